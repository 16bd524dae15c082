package autograd_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

func TestBCELossGradCheck(t *testing.T) {
	g := autograd.NewGenerator(29)
	// Probabilities in [0.1, 0.9]: away from 0 and 1, where the loss is
	// steep and the finite differences would leave [0, 1].
	prob := func(shape ...int) *autograd.Tensor {
		return autograd.AddScalar(autograd.MulScalar(autograd.Rand(g, shape...), 0.8), 0.1)
	}
	cl := autograd.ChannelsLast
	cases := []struct {
		name string
		p, t *autograd.Tensor
		r    autograd.Reduction
	}{
		{"mean", prob(3, 4), autograd.Rand(g, 3, 4), autograd.ReductionMean},
		{"sum", prob(2, 3, 2), autograd.Rand(g, 2, 3, 2), autograd.ReductionSum},
		{"none", prob(5), autograd.Rand(g, 5), autograd.ReductionNone},
		{"0d", autograd.Scalar(0.3), autograd.Scalar(0.8), autograd.ReductionMean},
		{"hard targets", prob(6), autograd.FromFloat32([]float32{0, 1, 1, 0, 1, 0}, 6), autograd.ReductionSum},
		{"cl-p-none", prob(2, 3, 2, 2).To(cl), autograd.Rand(g, 2, 3, 2, 2), autograd.ReductionNone},
		{"cl-t-mean", prob(2, 3, 2, 2), autograd.Rand(g, 2, 3, 2, 2).To(cl), autograd.ReductionMean},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, tg := c.p.Detach().SetRequiresGrad(true), c.t.Detach().SetRequiresGrad(true)
			f := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.BCELoss(xs[0], xs[1], c.r) }
			if err := autograd.GradCheck(f, []*autograd.Tensor{p, tg}, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
			if p.Grad().Format() != p.Format() || tg.Grad().Format() != tg.Format() {
				t.Errorf("gradient formats %v, %v, want %v, %v", p.Grad().Format(), tg.Grad().Format(), p.Format(), tg.Format())
			}
			if c.r == autograd.ReductionNone {
				if out := autograd.BCELoss(p, tg, c.r); out.Format() != p.Format() {
					t.Errorf("result in %v, want the input's %v", out.Format(), p.Format())
				}
			}
		})
	}
}

// The cases of testdata/golden/gen_interaction.py's BCE table.
var bceGoldenCases = []struct {
	name string
	r    autograd.Reduction
	edge bool
}{
	{name: "bceloss.mean", r: autograd.ReductionMean},
	{name: "bceloss.sum", r: autograd.ReductionSum},
	{name: "bceloss.none", r: autograd.ReductionNone},
	{name: "bceloss.edge_none", r: autograd.ReductionNone, edge: true},
	{name: "bceloss.edge_sum", r: autograd.ReductionSum, edge: true},
	{name: "bceloss.edge_mean", r: autograd.ReductionMean, edge: true},
	{name: "bceloss.empty_mean", r: autograd.ReductionMean},
}

func TestBCELossGolden(t *testing.T) {
	set := golden.Load(t, "interaction.safetensors")
	for _, c := range bceGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			p, target := set.Get(t, c.name+".p"), set.Get(t, c.name+".target")
			p.SetRequiresGrad(true)
			target.SetRequiresGrad(!c.edge)
			out := autograd.BCELoss(p, target, c.r)
			out.Backward(lossGoldenLike(out, set.Get(t, c.name+".gout")))
			wantOut := lossGoldenLike(out, set.Get(t, c.name+".out"))
			if !c.edge {
				golden.AssertClose(t, "out", out, wantOut, 1e-5)
				golden.AssertClose(t, "grad_p", p.Grad(), set.Get(t, c.name+".grad_p"), 1e-5)
				golden.AssertClose(t, "grad_t", target.Grad(), set.Get(t, c.name+".grad_t"), 1e-5)
				return
			}
			bceEdgeClose(t, "out", out, wantOut, 0)
			bceEdgeClose(t, "grad_p", p.Grad(), set.Get(t, c.name+".grad_p"), bceSubnormalATol)
			if target.Grad() != nil {
				t.Errorf("target got a gradient it did not ask for")
			}
		})
	}
}

// bceSubnormalATol is the absolute slack of the edge cases' input
// gradients. PyTorch forms g·(p − t) in float32 before dividing by the
// 1e-12 floor, so for p = 1e-45 (the smallest subnormal) that product is
// rounded to a multiple of 2⁻¹⁴⁹ and the quotient is off by up to
// 2⁻¹⁵⁰/1e-12 ≈ 7e-34; Kiln computes it in float64.
const bceSubnormalATol = 1e-33

// bceEdgeClose compares element by element with a relative tolerance of
// 1e-6 plus atol, without golden.Close's allowance relative to the largest
// element: the edge cases mix gradients of 1e12 with ones of 1e-33.
func bceEdgeClose(t *testing.T, what string, got, want *autograd.Tensor, atol float64) {
	t.Helper()
	if fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape(), want.Shape())
	}
	g, w := got.Values(), want.Values()
	for i := range w {
		if d := math.Abs(g[i] - w[i]); !(d <= 1e-6*math.Abs(w[i])+atol) {
			t.Errorf("%s: element %d = %.8g, want %.8g", what, i, g[i], w[i])
		}
	}
}

// TestBCELossClamp checks the values PyTorch documents at the ends of
// [0, 1]: each log floored at −100, the input gradient's denominator
// floored at 1e-12, the target gradient unclamped.
func TestBCELossClamp(t *testing.T) {
	p := autograd.FromFloat32([]float32{0, 0, 1, 1, 0.5}, 5).SetRequiresGrad(true)
	tg := autograd.FromFloat32([]float32{1, 0, 0, 1, 0.25}, 5).SetRequiresGrad(true)
	out := autograd.BCELoss(p, tg, autograd.ReductionNone)
	out.Backward(autograd.OnesLike(out))
	want := []float64{100, 0, 100, 0, -(0.25*math.Log(0.5) + 0.75*math.Log(0.5))}
	wantDP := []float64{-1 / float64(float32(1e-12)), 0, 1 / float64(float32(1e-12)), 0, 0.25 / 0.25}
	wantDT := []float64{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1), 0}
	for i := range want {
		if v := out.Values()[i]; math.Abs(v-want[i]) > 1e-6*math.Abs(want[i]) {
			t.Errorf("loss %d = %v, want %v", i, v, want[i])
		}
		if v := p.Grad().Values()[i]; math.Abs(v-wantDP[i]) > 1e-6*math.Abs(wantDP[i]) {
			t.Errorf("input gradient %d = %v, want %v", i, v, wantDP[i])
		}
		if v := tg.Grad().Values()[i]; v != wantDT[i] {
			t.Errorf("target gradient %d = %v, want %v", i, v, wantDT[i])
		}
	}
}

func TestBCELossBadInputs(t *testing.T) {
	p := autograd.FromFloat32([]float32{0.5, 0.25}, 2)
	cases := []struct {
		name    string
		p, tg   *autograd.Tensor
		r       autograd.Reduction
		kind    error
		message string
	}{
		{"above 1", autograd.FromFloat32([]float32{0.5, 1.5}, 2), p, autograd.ReductionMean, autograd.ErrArgument,
			"BCELoss: input holds 1.5; BCELoss takes probabilities in [0, 1]"},
		{"negative", autograd.FromFloat32([]float32{-0.5, 0.5}, 2), p, autograd.ReductionNone, autograd.ErrArgument, "input holds -0.5"},
		{"NaN", autograd.FromFloat32([]float32{float32(math.NaN()), 0.5}, 2), p, autograd.ReductionSum, autograd.ErrArgument, "input holds NaN"},
		{"nil input", nil, p, autograd.ReductionMean, autograd.ErrArgument, "BCELoss: input is nil"},
		{"nil target", p, nil, autograd.ReductionMean, autograd.ErrArgument, "BCELoss: target is nil"},
		{"shape", p, autograd.Zeros(3), autograd.ReductionMean, autograd.ErrShape, "BCELoss: input shape [2] and target shape [3] differ"},
		{"dtype", p, autograd.Cast(p, autograd.BFloat16), autograd.ReductionMean, autograd.ErrDType, "BCELoss: target has dtype bfloat16"},
		{"reduction", p, p, autograd.Reduction(9), autograd.ErrArgument, "BCELoss: invalid reduction"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(func() { autograd.BCELoss(c.p, c.tg, c.r) })
			if !errors.Is(err, c.kind) || !strings.Contains(fmt.Sprint(err), c.message) {
				t.Errorf("error %v, want %v containing %q", err, c.kind, c.message)
			}
		})
	}
	// Targets outside [0, 1] are not checked, as in PyTorch.
	if err := autograd.Try(func() { autograd.BCELoss(p, autograd.FromFloat32([]float32{1.5, -1}, 2), autograd.ReductionMean) }); err != nil {
		t.Errorf("target outside [0, 1]: %v", err)
	}
}
