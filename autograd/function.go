package autograd

import (
	"fmt"
)

// TensorType is what a tensor is without its data: dtype, shape and memory
// format.
type TensorType struct {
	DType  DType
	Shape  []int
	Format MemoryFormat
}

// Type returns t's dtype, shape and memory format.
func (t *Tensor) Type() TensorType {
	return TensorType{DType: t.dtype, Shape: cloneInts(t.shape), Format: t.format}
}

// Function is an op users add to Kiln, like a torch.autograd.Function: a
// forward computation, its backward, and what package graph needs to
// record, save, load and run it. A is the op's attribute struct: its
// exported fields, of types int, []int, float64, bool and string, are the
// op's attributes, named in graphs by their
// `kiln:"name"` tag or else by the field name in snake case. Use struct{}
// for an op without attributes.
//
// Apply runs the op. graph.Register makes the op known to graphs: a model
// that calls it traces, freezes, saves, loads and runs like one made of
// built-in ops.
type Function[A any] struct {
	// Name names the op in graphs: a letter followed by letters, digits
	// and underscores, unlike every built-in op's name.
	Name string
	// Forward computes the result from the operands. Its operands are
	// views in a computation that records nothing, so it may use any
	// Kiln op; it may return a new tensor or one of its operands.
	Forward func(attrs A, inputs []*Tensor) *Tensor
	// Backward, if not nil, returns one gradient per input (nil where an
	// input needs none), each of its input's shape, given the gradient of
	// the result, grad. inputs and output are the forward's, in a
	// computation that records nothing. Without Backward the op cannot be
	// differentiated: Backward through it fails.
	Backward func(attrs A, inputs []*Tensor, output, grad *Tensor) []*Tensor
	// Infer gives the result's type for operands of the given types (a
	// zero TensorType for an absent, nil operand) or the error Forward
	// would meet. Graphs check and plan with it; graph.Register requires
	// it.
	Infer func(attrs A, inputs []TensorType) (TensorType, error)
	// Compile, if not nil, is the op's compiled form for graph plans: it
	// returns a function that computes the op on inputs into output,
	// whose storage the plan owns and reuses, allocating nothing when it
	// runs and giving Forward's bits; nil declines (the plan then runs
	// Forward). It is called when a graph is planned, not when it runs.
	Compile func(attrs A, inputs []*Tensor, output *Tensor) func()
}

// Apply runs the op on inputs: the result is Forward's, recorded for
// Backward and reported to a trace like a built-in op's, in the mode of
// its operands' computation.
func (f *Function[A]) Apply(attrs A, inputs ...*Tensor) *Tensor {
	if f == nil || f.Forward == nil {
		Fail("Function.Apply", "the function or its Forward is nil")
	}
	m := modeOf(inputs...)
	// Forward computes in the operands' computation, but records nothing
	// and reports nothing: the op is one node on the tape and in a trace.
	inner := Mode{noGrad: true, autocast: m.autocast}
	views := make([]*Tensor, len(inputs))
	for i, in := range inputs {
		if in != nil {
			views[i] = in.detached()
			views[i].mode = inner
		}
	}
	y := f.Forward(attrs, views)
	if y == nil {
		Fail(f.Name, "Forward returned nil")
	}
	out := &Tensor{dtype: y.dtype, shape: cloneInts(y.shape), format: y.format, data: y.data, mode: y.mode.arenaMode()}
	traceIn(m, f.Name, attrs, inputs, []*Tensor{out})
	saved := y.detached()
	saved.mode = inner
	return recordIn(m, f.Name+"Backward", out, inputs, func(g *Tensor) []*Tensor {
		if f.Backward == nil {
			failGrad(f.Name, "the op has no Backward and cannot be differentiated")
		}
		gv := g.detached()
		gv.mode = inner
		grads := f.Backward(attrs, views, saved, gv)
		if len(grads) != len(inputs) {
			Fail(f.Name, "Backward returned %d gradients for %d inputs", len(grads), len(inputs))
		}
		return grads
	})
}

// String names the function, for error messages.
func (f *Function[A]) String() string { return fmt.Sprintf("Function %q", f.Name) }
