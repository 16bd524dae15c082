package graph

import (
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

func TestTraceResNet18(t *testing.T) {
	g := autograd.NewGenerator(1)
	m := models.ResNet18(g, models.ResNetOptions{NumClasses: 10})
	x := autograd.Randn(g, 1, 3, 32, 32)
	gr, err := Trace(m, x)
	if err != nil {
		t.Fatal(err)
	}
	s := gr.String()
	t.Log(s[:min(len(s), 3000)])
	if !strings.Contains(s, "Conv2d(%input0, conv1.weight") {
		t.Errorf("stem convolution not traced")
	}
	if !m.Training() {
		t.Errorf("training flag not restored")
	}
}

type lossy struct {
	nn.Base
	fc *nn.Linear
}

func (l *lossy) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(l, x)()
	y := l.fc.Forward(x)
	return autograd.CrossEntropy(y, autograd.FromInt64([]int64{0}, 1), autograd.CrossEntropyOptions{})
}

func TestTraceUntraceable(t *testing.T) {
	g := autograd.NewGenerator(1)
	m := &lossy{}
	m.fc = nn.NewLinear(g, 4, 3, nn.LinearOptions{})
	m.RegisterModule("fc", m.fc)
	_, err := Trace(m, autograd.Randn(g, 1, 4))
	if err == nil || !strings.Contains(err.Error(), "CrossEntropy") {
		t.Fatalf("got %v, want an error naming CrossEntropy", err)
	}
	t.Log(err)

	// Nested, the error names the module's path.
	parent := &wrapper{}
	parent.head = parent.RegisterModule("head", m).(*lossy)
	_, err = Trace(parent, autograd.Randn(g, 1, 4))
	if err == nil || !strings.Contains(err.Error(), `op CrossEntropy in module "head"`) {
		t.Fatalf("got %v, want an error naming CrossEntropy in module \"head\"", err)
	}
}

type wrapper struct {
	nn.Base
	head *lossy
}

func (w *wrapper) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(w, x)()
	return w.head.Forward(x)
}

func TestTraceRunMatchesEager(t *testing.T) {
	g := autograd.NewGenerator(2)
	m := nn.Eval(models.ResNet18(g, models.ResNetOptions{NumClasses: 10}))
	x := autograd.Randn(g, 2, 3, 32, 32)
	gr, err := Trace(m, x)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	var want *autograd.Tensor
	want = m.Forward(autograd.NoGrad(x))
	if !slicesEqual(got[0].Float32s(), want.Float32s()) {
		t.Fatalf("graph run differs from eager")
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// scaled multiplies by a tensor that is neither a parameter nor a buffer:
// the trace freezes it as a constant.
type scaled struct {
	nn.Base
	fc    *nn.Linear
	drop  *nn.Dropout
	scale *autograd.Tensor
}

func (s *scaled) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(s, x)()
	return autograd.Mul(s.drop.Forward(s.fc.Forward(x)), s.scale)
}

func TestTraceDropoutAndConstants(t *testing.T) {
	g := autograd.NewGenerator(1)
	m := &scaled{scale: autograd.Full(0.5, 3)}
	m.fc = m.RegisterModule("fc", nn.NewLinear(g, 4, 3, nn.LinearOptions{})).(*nn.Linear)
	m.drop = m.RegisterModule("drop", nn.NewDropout(g, 0.3)).(*nn.Dropout)
	x := autograd.Randn(g, 2, 4)
	gr, err := Trace(m, x)
	if err != nil {
		t.Fatal(err)
	}
	s := gr.String()
	for _, want := range []string{"= Linear(%input0, fc.weight, fc.bias)", "= Dropout(", "const.0"} {
		if !strings.Contains(s, want) {
			t.Errorf("trace lacks %q:\n%s", want, s)
		}
	}
	m.scale.Fill(2) // the trace keeps the value it saw
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	m.scale.Fill(0.5)
	var want *autograd.Tensor
	want = nn.Eval(m).Forward(autograd.NoGrad(x))
	if !slicesEqual(got[0].Float32s(), want.Float32s()) {
		t.Errorf("graph %v, eager %v", got[0].Float32s(), want.Float32s())
	}
}

// TestTraceThroughViews: a forward that starts autocast (or detaches) part
// way keeps the traced value flowing; the graph computes from its input,
// not from a constant frozen at the traced one.
func TestTraceThroughViews(t *testing.T) {
	gen := autograd.NewGenerator(3)
	w := autograd.Randn(gen, 5, 4)
	f := func(in []*autograd.Tensor) []*autograd.Tensor {
		h := autograd.ReLU(in[0]).Detach()
		return []*autograd.Tensor{autograd.Linear(autograd.Autocast(h), w, nil)}
	}
	g, err := TraceFunc(nil, f, autograd.Randn(gen, 3, 4))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	x := autograd.Randn(gen, 3, 4)
	got, err := p.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	want := f([]*autograd.Tensor{autograd.NoGrad(x)})[0]
	if !slices.Equal(got[0].BFloat16s(), want.BFloat16s()) {
		t.Errorf("the graph of\n%s\ngives %v, the function %v", g, got[0].Values(), want.Values())
	}
}
