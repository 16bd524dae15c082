package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// actCase is one function with its parameters, a float64 reference written
// independently of the kernel (other identities where there are any) and
// the input domain to test it on.
type actCase struct {
	act   Act
	ref   func(x float64) float64
	lo    float64 // inputs are uniform in [lo, hi)
	hi    float64
	kinks []float64 // points the finite differences keep away from
}

func actCases() []actCase {
	gelu := func(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }
	geluTanh := func(x float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	}
	sigmoid := func(x float64) float64 { return 0.5 * (1 + math.Tanh(x/2)) }
	return []actCase{
		{act: Act{Fn: ActNeg}, ref: func(x float64) float64 { return -x }, lo: -5, hi: 5},
		{act: Act{Fn: ActExp}, ref: math.Exp, lo: -10, hi: 10},
		{act: Act{Fn: ActLog}, ref: math.Log, lo: 0.01, hi: 50},
		{act: Act{Fn: ActSqrt}, ref: math.Sqrt, lo: 0.01, hi: 50},
		{act: Act{Fn: ActPow, A: 2.5}, ref: func(x float64) float64 { return math.Pow(x, 2.5) }, lo: 0.01, hi: 5},
		{act: Act{Fn: ActPow, A: 3}, ref: func(x float64) float64 { return x * x * x }, lo: -4, hi: 4},
		{act: Act{Fn: ActPow, A: 2}, ref: func(x float64) float64 { return x * x }, lo: -4, hi: 4},
		{act: Act{Fn: ActPow, A: -2}, ref: func(x float64) float64 { return 1 / (x * x) }, lo: 0.1, hi: 4},
		{act: Act{Fn: ActPow, A: 0.5}, ref: math.Sqrt, lo: 0.01, hi: 5},
		{act: Act{Fn: ActPow, A: -0.5}, ref: func(x float64) float64 { return 1 / math.Sqrt(x) }, lo: 0.05, hi: 5},
		{act: Act{Fn: ActPow, A: -1}, ref: func(x float64) float64 { return 1 / x }, lo: 0.05, hi: 5},
		{act: Act{Fn: ActPow, A: -1.5}, ref: func(x float64) float64 { return math.Pow(x, -1.5) }, lo: 0.05, hi: 5},
		{act: Act{Fn: ActPow, A: 1}, ref: func(x float64) float64 { return x }, lo: -4, hi: 4},
		{act: Act{Fn: ActPow, A: 0}, ref: func(x float64) float64 { return 1 }, lo: -4, hi: 4},
		{act: Act{Fn: ActAddScalar, A: 1.25}, ref: func(x float64) float64 { return x + 1.25 }, lo: -5, hi: 5},
		{act: Act{Fn: ActMulScalar, A: -0.75}, ref: func(x float64) float64 { return -0.75 * x }, lo: -5, hi: 5},
		{act: Act{Fn: ActReLU}, ref: func(x float64) float64 { return math.Max(x, 0) }, lo: -5, hi: 5, kinks: []float64{0}},
		{act: Act{Fn: ActSigmoid}, ref: sigmoid, lo: -12, hi: 12},
		{act: Act{Fn: ActTanh}, ref: math.Tanh, lo: -6, hi: 6},
		{act: Act{Fn: ActHardTanh, A: -0.5, B: 2}, ref: func(x float64) float64 { return math.Min(math.Max(x, -0.5), 2) },
			lo: -4, hi: 4, kinks: []float64{-0.5, 2}},
		{act: Act{Fn: ActClamp, A: -0.5, B: 2}, ref: func(x float64) float64 { return math.Min(math.Max(x, -0.5), 2) },
			lo: -4, hi: 4, kinks: []float64{-0.5, 2}},
		{act: Act{Fn: ActSiLU}, ref: func(x float64) float64 { return x * sigmoid(x) }, lo: -12, hi: 12},
		{act: Act{Fn: ActELU, A: 0.7}, ref: func(x float64) float64 {
			if x > 0 {
				return x
			}
			return 0.7 * math.Expm1(x)
		}, lo: -6, hi: 4, kinks: []float64{0}},
		{act: Act{Fn: ActGELU}, ref: gelu, lo: -6, hi: 6},
		{act: Act{Fn: ActGELUTanh}, ref: geluTanh, lo: -5, hi: 5},
	}
}

func (c actCase) name() string {
	if c.act.A == 0 && c.act.B == 0 {
		return c.act.Fn.String()
	}
	return fmt.Sprintf("%v(%g,%g)", c.act.Fn, c.act.A, c.act.B)
}

// actInputs fills n values uniform in [lo, hi), moved at least gap away
// from each kink.
func actInputs(r *rand.Rand, n int, c actCase, gap float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		v := c.lo + (c.hi-c.lo)*r.Float64()
		for _, k := range c.kinks {
			if math.Abs(v-k) < gap {
				v = k + math.Copysign(gap, v-k)
			}
		}
		x[i] = float32(v)
	}
	return x
}

// actSizes covers empty, one, primes, SIMD-ish tails and a size large
// enough for every function to split across the worker pool.
var actSizes = []int{0, 1, 2, 7, 17, 31, 64, 97, 1000, 50021}

const actGuard = float32(-12345.5)

// actGuarded returns a slice of n elements inside a buffer whose element
// before and after hold actGuard, and a check that they still do.
func actGuarded(t *testing.T, n int) ([]float32, func()) {
	buf := make([]float32, n+2)
	buf[0], buf[n+1] = actGuard, actGuard
	return buf[1 : n+1], func() {
		t.Helper()
		if buf[0] != actGuard || buf[n+1] != actGuard {
			t.Fatalf("n=%d: the kernel wrote outside its output", n)
		}
	}
}

func TestActForward(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range actCases() {
		t.Run(c.name(), func(t *testing.T) {
			for _, n := range actSizes {
				x := actInputs(r, n, c, 0)
				y, check := actGuarded(t, n)
				c.act.Forward(y, x)
				check()
				for i := range x {
					want := c.ref(float64(x[i]))
					// The kernels round in float32 step by step as PyTorch
					// does, so results that cancel (ELU's eˣ−1, GELU's tail)
					// carry an absolute error of a few float32 ulps of 1.
					if d := math.Abs(float64(y[i]) - want); !(d <= 1e-5*math.Abs(want)+1e-6) {
						t.Fatalf("n=%d: f(%v) = %v, want %v", n, x[i], y[i], want)
					}
				}
			}
		})
	}
}

func TestActBackward(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range actCases() {
		t.Run(c.name(), func(t *testing.T) {
			for _, n := range actSizes {
				x := actInputs(r, n, c, 1e-2)
				y := make([]float32, n)
				c.act.Forward(y, x)
				dy := make([]float32, n)
				for i := range dy {
					dy[i] = float32(r.NormFloat64())
				}
				dx, check := actGuarded(t, n)
				c.act.Backward(dx, dy, x, y)
				check()
				for i := range x {
					v := float64(x[i])
					h := 1e-4 * math.Max(1, math.Abs(v))
					num := (c.ref(v+h) - c.ref(v-h)) / (2 * h)
					want := float64(dy[i]) * num
					if d := math.Abs(float64(dx[i]) - want); !(d <= 1e-3*math.Abs(want)+1e-5) {
						t.Fatalf("n=%d: x=%v dy=%v: dx = %v, want %v", n, x[i], dy[i], dx[i], want)
					}
				}
			}
		})
	}
}

// TestActBackwardInPlace checks that dx may share dy's memory.
func TestActBackwardInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range actCases() {
		x := actInputs(r, 500, c, 1e-2)
		y := make([]float32, len(x))
		c.act.Forward(y, x)
		dy := make([]float32, len(x))
		for i := range dy {
			dy[i] = float32(r.NormFloat64())
		}
		want := make([]float32, len(x))
		c.act.Backward(want, dy, x, y)
		c.act.Backward(dy, dy, x, y)
		for i := range want {
			if dy[i] != want[i] && !(want[i] != want[i] && dy[i] != dy[i]) {
				t.Fatalf("%s: in place dx[%d] = %v, want %v", c.name(), i, dy[i], want[i])
			}
		}
	}
}

// TestActBackwardReads checks that Backward reads only what ReadsOutput
// says: the unused one of x and y may be nil.
func TestActBackwardReads(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range actCases() {
		x := actInputs(r, 40, c, 1e-2)
		y := make([]float32, len(x))
		c.act.Forward(y, x)
		dy := make([]float32, len(x))
		for i := range dy {
			dy[i] = float32(r.NormFloat64())
		}
		want := make([]float32, len(x))
		c.act.Backward(want, dy, x, y)
		got := make([]float32, len(x))
		if c.act.ReadsOutput() {
			c.act.Backward(got, dy, nil, y)
		} else {
			c.act.Backward(got, dy, x, nil)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: dx[%d] = %v reading one operand, %v reading both", c.name(), i, got[i], want[i])
			}
		}
	}
}

func TestActSpecialValues(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		act     Act
		x       []float32
		y, dx   []float32 // dy is 1 everywhere
		nanY    []bool
		nanGrad []bool
	}{
		// ReLU keeps NaN and passes its gradient; the gradient at 0 is 0.
		{act: Act{Fn: ActReLU}, x: []float32{nan, 0, -inf, inf}, y: []float32{0, 0, 0, inf}, dx: []float32{1, 0, 0, 1},
			nanY: []bool{true, false, false, false}},
		// HardTanh: no gradient at its bounds or at NaN.
		{act: Act{Fn: ActHardTanh, A: -1, B: 1}, x: []float32{-1, 1, nan, 0.5}, y: []float32{-1, 1, 0, 0.5}, dx: []float32{0, 0, 0, 1},
			nanY: []bool{false, false, true, false}},
		// Clamp (torch.clamp): the gradient passes at its bounds, not at NaN
		// or ±Inf outside them; crossed bounds give B and no gradient, but
		// keep NaN.
		{act: Act{Fn: ActClamp, A: -1, B: 1}, x: []float32{-1, 1, nan, 0.5, inf, -inf, 2}, y: []float32{-1, 1, 0, 0.5, 1, -1, 1},
			dx: []float32{1, 1, 0, 1, 0, 0, 0}, nanY: []bool{false, false, true, false, false, false, false}},
		{act: Act{Fn: ActClamp, A: 1, B: -1}, x: []float32{-2, 0, 1, -1, nan, inf}, y: []float32{-1, -1, -1, -1, 0, -1},
			dx: []float32{0, 0, 0, 0, 0, 0}, nanY: []bool{false, false, false, false, true, false}},
		{act: Act{Fn: ActClamp, A: float32(math.Inf(-1)), B: inf}, x: []float32{-inf, inf, nan, 3}, y: []float32{-inf, inf, 0, 3},
			dx: []float32{1, 1, 0, 1}, nanY: []bool{false, false, true, false}},
		// Pow with exponent 0: ones and zero gradient, NaN included.
		{act: Act{Fn: ActPow, A: 0}, x: []float32{nan, 0, -2}, y: []float32{1, 1, 1}, dx: []float32{0, 0, 0}},
		// Log and Sqrt of negatives are NaN, of zero −Inf and 0. Log's
		// gradient 1/x does not look at the NaN output.
		{act: Act{Fn: ActLog}, x: []float32{-1, 0}, y: []float32{0, -inf}, dx: []float32{-1, inf}, nanY: []bool{true, false}},
		{act: Act{Fn: ActSqrt}, x: []float32{-1, 0}, y: []float32{0, 0}, dx: []float32{0, inf}, nanY: []bool{true, false}, nanGrad: []bool{true, false}},
		// ELU: gradient alpha at 0, NaN at NaN; Tanh saturates like SLEEF.
		{act: Act{Fn: ActELU, A: 0.5}, x: []float32{0, nan}, y: []float32{0, 0}, dx: []float32{0.5, 0}, nanY: []bool{false, true}, nanGrad: []bool{false, true}},
		{act: Act{Fn: ActTanh}, x: []float32{8.7, -8.7}, y: []float32{1, -1}, dx: []float32{0, 0}},
	}
	for _, c := range cases {
		n := len(c.x)
		y := make([]float32, n)
		c.act.Forward(y, c.x)
		ones := make([]float32, n)
		for i := range ones {
			ones[i] = 1
		}
		dx := make([]float32, n)
		c.act.Backward(dx, ones, c.x, y)
		for i := range c.x {
			isNaN := func(v float32) bool { return v != v }
			wantNaNY := c.nanY != nil && c.nanY[i]
			wantNaNG := c.nanGrad != nil && c.nanGrad[i]
			if isNaN(y[i]) != wantNaNY || (!wantNaNY && y[i] != c.y[i]) {
				t.Errorf("%v(%v) = %v, want %v (NaN: %v)", c.act.Fn, c.x[i], y[i], c.y[i], wantNaNY)
			}
			if isNaN(dx[i]) != wantNaNG || (!wantNaNG && dx[i] != c.dx[i]) {
				t.Errorf("%v'(%v) = %v, want %v (NaN: %v)", c.act.Fn, c.x[i], dx[i], c.dx[i], wantNaNG)
			}
		}
	}
}

func TestActLengthMismatch(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"forward", func() { Act{Fn: ActExp}.Forward(make([]float32, 3), make([]float32, 4)) }, "Act.Forward(Exp): dst has 3 elements, src 4"},
		{"backward dy", func() { Act{Fn: ActNeg}.Backward(make([]float32, 3), make([]float32, 2), nil, nil) }, "Act.Backward(Neg): dx has 3 elements, dy 2"},
		{"backward x", func() {
			Act{Fn: ActGELU}.Backward(make([]float32, 3), make([]float32, 3), make([]float32, 2), make([]float32, 3))
		}, "Act.Backward(GELU): dx has 3 elements, dy 3, x 2"},
		{"backward y", func() {
			Act{Fn: ActSigmoid}.Backward(make([]float32, 3), make([]float32, 3), make([]float32, 3), nil)
		}, "y 0"},
		{"unknown", func() { Act{Fn: ActFunc(99)}.Forward(nil, nil) }, "unknown function ActFunc(99)"},
		{"dropout", func() { Dropout(make([]float32, 3), make([]float32, 3), make([]uint8, 2), 2) }, "Dropout: dst has 3 elements, src 3, keep 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if e, ok := r.(*Error); !ok || !strings.Contains(e.Error(), c.want) {
					t.Fatalf("panic %v, want one containing %q", r, c.want)
				}
			}()
			c.f()
		})
	}
}

func TestDropoutKernel(t *testing.T) {
	nan := float32(math.NaN())
	src := []float32{1, -2, nan, 4, float32(math.Inf(1))}
	keep := []uint8{1, 0, 0, 1, 0}
	dst, check := actGuarded(t, len(src))
	Dropout(dst, src, keep, 1.25)
	check()
	want := []float32{1.25, 0, nan, 5, nan}
	for i := range want {
		if dst[i] != want[i] && !(want[i] != want[i] && dst[i] != dst[i]) {
			t.Errorf("element %d: %v, want %v", i, dst[i], want[i])
		}
	}
	// A nil mask keeps everything: scale 0 is dropout with p = 1.
	Dropout(dst, src, nil, 0)
	if dst[0] != 0 || dst[1] != 0 || dst[2] == dst[2] {
		t.Errorf("p=1: %v, want zeros with NaN kept", dst)
	}
	// Large enough to split across workers; in place.
	n := 1 << 16
	big := make([]float32, n)
	mask := make([]uint8, n)
	for i := range big {
		big[i] = float32(i)
		mask[i] = uint8(i % 3 & 1)
	}
	Dropout(big, big, mask, 2)
	for i, v := range big {
		if want := float32(i) * float32(i%3&1) * 2; v != want {
			t.Fatalf("element %d: %v, want %v", i, v, want)
		}
	}
}

// useActLevel switches Act's kernels to level l's variants until the
// returned function restores them, so benchmarks can time each level
// through the public entry points (the worker pool included).
func useActLevel(l Level) (restore func()) {
	f, b, d := actForwardImpl, actBackwardImpl, dropoutImpl
	actForwardImpl, actBackwardImpl, dropoutImpl = actForwardFor(l), actBackwardFor(l), dropoutFor(l)
	return func() { actForwardImpl, actBackwardImpl, dropoutImpl = f, b, d }
}

// benchSizes are the element counts the elementwise benchmarks run at: 1M
// (4 MiB per operand, inside the 32 MiB L3) and 25M (100 MB per operand,
// from memory, the size of a ResNet-50's parameters).
var benchSizes = []struct {
	name string
	n    int
}{{"1M", 1 << 20}, {"25M", 25_000_000}}

// reportElems adds an elements-per-second metric beside the MB/s of
// SetBytes.
func reportElems(b *testing.B, n int) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
}

func BenchmarkActForward(b *testing.B) {
	for _, sz := range benchSizes {
		x := make([]float32, sz.n)
		for i := range x {
			x[i] = float32(i%2000)/500 - 2
		}
		y := make([]float32, len(x))
		for _, a := range []Act{{Fn: ActReLU}, {Fn: ActExp}, {Fn: ActLog}, {Fn: ActSigmoid}, {Fn: ActSiLU}, {Fn: ActTanh}, {Fn: ActGELU}, {Fn: ActGELUTanh}} {
			for _, l := range Levels() {
				b.Run(fmt.Sprintf("%v/%s/%v", a.Fn, sz.name, l), func(b *testing.B) {
					defer useActLevel(l)()
					b.SetBytes(int64(8 * len(x)))
					for b.Loop() {
						a.Forward(y, x)
					}
					reportElems(b, len(x))
				})
			}
		}
	}
}

func BenchmarkActBackward(b *testing.B) {
	for _, sz := range benchSizes {
		x := make([]float32, sz.n)
		for i := range x {
			x[i] = float32(i%2000)/500 - 2
		}
		dy := make([]float32, len(x))
		for i := range dy {
			dy[i] = float32(i%7) - 3
		}
		dx := make([]float32, len(x))
		for _, a := range []Act{{Fn: ActReLU}, {Fn: ActGELU}} {
			for _, l := range Levels() {
				b.Run(fmt.Sprintf("%v/%s/%v", a.Fn, sz.name, l), func(b *testing.B) {
					defer useActLevel(l)()
					b.SetBytes(int64(12 * len(x)))
					for b.Loop() {
						a.Backward(dx, dy, x, x)
					}
					reportElems(b, len(x))
				})
			}
		}
	}
}

// actSpecials are inputs every variant must treat exactly as the
// reference: signed zeros, subnormals, infinities, NaN, huge values and the
// edges where exp overflows, underflows and tanh saturates.
var actSpecials = []float32{
	0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-40, -1e-40, 1.1754944e-38,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32,
	88.72, 88.73, -87.33, -103.9, -104, 8.664339742, 8.6643405, -8.6643405, 3.92, -3.93, 0.75, -0.75,
	1, -1, 2, -2, 0.5, 1e-7, -1e-7, 1e30, -1e30,
}

// actSuiteInput returns n inputs for c: mostly uniform in its domain, some
// spread over all magnitudes, and every tenth a special value, so they land
// in whole vectors and in tails alike.
func actSuiteInput(r *rand.Rand, n int, c actCase) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch {
		case r.IntN(10) == 0:
			x[i] = actSpecials[r.IntN(len(actSpecials))]
		case r.IntN(4) == 0:
			x[i] = float32(math.Copysign(math.Exp(r.Float64()*60-30), r.Float64()-0.3))
		default:
			x[i] = float32(c.lo + (c.hi-c.lo)*r.Float64())
		}
	}
	return x
}

// actSame reports whether got and want are the same float32, any NaN
// matching any NaN.
func actSame(got, want float32) bool {
	return math.Float32bits(got) == math.Float32bits(want) || (got != got && want != want)
}

// actULPs is how many float32 values lie between got and want (0 when
// actSame), or a large number when only one is NaN or their signs differ.
func actULPs(got, want float32) int64 {
	if actSame(got, want) {
		return 0
	}
	if got != got || want != want || math.Signbit(float64(got)) != math.Signbit(float64(want)) {
		return math.MaxInt64
	}
	d := int64(math.Float32bits(got)) - int64(math.Float32bits(want))
	if d < 0 {
		d = -d
	}
	return d
}

// actGeneralPow reports whether a is Pow with an exponent none of
// actPowElem's shortcuts covers. Its variants compute e^(e·ln x) in float64
// where the reference calls math.Pow; neither is correctly rounded in every
// case (x^1.5 can be a float32 midpoint exactly), so they may differ by an
// ulp, where every other function agrees bit for bit.
func actGeneralPow(a Act) bool {
	switch a.A {
	case 0, 1, 2, 3, -2, 0.5, -0.5, -1:
		return false
	}
	return a.Fn == ActPow
}

// TestActConformance compares every variant of the forward and backward
// kernels with the reference on suite sizes, with guard cells, on inputs
// including special values. The variants must agree bit for bit (but for
// Pow's general exponents, within an ulp): their transcendental functions
// make the reference's roundings.
func TestActConformance(t *testing.T) {
	cases := append(actCases(),
		actCase{act: Act{Fn: ActPow, A: 1.5}, lo: -3, hi: 3},
		actCase{act: Act{Fn: ActPow, A: -3.25}, lo: 0, hi: 3},
		actCase{act: Act{Fn: ActELU, A: 1}, lo: -3, hi: 3},
		actCase{act: Act{Fn: ActHardTanh, A: -1, B: 1}, lo: -3, hi: 3},
		actCase{act: Act{Fn: ActClamp, A: -1, B: 1}, lo: -3, hi: 3},
		actCase{act: Act{Fn: ActClamp, A: 1, B: -1}, lo: -3, hi: 3},
	)
	forEachLevel(t, func(t *testing.T, l Level) {
		fwd, bwd := actForwardFor(l), actBackwardFor(l)
		r := rand.New(rand.NewPCG(11, 12))
		for _, c := range cases {
			t.Run(c.name(), func(t *testing.T) {
				for _, n := range suiteSizes(8) {
					x := actSuiteInput(r, n, c)
					want := make([]float32, n)
					c.act.forward(want, x)
					y, check := guarded(t, n)
					fwd(c.act, y, x)
					check()
					tol := int64(0)
					if actGeneralPow(c.act) {
						tol = 1
					}
					for i := range y {
						if actULPs(y[i], want[i]) > tol {
							t.Fatalf("n=%d: forward(%v) = %v, reference %v", n, x[i], y[i], want[i])
						}
					}
					v := x
					if c.act.ReadsOutput() {
						v = want
					}
					dy := make([]float32, n)
					for i := range dy {
						dy[i] = float32(r.NormFloat64())
					}
					wantDx := make([]float32, n)
					c.act.backward(wantDx, dy, v)
					dx, check := guarded(t, n)
					bwd(c.act, dx, dy, v)
					check()
					for i := range dx {
						if actULPs(dx[i], wantDx[i]) > tol {
							t.Fatalf("n=%d: backward at %v (dy %v) = %v, reference %v", n, v[i], dy[i], dx[i], wantDx[i])
						}
					}
					// In place: dst = src, dx = dy.
					xy := append([]float32(nil), x...)
					fwd(c.act, xy, xy)
					bwd(c.act, dy, dy, v)
					for i := range x {
						if actULPs(xy[i], want[i]) > tol || actULPs(dy[i], wantDx[i]) > tol {
							t.Fatalf("n=%d: in place, element %d: %v and %v, want %v and %v", n, i, xy[i], dy[i], want[i], wantDx[i])
						}
					}
				}
			})
		}
	})
}

// TestActSweep runs the functions built on the vector exp, log, tanh and
// erf over a sweep of every 4099th float32 bit pattern (a million values of
// every sign and magnitude, NaNs, infinities and subnormals included) and
// checks each variant against the reference bit for bit.
func TestActSweep(t *testing.T) {
	const stride = 4099
	x := make([]float32, 0, 1<<32/stride+1)
	for b := uint64(0); b < 1<<32; b += stride {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	want := make([]float32, len(x))
	got := make([]float32, len(x))
	for _, l := range Levels()[1:] {
		fwd := actForwardFor(l)
		for _, a := range []Act{{Fn: ActExp}, {Fn: ActLog}, {Fn: ActTanh}, {Fn: ActSigmoid}, {Fn: ActELU, A: 1},
			{Fn: ActGELU}, {Fn: ActGELUTanh}, {Fn: ActSiLU}} {
			a.forward(want, x)
			fwd(a, got, x)
			for i := range x {
				if !actSame(got[i], want[i]) {
					t.Fatalf("%v: %v(%v) = %v, reference %v", l, a.Fn, x[i], got[i], want[i])
				}
			}
		}
	}
}

func TestActDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	n := 1 << 16 // large enough to go through the worker pool
	x, y, dy := make([]float32, n), make([]float32, n), make([]float32, n)
	keep := make([]uint8, n)
	for _, a := range []Act{{Fn: ActReLU}, {Fn: ActGELU}, {Fn: ActPow, A: 2.5}} {
		if avg := testing.AllocsPerRun(10, func() { a.Forward(y, x) }); avg != 0 {
			t.Errorf("%v.Forward allocates %v times per call", a.Fn, avg)
		}
		if avg := testing.AllocsPerRun(10, func() { a.Backward(dy, dy, x, y) }); avg != 0 {
			t.Errorf("%v.Backward allocates %v times per call", a.Fn, avg)
		}
	}
	if avg := testing.AllocsPerRun(10, func() { Dropout(y, x, keep, 2) }); avg != 0 {
		t.Errorf("Dropout allocates %v times per call", avg)
	}
}

// TestDropoutConformance compares every variant of the dropout kernel with
// the reference on suite sizes, with and without a mask.
func TestDropoutConformance(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		drop := dropoutFor(l)
		r := rand.New(rand.NewPCG(13, 14))
		for _, n := range suiteSizes(8) {
			x := actSuiteInput(r, n, actCase{lo: -3, hi: 3})
			keep := make([]uint8, n)
			for i := range keep {
				keep[i] = uint8(r.IntN(2))
			}
			for _, k := range [][]uint8{keep, nil} {
				want := make([]float32, n)
				dropoutSpan(want, x, k, 1.25)
				got, check := guarded(t, n)
				drop(got, x, k, 1.25)
				check()
				for i := range got {
					if !actSame(got[i], want[i]) {
						t.Fatalf("n=%d mask %v: element %d = %v, reference %v", n, k != nil, i, got[i], want[i])
					}
				}
			}
		}
	})
}
