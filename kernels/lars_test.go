package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// larsReference computes the norms as the LARS definition says (float64,
// per lambBlock block in four lanes, blocks in order) and then runs the
// reference SGD kernel with the scaled learning rate.
func larsReference(p, g, b []float32, c LARSConfig, init bool) float64 {
	pn, gn := math.Sqrt(refSumSquares(p)), math.Sqrt(refSumSquares(g))
	trust := 1.0
	if pn > 0 && gn > 0 {
		trust = c.Eeta * pn / (gn + c.WeightDecay*pn + c.Eps)
	}
	sc := c.SGD
	sc.LR = float32(c.LR * trust)
	sgdSpan(&sc, init, p, g, b)
	return trust
}

func larsTestConfig(lr, momentum, dampening, wd float64, nesterov bool, eeta, eps float64) LARSConfig {
	return LARSConfig{LR: lr, Eeta: eeta, WeightDecay: wd, Eps: eps,
		SGD: SGDConfig{Momentum: float32(momentum), WeightDecay: float32(wd), Keep: float32(1 - dampening), Nesterov: nesterov}}
}

var larsTestConfigs = []LARSConfig{
	larsTestConfig(0.1, 0.9, 0, 5e-4, false, 1e-3, 0),
	larsTestConfig(0.5, 0.8, 0, 1e-2, true, 2e-2, 1e-6),
	larsTestConfig(0.05, 0, 0, 0, false, 0.5, 1e-3),
	larsTestConfig(0.1, 0.5, 0.3, 1e-3, false, 1e-2, 0),
}

// TestLARSStepMatchesReference runs LARSStep through the worker pool and
// wants the reference bit for bit, with guard elements, over several steps
// (the first initialising the momentum buffer).
func TestLARSStepMatchesReference(t *testing.T) {
	const guard = 4
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 7, 31, 4095, 4097, 100003} {
		for ci, cfg := range larsTestConfigs {
			t.Run(fmt.Sprintf("n=%d/config=%d", n, ci), func(t *testing.T) {
				p, b := normalSlice(rng, n, guard, false), normalSlice(rng, n, guard, false)
				wantP, wantB := append([]float32(nil), p...), append([]float32(nil), b...)
				s := LARSStep{Param: p[:n], Buf: b[:n], LARSConfig: cfg}
				for step := 1; step <= 3; step++ {
					g := normalSlice(rng, n, guard, false)
					s.Grad, s.Init = g[:n], step == 1
					s.Run()
					trust := larsReference(wantP[:n], g[:n], wantB[:n], cfg, step == 1)
					if s.TrustRatio != trust {
						t.Fatalf("step %d: trust ratio %v, reference %v", step, s.TrustRatio, trust)
					}
					for i := range p {
						if !actSame(p[i], wantP[i]) || !actSame(b[i], wantB[i]) {
							t.Fatalf("step %d element %d: p %v b %v, reference %v %v", step, i, p[i], b[i], wantP[i], wantB[i])
						}
					}
				}
			})
		}
	}
}

func TestLARSTrustRatio(t *testing.T) {
	for _, c := range []struct{ pn, gn, want float64 }{
		{0, 1, 1}, {1, 0, 1}, {0, 0, 1},
		{3, 4, 0.5 * 3 / (4 + 0.1*3 + 0.01)},
		{math.NaN(), 1, math.NaN()}, {1, math.NaN(), math.NaN()},
	} {
		got := LARSTrustRatio(c.pn, c.gn, 0.5, 0.1, 0.01)
		if !(got == c.want || math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("LARSTrustRatio(%v, %v) = %v, want %v", c.pn, c.gn, got, c.want)
		}
	}
	// Zero weights: the step is plain SGD with the base learning rate.
	p := make([]float32, 3)
	if tr := LARS(p, []float32{1, -2, 4}, nil, larsTestConfig(0.5, 0, 0, 0.1, false, 1e-3, 0), false); tr != 1 {
		t.Fatalf("zero parameter: trust ratio %v, want 1", tr)
	}
	if p[0] != -0.5 || p[1] != 1 || p[2] != -2 {
		t.Fatalf("zero parameter: p = %v, want [-0.5 1 -2]", p)
	}
}

func TestLARSStepLengthMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	LARS(make([]float32, 4), make([]float32, 4), make([]float32, 3), larsTestConfigs[0], true)
}

func TestLARSStepDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	n := 1 << 16
	s := LARSStep{Param: benchFilled(n, 1), Grad: benchFilled(n, 0.5), Buf: benchFilled(n, 0.25), LARSConfig: larsTestConfigs[0]}
	s.Run()
	if a := testing.AllocsPerRun(20, s.Run); a != 0 {
		t.Fatalf("Run allocates %v times per call", a)
	}
}

// BenchmarkLARSStep times a LARS step with momentum: the norm pass reads
// two arrays, the SGD pass reads three and writes two (28 bytes per
// element).
func BenchmarkLARSStep(b *testing.B) {
	for _, sz := range benchSizes {
		n := sz.n
		for _, l := range Levels() {
			b.Run(fmt.Sprintf("%s/%v", sz.name, l), func(b *testing.B) {
				defer useLambLevel(l)()
				s := LARSStep{Param: benchFilled(n, 1), Grad: benchFilled(n, 0.5), Buf: benchFilled(n, 0.25), LARSConfig: larsTestConfigs[0]}
				b.SetBytes(int64(n) * 4 * 7)
				for b.Loop() {
					s.Run()
				}
				reportElems(b, n)
			})
		}
	}
}
