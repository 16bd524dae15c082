package autograd

import (
	"strings"
	"sync/atomic"
)

// Tracer receives the operations a model runs while it is installed with
// WithTracer; package graph builds its IR from them. Autograd knows only
// ops and tensors: a tracer turns tensors it has not seen into constants
// or inputs as it sees fit.
type Tracer interface {
	// Op reports one call of a traceable op: its canonical name ("Conv2d",
	// "ReLU", "Add", …), its attributes, its tensor operands (nil for an
	// absent optional one, like a missing bias) and its results. Ops that
	// autograd runs as one fused kernel are reported decomposed (AddReLU
	// as Add then ReLU, with an intermediate result that holds no data),
	// so the graph sees each op once and its passes fuse them again.
	Op(op string, attrs []Attr, inputs, outputs []*Tensor)
	// Recorded reports that op made out. Every op that records a
	// backward reports it, traceable or not, before or after its Op call:
	// a tensor that no Op call ever reports as a result was made by an op
	// that cannot be traced.
	Recorded(op string, out *Tensor)
	// Enter and Exit bracket a module's forward (see EnterModule).
	Enter(module any)
	Exit()
}

// Attr is one attribute of a traced op. Value is an int, []int, float64,
// bool, string, DType or MemoryFormat.
type Attr struct {
	Name  string
	Value any
}

var activeTracer atomic.Pointer[tracerBox]

type tracerBox struct{ t Tracer }

// WithTracer runs f with t receiving every op f runs. Like NoGrad it is
// process-wide: other goroutines running ops meanwhile are traced too, so
// trace one model at a time. Tracers do not nest.
func WithTracer(t Tracer, f func()) {
	if !activeTracer.CompareAndSwap(nil, &tracerBox{t}) {
		Fail("WithTracer", "a trace is already running")
	}
	defer activeTracer.Store(nil)
	f()
}

// tracing reports whether a tracer is installed; ops test it before
// building their attributes, so untraced calls pay one atomic load.
func tracing() bool { return activeTracer.Load() != nil }

// EnterModule tells a running tracer that module's forward begins and
// returns the function that ends it; with no tracer it costs an atomic load.
// Modules call it as `defer autograd.EnterModule(m)()` so a tracer can name
// the module an untraceable op ran in.
func EnterModule(module any) func() {
	box := activeTracer.Load()
	if box == nil {
		return func() {}
	}
	box.t.Enter(module)
	return box.t.Exit
}

// trace reports a traceable op's call to the tracer, if any.
func trace(op string, inputs, outputs []*Tensor, attrs ...Attr) {
	if box := activeTracer.Load(); box != nil {
		box.t.Op(op, attrs, inputs, outputs)
	}
}

// traceRecord is record for an op whose trace form is its name, its
// operands and its one result, with no attributes.
func traceRecord(op string, out *Tensor, inputs []*Tensor, backward func(grad *Tensor) []*Tensor) *Tensor {
	trace(op, inputs, []*Tensor{out})
	return record(op+"Backward", out, inputs, backward)
}

// traceRecorded tells the tracer which op made out; record calls it, so an
// op that never called trace shows up as untraceable.
func traceRecorded(op string, out *Tensor) {
	if box := activeTracer.Load(); box != nil {
		box.t.Recorded(strings.TrimSuffix(op, "Backward"), out)
	}
}

// Meta returns a tensor with t's dtype, shape and memory format and no
// data, as tracers receive for intermediate results of decomposed ops.
func (t *Tensor) Meta() *Tensor { return t.meta() }

// HasData reports whether t holds data (Meta tensors do not).
func (t *Tensor) HasData() bool { return t.data != nil }
