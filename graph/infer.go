package graph

import (
	"github.com/kilnml/kiln/autograd"
)

// inferWith runs f, an op's type inference over autograd's types, on
// ins: the rule its eager op runs, failing where the op would, with the
// op's error.
func inferWith(f func(attrs any, ins []*autograd.TensorType) []autograd.TensorType, attrs any, ins []*sig) ([]sig, error) {
	types := make([]*autograd.TensorType, len(ins))
	for i, s := range ins {
		if s != nil {
			types[i] = &autograd.TensorType{DType: s.dtype, Shape: s.shape, Format: s.format}
		}
	}
	var outs []autograd.TensorType
	if err := autograd.Try(func() { outs = f(attrs, types) }); err != nil {
		return nil, err
	}
	r := make([]sig, len(outs))
	for i, t := range outs {
		r[i] = sig{dtype: t.DType, format: t.Format, shape: t.Shape}
	}
	return r, nil
}
