package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// lambReference follows the Lamb definition literally: whole-array passes
// for the moments, a scratch array for u, the norms summed in float64 per
// lambBlock block in four lanes and the blocks added in order, then the
// update.
func lambReference(p, g, m, v []float32, c LambConfig) float64 {
	for i := range m {
		m[i] = fmaAcc(m[i]*c.Beta1, c.Keep1, g[i])
	}
	for i := range v {
		v[i] = fmaAcc(v[i]*c.Beta2, c.Keep2*g[i], g[i])
	}
	u := make([]float32, len(p))
	for i := range u {
		u[i] = m[i] / c.BiasCorrection1
	}
	for i := range u {
		den := float32(math.Sqrt(float64(v[i]/c.BiasCorrection2))) + c.Eps
		u[i] /= den
	}
	if c.WeightDecay != 0 {
		for i := range u {
			u[i] = fmaAcc(u[i], c.WeightDecay, p[i])
		}
	}
	pn, un := math.Sqrt(refSumSquares(p)), math.Sqrt(refSumSquares(u))
	trust := 1.0
	if pn != 0 && un != 0 {
		trust = pn / un
	}
	s := float32(-c.LR * trust)
	for i := range p {
		p[i] = fmaAcc(p[i], s, u[i])
	}
	return trust
}

// refSumSquares is Σa² as the Lamb and LARS kernels define it: in
// float64, per lambBlock block in four lanes (element i of a block into
// lane i mod 4, combined as (l0+l1)+(l2+l3)), the blocks added in order.
func refSumSquares(a []float32) float64 {
	var s float64
	for lo := 0; lo < len(a); lo += lambBlock {
		var l [4]float64
		for i := lo; i < min(lo+lambBlock, len(a)); i++ {
			l[(i-lo)%4] += float64(a[i]) * float64(a[i])
		}
		s += (l[0] + l[1]) + (l[2] + l[3])
	}
	return s
}

func lambTestConfig(lr, b1, b2, eps, wd float64, t int) LambConfig {
	return LambConfig{
		Beta1: float32(b1), Beta2: float32(b2), Keep1: float32(1 - b1), Keep2: float32(1 - b2),
		BiasCorrection1: float32(1 - math.Pow(b1, float64(t))), BiasCorrection2: float32(1 - math.Pow(b2, float64(t))),
		Eps: float32(eps), WeightDecay: float32(wd), LR: lr,
	}
}

var lambTestConfigs = []func(t int) LambConfig{
	func(t int) LambConfig { return lambTestConfig(1e-3, 0.9, 0.999, 1e-8, 0, t) },
	func(t int) LambConfig { return lambTestConfig(1e-2, 0.8, 0.99, 1e-6, 1e-2, t) },
	func(t int) LambConfig { return lambTestConfig(0.5, 0, 0.5, 1e-3, 0.3, t) },
}

// normalSlice returns n random normal values (their magnitudes with abs)
// followed by guard more.
func normalSlice(rng *rand.Rand, n, guard int, abs bool) []float32 {
	a := make([]float32, n+guard)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
		if abs {
			a[i] = float32(math.Abs(float64(a[i])))
		}
	}
	return a
}

// TestLambStepMatchesReference runs LambStep through the worker pool (the
// largest size spans many blocks) and wants the literal reference bit for
// bit, with guard elements past each array's end, over several steps.
func TestLambStepMatchesReference(t *testing.T) {
	const guard = 4
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 31, 4095, 4097, 100003} {
		for ci, cfg := range lambTestConfigs {
			t.Run(fmt.Sprintf("n=%d/config=%d", n, ci), func(t *testing.T) {
				p, m, v := normalSlice(rng, n, guard, false), normalSlice(rng, n, guard, false), normalSlice(rng, n, guard, true)
				wantP, wantM, wantV := append([]float32(nil), p...), append([]float32(nil), m...), append([]float32(nil), v...)
				s := LambStep{Param: p[:n], ExpAvg: m[:n], ExpAvgSq: v[:n]}
				for step := 1; step <= 3; step++ {
					g := normalSlice(rng, n, guard, false)
					g0 := append([]float32(nil), g...)
					s.Grad = g[:n]
					s.LambConfig = cfg(step)
					s.Run()
					trust := lambReference(wantP[:n], g[:n], wantM[:n], wantV[:n], s.LambConfig)
					if s.TrustRatio != trust {
						t.Fatalf("step %d: trust ratio %v, reference %v", step, s.TrustRatio, trust)
					}
					for i := range p {
						if !actSame(p[i], wantP[i]) || !actSame(m[i], wantM[i]) || !actSame(v[i], wantV[i]) || !actSame(g[i], g0[i]) {
							t.Fatalf("step %d element %d: p %v m %v v %v g %v, reference %v %v %v %v",
								step, i, p[i], m[i], v[i], g[i], wantP[i], wantM[i], wantV[i], g0[i])
						}
					}
				}
			})
		}
	}
}

// TestLambTrustRatioFallback checks the two cases whose trust ratio is 1:
// a zero parameter (the update is then plain −lr·u) and a zero direction
// (zero gradient and state: nothing moves).
func TestLambTrustRatioFallback(t *testing.T) {
	c := lambTestConfig(0.1, 0.9, 0.999, 1e-8, 0.01, 1)
	p := make([]float32, 5)
	g := []float32{1, -2, 3, -4, 0}
	if tr := Lamb(p, g, make([]float32, 5), make([]float32, 5), c); tr != 1 {
		t.Fatalf("zero parameter: trust ratio %v, want 1", tr)
	}
	// First step: m̂ = g, v̂ = g², so u = sign(g) (nearly) and p = −0.1·sign(g).
	for i, want := range []float64{-0.1, 0.1, -0.1, 0.1, 0} {
		if math.Abs(float64(p[i])-want) > 1e-6 {
			t.Fatalf("zero parameter: p = %v, want about [-0.1 0.1 -0.1 0.1 0]", p)
		}
	}
	c.WeightDecay = 0
	p = []float32{1, 2, 3}
	if tr := Lamb(p, make([]float32, 3), make([]float32, 3), make([]float32, 3), c); tr != 1 || p[0] != 1 || p[1] != 2 || p[2] != 3 {
		t.Fatalf("zero direction: trust ratio %v, p %v; want 1, [1 2 3]", tr, p)
	}
	// A non-trivial ratio: ‖p‖/‖u‖ with u = sign(g) for one element.
	p = []float32{3, 4}
	tr := Lamb(p, []float32{1, 1}, make([]float32, 2), make([]float32, 2), c)
	if math.Abs(tr-5/math.Sqrt2) > 1e-5 {
		t.Fatalf("trust ratio %v, want about %v", tr, 5/math.Sqrt2)
	}
}

func TestLambStepNaNPropagates(t *testing.T) {
	p := []float32{1, float32(math.NaN()), 2}
	c := lambTestConfig(0.1, 0.9, 0.999, 1e-8, 0, 1)
	tr := Lamb(p, []float32{1, 1, 1}, make([]float32, 3), make([]float32, 3), c)
	if !math.IsNaN(tr) || !math.IsNaN(float64(p[0])) {
		t.Fatalf("trust ratio %v, p %v; want NaN everywhere", tr, p)
	}
}

func TestLambStepLengthMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	Lamb(make([]float32, 4), make([]float32, 4), make([]float32, 3), make([]float32, 4), lambTestConfigs[0](1))
}

func TestLambStepDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	n := 1 << 16 // large enough to go through the worker pool
	s := LambStep{Param: benchFilled(n, 1), Grad: benchFilled(n, 0.5), ExpAvg: benchFilled(n, 0.25),
		ExpAvgSq: benchFilled(n, 0.125), LambConfig: lambTestConfigs[1](1)}
	s.Run()
	if a := testing.AllocsPerRun(20, s.Run); a != 0 {
		t.Fatalf("Run allocates %v times per call", a)
	}
}

// BenchmarkLambStep times a Lamb step with weight decay: pass 1 reads four
// arrays and writes two, pass 2 reads three and writes one (40 bytes per
// element).
func BenchmarkLambStep(b *testing.B) {
	for _, sz := range benchSizes {
		n := sz.n
		for _, l := range Levels() {
			b.Run(fmt.Sprintf("%s/%v", sz.name, l), func(b *testing.B) {
				defer useLambLevel(l)()
				s := LambStep{Param: benchFilled(n, 1), Grad: benchFilled(n, 0.5), ExpAvg: benchFilled(n, 0.25),
					ExpAvgSq: benchFilled(n, 0.125), LambConfig: lambTestConfigs[1](10)}
				b.SetBytes(int64(n) * 4 * 10)
				for b.Loop() {
					s.Run()
				}
				reportElems(b, n)
			})
		}
	}
}

// sameLanes reports whether two accumulators hold the same bits (NaN
// matching NaN).
func sameLanes(a, b *[8]float64) bool {
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
	}
	return true
}

// TestLambConformance compares every level's Lamb passes and LARS norm
// pass with the reference, bit for bit, on suite sizes with guard cells
// around every array they write, from inputs with special values, and
// with accumulators that already hold sums.
func TestLambConformance(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		moments, apply, sums := lambMomentsFor(l), lambApplyFor(l), sumSquares2For(l)
		rng := rand.New(rand.NewPCG(55, 56))
		for ci, cfg := range lambTestConfigs {
			c := cfg(7)
			for _, n := range suiteSizes(8) {
				p0, g := optimTestSlice(rng, n, 0, false), optimTestSlice(rng, n, 0, false)
				m0, v0 := optimTestSlice(rng, n, 0, false), optimTestSlice(rng, n, 0, true)
				start := [8]float64{1, 2, 3, 4, 5, 6, 7, 8}
				wantP, wantM, wantV := append([]float32(nil), p0...), append([]float32(nil), m0...), append([]float32(nil), v0...)
				wantAcc, wantSums := start, start
				lambMomentsSpan(&c, wantP, g, wantM, wantV, &wantAcc)
				lambApplySpan(&c, -0.125, wantP, wantM, wantV)
				sumSquares2(p0, g, &wantSums)
				p, checkP := guarded(t, n)
				m, checkM := guarded(t, n)
				v, checkV := guarded(t, n)
				copy(p, p0)
				copy(m, m0)
				copy(v, v0)
				acc, gotSums := start, start
				moments(&c, p, g, m, v, &acc)
				apply(&c, -0.125, p, m, v)
				sums(p0, g, &gotSums)
				checkP()
				checkM()
				checkV()
				if !sameLanes(&acc, &wantAcc) || !sameLanes(&gotSums, &wantSums) {
					t.Fatalf("config %d n=%d: lanes %v and %v, reference %v and %v", ci, n, acc, gotSums, wantAcc, wantSums)
				}
				for i := range p {
					if !actSame(p[i], wantP[i]) || !actSame(m[i], wantM[i]) || !actSame(v[i], wantV[i]) {
						t.Fatalf("config %d n=%d element %d: p %v m %v v %v, reference %v %v %v",
							ci, n, i, p[i], m[i], v[i], wantP[i], wantM[i], wantV[i])
					}
				}
			}
		}
	})
}

// useLambLevel switches the Lamb and LARS kernels to level l's variants
// until the returned function restores them.
func useLambLevel(l Level) (restore func()) {
	m, a, s := lambMomentsImpl, lambApplyImpl, sumSquares2Impl
	lambMomentsImpl, lambApplyImpl, sumSquares2Impl = lambMomentsFor(l), lambApplyFor(l), sumSquares2For(l)
	return func() { lambMomentsImpl, lambApplyImpl, sumSquares2Impl = m, a, s }
}
