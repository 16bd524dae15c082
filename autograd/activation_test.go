package autograd_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// actOp is one public elementwise entry point with its settings, and how
// to make inputs it can be finite-differenced on.
type actOp struct {
	name  string
	f     func(*autograd.Tensor) *autograd.Tensor
	input func(g *autograd.Generator, shape []int) *autograd.Tensor
}

// actAny draws N(0, 1.5²) inputs, moved at least 0.05 away from kinks.
func actAny(kinks ...float32) func(*autograd.Generator, []int) *autograd.Tensor {
	return func(g *autograd.Generator, shape []int) *autograd.Tensor {
		x := autograd.Randn(g, shape...)
		d := x.Float32s()
		for i := range d {
			d[i] *= 1.5
			for _, k := range kinks {
				if diff := d[i] - k; diff > -0.05 && diff < 0.05 {
					d[i] = k + float32(math.Copysign(0.1, float64(diff)))
				}
			}
		}
		return x
	}
}

// actPositive draws inputs in [0.2, 3.2), the domain of logs, roots and
// fractional powers.
func actPositive(g *autograd.Generator, shape []int) *autograd.Tensor {
	return autograd.Rand(g, shape...).Uniform(g, 0.2, 3.2)
}

func actOps() []actOp {
	return []actOp{
		{"Neg", autograd.Neg, actAny()},
		{"Exp", autograd.Exp, actAny()},
		{"Log", autograd.Log, actPositive},
		{"Sqrt", autograd.Sqrt, actPositive},
		{"Pow(2.5)", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Pow(x, 2.5) }, actPositive},
		{"Pow(-1.5)", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Pow(x, -1.5) }, actPositive},
		{"Pow(3)", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Pow(x, 3) }, actAny()},
		{"Pow(0)", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Pow(x, 0) }, actAny()},
		{"AddScalar", func(x *autograd.Tensor) *autograd.Tensor { return autograd.AddScalar(x, -0.5) }, actAny()},
		{"MulScalar", func(x *autograd.Tensor) *autograd.Tensor { return autograd.MulScalar(x, 2.5) }, actAny()},
		{"ReLU", autograd.ReLU, actAny(0)},
		{"Sigmoid", autograd.Sigmoid, actAny()},
		{"Tanh", autograd.Tanh, actAny()},
		{"HardTanh", func(x *autograd.Tensor) *autograd.Tensor { return autograd.HardTanh(x, -1, 0.5) }, actAny(-1, 0.5)},
		{"Clamp", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Clamp(x, -1, 0.5) }, actAny(-1, 0.5)},
		{"SiLU", autograd.SiLU, actAny()},
		{"ELU", func(x *autograd.Tensor) *autograd.Tensor { return autograd.ELU(x, 0.8) }, actAny(0)},
		{"GELU", func(x *autograd.Tensor) *autograd.Tensor { return autograd.GELU(x, "none") }, actAny()},
		{"GELU(tanh)", func(x *autograd.Tensor) *autograd.Tensor { return autograd.GELU(x, "tanh") }, actAny()},
		{"Dropout", func(x *autograd.Tensor) *autograd.Tensor {
			// A fresh generator per call draws the same mask each time, so
			// the finite differences see one fixed function.
			return autograd.Dropout(x, 0.4, true, autograd.NewGenerator(3))
		}, actAny()},
	}
}

// actShapes covers 0-d, 1-D, 2-D and the channels-last image layouts.
var actShapes = []struct {
	shape  []int
	format autograd.MemoryFormat
}{
	{[]int{}, autograd.Contiguous},
	{[]int{7}, autograd.Contiguous},
	{[]int{3, 5}, autograd.Contiguous},
	{[]int{2, 3, 4, 3}, autograd.Contiguous},
	{[]int{2, 3, 4, 3}, autograd.ChannelsLast},
	{[]int{2, 2, 3, 2, 3}, autograd.ChannelsLast3d},
}

func TestActivationGradCheck(t *testing.T) {
	g := autograd.NewGenerator(17)
	for _, op := range actOps() {
		for _, s := range actShapes {
			t.Run(fmt.Sprintf("%s/%v/%v", op.name, s.shape, s.format), func(t *testing.T) {
				x := op.input(g, s.shape).To(s.format).Detach().SetRequiresGrad(true)
				y := op.f(x)
				if y.Format() != x.Format() || fmt.Sprint(y.Strides()) != fmt.Sprint(x.Strides()) {
					t.Errorf("output %v strides %v, input %v strides %v", y.Format(), y.Strides(), x.Format(), x.Strides())
				}
				if fmt.Sprint(y.Shape()) != fmt.Sprint(x.Shape()) {
					t.Errorf("output shape %v, input %v", y.Shape(), x.Shape())
				}
				f := func(xs ...*autograd.Tensor) *autograd.Tensor { return op.f(xs[0]) }
				if err := autograd.GradCheck(f, []*autograd.Tensor{x}, autograd.GradCheckOptions{}); err != nil {
					t.Fatal(err)
				}
				if x.Grad().Format() != x.Format() {
					t.Errorf("gradient format %v, input %v", x.Grad().Format(), x.Format())
				}
			})
		}
	}
}

// TestActivationLayouts checks that a channels-last input gives the same
// values and gradients as a contiguous one, also when the output gradient
// arrives in the other format.
func TestActivationLayouts(t *testing.T) {
	g := autograd.NewGenerator(23)
	for _, op := range actOps() {
		x0 := op.input(g, []int{2, 3, 4, 5})
		gout := autograd.Randn(g, 2, 3, 4, 5)
		var ref []float64
		for _, xf := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
			for _, gf := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
				x := x0.To(xf).Detach().SetRequiresGrad(true)
				y := op.f(x)
				y.Backward(gout.To(gf))
				got := append(y.Values(), x.Grad().Values()...)
				if ref == nil {
					ref = got
					continue
				}
				for i := range ref {
					if got[i] != ref[i] && !(math.IsNaN(got[i]) && math.IsNaN(ref[i])) {
						t.Fatalf("%s x %v, grad %v: element %d = %v, contiguous gives %v", op.name, xf, gf, i, got[i], ref[i])
					}
				}
			}
		}
	}
}

// TestActivationEdgeShapes runs every op on empty and 0-d tensors, and
// checks that nothing is recorded without a gradient to compute.
func TestActivationEdgeShapes(t *testing.T) {
	for _, op := range actOps() {
		e := autograd.Zeros(0, 3).SetRequiresGrad(true)
		y := op.f(e)
		if fmt.Sprint(y.Shape()) != "[0 3]" {
			t.Errorf("%s: empty input gives shape %v", op.name, y.Shape())
		}
		y.Backward(autograd.Zeros(0, 3))
		if e.Grad() == nil || fmt.Sprint(e.Grad().Shape()) != "[0 3]" {
			t.Errorf("%s: empty input got gradient %v", op.name, e.Grad())
		}
		s := autograd.Scalar(0.7).SetRequiresGrad(true)
		y = op.f(s)
		if y.NDim() != 0 {
			t.Errorf("%s: 0-d input gives shape %v", op.name, y.Shape())
		}
		y.Backward()
		if s.Grad() == nil {
			t.Errorf("%s: 0-d input got no gradient", op.name)
		}
		if op.f(autograd.Ones(3)).RequiresGrad() {
			t.Errorf("%s: result of a constant requires grad", op.name)
		}
		z := op.f(autograd.NoGrad(autograd.Ones(3).SetRequiresGrad(true)))
		if z.RequiresGrad() {
			t.Errorf("%s: result under NoGrad requires grad", op.name)
		}
	}
}

func TestActivationBadInputs(t *testing.T) {
	g := autograd.NewGenerator(1)
	type entry struct {
		name string
		f    func(*autograd.Tensor) *autograd.Tensor
	}
	entries := []entry{
		{"Neg", autograd.Neg}, {"Exp", autograd.Exp}, {"Log", autograd.Log}, {"Sqrt", autograd.Sqrt},
		{"Pow", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Pow(x, 2) }},
		{"AddScalar", func(x *autograd.Tensor) *autograd.Tensor { return autograd.AddScalar(x, 1) }},
		{"MulScalar", func(x *autograd.Tensor) *autograd.Tensor { return autograd.MulScalar(x, 1) }},
		{"ReLU", autograd.ReLU}, {"Sigmoid", autograd.Sigmoid}, {"Tanh", autograd.Tanh},
		{"HardTanh", func(x *autograd.Tensor) *autograd.Tensor { return autograd.HardTanh(x, -1, 1) }},
		{"Clamp", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Clamp(x, -1, 1) }},
		{"SiLU", autograd.SiLU},
		{"ELU", func(x *autograd.Tensor) *autograd.Tensor { return autograd.ELU(x, 1) }},
		{"GELU", func(x *autograd.Tensor) *autograd.Tensor { return autograd.GELU(x, "tanh") }},
		{"Dropout", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Dropout(x, 0.5, true, g) }},
	}
	type badCase struct {
		name string
		f    func()
		want []string
	}
	var cases []badCase
	for _, e := range entries {
		cases = append(cases,
			badCase{e.name + "/nil", func() { e.f(nil) }, []string{e.name + ": input is nil"}},
			badCase{e.name + "/int64", func() { e.f(autograd.Empty(autograd.Int64, 2, 3)) },
				[]string{e.name + ": input has dtype int64; " + e.name + " supports float32"}},
		)
	}
	x := autograd.Ones(2, 2)
	cases = append(cases,
		badCase{"HardTanh/bounds", func() { autograd.HardTanh(x, 2, -1) }, []string{"HardTanh: min 2 is greater than max -1"}},
		badCase{"HardTanh/NaN bound", func() { autograd.HardTanh(x, float32(math.NaN()), 1) }, []string{"HardTanh: bounds must be numbers, got min NaN and max 1"}},
		badCase{"GELU/approximate", func() { autograd.GELU(x, "fast") }, []string{`GELU: approximate must be "none" or "tanh", got "fast"`}},
		badCase{"GELU/empty approximate", func() { autograd.GELU(x, "") }, []string{`got ""`}},
		badCase{"Dropout/p>1", func() { autograd.Dropout(x, 1.5, true, g) }, []string{"Dropout: dropout probability has to be between 0 and 1, but got 1.5"}},
		badCase{"Dropout/p<0", func() { autograd.Dropout(x, -0.1, true, g) }, []string{"but got -0.1"}},
		badCase{"Dropout/p NaN", func() { autograd.Dropout(x, math.NaN(), false, g) }, []string{"but got NaN"}},
		badCase{"Dropout/bad p in eval", func() { autograd.Dropout(x, 2, false, nil) }, []string{"but got 2"}},
		badCase{"Dropout/nil generator", func() { autograd.Dropout(x, 0.5, true, nil) }, []string{"Dropout: generator is nil", "p=0.5"}},
		badCase{"Dropout/int64 in eval", func() { autograd.Dropout(autograd.Empty(autograd.Int64, 3), 0.5, false, nil) }, []string{"Dropout: input has dtype int64"}},
	)
	// Bfloat16 inputs run through float32 and round back: exactly the
	// float32 op's result rounded to bfloat16.
	xb := autograd.Cast(autograd.AddScalar(autograd.Rand(g, 2, 3), 0.5), autograd.BFloat16)
	for _, e := range entries {
		got := e.f(xb)
		want := autograd.Cast(e.f(autograd.Cast(xb, autograd.Float32)), autograd.BFloat16)
		if strings.HasPrefix(e.name, "Dropout") {
			want = got // its mask is a fresh draw each call
		}
		if got.DType() != autograd.BFloat16 || fmt.Sprint(got.BFloat16s()) != fmt.Sprint(want.BFloat16s()) {
			t.Errorf("%s on bfloat16: %v %v, want %v", e.name, got.DType(), got.Values(), want.Values())
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(c.f)
			var ae *autograd.Error
			if !errors.As(err, &ae) {
				t.Fatalf("got %v, want an *autograd.Error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// actDropoutScale is the factor PyTorch scales kept elements by: 1/(1−p)
// divided in float32.
func actDropoutScale(p float64) float32 { return 1 / float32(1-p) }

func TestDropoutStatistics(t *testing.T) {
	const rows, cols = 200, 500
	n := float64(rows * cols)
	for _, p := range []float64{0.02, 0.1, 0.5, 0.8, 0.97} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			g := autograd.NewGenerator(uint64(1000 * p))
			// Inputs in [0.5, 1.5) are never 0, so a zero output is a drop.
			x := autograd.Rand(g, rows, cols).Uniform(g, 0.5, 1.5).SetRequiresGrad(true)
			y := autograd.Dropout(x, p, true, g)
			gout := autograd.Randn(g, rows, cols)
			y.Backward(gout)
			scale := actDropoutScale(p)
			if math.Abs(float64(scale)-1/(1-p)) > 1e-6/(1-p) {
				t.Fatalf("scale %v, want about %v", scale, 1/(1-p))
			}
			xs, ys, gs, gx := x.Float32s(), y.Float32s(), gout.Float32s(), x.Grad().Float32s()
			dropped := 0
			for i := range xs {
				if ys[i] == 0 {
					dropped++
					if gx[i] != 0 {
						t.Fatalf("element %d dropped but its gradient is %v", i, gx[i])
					}
					continue
				}
				if ys[i] != xs[i]*scale {
					t.Fatalf("element %d kept as %v, want %v·%v = %v", i, ys[i], xs[i], scale, xs[i]*scale)
				}
				if gx[i] != gs[i]*scale {
					t.Fatalf("element %d: gradient %v, want %v·%v", i, gx[i], gs[i], scale)
				}
			}
			// The dropped count is binomial(n, p): allow five standard deviations.
			frac := float64(dropped) / n
			if sd := math.Sqrt(p * (1 - p) / n); math.Abs(frac-p) > 5*sd {
				t.Errorf("dropped %.4f of the elements, want %v ± %.4f", frac, p, 5*sd)
			}
		})
	}
}

func TestDropoutDeterminism(t *testing.T) {
	x := autograd.Rand(autograd.NewGenerator(0), 2, 3, 4, 5).Uniform(autograd.NewGenerator(0), 0.5, 1.5)
	run := func(seed uint64, f autograd.MemoryFormat) []float64 {
		return autograd.Dropout(x.To(f), 0.5, true, autograd.NewGenerator(seed)).Values()
	}
	a, b, c := run(42, autograd.Contiguous), run(42, autograd.Contiguous), run(43, autograd.Contiguous)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("the same seed gave different masks")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Error("different seeds gave the same mask")
	}
	// The mask is drawn in logical order, so the layout does not change it.
	if cl := run(42, autograd.ChannelsLast); fmt.Sprint(cl) != fmt.Sprint(a) {
		t.Error("a channels-last input got a different mask for the same seed")
	}
	y := autograd.Dropout(x.To(autograd.ChannelsLast), 0.5, true, autograd.NewGenerator(1))
	if y.Format() != autograd.ChannelsLast || fmt.Sprint(y.Strides()) != "[60 1 15 3]" {
		t.Errorf("channels-last input gave %v output with strides %v", y.Format(), y.Strides())
	}
	// Successive calls on one generator draw fresh masks.
	g := autograd.NewGenerator(5)
	if fmt.Sprint(autograd.Dropout(x, 0.5, true, g).Values()) == fmt.Sprint(autograd.Dropout(x, 0.5, true, g).Values()) {
		t.Error("two calls on one generator gave the same mask")
	}
}

func TestDropoutIdentityAndAll(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		name     string
		p        float64
		training bool
	}{{"eval", 0.5, false}, {"p=0", 0, true}, {"p=0 eval", 0, false}} {
		g := autograd.NewGenerator(9)
		x := autograd.FromFloat32([]float32{1, -2, 3}).SetRequiresGrad(true)
		y := autograd.Dropout(x, c.p, c.training, g)
		if y != x {
			t.Errorf("%s: did not return its input", c.name)
		}
		autograd.Mul(y, autograd.FromFloat32([]float32{4, 5, 6})).Backward(autograd.Ones(3))
		if got := fmt.Sprint(x.Grad().Values()); got != "[4 5 6]" {
			t.Errorf("%s: gradient %v, want the identity's [4 5 6]", c.name, got)
		}
		if g.Uint64() != autograd.NewGenerator(9).Uint64() {
			t.Errorf("%s: drew from the generator", c.name)
		}
		if autograd.Dropout(x, c.p, c.training, nil) != x {
			t.Errorf("%s: needs a generator it does not use", c.name)
		}
	}
	// p = 1 is x·0 and needs no generator: zeros, NaN stays NaN, no gradient.
	x := autograd.FromFloat32([]float32{1, -2, nan, 4}).SetRequiresGrad(true)
	y := autograd.Dropout(x, 1, true, nil)
	v := y.Values()
	if v[0] != 0 || v[1] != 0 || !math.IsNaN(v[2]) || v[3] != 0 {
		t.Errorf("p=1: %v, want [0 0 NaN 0]", v)
	}
	y.Backward(autograd.Ones(4))
	if got := fmt.Sprint(x.Grad().Values()); got != "[0 0 0 0]" {
		t.Errorf("p=1: gradient %v, want zeros", got)
	}
	// Empty input is returned as it is, as PyTorch does.
	e := autograd.Zeros(0, 4)
	if autograd.Dropout(e, 0.5, true, nil) != e {
		t.Error("empty input was not returned as it is")
	}
}

func ExampleReLU() {
	x := autograd.FromFloat32([]float32{-1, 0, 2}).SetRequiresGrad(true)
	y := autograd.ReLU(x)
	y.Backward(autograd.Ones(3))
	fmt.Println(y.Values(), x.Grad().Values())
	// Output: [0 0 2] [0 0 1]
}

func ExampleGELU() {
	x := autograd.FromFloat32([]float32{-1, 0, 1})
	for _, approx := range []string{"none", "tanh"} {
		fmt.Printf("%s:", approx)
		for _, v := range autograd.GELU(x, approx).Values() {
			fmt.Printf(" %.5f", v)
		}
		fmt.Println()
	}
	// Output:
	// none: -0.15866 0.00000 0.84134
	// tanh: -0.15881 0.00000 0.84119
}

func ExampleHardTanh() {
	x := autograd.FromFloat32([]float32{-3, -1, 0.5, 1, 3}).SetRequiresGrad(true)
	y := autograd.HardTanh(x, -1, 1)
	y.Backward(autograd.Ones(5))
	// No gradient at the bounds, as in PyTorch.
	fmt.Println(y.Values(), x.Grad().Values())
	// Output: [-1 -1 0.5 1 1] [0 0 1 0 0]
}

func ExamplePow() {
	x := autograd.FromFloat32([]float32{4, 9, -1}).SetRequiresGrad(true)
	y := autograd.Pow(x, 0.5) // a negative base gives NaN, as in PyTorch
	autograd.Pow(x, 2).Backward(autograd.Ones(3))
	fmt.Println(y.Values(), x.Grad().Values())
	// Output: [2 3 NaN] [8 18 -2]
}

func ExampleDropout() {
	x := autograd.Ones(2, 4)
	g := autograd.NewGenerator(7)
	// Training: about half the elements are zeroed, the rest scaled by 2.
	fmt.Println(autograd.Dropout(x, 0.5, true, g).Values())
	// Evaluation: the identity, the input itself.
	fmt.Println(autograd.Dropout(x, 0.5, false, g) == x)
	// Output:
	// [0 0 2 0 2 2 2 2]
	// true
}

// TestAddReLU checks the fused op against autograd.ReLU(autograd.Add(a, b)): the same output
// and gradients bit for bit, with and without broadcasting, and a
// finite-difference check away from the kink.
func TestAddReLU(t *testing.T) {
	g := autograd.NewGenerator(11)
	for _, c := range []struct {
		name   string
		a, b   []int
		format autograd.MemoryFormat
	}{{"same", []int{2, 3, 4, 5}, []int{2, 3, 4, 5}, autograd.Contiguous}, {"same-cl", []int{2, 3, 4, 5}, []int{2, 3, 4, 5}, autograd.ChannelsLast}, {"broadcast", []int{4, 6}, []int{6}, autograd.Contiguous}} {
		t.Run(c.name, func(t *testing.T) {
			a, b := autograd.Randn(g, c.a...), autograd.Randn(g, c.b...)
			if c.format != autograd.Contiguous {
				a, b = a.To(c.format), b.To(c.format)
			}
			dy := autograd.Randn(g, c.a...)
			run := func(fused bool) []*autograd.Tensor {
				al, bl := a.Detach().SetRequiresGrad(true), b.Detach().SetRequiresGrad(true)
				var y *autograd.Tensor
				if fused {
					y = autograd.AddReLU(al, bl)
				} else {
					y = autograd.ReLU(autograd.Add(al, bl))
				}
				y.Backward(dy)
				return []*autograd.Tensor{y, al.Grad(), bl.Grad()}
			}
			want, got := run(false), run(true)
			for i, name := range []string{"output", "a grad", "b grad"} {
				if got[i].Format() != want[i].Format() || fmt.Sprint(got[i].Values()) != fmt.Sprint(want[i].Values()) {
					t.Errorf("%s differs from autograd.ReLU(autograd.Add(a, b))", name)
				}
			}
			// Keep a+b at least 0.5 from autograd.ReLU's kink for finite differences.
			av := autograd.Randn(g, c.a...).Float32s()
			for i, v := range av {
				av[i] = float32(math.Copysign(1+0.1*math.Min(math.Abs(float64(v)), 5), float64(v)))
			}
			ak := autograd.FromFloat32(av, c.a...)
			bk := autograd.MulScalar(autograd.Rand(g, c.b...), 0.4)
			if err := autograd.GradCheck(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.AddReLU(xs[0], xs[1]) },
				[]*autograd.Tensor{ak.SetRequiresGrad(true), bk.Detach().SetRequiresGrad(true)}, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
