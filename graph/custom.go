package graph

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/tracing"
)

// customOps holds the ops Register added, by name: *opImpl values.
// Built-in ops live in opImpls, fixed once the package is initialised.
var customOps sync.Map

// ErrUnknownOp is wrapped by the error of Decode, Load or Compile for a
// graph with an op that is neither built in nor registered in this
// process (see Register).
var ErrUnknownOp = errors.New("unknown op")

// Register makes f, an op added with autograd.Function, known to graphs
// by its name: a model calling f.Apply traces to a node of that op, which
// Freeze keeps, Save writes with its attributes, and Load, Compile and Run
// accept in this process, running f's Compile form where it gives one and
// Forward otherwise. A program that loads such a graph (a server, or a
// build of the kiln command made with package cli) registers the op
// before loading it.
//
// f must have a Name that is a Go identifier and not a built-in op's, an
// attribute struct of int, []int, float64, bool and string fields, a
// Forward and an Infer. Registering f again does nothing; registering
// another function under a name already taken is an error.
func Register[A any](f *autograd.Function[A]) error {
	if f == nil {
		return errors.New("graph.Register: function is nil")
	}
	if !isIdentifier(f.Name) {
		return fmt.Errorf("graph.Register: op name %q is not an identifier", f.Name)
	}
	if _, ok := opImpls[f.Name]; ok {
		return fmt.Errorf("graph.Register: %q is a built-in op", f.Name)
	}
	if _, ok := fusedExtra[f.Name]; ok {
		return fmt.Errorf("graph.Register: %q is a part of built-in fused ops", f.Name)
	}
	if f.Forward == nil || f.Infer == nil {
		return fmt.Errorf("graph.Register: op %q needs a Forward and an Infer", f.Name)
	}
	if _, err := tracing.Fields(reflect.TypeFor[A]()); err != nil {
		return fmt.Errorf("graph.Register: op %q: %w", f.Name, err)
	}
	impl := &opImpl{name: f.Name, ins: arity{0, -1}, outs: exactly(1), attrs: reflect.TypeFor[A]()}
	impl.infer = func(attrs any, ins []*sig) ([]sig, error) {
		types := make([]autograd.TensorType, len(ins))
		for i, s := range ins {
			if s != nil {
				types[i] = autograd.TensorType{DType: s.dtype, Shape: s.shape, Format: s.format}
			}
		}
		var t autograd.TensorType
		var inferErr error
		if err := autograd.Try(func() { t, inferErr = f.Infer(attrs.(A), types) }); err != nil {
			return nil, err
		}
		if inferErr != nil {
			return nil, inferErr
		}
		return []sig{{dtype: t.DType, format: t.Format, shape: t.Shape}}, nil
	}
	impl.eager = func(attrs any, ins []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{f.Apply(attrs.(A), ins...)}
	}
	if f.Compile != nil {
		impl.compile = func(_ *compileCtx, op nodeOp, ins, outs []*autograd.Tensor) func() {
			return f.Compile(op.attrs.(A), ins, outs[0])
		}
	}
	impl.source = f
	if prev, dup := customOps.LoadOrStore(f.Name, impl); dup && prev.(*opImpl).source != any(f) {
		return fmt.Errorf("graph.Register: op %q is already registered", f.Name)
	}
	return nil
}

// customOp returns the registered op named name.
func customOp(name string) (*opImpl, bool) {
	v, ok := customOps.Load(name)
	if !ok {
		return nil, false
	}
	return v.(*opImpl), true
}

func attrKindOf(t reflect.Type) AttrKind {
	switch t {
	case reflect.TypeFor[int]():
		return AttrInt
	case reflect.TypeFor[[]int]():
		return AttrInts
	case reflect.TypeFor[float64]():
		return AttrFloat
	case reflect.TypeFor[bool]():
		return AttrBool
	}
	return AttrString
}

func isIdentifier(s string) bool {
	for i, r := range s {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}
