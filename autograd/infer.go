package autograd

import "github.com/kilnml/kiln/internal/opbind"

// The parts of the built-in ops' descriptors in internal/opbind, each
// defined next to the op it describes.

type opDesc = opbind.Op[*Tensor, TensorType]

// defineBind makes f the kernel binding of op.
func defineBind(op string, f func(attrs any, ins, outs []*Tensor, consts []bool) func()) {
	opbind.Define(op, opDesc{Bind: f})
}

// defineEager makes attrs (the zero value of op's attribute struct, nil
// for none) and f op's attributes and eager form.
func defineEager(op string, attrs any, f func(attrs any, ins []*Tensor) []*Tensor) {
	opbind.Define(op, opDesc{Attrs: attrs, Eager: f})
}

// one is a single result as an eager form returns it.
func one(t *Tensor) []*Tensor { return []*Tensor{t} }

// registerInfer makes f the type inference of ops in internal/opbind: f
// gives an op's result types from tensors with its operands' types and no
// data (nil for an absent one), running the checks the op runs and
// panicking where it does.
func registerInfer(f func(op string, attrs any, ins []*Tensor) []TensorType, ops ...string) {
	for _, op := range ops {
		opbind.Define(op, opDesc{Infer: func(attrs any, ins []*TensorType) []TensorType {
			xs := make([]*Tensor, len(ins))
			for i, t := range ins {
				if t != nil {
					xs[i] = &Tensor{dtype: t.DType, shape: t.Shape, format: t.Format}
				}
			}
			return f(op, attrs, xs)
		}})
	}
}
