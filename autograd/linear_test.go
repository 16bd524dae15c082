package autograd_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// matmulNaive multiplies logical values in float64 with torch.matmul's
// rules, returning the result's shape and row-major values.
func matmulNaive(a, b *autograd.Tensor) ([]int, []float64) {
	as, bs := a.Shape(), b.Shape()
	av, bv := a.Values(), b.Values()
	if len(as) == 1 {
		as = []int{1, as[0]}
	}
	if len(bs) == 1 {
		bs = []int{bs[0], 1}
	}
	n, k, m := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	ab, bb := as[:len(as)-2], bs[:len(bs)-2]
	nb := max(len(ab), len(bb))
	batch := make([]int, nb)
	dim := func(s []int, i int) int {
		if j := len(s) - nb + i; j >= 0 {
			return s[j]
		}
		return 1
	}
	total := 1
	for i := range batch {
		batch[i] = max(dim(ab, i), dim(bb, i))
		total *= batch[i]
	}
	out := make([]float64, total*n*m)
	idx := make([]int, nb)
	for t := 0; t < total; t++ {
		ao, bo := 0, 0
		for i := range batch {
			da, db := dim(ab, i), dim(bb, i)
			ao = ao*da + min(idx[i], da-1)
			bo = bo*db + min(idx[i], db-1)
		}
		for i := 0; i < n; i++ {
			for j := 0; j < m; j++ {
				s := 0.0
				for p := 0; p < k; p++ {
					s += av[ao*n*k+i*k+p] * bv[bo*k*m+p*m+j]
				}
				out[t*n*m+i*m+j] = s
			}
		}
		for d := nb - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < batch[d] {
				break
			}
			idx[d] = 0
		}
	}
	shape := batch
	if a.NDim() > 1 {
		shape = append(shape, n)
	}
	if b.NDim() > 1 {
		shape = append(shape, m)
	}
	return shape, out
}

func linearClose(t *testing.T, what string, got []float64, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

var matmulCases = []struct {
	name   string
	a, b   []int
	aCL    bool
	result []int
}{
	{"dot", []int{5}, []int{5}, false, []int{}},
	{"mm", []int{3, 4}, []int{4, 5}, false, []int{3, 5}},
	{"vec-mat", []int{4}, []int{4, 5}, false, []int{5}},
	{"mat-vec", []int{3, 4}, []int{4}, false, []int{3}},
	{"batched-mat", []int{2, 3, 4}, []int{4, 5}, false, []int{2, 3, 5}},
	{"mat-batched", []int{3, 4}, []int{2, 4, 5}, false, []int{2, 3, 5}},
	{"batched", []int{2, 3, 4}, []int{2, 4, 5}, false, []int{2, 3, 5}},
	{"broadcast", []int{2, 1, 3, 4}, []int{3, 4, 2}, false, []int{2, 3, 3, 2}},
	{"broadcast-both", []int{1, 3, 2, 4}, []int{2, 1, 4, 3}, false, []int{2, 3, 2, 3}},
	{"vec-batched", []int{4}, []int{2, 4, 5}, false, []int{2, 5}},
	{"batched-vec", []int{2, 3, 4}, []int{4}, false, []int{2, 3}},
	{"channels-last", []int{2, 3, 4, 5}, []int{5, 2}, true, []int{2, 3, 4, 2}},
	{"channels-last-batched", []int{2, 3, 4, 5}, []int{3, 5, 2}, true, []int{2, 3, 4, 2}},
	{"zero-k", []int{2, 0}, []int{0, 3}, false, []int{2, 3}},
}

func TestMatmulValuesAndGradients(t *testing.T) {
	g := autograd.NewGenerator(11)
	for _, c := range matmulCases {
		t.Run(c.name, func(t *testing.T) {
			a, b := autograd.Randn(g, c.a...), autograd.Randn(g, c.b...)
			if c.aCL {
				a = a.To(autograd.ChannelsLast)
			}
			a, b = shapeLeaf(a), shapeLeaf(b)
			y := autograd.Matmul(a, b)
			shape, want := matmulNaive(a, b)
			if fmt.Sprint(y.Shape()) != fmt.Sprint(c.result) || fmt.Sprint(shape) != fmt.Sprint(c.result) {
				t.Fatalf("shape %v (naive %v), want %v", y.Shape(), shape, c.result)
			}
			if y.Format() != autograd.Contiguous {
				t.Errorf("result format %v, want contiguous", y.Format())
			}
			linearClose(t, "values", y.Values(), want, 1e-5)
			f := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Matmul(xs[0], xs[1]) }
			if err := autograd.GradCheck(f, []*autograd.Tensor{a, b}, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
			if a.Grad().Format() != a.Format() {
				t.Errorf("gradient format %v, want %v", a.Grad().Format(), a.Format())
			}
		})
	}
}

// Only the operand that requires a gradient gets one.
func TestMatmulOneSidedGradient(t *testing.T) {
	g := autograd.NewGenerator(2)
	a := shapeLeaf(autograd.Randn(g, 2, 3, 4))
	b := autograd.Randn(g, 2, 4, 5)
	autograd.Sum(autograd.Matmul(a, b), nil, false).Backward()
	if a.Grad() == nil || b.Grad() != nil {
		t.Fatalf("gradients a %v, b %v; want only a's", a.Grad() != nil, b.Grad() != nil)
	}
	// d(sum(a·b))/da[i,p] = Σ_j b[p,j]
	bv := b.Values()
	av := a.Grad().Values()
	for bt := 0; bt < 2; bt++ {
		for p := 0; p < 4; p++ {
			s := 0.0
			for j := 0; j < 5; j++ {
				s += bv[bt*20+p*5+j]
			}
			for i := 0; i < 3; i++ {
				if got := av[bt*12+i*4+p]; math.Abs(got-s) > 1e-5 {
					t.Fatalf("grad a[%d,%d,%d] = %v, want %v", bt, i, p, got, s)
				}
			}
		}
	}
}

func TestBMM(t *testing.T) {
	g := autograd.NewGenerator(4)
	for _, c := range []struct{ a, b []int }{
		{[]int{3, 2, 4}, []int{3, 4, 5}},
		{[]int{1, 1, 1}, []int{1, 1, 1}},
		{[]int{2, 5, 1}, []int{2, 1, 3}},
		{[]int{4, 3, 3}, []int{4, 3, 2}},
		{[]int{2, 3, 0}, []int{2, 0, 2}},
	} {
		t.Run(fmt.Sprint(c.a, c.b), func(t *testing.T) {
			a, b := shapeLeaf(autograd.Randn(g, c.a...)), shapeLeaf(autograd.Randn(g, c.b...))
			y := autograd.BMM(a, b)
			_, want := matmulNaive(a, b)
			linearClose(t, "values", y.Values(), want, 1e-5)
			if y.GradFn() != "BMMBackward" {
				t.Errorf("grad_fn %q, want BMMBackward", y.GradFn())
			}
			f := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.BMM(xs[0], xs[1]) }
			if err := autograd.GradCheck(f, []*autograd.Tensor{a, b}, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLinearValuesAndGradients(t *testing.T) {
	g := autograd.NewGenerator(5)
	cases := []struct {
		name string
		x    []int
		cl   bool
		bias bool
	}{
		{"2d", []int{5, 7}, false, true},
		{"2d-no-bias", []int{5, 7}, false, false},
		{"1d", []int{7}, false, true},
		{"3d", []int{2, 3, 7}, false, true},
		{"channels-last", []int{2, 3, 4, 7}, true, true},
		{"empty-batch", []int{0, 7}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := autograd.Randn(g, c.x...)
			if c.cl {
				x = x.To(autograd.ChannelsLast)
			}
			x, w := shapeLeaf(x), shapeLeaf(autograd.Randn(g, 4, 7))
			ins := []*autograd.Tensor{x, w}
			var b *autograd.Tensor
			if c.bias {
				b = shapeLeaf(autograd.Randn(g, 4))
				ins = append(ins, b)
			}
			y := autograd.Linear(x, w, b)
			want := append(c.x[:len(c.x)-1:len(c.x)-1], 4)
			if fmt.Sprint(y.Shape()) != fmt.Sprint(want) || y.Format() != autograd.Contiguous {
				t.Fatalf("result %v %v, want %v contiguous", y.Shape(), y.Format(), want)
			}
			// Reference: x·wᵀ (+ b) through the naive matmul.
			wv := w.Values()
			wt := make([]float32, len(wv))
			for o := 0; o < 4; o++ {
				for i := 0; i < 7; i++ {
					wt[i*4+o] = float32(wv[o*7+i])
				}
			}
			_, ref := matmulNaive(x, autograd.FromFloat32(wt, 7, 4))
			if b != nil {
				for i := range ref {
					ref[i] += b.Values()[i%4]
				}
			}
			linearClose(t, "values", y.Values(), ref, 1e-5)
			f := func(xs ...*autograd.Tensor) *autograd.Tensor {
				var b *autograd.Tensor
				if len(xs) == 3 {
					b = xs[2]
				}
				return autograd.Linear(xs[0], xs[1], b)
			}
			if err := autograd.GradCheck(f, ins, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
			if x.Grad().Format() != x.Format() {
				t.Errorf("input gradient format %v, want %v", x.Grad().Format(), x.Format())
			}
		})
	}
}

func TestLinearBadInputs(t *testing.T) {
	x, w, b := autograd.Zeros(3, 4), autograd.Zeros(5, 4), autograd.Zeros(5)
	shapeBadInputs(t, []shapeBadCase{
		{"matmul nil", func() { autograd.Matmul(nil, w) }, "Matmul: first operand is nil"},
		{"matmul dtype", func() { autograd.Matmul(x, autograd.Empty(autograd.Int64, 4, 5)) }, "Matmul: second operand has dtype int64"},
		{"matmul 0-d", func() { autograd.Matmul(autograd.Scalar(1), w) }, "Matmul: both arguments need at least 1 dimension, got shapes [] and [5 4]"},
		{"matmul sizes", func() { autograd.Matmul(autograd.Zeros(2, 3), autograd.Zeros(4, 5)) }, "Matmul: shapes [2 3] and [4 5] cannot be multiplied (2×3 and 4×5)"},
		{"matmul vector sizes", func() { autograd.Matmul(autograd.Zeros(3), autograd.Zeros(4)) }, "1-D operands of sizes 3 and 4 differ"},
		{"matmul mat-vec", func() { autograd.Matmul(autograd.Zeros(2, 3), autograd.Zeros(4)) }, "shapes [2 3] and [4] cannot be multiplied"},
		{"matmul batch", func() { autograd.Matmul(autograd.Zeros(2, 2, 3), autograd.Zeros(3, 3, 5)) },
			"Matmul: batch dimensions [2] of [2 2 3] and [3] of [3 3 5] cannot be broadcast together"},
		// No elements, but the broadcast batch has too many matrices to
		// list their offsets.
		{"matmul batch overflowing", func() { autograd.Matmul(autograd.Zeros(1<<40+1, 1, 0, 1), autograd.Zeros(1, 1<<40+1, 1, 0)) },
			"Matmul: shape [1099511627777 1099511627777 0 0]: element count overflows"},
		{"bmm rank", func() { autograd.BMM(autograd.Zeros(3, 4), autograd.Zeros(2, 4, 5)) }, "BMM: first operand must be a 3-D [batch, n, k] tensor, got shape [3 4]"},
		{"bmm rank b", func() { autograd.BMM(autograd.Zeros(2, 3, 4), autograd.Zeros(1, 2, 4, 5)) }, "BMM: second operand must be a 3-D"},
		{"bmm batch", func() { autograd.BMM(autograd.Zeros(2, 3, 4), autograd.Zeros(3, 4, 5)) }, "BMM: second operand must have shape [2 4 m] to multiply first operand [2 3 4], got [3 4 5]"},
		{"bmm inner", func() { autograd.BMM(autograd.Zeros(2, 3, 4), autograd.Zeros(2, 5, 5)) }, "got [2 5 5]"},
		{"bmm dtype", func() { autograd.BMM(autograd.Empty(autograd.BFloat16, 2, 3, 4), autograd.Zeros(2, 4, 5)) }, "BMM: second operand has dtype float32 but the first is bfloat16"},
		{"linear nil weight", func() { autograd.Linear(x, nil, nil) }, "Linear: weight is nil"},
		{"linear nil input", func() { autograd.Linear(nil, w, nil) }, "Linear: input is nil"},
		{"linear dtype", func() { autograd.Linear(autograd.Empty(autograd.Int32, 3, 4), w, nil) }, "Linear: input has dtype int32"},
		{"linear bias dtype", func() { autograd.Linear(x, w, autograd.Empty(autograd.Int64, 5)) }, "Linear: bias has dtype int64"},
		{"linear weight rank", func() { autograd.Linear(x, autograd.Zeros(4), nil) }, "Linear: weight must be 2-D [out, in], got shape [4]"},
		{"linear features", func() { autograd.Linear(autograd.Zeros(3, 6), w, b) }, "Linear: input [3 6] has 6 features in its last dimension, weight [5 4] expects 4"},
		{"linear 0-d", func() { autograd.Linear(autograd.Scalar(2), w, b) }, "Linear: input must have at least 1 dimension"},
		{"linear bias shape", func() { autograd.Linear(x, w, autograd.Zeros(4)) }, "Linear: bias has shape [4], want [5] for weight [5 4]"},
		{"linear bias rank", func() { autograd.Linear(x, w, autograd.Zeros(5, 1)) }, "bias has shape [5 1], want [5]"},
	})
}

// torch.matmul's cases: a dot product, a matrix-vector product and a
// batched product broadcasting one matrix.
func ExampleMatmul() {
	v := autograd.FromFloat32([]float32{1, 2, 3})
	m := autograd.FromFloat32([]float32{1, 0, 0, 0, 1, 0}, 2, 3)
	fmt.Println(autograd.Matmul(v, v).Shape(), autograd.Matmul(v, v).Item())
	fmt.Println(autograd.Matmul(m, v).Values())
	batch := autograd.Ones(4, 5, 2)
	fmt.Println(autograd.Matmul(batch, m).Shape())
	// Output:
	// [] 14
	// [1 2]
	// [4 5 3]
}

// A fully connected layer: x [batch, in], w [out, in], b [out].
func ExampleLinear() {
	x := autograd.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	w := autograd.FromFloat32([]float32{1, 1, 1, -1, 0, 2}, 3, 2).SetRequiresGrad(true)
	b := autograd.FromFloat32([]float32{0, 0, 10})
	y := autograd.Linear(x, w, b)
	fmt.Println(y.Shape(), y.Values())
	autograd.Sum(y, nil, false).Backward()
	fmt.Println(w.Grad().Values())
	// Output:
	// [2 3] [3 -1 14 7 -1 18]
	// [4 6 4 6 4 6]
}

// TestLinearBF16 checks the bfloat16 Linear against the float32 one on the
// same (bfloat16-representable) values: the products are exact and both sum
// in float32, so after rounding to bfloat16 they differ by at most an ulp
// of bfloat16 (2⁻⁸ relative); the gradients likewise.
func TestLinearBF16(t *testing.T) {
	g := autograd.NewGenerator(21)
	bf := func(shape ...int) *autograd.Tensor {
		return autograd.Cast(autograd.Randn(g, shape...), autograd.BFloat16)
	}
	x, w, b := bf(5, 3, 24), bf(17, 24), bf(17)
	dy := bf(5, 3, 17)
	run := func(dtype autograd.DType) []*autograd.Tensor {
		xl := autograd.Cast(x, dtype).Detach().SetRequiresGrad(true)
		wl := autograd.Cast(w, dtype).Detach().SetRequiresGrad(true)
		bl := autograd.Cast(b, dtype).Detach().SetRequiresGrad(true)
		y := autograd.Linear(xl, wl, bl)
		if y.DType() != dtype {
			t.Fatalf("%v Linear gave %v", dtype, y.DType())
		}
		y.Backward(autograd.Cast(dy, dtype))
		return []*autograd.Tensor{y, xl.Grad(), wl.Grad(), bl.Grad()}
	}
	want, got := run(autograd.Float32), run(autograd.BFloat16)
	for i, name := range []string{"output", "x grad", "w grad", "b grad"} {
		gv, wv := got[i].Values(), want[i].Values()
		for j := range wv {
			if d := math.Abs(gv[j] - wv[j]); d > 0x1p-7*math.Abs(wv[j])+1e-6 {
				t.Fatalf("%s[%d] = %v in BF16, %v in FP32", name, j, gv[j], wv[j])
			}
		}
	}
	if err := autograd.Try(func() { autograd.Linear(x, autograd.Randn(g, 17, 24), nil) }); err == nil || !strings.Contains(err.Error(), "weight has dtype float32 but the input is bfloat16") {
		t.Errorf("mixed dtypes: %v", err)
	}
}

// TestAutocastLinear: under autocast a float32 Linear computes in BF16,
// returns bfloat16, and its float32 leaves get float32 gradients close to
// the float32 ones.
func TestAutocastLinear(t *testing.T) {
	g := autograd.NewGenerator(22)
	x := autograd.Randn(g, 8, 32)
	w := autograd.Randn(g, 16, 32).SetRequiresGrad(true)
	y := autograd.Linear(autograd.Autocast(x), w, nil)
	if y.DType() != autograd.BFloat16 || !y.Mode().Autocast() || x.Mode().Autocast() || w.Mode().Autocast() {
		t.Fatalf("autocast Linear gave %v (result in autocast: %v; x, w marked: %v, %v)", y.DType(), y.Mode().Autocast(), x.Mode().Autocast(), w.Mode().Autocast())
	}
	autograd.Sum(autograd.Cast(y, autograd.Float32), nil, false).Backward()
	if w.Grad() == nil || w.Grad().DType() != autograd.Float32 {
		t.Fatalf("float32 weight's gradient: %v", w.Grad())
	}
	// The gradient of sum(x·wᵀ) is, in every row of w, the column sums of
	// x: BF16 rounding of x and of the output moves it by well under 2%.
	xs := x.Values()
	for j, v := range w.Grad().Values() {
		var s float64
		for r := range 8 {
			s += xs[r*32+j%32]
		}
		if math.Abs(v-s) > 0.02*math.Abs(s)+0.05 {
			t.Fatalf("w grad[%d] = %v, want about %v", j, v, s)
		}
	}
}

// TestMatmulBF16 checks bfloat16 Matmul and BMM (with broadcasting) against
// the float32 ops on the same values, within a bfloat16 ulp, and that
// autocast reaches them.
func TestMatmulBF16(t *testing.T) {
	g := autograd.NewGenerator(23)
	bf := func(shape ...int) *autograd.Tensor {
		return autograd.Cast(autograd.Randn(g, shape...), autograd.BFloat16)
	}
	for _, c := range []struct {
		name string
		a, b []int
		f    func(a, b *autograd.Tensor) *autograd.Tensor
	}{
		{"matmul 2d", []int{5, 9}, []int{9, 7}, autograd.Matmul},
		{"matmul broadcast", []int{3, 5, 9}, []int{9, 7}, autograd.Matmul},
		{"matmul batch broadcast", []int{2, 1, 4, 6}, []int{3, 6, 5}, autograd.Matmul},
		{"bmm", []int{3, 4, 6}, []int{3, 6, 5}, autograd.BMM},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := bf(c.a...), bf(c.b...)
			run := func(dtype autograd.DType) []*autograd.Tensor {
				al := autograd.Cast(a, dtype).Detach().SetRequiresGrad(true)
				bl := autograd.Cast(b, dtype).Detach().SetRequiresGrad(true)
				y := c.f(al, bl)
				y.Backward(autograd.Cast(autograd.OnesLike(y), dtype))
				return []*autograd.Tensor{y, al.Grad(), bl.Grad()}
			}
			want, got := run(autograd.Float32), run(autograd.BFloat16)
			for i, name := range []string{"output", "a grad", "b grad"} {
				if got[i].DType() != autograd.BFloat16 {
					t.Fatalf("%s has dtype %v", name, got[i].DType())
				}
				gv, wv := got[i].Values(), want[i].Values()
				for j := range wv {
					if d := math.Abs(gv[j] - wv[j]); d > 0x1p-7*math.Abs(wv[j])+1e-5 {
						t.Fatalf("%s[%d] = %v in BF16, %v in FP32", name, j, gv[j], wv[j])
					}
				}
			}
			y := c.f(autograd.Autocast(autograd.Cast(a, autograd.Float32)), autograd.Cast(b, autograd.Float32))
			if y.DType() != autograd.BFloat16 {
				t.Errorf("under autocast the product is %v", y.DType())
			}
		})
	}
}

// LinearReLU gives ReLU(Linear) bit for bit: fused where nothing records,
// the two ops where something does.
func TestLinearReLU(t *testing.T) {
	g := autograd.NewGenerator(7)
	nan := float32(math.NaN())
	for _, c := range []struct {
		name     string
		x        []int
		in, out  int
		bias     bool
		specials bool
	}{
		{"2-D with bias", []int{37, 19}, 19, 45, true, false},
		{"2-D without bias", []int{5, 64}, 64, 17, false, false},
		{"3-D", []int{3, 7, 33}, 33, 31, true, false},
		{"NaN passes through", []int{4, 3}, 3, 2, false, true},
		{"no rows", []int{0, 8}, 8, 5, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			x, w := autograd.Randn(g, c.x...), autograd.Randn(g, c.out, c.in)
			var b *autograd.Tensor
			if c.bias {
				b = autograd.Randn(g, c.out)
			}
			if c.specials {
				xd, wd := x.Float32s(), w.Float32s()
				clear(xd)
				clear(wd)
				xd[0], wd[0] = nan, 1 // row 0, column 0: NaN
				xd[3], wd[3] = 1, -2  // row 1, column 1: −2, rectified to 0
			}
			want := autograd.ReLU(autograd.Linear(autograd.NoGrad(x), w, b)).Float32s()
			for _, mode := range []string{"no-grad", "no operand requires a gradient"} {
				in := x
				if mode == "no-grad" {
					in = autograd.NoGrad(x)
				}
				y := autograd.LinearReLU(in, w, b)
				if y.RequiresGrad() {
					t.Errorf("%s: result requires a gradient", mode)
				}
				for i, v := range y.Float32s() {
					if math.Float32bits(v) != math.Float32bits(want[i]) && !(v != v && want[i] != want[i]) {
						t.Fatalf("%s: element %d = %v, want %v", mode, i, v, want[i])
					}
				}
			}
		})
	}

	// Recording: values and every gradient are the two ops', bit for
	// bit, on a result with zeros and NaN, and a finite-difference check.
	for _, bias := range []bool{true, false} {
		x0, w0, b0 := autograd.Randn(g, 37, 19), autograd.Randn(g, 45, 19), autograd.Randn(g, 45)
		x0.Float32s()[5] = nan
		gout := autograd.Randn(g, 37, 45)
		var vals [2][]float32
		for k, fused := range []bool{true, false} {
			x, w, b := x0.Detach().SetRequiresGrad(true), w0.Detach().SetRequiresGrad(true), b0.Detach().SetRequiresGrad(true)
			if !bias {
				b = nil
			}
			var y *autograd.Tensor
			if fused {
				y = autograd.LinearReLU(x, w, b)
			} else {
				y = autograd.ReLU(autograd.Linear(x, w, b))
			}
			if !y.RequiresGrad() {
				t.Fatal("LinearReLU of operands that require gradients does not record")
			}
			y.Backward(gout)
			vals[k] = append(append(append([]float32(nil), y.Float32s()...), x.Grad().Float32s()...), w.Grad().Float32s()...)
			if b != nil {
				vals[k] = append(vals[k], b.Grad().Float32s()...)
			}
		}
		for i, v := range vals[0] {
			if want := vals[1][i]; math.Float32bits(v) != math.Float32bits(want) && !(v != v && want != want) {
				t.Fatalf("bias %v: value or gradient %d = %v fused, %v as two ops", bias, i, v, want)
			}
		}
	}
	// A chain, LinearReLU into LinearReLU into Linear: the same bits, also
	// where a ReLU's result has a second consumer whose gradient adds to
	// it.
	for _, branch := range []bool{false, true} {
		x0 := autograd.Randn(g, 37, 19)
		ws := []*autograd.Tensor{autograd.Randn(g, 45, 19), autograd.Randn(g, 45), autograd.Randn(g, 33, 45), autograd.Randn(g, 33), autograd.Randn(g, 3, 33), autograd.Randn(g, 3)}
		var vals [2][]float32
		for k, fused := range []bool{true, false} {
			x := x0.Detach().SetRequiresGrad(true)
			p := make([]*autograd.Tensor, len(ws))
			for i, w := range ws {
				p[i] = w.Detach().SetRequiresGrad(true)
			}
			lr := func(x, w, b *autograd.Tensor) *autograd.Tensor {
				if fused {
					return autograd.LinearReLU(x, w, b)
				}
				return autograd.ReLU(autograd.Linear(x, w, b))
			}
			y1 := lr(x, p[0], p[1])
			y := autograd.Linear(lr(y1, p[2], p[3]), p[4], p[5])
			loss := autograd.Sum(autograd.Mul(y, y), nil, false)
			if branch {
				loss = autograd.Add(loss, autograd.Sum(autograd.Mul(y1, y1), nil, false))
			}
			loss.Backward()
			vals[k] = append(vals[k], x.Grad().Float32s()...)
			for _, t := range p {
				vals[k] = append(vals[k], t.Grad().Float32s()...)
			}
		}
		for i, v := range vals[0] {
			if math.Float32bits(v) != math.Float32bits(vals[1][i]) {
				t.Fatalf("chain (branch %v): gradient element %d = %v fused, %v as ops", branch, i, v, vals[1][i])
			}
		}
	}
	x := autograd.Randn(g, 6, 5).SetRequiresGrad(true)
	w := autograd.Randn(g, 4, 5).SetRequiresGrad(true)
	b := autograd.Randn(g, 4).SetRequiresGrad(true)
	f := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.LinearReLU(xs[0], xs[1], xs[2]) }
	if err := autograd.GradCheck(f, []*autograd.Tensor{x, w, b}, autograd.GradCheckOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestLinearReLUAutocast: under autocast, LinearReLU (the BF16 product
// rectified in place) gives the bits of ReLU(Linear) in values and every
// gradient, on a result with NaN and negative entries, with and without
// an arena.
func TestLinearReLUAutocast(t *testing.T) {
	g := autograd.NewGenerator(17)
	nan := float32(math.NaN())
	x0, w0, b0 := autograd.Randn(g, 29, 19), autograd.Randn(g, 45, 19), autograd.Randn(g, 45)
	x0.Float32s()[5] = nan
	gout := autograd.Cast(autograd.Randn(g, 29, 45), autograd.BFloat16)
	for _, inArena := range []bool{false, true} {
		var vals [2][]uint32
		for k, fused := range []bool{true, false} {
			x, w, b := x0.Detach().SetRequiresGrad(true), w0.Detach().SetRequiresGrad(true), b0.Detach().SetRequiresGrad(true)
			in := autograd.Autocast(x)
			arena := autograd.NewArena(0)
			if inArena {
				in = arena.In(in)
			}
			var y *autograd.Tensor
			if fused {
				y = autograd.LinearReLU(in, w, b)
			} else {
				y = autograd.ReLU(autograd.Linear(in, w, b))
			}
			if y.DType() != autograd.BFloat16 {
				t.Fatalf("dtype %v under autocast", y.DType())
			}
			y.Backward(gout)
			for _, v := range y.BFloat16s() {
				vals[k] = append(vals[k], uint32(v))
			}
			for _, p := range []*autograd.Tensor{x, w, b} {
				for _, v := range p.Grad().Float32s() {
					vals[k] = append(vals[k], math.Float32bits(v))
				}
			}
			arena.Reset()
		}
		if !slices.Equal(vals[0], vals[1]) {
			t.Errorf("arena %v: fused values or gradients differ from ReLU(Linear)", inArena)
		}
	}
}
