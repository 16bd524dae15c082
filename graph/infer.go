package graph

import (
	"fmt"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/opbind"
)

// Type inference of the ops, the infer field of their definitions. Most
// ops run their autograd op's own rule, registered in internal/opbind
// (inferShared); the rest follow the shape rules of the autograd ops the
// node runs and fail where they would, with dtypes close enough to size
// memory (the eager run the plan starts from is what decides them).
// Operand counts and attributes have been checked against the op's
// definition first.

func like(s *sig, shape []int) []sig {
	return []sig{{dtype: s.dtype, format: s.format, shape: shape}}
}

// inferSame is the type of an op whose result is its first operand's.
func inferSame(_ *Node, ins []*sig) ([]sig, error) { return like(ins[0], ins[0].shape), nil }

// inferLayerNorm is inferShared on the operand widened to float32, as
// ops_eager.go widens it.
func inferLayerNorm(n *Node, ins []*sig) ([]sig, error) {
	x := *ins[0]
	if x.dtype == autograd.BFloat16 {
		x.dtype = autograd.Float32
	}
	return inferOp(n.Op, n, "inputs", append([]*sig{&x}, ins[1:]...))
}

// inferShared is the type of an op whose type inference autograd
// registers in internal/opbind, the rule its eager op runs: it fails
// where the op would, with the op's error.
func inferShared(n *Node, ins []*sig) ([]sig, error) {
	return inferOp(n.Op, bindAttrs(n), "inputs", ins)
}

// inferOp runs op's registered type inference with attrs on ins; its
// error names field.
func inferOp(op string, attrs any, field string, ins []*sig) ([]sig, error) {
	f, _ := opbind.LookupInfer[autograd.TensorType](op)
	types := make([]*autograd.TensorType, len(ins))
	for i, s := range ins {
		if s != nil {
			types[i] = &autograd.TensorType{DType: s.dtype, Shape: s.shape, Format: s.format}
		}
	}
	var outs []autograd.TensorType
	if err := autograd.Try(func() { outs = f(attrs, types) }); err != nil {
		return nil, &fieldError{field, err}
	}
	r := make([]sig, len(outs))
	for i, t := range outs {
		r[i] = sig{dtype: t.DType, format: t.Format, shape: t.Shape}
	}
	return r, nil
}

// spatial expands a pooling attribute to one value per
// spatial dimension, as autograd's convSpatialArg does.
func spatial(v []int, nsp, def int) []int {
	out := make([]int, nsp)
	for i := range out {
		switch len(v) {
		case 0:
			out[i] = def
		case 1:
			out[i] = v[0]
		default:
			out[i] = v[i]
		}
	}
	return out
}

// windowFits reports whether a window of k taps dil apart fits in a
// padded size, without overflowing: attributes are at most maxDim.
func windowFits(padded, k, dil int) bool {
	return k >= 1 && padded >= 1 && k-1 <= (padded-1)/dil
}

// inferPool is inferShared after the checks whose fields and messages
// graph files have always been told of a misfit pool.
func inferPool(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	if len(x.shape) != 3 && len(x.shape) != 4 {
		return nil, fmt.Errorf("input %v is not 3-D or 4-D", x.shape)
	}
	k := spatial(n.Ints("kernel"), 2, 0)
	pad, dil := spatial(n.Ints("padding"), 2, 0), spatial(n.Ints("dilation"), 2, 1)
	for i := range 2 {
		if pad[i] > k[i]/2 {
			return nil, badField("attrs.padding", "%v is more than half the kernel %v", n.Ints("padding"), k)
		}
		if !windowFits(x.shape[len(x.shape)-2+i]+2*pad[i], k[i], dil[i]) {
			return nil, fmt.Errorf("kernel %v with dilation %v does not fit input %v padded by %v", k, dil, x.shape, pad)
		}
	}
	return inferShared(n, ins)
}

// inferSoftmax is inferShared with the dim at fault, Softmax's result
// widened as its operand is (see ops_eager.go).
func inferSoftmax(n *Node, ins []*sig) ([]sig, error) {
	r, err := inferOp(n.Op, n, "attrs.dim", ins)
	if err == nil && n.Op == "Softmax" {
		r[0].dtype = autograd.Float32
	}
	return r, err
}

func inferLinearConcat(n *Node, ins []*sig) ([]sig, error) {
	y, err := inferOp("Linear", nil, "inputs", ins)
	if err != nil {
		return nil, err
	}
	split := &Node{Attrs: []Attr{IntsAttr("sizes", n.Ints("sizes")), IntAttr("dim", -1)}}
	return inferOp("Split", split, "attrs.sizes", []*sig{&y[0]})
}

func inferChannelShuffle(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	if g := n.Int("groups"); len(x.shape) < 2 || x.shape[1]%g != 0 {
		return nil, badField("attrs.groups", "%d groups do not split the channels of %v", g, x.shape)
	}
	return inferSame(n, ins)
}
