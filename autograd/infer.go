package autograd

import "github.com/kilnml/kiln/internal/opbind"

// registerInfer makes f the type inference of ops in internal/opbind: f
// gives an op's result types from tensors with its operands' types and no
// data (nil for an absent one), running the checks the op runs and
// panicking where it does.
func registerInfer(f func(op string, attrs any, ins []*Tensor) []TensorType, ops ...string) {
	for _, op := range ops {
		opbind.RegisterInfer(op, func(attrs any, ins []*TensorType) []TensorType {
			xs := make([]*Tensor, len(ins))
			for i, t := range ins {
				if t != nil {
					xs[i] = &Tensor{dtype: t.DType, shape: t.Shape, format: t.Format}
				}
			}
			return f(op, attrs, xs)
		})
	}
}
