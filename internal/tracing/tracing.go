// Package tracing connects autograd's ops to the packages of this module
// that observe them — graph's tracer and nn's module scopes — without
// making the connection part of autograd's public API.
//
// A trace belongs to the computation it starts: autograd marks the traced
// inputs, and only ops on those inputs, or on results computed from them,
// report to the tracer. Other goroutines, and other traces, run unseen.
//
// The package is generic over the tensor type so that it need not import
// autograd; autograd installs its hooks at initialisation.
package tracing

// Tracer receives the ops of one traced computation, in the order they
// run.
type Tracer[T any] interface {
	// Op reports one call of a traceable op: its canonical name ("Conv2d",
	// "ReLU", "Add", …), its attribute struct (nil for none; see Fields),
	// its tensor operands (nil for an
	// absent optional one, like a missing bias) and its results. Ops that
	// autograd runs as one fused kernel are reported decomposed (AddReLU
	// as Add then ReLU, with an intermediate result that holds no data),
	// so the graph sees each op once and its passes fuse them again.
	Op(op string, attrs any, inputs, outputs []T)
	// Recorded reports that op made out. Every op that records a backward
	// reports it, traceable or not, before or after its Op call: a tensor
	// that no Op call ever reports as a result was made by an op that
	// cannot be traced.
	Recorded(op string, out T)
	// Enter and Exit bracket a module's forward.
	Enter(module any)
	Exit()
}

// Hooks are the functions autograd provides.
type Hooks[T any] struct {
	// Start returns views of inputs (same data) that start a computation
	// reporting to tr, with gradient recording off. The model's own
	// tensors (state: its parameters and buffers) join that computation
	// in place, so ops on them alone are traced too, until end is called;
	// they must not be used elsewhere meanwhile.
	Start func(tr Tracer[T], inputs, state []T) (views []T, end func())
	// Enter tells the tracer of x's computation, if any, that module's
	// forward begins, and returns the function that ends it.
	Enter func(module any, x T) func()
}

// installed holds the Hooks[T] autograd installed; it is written once,
// during autograd's initialisation, before any reader can run.
var installed any

// Install records autograd's hooks. Only autograd calls it.
func Install[T any](h Hooks[T]) { installed = h }

// Get returns the hooks installed for tensor type T.
func Get[T any]() Hooks[T] { return installed.(Hooks[T]) }
