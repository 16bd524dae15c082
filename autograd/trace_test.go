package autograd

import (
	"github.com/kilnml/kiln/internal/tracing"
	"strings"
	"testing"
)

// recordingTracer keeps what a tracer is told, as op names with their
// attribute names.
type recordingTracer struct {
	ops      []string
	recorded []made
	outs     map[*Tensor]bool
	depth    int
}

func (r *recordingTracer) Op(op string, typed any, inputs, outputs []*Tensor) {
	attrs, err := tracing.StructAttrs(typed)
	if err != nil {
		panic(err)
	}
	names := make([]string, len(attrs))
	for i, a := range attrs {
		names[i] = a.Name
	}
	r.ops = append(r.ops, op+"("+strings.Join(names, ",")+")")
	for _, o := range outputs {
		r.outs[o] = true
	}
}

type made struct {
	op  string
	out *Tensor
}

func (r *recordingTracer) Recorded(op string, out *Tensor) {
	r.recorded = append(r.recorded, made{op, out})
}

// untraced lists the ops that made a tensor no Op call reported.
func (r *recordingTracer) untraced() string {
	var ops []string
	for _, m := range r.recorded {
		if !r.outs[m.out] {
			ops = append(ops, m.op)
		}
	}
	return strings.Join(ops, " ")
}

func (r *recordingTracer) Enter(any) { r.depth++ }
func (r *recordingTracer) Exit()     { r.depth-- }

func TestTracerSeesOps(t *testing.T) {
	g := NewGenerator(1)
	x := Randn(g, 2, 3, 5, 5)
	w := Randn(g, 4, 3, 3, 3)
	lw := Randn(g, 2, 4)
	cases := []struct {
		name     string
		f        func(x *Tensor)
		want     string
		untraced string // ops reported as made without a trace form
	}{
		{"conv", func(x *Tensor) { Conv2d(x, w, nil, ConvOptions{}) }, "Conv2d(stride,padding,dilation,groups)", ""},
		{"add relu decomposed", func(x *Tensor) { AddReLU(x, x) }, "Add() ReLU()", ""},
		{"in-place add relu", func(x *Tensor) { AddReLUInPlace(x.Clone(), x) }, "Clone() Add() ReLU()", ""},
		{"hardtanh attrs", func(x *Tensor) { HardTanh(x, -1, 1) }, "HardTanh(min_val,max_val)", ""},
		{"flatten then linear", func(x *Tensor) {
			Linear(Flatten(MaxPool2d(ReLU(Conv2d(x, w, nil, ConvOptions{})), PoolOptions{Kernel: []int{2}}), 1, -1), lw, nil)
		},
			"Conv2d(stride,padding,dilation,groups) ReLU() MaxPool2d(kernel,stride,padding,dilation,ceil_mode,count_include_pad) Flatten(start_dim,end_dim) Linear()", ""},
		{"eval dropout is traced", func(x *Tensor) { Dropout(x, 0.5, false, nil) }, "Dropout(p)", ""},
		{"split", func(x *Tensor) { SplitSizes(x, []int{1, 2}, 1) }, "Split(sizes,dim)", ""},
		{"loss is untraceable", func(x *Tensor) { MSELoss(x, x, ReductionMean) }, "", "MSELoss"},
		{"training dropout is untraceable", func(x *Tensor) { Dropout(x, 0.5, true, g) }, "", "Dropout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &recordingTracer{outs: map[*Tensor]bool{}}
			c.f(traceView(r, x))
			if got := strings.Join(r.ops, " "); got != c.want {
				t.Errorf("traced %q, want %q", got, c.want)
			}
			if got := r.untraced(); got != c.untraced {
				t.Errorf("untraceable ops %q, want %q", got, c.untraced)
			}
		})
	}
}

func TestTracesAreSeparate(t *testing.T) {
	g := NewGenerator(1)
	x, y := Randn(g, 2, 3), Randn(g, 2, 3)
	r1, r2 := &recordingTracer{outs: map[*Tensor]bool{}}, &recordingTracer{outs: map[*Tensor]bool{}}
	tx, ty := traceView(r1, x), traceView(r2, y)
	ReLU(tx)
	Tanh(Add(ty, y))
	Sigmoid(x) // untraced: x itself belongs to no trace
	if got := strings.Join(r1.ops, " "); got != "ReLU()" {
		t.Errorf("first trace saw %q, want %q", got, "ReLU()")
	}
	if got := strings.Join(r2.ops, " "); got != "Add() Tanh()" {
		t.Errorf("second trace saw %q, want %q", got, "Add() Tanh()")
	}
	if err := Try(func() { Add(tx, ty) }); err == nil || !strings.Contains(err.Error(), "two different traces") {
		t.Errorf("an op on tensors of two traces: got %v", err)
	}
}

func TestEnterModuleWithoutTracer(t *testing.T) {
	x := Ones(2)
	enterModule(struct{}{}, x)() // no tracer: a no-op
	enterModule(struct{}{}, nil)()
	r := &recordingTracer{outs: map[*Tensor]bool{}}
	exit := enterModule(1, traceView(r, x))
	if r.depth != 1 {
		t.Errorf("depth %d after enterModule, want 1", r.depth)
	}
	exit()
	if r.depth != 0 {
		t.Errorf("depth %d after exit, want 0", r.depth)
	}
}

// traceView returns a view of x that starts a computation traced by r.
func traceView(r *recordingTracer, x *Tensor) *Tensor {
	views, _ := startTrace(r, []*Tensor{x}, nil)
	return views[0]
}

// TestTraceState: a model's state joins the trace while it runs, so ops
// on parameters alone are traced, and leaves it afterwards.
func TestTraceState(t *testing.T) {
	x, w := Ones(2), Ones(2).SetRequiresGrad(true)
	r := &recordingTracer{outs: map[*Tensor]bool{}}
	views, end := startTrace(r, []*Tensor{x}, []*Tensor{w, w})
	Add(views[0], Exp(w))
	end()
	if got := strings.Join(r.ops, " "); got != "Exp() Add()" {
		t.Errorf("traced %q, want %q", got, "Exp() Add()")
	}
	if w.Mode() != (Mode{}) || !Mul(w, w).RequiresGrad() {
		t.Errorf("after the trace the parameter is in mode %+v", w.Mode())
	}
}

// TestViewsAreTraced: Detach, NoGrad and Autocast views of a traced
// tensor stay in the trace (as Identity), so the trace does not take them
// for constants.
func TestViewsAreTraced(t *testing.T) {
	r := &recordingTracer{outs: map[*Tensor]bool{}}
	x := traceView(r, Ones(2))
	ReLU(Autocast(NoGrad(x.Detach())))
	if got, want := strings.Join(r.ops, " "), "Identity() Identity() Identity() ReLU()"; got != want {
		t.Errorf("traced %q, want %q", got, want)
	}
}
