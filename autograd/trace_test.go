package autograd

import (
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

func (r *recordingTracer) Op(op string, attrs []Attr, inputs, outputs []*Tensor) {
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
		f        func()
		want     string
		untraced string // ops reported as made without a trace form
	}{
		{"conv", func() { Conv2d(x, w, nil, ConvOptions{}) }, "Conv2d(stride,padding,dilation,groups)", ""},
		{"add relu decomposed", func() { AddReLU(x, x) }, "Add() ReLU()", ""},
		{"in-place add relu", func() { AddReLUInPlace(x.Clone(), x) }, "Clone() Add() ReLU()", ""},
		{"hardtanh attrs", func() { HardTanh(x, -1, 1) }, "HardTanh(min_val,max_val)", ""},
		{"flatten then linear", func() {
			Linear(Flatten(MaxPool2d(ReLU(Conv2d(x, w, nil, ConvOptions{})), PoolOptions{Kernel: []int{2}}), 1, -1), lw, nil)
		},
			"Conv2d(stride,padding,dilation,groups) ReLU() MaxPool2d(kernel,stride,padding,dilation,ceil_mode,count_include_pad) Flatten(start_dim,end_dim) Linear()", ""},
		{"eval dropout is traced", func() { Dropout(x, 0.5, false, nil) }, "Dropout(p)", ""},
		{"split", func() { SplitSizes(x, []int{1, 2}, 1) }, "Split(sizes,dim)", ""},
		{"loss is untraceable", func() { MSELoss(x, x, ReductionMean) }, "", "MSELoss"},
		{"training dropout is untraceable", func() { Dropout(x, 0.5, true, g) }, "", "Dropout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &recordingTracer{outs: map[*Tensor]bool{}}
			NoGrad(func() { WithTracer(r, c.f) })
			if got := strings.Join(r.ops, " "); got != c.want {
				t.Errorf("traced %q, want %q", got, c.want)
			}
			if got := r.untraced(); got != c.untraced {
				t.Errorf("untraceable ops %q, want %q", got, c.untraced)
			}
		})
	}
}

func TestTracerDoesNotNest(t *testing.T) {
	r := &recordingTracer{outs: map[*Tensor]bool{}}
	err := Try(func() { WithTracer(r, func() { WithTracer(r, func() {}) }) })
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("nested WithTracer: got %v", err)
	}
	if tracing() {
		t.Fatal("tracer left installed after a failed trace")
	}
}

func TestEnterModuleWithoutTracer(t *testing.T) {
	EnterModule(struct{}{})() // no tracer: a no-op
	r := &recordingTracer{outs: map[*Tensor]bool{}}
	WithTracer(r, func() {
		exit := EnterModule(1)
		if r.depth != 1 {
			t.Errorf("depth %d after EnterModule, want 1", r.depth)
		}
		exit()
	})
	if r.depth != 0 {
		t.Errorf("depth %d after exit, want 0", r.depth)
	}
}
