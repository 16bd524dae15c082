package autograd

import (
	"strings"
	"sync/atomic"

	"github.com/kilnml/kiln/internal/tracing"
)

// traceSession is one running trace: the tracer the ops of the traced
// computation report to. Tensors of that computation point to it from
// their Mode.
type traceSession struct {
	t tracing.Tracer[*Tensor]
	// done is set when the trace returns: tensors it made may live on (a
	// module's cache), and their later ops are nobody's trace.
	done atomic.Bool
}

// active reports whether s is a trace still running.
func (s *traceSession) active() bool { return s != nil && !s.done.Load() }

func init() {
	tracing.Install(tracing.Hooks[*Tensor]{Start: startTrace, Enter: enterModule})
}

// startTrace returns views of inputs that start a computation reporting to
// tr, recording no gradient, and puts the tensors of state into that
// computation until end is called.
func startTrace(tr tracing.Tracer[*Tensor], inputs, state []*Tensor) (views []*Tensor, end func()) {
	m := Mode{noGrad: true, trace: &traceSession{t: tr}}
	views = make([]*Tensor, len(inputs))
	for i, in := range inputs {
		if in != nil {
			views[i] = in.inMode(m)
		}
	}
	saved := make([]Mode, len(state))
	for i, s := range state {
		saved[i] = s.mode
		s.mode = s.mode.union(m)
	}
	return views, func() {
		m.trace.done.Store(true)
		for i := len(state) - 1; i >= 0; i-- { // a tensor listed twice ends as it began
			state[i].mode = saved[i]
		}
	}
}

// enterModule tells the tracer of x's computation, if any, that module's
// forward begins and returns the function that ends it.
func enterModule(module any, x *Tensor) func() {
	if x == nil || !x.mode.trace.active() {
		return func() {}
	}
	tr := x.mode.trace.t
	tr.Enter(module)
	return tr.Exit
}

// traced reports whether an op on ts is traced; ops test it before
// building their attributes.
func traced(ts ...*Tensor) bool {
	for _, t := range ts {
		if t != nil && t.mode.trace.active() {
			return true
		}
	}
	return false
}

// trace reports a traceable op's call to the tracer of its operands'
// computation, if any, with its attribute struct (nil for none).
func trace(op string, attrs any, inputs, outputs []*Tensor) {
	traceIn(Mode{}, op, attrs, inputs, outputs)
}

// traceIn is trace for an op running in mode m besides its operands'.
func traceIn(m Mode, op string, attrs any, inputs, outputs []*Tensor) {
	if m = m.union(modeOf(inputs...)); m.trace != nil {
		m.trace.t.Op(op, attrs, inputs, outputs)
	}
}

// traceIdentity reports v, a view of t made outside the ops (Detach,
// NoGrad, Autocast), to the trace t belongs to, if any, as an Identity:
// without it the trace would take the view for a constant.
func traceIdentity(t, v *Tensor) {
	if t.mode.trace.active() {
		t.mode.trace.t.Op("Identity", nil, []*Tensor{t}, []*Tensor{v})
	}
}

// traceRecord is record for an op whose trace form is its name, its
// operands and its one result, with no attributes.
func traceRecord(op string, out *Tensor, inputs []*Tensor, backward func(grad *Tensor) []*Tensor) *Tensor {
	trace(op, nil, inputs, []*Tensor{out})
	return record(op+"Backward", out, inputs, backward)
}

// traceRecorded tells the tracer of mode m which op made out; record calls
// it, so an op that never called trace shows up as untraceable.
func traceRecorded(m Mode, op string, out *Tensor) {
	if m.trace != nil {
		m.trace.t.Recorded(strings.TrimSuffix(op, "Backward"), out)
	}
}
