package autograd_test

import (
	"math"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

// The ops of testdata/golden/gen_activation.py's OPS table, with the same
// parameters. Each has a ".basic", a ".cl" and a ".special" case.
var actGoldenOps = map[string]func(*autograd.Tensor) *autograd.Tensor{
	"neg":           autograd.Neg,
	"exp":           autograd.Exp,
	"log":           autograd.Log,
	"sqrt":          autograd.Sqrt,
	"pow2_5":        actPow(2.5),
	"pow3":          actPow(3),
	"pow2":          actPow(2),
	"powm1_5":       actPow(-1.5),
	"pow0_5":        actPow(0.5),
	"powm0_5":       actPow(-0.5),
	"powm1":         actPow(-1),
	"powm2":         actPow(-2),
	"pow1":          actPow(1),
	"pow0":          actPow(0),
	"add_scalar":    func(x *autograd.Tensor) *autograd.Tensor { return autograd.AddScalar(x, 1.5) },
	"mul_scalar":    func(x *autograd.Tensor) *autograd.Tensor { return autograd.MulScalar(x, -0.75) },
	"relu":          autograd.ReLU,
	"sigmoid":       autograd.Sigmoid,
	"tanh":          autograd.Tanh,
	"hardtanh":      func(x *autograd.Tensor) *autograd.Tensor { return autograd.HardTanh(x, -1, 1) },
	"hardtanh_asym": func(x *autograd.Tensor) *autograd.Tensor { return autograd.HardTanh(x, -0.5, 2) },
	"silu":          autograd.SiLU,
	"elu":           func(x *autograd.Tensor) *autograd.Tensor { return autograd.ELU(x, 1) },
	"elu_a03":       func(x *autograd.Tensor) *autograd.Tensor { return autograd.ELU(x, 0.3) },
	"gelu":          func(x *autograd.Tensor) *autograd.Tensor { return autograd.GELU(x, "none") },
	"gelu_tanh":     func(x *autograd.Tensor) *autograd.Tensor { return autograd.GELU(x, "tanh") },
}

func actPow(e float32) func(*autograd.Tensor) *autograd.Tensor {
	return func(x *autograd.Tensor) *autograd.Tensor { return autograd.Pow(x, e) }
}

// actGoldenRun applies op to the case's input (channels-last when cl) and
// backpropagates the case's output gradient.
func actGoldenRun(t *testing.T, set golden.Set, name string, op func(*autograd.Tensor) *autograd.Tensor, cl bool) (out, x *autograd.Tensor) {
	t.Helper()
	x = set.Get(t, name+".x")
	if cl {
		x = x.To(autograd.ChannelsLast)
	}
	x.SetRequiresGrad(true)
	out = op(x)
	if out.Format() != x.Format() {
		t.Errorf("output format %v, input %v", out.Format(), x.Format())
	}
	out.Backward(set.Get(t, name+".gout"))
	if x.Grad() == nil {
		t.Fatal("no gradient reached the input")
	}
	return out, x
}

func TestActivationGolden(t *testing.T) {
	set := golden.Load(t, "activation.safetensors")
	for name, op := range actGoldenOps {
		for _, kind := range []string{"basic", "cl"} {
			c := name + "." + kind
			t.Run(c, func(t *testing.T) {
				out, x := actGoldenRun(t, set, c, op, kind == "cl")
				golden.AssertClose(t, "out", out, set.Get(t, c+".out"), 1e-5)
				golden.AssertClose(t, "grad_x", x.Grad(), set.Get(t, c+".grad_x"), 1e-5)
				checkGoldenStrides(t, set, c, out)
				if _, ok := set[c+".out_strides"]; kind == "cl" && !ok {
					t.Error("channels-last case without PyTorch's output strides")
				}
			})
		}
	}
}

// TestActivationGoldenSpecial checks kinks, signed zeros, huge, infinite
// and NaN inputs: non-finite results must match PyTorch's exactly (NaN for
// NaN, Inf of the same sign), finite ones to 1e-5 relative.
func TestActivationGoldenSpecial(t *testing.T) {
	set := golden.Load(t, "activation.safetensors")
	for name, op := range actGoldenOps {
		c := name + ".special"
		t.Run(c, func(t *testing.T) {
			out, x := actGoldenRun(t, set, c, op, false)
			xs := x.Values()
			actSpecialClose(t, "out", xs, out.Values(), set.Get(t, c+".out").Values())
			actSpecialClose(t, "grad_x", xs, x.Grad().Values(), set.Get(t, c+".grad_x").Values())
		})
	}
}

func actSpecialClose(t *testing.T, what string, x, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		var ok bool
		switch {
		case math.IsNaN(w):
			ok = math.IsNaN(g)
		case math.IsInf(w, 0):
			ok = g == w
		default:
			// The absolute floor covers subnormal results (e^-100).
			ok = math.Abs(g-w) <= 1e-5*math.Abs(w)+1e-37
		}
		if !ok {
			t.Errorf("%s at x=%v: got %v, PyTorch %v", what, x[i], g, w)
		}
	}
}
