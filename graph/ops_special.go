package graph

import (
	"github.com/kilnml/kiln/autograd"
)

// Ops that only Freeze's fusion passes make: nothing traces them.

func init() {
	// ChannelShuffle{groups} is ShuffleNet's channel shuffle of x
	// [N, C, …]: a view as [N, groups, C/groups, …], dimensions 1 and 2
	// swapped, made contiguous and viewed as [N, C, …] again. Its eager
	// form runs exactly those ops, so it is the traced chain bit for bit.
	registerOp("ChannelShuffle", eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{intAttr("groups", 1, maxDim)}, infer: inferChannelShuffle},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor { return channelShuffle(in[0], n.Int("groups")) }))
	// LinearConcat{sizes}(x, w, b) is several Linear layers on one input
	// as one: x·wᵀ + b with the layers' weights (and biases) concatenated
	// along the out-features, split along the last dimension into results
	// of the given sizes. b may be absent.
	registerOp("LinearConcat", &opImpl{ins: exactly(3), outs: arity{1, -1}, optional: []int{2},
		attrs: []attrSpec{intsAttr("sizes", 0, maxDim)}, infer: inferLinearConcat, eager: func(n *Node, in []*autograd.Tensor) []*autograd.Tensor {
			return autograd.SplitSizes(autograd.Linear(in[0], in[1], in[2]), n.Ints("sizes"), -1)
		}})
}

func channelShuffle(x *autograd.Tensor, groups int) *autograd.Tensor {
	const op = "ChannelShuffle"
	shape := x.Shape()
	if len(shape) < 2 {
		fail(autograd.ErrShape, op, "input must be [N, C, …], got shape %v", shape)
	}
	if groups <= 0 || shape[1]%groups != 0 {
		fail(autograd.ErrShape, op, "%d channels do not split into %d groups", shape[1], groups)
	}
	split := append([]int{shape[0], groups, shape[1] / groups}, shape[2:]...)
	perm := []int{0, 2, 1}
	for d := 3; d < len(split); d++ {
		perm = append(perm, d)
	}
	y := autograd.Permute(autograd.Reshape(x, split...), perm...)
	return autograd.Reshape(y.Contiguous(), shape...)
}
