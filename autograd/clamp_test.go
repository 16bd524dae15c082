package autograd_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// TestClampGradCheck checks Clamp's gradient by finite differences away
// from its bounds, in every memory format.
func TestClampGradCheck(t *testing.T) {
	g := autograd.NewGenerator(29)
	bounds := [][2]float64{{-1, 0.5}, {-0.25, 2}, {math.Inf(-1), 0.3}, {-0.3, math.Inf(1)}}
	for _, b := range bounds {
		for _, s := range actShapes {
			t.Run(fmt.Sprintf("%v/%v/%v", b, s.shape, s.format), func(t *testing.T) {
				x := actAny(float32(b[0]), float32(b[1]))(g, s.shape).To(s.format).Detach().SetRequiresGrad(true)
				f := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Clamp(xs[0], b[0], b[1]) }
				if y := f(x); y.Format() != x.Format() || fmt.Sprint(y.Shape()) != fmt.Sprint(x.Shape()) {
					t.Errorf("output %v %v, input %v %v", y.Shape(), y.Format(), x.Shape(), x.Format())
				}
				if err := autograd.GradCheck(f, []*autograd.Tensor{x}, autograd.GradCheckOptions{}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestClampBounds checks the gradient at exactly the bounds, which passes
// (unlike HardTanh's), and the crossed and infinite bounds.
func TestClampBounds(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		min, max float64
		x        []float32
		y, dx    []float64
	}{
		{-1, 1, []float32{-1, 1, -2, 2, 0, nan, inf, -inf}, []float64{-1, 1, -1, 1, 0, math.NaN(), 1, -1}, []float64{1, 1, 0, 0, 1, 0, 0, 0}},
		{1, -1, []float32{-2, 0, 1, -1, nan}, []float64{-1, -1, -1, -1, math.NaN()}, []float64{0, 0, 0, 0, 0}},
		{math.Inf(-1), math.Inf(1), []float32{-inf, inf, 3}, []float64{math.Inf(-1), math.Inf(1), 3}, []float64{1, 1, 1}},
	} {
		for _, dt := range []autograd.DType{autograd.Float32, autograd.BFloat16} {
			x := autograd.Cast(autograd.FromFloat32(c.x), dt).SetRequiresGrad(true)
			y := autograd.Clamp(x, c.min, c.max)
			y.Backward(autograd.Cast(autograd.Ones(len(c.x)), dt))
			clampExact(t, fmt.Sprintf("%v clamp(%v, %v)", dt, c.min, c.max), x.Values(), y.Values(), c.y)
			clampExact(t, fmt.Sprintf("%v grad clamp(%v, %v)", dt, c.min, c.max), x.Values(), x.Grad().Values(), c.dx)
		}
	}
}

func TestClampBadInputs(t *testing.T) {
	x := autograd.Ones(2, 2)
	xb := autograd.Cast(x, autograd.BFloat16)
	for _, c := range []struct {
		name string
		f    func()
		want []string
	}{
		{"nil", func() { autograd.Clamp(nil, 0, 1) }, []string{"Clamp: input is nil"}},
		{"int64", func() { autograd.Clamp(autograd.Empty(autograd.Int64, 2), 0, 1) }, []string{"Clamp: input has dtype int64"}},
		{"uint8", func() { autograd.Clamp(autograd.Empty(autograd.Uint8, 2), 0, 1) }, []string{"Clamp: input has dtype uint8"}},
		{"NaN min", func() { autograd.Clamp(x, math.NaN(), 1) }, []string{"Clamp: bounds must be numbers, got min NaN and max 1"}},
		{"NaN max", func() { autograd.Clamp(xb, 0, math.NaN()) }, []string{"Clamp: bounds must be numbers, got min 0 and max NaN"}},
		{"float32 overflow", func() { autograd.Clamp(x, -1e300, 1) }, []string{"Clamp: bound -1e+300 cannot be converted to float32 without overflow"}},
		{"bfloat16 overflow", func() { autograd.Clamp(xb, 0, 3.4e38) }, []string{"Clamp: bound 3.4e+38 cannot be converted to bfloat16 without overflow"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(c.f)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func ExampleClamp() {
	x := autograd.FromFloat32([]float32{-3, -1, 0.5, 1, 3}).SetRequiresGrad(true)
	y := autograd.Clamp(x, -1, 1)
	y.Backward(autograd.Ones(5))
	// The gradient passes at the bounds, as torch.clamp's does.
	fmt.Println(y.Values(), x.Grad().Values())
	// Output: [-1 -1 0.5 1 1] [0 1 1 1 0]
}
