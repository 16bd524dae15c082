package autograd_test

import (
	"math"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

// The cases of testdata/golden/gen_clamp.py's CASES table, with the same
// bounds.
var clampGoldenCases = map[string][2]float64{
	"sym.basic":            {-1, 1},
	"sym.special":          {-1, 1},
	"asym.basic":           {-0.5, 1.25},
	"asym.cl":              {-0.5, 1.25},
	"asym.special":         {-0.5, 1.25},
	"crossed.special":      {1, -1},
	"inf.special":          {math.Inf(-1), math.Inf(1)},
	"half_open.special":    {math.Inf(-1), 0.5},
	"round.special":        {0.1000000001, 1.00000001},
	"threshold.basic":      {0, 1},
	"bf16.basic":           {-0.5, 1.25},
	"bf16.cl":              {-0.5, 1.25},
	"bf16.special":         {-1, 1},
	"bf16_crossed.special": {1, -1},
	"bf16_round.special":   {0.3009, 0.3025},
}

// TestClampGolden compares Clamp with torch.clamp exactly: clamping and
// its gradient do no arithmetic, so every value, NaN included, must be
// PyTorch's bit for bit (up to the sign of a zero).
func TestClampGolden(t *testing.T) {
	set := golden.Load(t, "clamp.safetensors")
	for c, b := range clampGoldenCases {
		t.Run(c, func(t *testing.T) {
			x := set.Get(t, c+".x")
			cl := len(c) > 3 && c[len(c)-3:] == ".cl"
			if cl {
				x = x.To(autograd.ChannelsLast)
			}
			x.SetRequiresGrad(true)
			out := autograd.Clamp(x, b[0], b[1])
			if out.Format() != x.Format() || out.DType() != x.DType() {
				t.Errorf("output %v %v, input %v %v", out.DType(), out.Format(), x.DType(), x.Format())
			}
			out.Backward(set.Get(t, c+".gout"))
			if x.Grad() == nil {
				t.Fatal("no gradient reached the input")
			}
			xs := x.Values()
			clampExact(t, "out", xs, out.Values(), set.Get(t, c+".out").Values())
			clampExact(t, "grad_x", xs, x.Grad().Values(), set.Get(t, c+".grad_x").Values())
			if cl {
				checkGoldenStrides(t, set, c, out)
			}
		})
	}
}

func clampExact(t *testing.T, what string, x, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if g, w := got[i], want[i]; g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
			t.Errorf("%s at x=%v: got %v, PyTorch %v", what, x[i], g, w)
		}
	}
}
