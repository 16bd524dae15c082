package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// adagradReference follows PyTorch 1.13's _single_tensor_adagrad (dense
// gradients) literally: one whole-array pass per tensor operation, add
// (alpha=) and addcmul rounded once as fused multiply-adds.
func adagradReference(p, g, s []float32, c AdagradConfig) {
	d := refDirection(p, g, c.WeightDecay, c.Maximize)
	for i := range s {
		s[i] = fmaAcc(s[i], 1*d[i], d[i])
	}
	std := make([]float32, len(s))
	for i := range std {
		std[i] = float32(math.Sqrt(float64(s[i])))
	}
	for i := range std {
		std[i] += c.Eps
	}
	for i := range p {
		p[i] += c.NegLR * d[i] / std[i]
	}
}

func adagradTestConfig(lr, lrDecay, wd, eps float64, maximize bool, step int) AdagradConfig {
	return AdagradConfig{WeightDecay: float32(wd), NegLR: float32(-(lr / (1 + float64(step-1)*lrDecay))), Eps: float32(eps), Maximize: maximize}
}

var adagradTestConfigs = []func(step int) AdagradConfig{
	func(step int) AdagradConfig { return adagradTestConfig(1e-2, 0, 0, 1e-10, false, step) },
	func(step int) AdagradConfig { return adagradTestConfig(5e-2, 1e-2, 1e-2, 1e-10, false, step) },
	func(step int) AdagradConfig { return adagradTestConfig(0.1, 0.5, 0, 1e-6, true, step) },
}

// TestAdagradStepMatchesReference runs AdagradStep through the worker pool
// and wants the literal reference bit for bit, on sizes with tails, with
// guard elements past each array's end and special values among the
// inputs.
func TestAdagradStepMatchesReference(t *testing.T) {
	const guard = 4
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 31, 1000, 100003} {
		for ci, cfg := range adagradTestConfigs {
			t.Run(fmt.Sprintf("n=%d/config=%d", n, ci), func(t *testing.T) {
				mk := func(abs bool) []float32 { return optimTestSlice(rng, n, guard, abs) }
				p, sum := mk(false), mk(true)
				wantP, wantS := append([]float32(nil), p...), append([]float32(nil), sum...)
				s := AdagradStep{Param: p[:n], Sum: sum[:n]}
				for step := 1; step <= 3; step++ {
					g := mk(false)
					s.Grad = g[:n]
					s.AdagradConfig = cfg(step)
					s.Run()
					adagradReference(wantP[:n], g[:n], wantS[:n], s.AdagradConfig)
					for i := range p {
						if !actSame(p[i], wantP[i]) || !actSame(sum[i], wantS[i]) {
							t.Fatalf("step %d element %d: p %v sum %v, reference %v %v", step, i, p[i], sum[i], wantP[i], wantS[i])
						}
					}
				}
			})
		}
	}
}

func TestAdagradStepLengthMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a short sum")
		}
	}()
	Adagrad(make([]float32, 4), make([]float32, 4), make([]float32, 3), adagradTestConfigs[0](1))
}

func TestAdagradStepDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	n := 1 << 16
	s := AdagradStep{Param: make([]float32, n), Grad: make([]float32, n), Sum: make([]float32, n), AdagradConfig: adagradTestConfigs[1](1)}
	s.Run()
	if a := testing.AllocsPerRun(20, s.Run); a != 0 {
		t.Fatalf("Run allocates %v times per call", a)
	}
}

// TestAdagradConformance compares every level's Adagrad kernel with the
// reference, bit for bit, on suite sizes with guard cells around the
// parameter and the sum, for each test configuration, from inputs with
// special values.
func TestAdagradConformance(t *testing.T) {
	checkAdagradLevels(t, adagradSpanFor, adagradSpan, 35, false)
}

// checkAdagradLevels runs every level's variant of an Adagrad update (from
// spanFor) against its reference bit for bit, on lengths with vector
// tails, guard cells past each array, special values among the inputs and
// each test configuration (those with weight decay skipped for the sparse
// update, which takes none).
func checkAdagradLevels(t *testing.T, spanFor func(Level) func(*AdagradConfig, []float32, []float32, []float32),
	ref func(*AdagradConfig, []float32, []float32, []float32), seed uint64, noDecay bool) {
	forEachLevel(t, func(t *testing.T, l Level) {
		span := spanFor(l)
		rng := rand.New(rand.NewPCG(seed, seed+1))
		for ci, cfg := range adagradTestConfigs {
			c := cfg(7)
			if noDecay && c.WeightDecay != 0 {
				continue
			}
			for _, n := range suiteSizes(8) {
				p0, g, s0 := optimTestSlice(rng, n, 0, false), optimTestSlice(rng, n, 0, false), optimTestSlice(rng, n, 0, true)
				wantP, wantS := append([]float32(nil), p0...), append([]float32(nil), s0...)
				ref(&c, wantP, g, wantS)
				p, checkP := guarded(t, n)
				s, checkS := guarded(t, n)
				copy(p, p0)
				copy(s, s0)
				span(&c, p, g, s)
				checkP()
				checkS()
				for i := range p {
					if !actSame(p[i], wantP[i]) || !actSame(s[i], wantS[i]) {
						t.Fatalf("config %d n=%d element %d: p %v sum %v, reference %v %v", ci, n, i, p[i], s[i], wantP[i], wantS[i])
					}
				}
			}
		}
	})
}

// BenchmarkAdagradStep times a step with weight decay (three arrays read,
// two written: 20 bytes per element) at each level.
func BenchmarkAdagradStep(b *testing.B) {
	for _, sz := range benchSizes {
		n := sz.n
		for _, l := range Levels() {
			b.Run(fmt.Sprintf("%s/%v", sz.name, l), func(b *testing.B) {
				old := adagradSpanImpl
				adagradSpanImpl = adagradSpanFor(l)
				defer func() { adagradSpanImpl = old }()
				s := AdagradStep{Param: benchFilled(n, 1), Grad: benchFilled(n, 0.5), Sum: benchFilled(n, 0.25), AdagradConfig: adagradTestConfigs[1](3)}
				b.SetBytes(int64(n) * 4 * 5)
				for b.Loop() {
					s.Run()
				}
				reportElems(b, n)
			})
		}
	}
}
