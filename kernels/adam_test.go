package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// adamReference follows PyTorch 1.13's _single_tensor_adam and
// _single_tensor_adamw literally: one whole-array pass per tensor
// operation, each add(alpha=) and addcmul rounded once as a fused
// multiply-add, every other operation rounded on its own.
func adamReference(p, g, m, v, vmax []float32, c AdamConfig) {
	d := refDirection(p, g, c.WeightDecay, c.Maximize)
	if c.Decoupled {
		for i := range p {
			p[i] *= c.DecayScale
		}
	}
	for i := range m {
		m[i] *= c.Beta1
	}
	for i := range m {
		m[i] = fmaAcc(m[i], c.Keep1, d[i])
	}
	for i := range v {
		v[i] *= c.Beta2
	}
	for i := range v {
		v[i] = fmaAcc(v[i], c.Keep2*d[i], d[i])
	}
	src := v
	if c.AMSGrad {
		// ATen's vectorised maximum: _mm256_max_ps(vmax, v), or NaN.
		for i := range vmax {
			if !(vmax[i] > v[i]) && !math.IsNaN(float64(vmax[i])) {
				vmax[i] = v[i]
			}
		}
		src = vmax
	}
	den := make([]float32, len(p))
	for i := range den {
		den[i] = float32(math.Sqrt(float64(src[i])))
	}
	for i := range den {
		den[i] /= c.BiasCorrection2Sqrt
	}
	for i := range den {
		den[i] += c.Eps
	}
	for i := range p {
		p[i] += c.NegStepSize * m[i] / den[i]
	}
}

// fmaAcc is x + a·y rounded once, as PyTorch's vectorised add(alpha=) and
// addcmul round it.
func fmaAcc(x, a, y float32) float32 { return fma32(a, y, x) }

// refDirection is the start of PyTorch's single-tensor Adam and Adagrad: a
// new gradient, negated with maximize, plus weight decay times the
// parameter (one rounding).
func refDirection(p, g []float32, wd float32, maximize bool) []float32 {
	d := append([]float32(nil), g...)
	for i := range d {
		if maximize {
			d[i] = -d[i]
		}
		if wd != 0 {
			d[i] = fmaAcc(d[i], wd, p[i])
		}
	}
	return d
}

// adamTestConfig returns the config of step t for PyTorch's Adam options.
func adamTestConfig(lr, b1, b2, eps, wd float64, decoupled, amsgrad, maximize bool, t int) AdamConfig {
	c := AdamConfig{
		Beta1: float32(b1), Beta2: float32(b2), Keep1: float32(1 - b1), Keep2: float32(1 - b2),
		NegStepSize:         float32(-(lr / (1 - math.Pow(b1, float64(t))))),
		BiasCorrection2Sqrt: float32(math.Sqrt(1 - math.Pow(b2, float64(t)))),
		Eps:                 float32(eps), AMSGrad: amsgrad, Maximize: maximize,
	}
	if decoupled {
		c.Decoupled, c.DecayScale = true, float32(1-lr*wd)
	} else {
		c.WeightDecay = float32(wd)
	}
	return c
}

var adamTestConfigs = []func(t int) AdamConfig{
	func(t int) AdamConfig { return adamTestConfig(1e-3, 0.9, 0.999, 1e-8, 0, false, false, false, t) },
	func(t int) AdamConfig { return adamTestConfig(1e-2, 0.9, 0.99, 1e-6, 1e-2, false, true, false, t) },
	func(t int) AdamConfig { return adamTestConfig(1e-2, 0.8, 0.999, 1e-8, 1e-1, true, false, true, t) },
	func(t int) AdamConfig { return adamTestConfig(5e-3, 0, 0.5, 1e-3, 1e-2, true, true, false, t) },
}

// TestAdamStepMatchesReference runs AdamStep through the worker pool and
// wants the literal reference bit for bit, on sizes with tails, with
// guard elements past each array's end, special values among the inputs,
// and several steps so the state carries over.
func TestAdamStepMatchesReference(t *testing.T) {
	const guard = 4
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 31, 1000, 100003} {
		for ci, cfg := range adamTestConfigs {
			t.Run(fmt.Sprintf("n=%d/config=%d", n, ci), func(t *testing.T) {
				mk := func(abs bool) []float32 { return optimTestSlice(rng, n, guard, abs) }
				p, m, v, vmax := mk(false), mk(false), mk(true), mk(true)
				wantP, wantM := append([]float32(nil), p...), append([]float32(nil), m...)
				wantV, wantVmax := append([]float32(nil), v...), append([]float32(nil), vmax...)
				s := AdamStep{Param: p[:n], ExpAvg: m[:n], ExpAvgSq: v[:n], MaxExpAvgSq: vmax[:n]}
				for step := 1; step <= 3; step++ {
					g := mk(false)
					s.Grad = g[:n]
					s.AdamConfig = cfg(step)
					s.Run()
					adamReference(wantP[:n], g[:n], wantM[:n], wantV[:n], wantVmax[:n], s.AdamConfig)
					for i := range p {
						if !actSame(p[i], wantP[i]) || !actSame(m[i], wantM[i]) || !actSame(v[i], wantV[i]) || !actSame(vmax[i], wantVmax[i]) {
							t.Fatalf("step %d element %d: p %v m %v v %v vmax %v, reference %v %v %v %v",
								step, i, p[i], m[i], v[i], vmax[i], wantP[i], wantM[i], wantV[i], wantVmax[i])
						}
					}
				}
			})
		}
	}
}

func TestAdamStepNilMaxWithoutAMSGrad(t *testing.T) {
	p, m, v := []float32{1, -2}, make([]float32, 2), make([]float32, 2)
	Adam(p, []float32{0.5, -1}, m, v, nil, adamTestConfig(0.1, 0.9, 0.999, 1e-8, 0, false, false, false, 1))
	// The first Adam step moves each element by lr·sign(grad), nearly.
	if math.Abs(float64(p[0])-0.9) > 1e-6 || math.Abs(float64(p[1])+1.9) > 1e-6 {
		t.Fatalf("got %v, want about [0.9 -1.9]", p)
	}
}

func TestAdamStepLengthMismatchPanics(t *testing.T) {
	for name, vmax := range map[string][]float32{"short max": make([]float32, 3), "nil max": nil} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			c := adamTestConfig(0.1, 0.9, 0.999, 1e-8, 0, false, true, false, 1)
			Adam(make([]float32, 4), make([]float32, 4), make([]float32, 4), make([]float32, 4), vmax, c)
		})
	}
}

func TestAdamStepDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	n := 1 << 16 // large enough to go through the worker pool
	s := AdamStep{Param: make([]float32, n), Grad: make([]float32, n), ExpAvg: make([]float32, n),
		ExpAvgSq: make([]float32, n), MaxExpAvgSq: make([]float32, n), AdamConfig: adamTestConfigs[1](1)}
	s.Run()
	if a := testing.AllocsPerRun(20, s.Run); a != 0 {
		t.Fatalf("Run allocates %v times per call", a)
	}
}

// BenchmarkAdamStep times an AMSGrad step with weight decay (five arrays
// read, four written: 36 bytes per element) at each level.
func BenchmarkAdamStep(b *testing.B) {
	for _, sz := range benchSizes {
		n := sz.n
		for _, l := range Levels() {
			b.Run(fmt.Sprintf("%s/%v", sz.name, l), func(b *testing.B) {
				defer useAdamLevel(l)()
				s := AdamStep{Param: benchFilled(n, 1), Grad: benchFilled(n, 0.5), ExpAvg: benchFilled(n, 0.25),
					ExpAvgSq: benchFilled(n, 0.125), MaxExpAvgSq: benchFilled(n, 0.125), AdamConfig: adamTestConfigs[1](10)}
				b.SetBytes(int64(n) * 4 * 9)
				for b.Loop() {
					s.Run()
				}
				reportElems(b, n)
			})
		}
	}
}

// optimTestSlice returns n random normal values (their magnitudes with
// abs), about one in 200 of them replaced by a special value (zeros,
// infinities, NaN, tiny and huge numbers), followed by guard more that the
// optimizer kernels must not touch.
func optimTestSlice(rng *rand.Rand, n, guard int, abs bool) []float32 {
	a := make([]float32, n+guard)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
		if abs {
			a[i] = float32(math.Abs(float64(a[i])))
		}
		if i < n && rng.IntN(200) == 0 {
			a[i] = actSpecials[rng.IntN(len(actSpecials))]
		}
	}
	return a
}

// TestAdamConformance compares every level's Adam kernel with the
// reference, bit for bit, on suite sizes with guard cells around every
// array it writes, for each test configuration, from inputs with special
// values.
func TestAdamConformance(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		span := adamSpanFor(l)
		rng := rand.New(rand.NewPCG(33, 34))
		for ci, cfg := range adamTestConfigs {
			c := cfg(7)
			for _, n := range suiteSizes(8) {
				p0, g := optimTestSlice(rng, n, 0, false), optimTestSlice(rng, n, 0, false)
				m0, v0, vmax0 := optimTestSlice(rng, n, 0, false), optimTestSlice(rng, n, 0, true), optimTestSlice(rng, n, 0, true)
				wantP, wantM := append([]float32(nil), p0...), append([]float32(nil), m0...)
				wantV, wantVmax := append([]float32(nil), v0...), append([]float32(nil), vmax0...)
				adamSpan(&c, wantP, g, wantM, wantV, wantVmax)
				p, checkP := guarded(t, n)
				m, checkM := guarded(t, n)
				v, checkV := guarded(t, n)
				vmax, checkVmax := guarded(t, n)
				copy(p, p0)
				copy(m, m0)
				copy(v, v0)
				copy(vmax, vmax0)
				span(&c, p, g, m, v, vmax)
				checkP()
				checkM()
				checkV()
				checkVmax()
				for i := range p {
					if !actSame(p[i], wantP[i]) || !actSame(m[i], wantM[i]) || !actSame(v[i], wantV[i]) || !actSame(vmax[i], wantVmax[i]) {
						t.Fatalf("config %d n=%d element %d: p %v m %v v %v vmax %v, reference %v %v %v %v",
							ci, n, i, p[i], m[i], v[i], vmax[i], wantP[i], wantM[i], wantV[i], wantVmax[i])
					}
				}
				if !c.AMSGrad && !slices.Equal(vmax, vmax0) {
					t.Fatalf("config %d n=%d: vmax written without AMSGrad", ci, n)
				}
			}
		}
	})
}

// useAdamLevel switches the Adam kernel to level l's variant until the
// returned function restores it.
func useAdamLevel(l Level) (restore func()) {
	old := adamSpanImpl
	adamSpanImpl = adamSpanFor(l)
	return func() { adamSpanImpl = old }
}
