package graph

import (
	"reflect"

	"github.com/kilnml/kiln/autograd"
)

// Ops that only Freeze's fusion passes make: nothing traces them.

type (
	channelShuffleAttrs struct{ Groups int }
	linearConcatAttrs   struct{ Sizes []int }
)

func init() {
	// ChannelShuffle{groups} is ShuffleNet's channel shuffle of x
	// [N, C, …]: a view as [N, groups, C/groups, …], dimensions 1 and 2
	// swapped, made contiguous and viewed as [N, C, …] again. Its eager
	// form runs exactly those ops, so it is the traced chain bit for bit.
	registerOp(&opImpl{name: "ChannelShuffle", ins: exactly(1), outs: exactly(1), attrs: reflect.TypeFor[channelShuffleAttrs](),
		infer: func(attrs any, ins []*sig) ([]sig, error) {
			x := ins[0]
			if g := attrs.(channelShuffleAttrs).Groups; len(x.shape) < 2 || g <= 0 || x.shape[1]%g != 0 {
				return nil, badField("attrs.groups", "%d groups do not split the channels of %v", g, x.shape)
			}
			return []sig{*x}, nil
		},
		eager: func(attrs any, in []*autograd.Tensor) []*autograd.Tensor {
			return []*autograd.Tensor{channelShuffle(in[0], attrs.(channelShuffleAttrs).Groups)}
		},
		compile: compileChannelShuffle,
	})
	// LinearConcat{sizes}(x, w, b) is several Linear layers on one input
	// as one: x·wᵀ + b with the layers' weights (and biases) concatenated
	// along the out-features, split along the last dimension into results
	// of the given sizes. b may be absent.
	registerOp(&opImpl{name: "LinearConcat", ins: exactly(3), outs: arity{1, -1}, optional: []int{2},
		attrs: reflect.TypeFor[linearConcatAttrs](),
		infer: func(attrs any, ins []*sig) ([]sig, error) {
			y, err := opImpls["Linear"].infer(nil, ins)
			if err != nil {
				return nil, err
			}
			r, err := opImpls["Split"].infer(splitAttrs(attrs.(linearConcatAttrs).Sizes, -1), []*sig{&y[0]})
			if err != nil {
				return nil, &fieldError{"attrs.sizes", err}
			}
			return r, nil
		},
		eager: func(attrs any, in []*autograd.Tensor) []*autograd.Tensor {
			return autograd.SplitSizes(autograd.Linear(in[0], in[1], in[2]), attrs.(linearConcatAttrs).Sizes, -1)
		},
		compile: compileLinearConcat,
	})
}

// splitAttrs are the attributes of a Split into sizes along dim.
func splitAttrs(sizes []int, dim int) any {
	a, _, _ := decodeStruct(opImpls["Split"].attrs, []Attr{IntsAttr("sizes", sizes), IntAttr("dim", dim)}, "")
	return a
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
