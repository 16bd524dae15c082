package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// useSplitLevel switches every kernel the split steps use (join, split,
// widen and the three FP32 spans) to level l's variant until the returned
// function restores them.
func useSplitLevel(l Level) (restore func()) {
	j, s, w := joinBF16Impl, splitBF16Impl, bf16ToF32Impl
	sg, ad, ag := sgdSpanImpl, adamSpanImpl, adagradSpanImpl
	joinBF16Impl, splitBF16Impl, bf16ToF32Impl = joinBF16For(l), splitBF16For(l), bf16ToF32For(l)
	sgdSpanImpl, adamSpanImpl, adagradSpanImpl = sgdSpanFor(l), adamSpanFor(l), adagradSpanFor(l)
	return func() {
		joinBF16Impl, splitBF16Impl, bf16ToF32Impl = j, s, w
		sgdSpanImpl, adamSpanImpl, adagradSpanImpl = sg, ad, ag
	}
}

// TestJoinSplitBF16Conformance checks every level's join and split against
// the reference loops on arbitrary bit patterns (NaN payloads included),
// with guard cells around the outputs.
func TestJoinSplitBF16Conformance(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		join, split := joinBF16For(l), splitBF16For(l)
		rng := rand.New(rand.NewPCG(5, 6))
		for _, n := range append(suiteSizes(8), 1<<15+9, 70001) {
			src := make([]float32, n)
			for i := range src {
				src[i] = math.Float32frombits(rng.Uint32())
			}
			top, checkT := guarded16(t, n)
			bottom, checkB := guarded16(t, n)
			split(top, bottom, src)
			checkT()
			checkB()
			for i, f := range src {
				b := math.Float32bits(f)
				if top[i] != uint16(b>>16) || bottom[i] != uint16(b) {
					t.Fatalf("n=%d split element %d: %#04x %#04x from %#08x", n, i, top[i], bottom[i], b)
				}
			}
			dst, checkD := guarded(t, n)
			join(dst, top, bottom)
			checkD()
			for i := range dst {
				if math.Float32bits(dst[i]) != math.Float32bits(src[i]) {
					t.Fatalf("n=%d join element %d: %#08x, want %#08x", n, i, math.Float32bits(dst[i]), math.Float32bits(src[i]))
				}
			}
		}
	})
}

// splitSizes are the parameter sizes of the split-step tests: odd sizes
// with scalar tails, sizes around the scratch span, and one large enough
// for the worker pool.
var splitSizes = []int{1, 3, 7, 8, 9, 1023, 1024, 1025, 4095, 4097, 12305, 70001}

// splitCase holds one parameter in FP32 form (p) and split form (top,
// bottom) with the same values, and a source of bfloat16 gradients.
type splitCase struct {
	p           []float32
	top, bottom []uint16
	rng         *rand.Rand
}

func newSplitCase(n int, seed uint64) *splitCase {
	c := &splitCase{p: make([]float32, n), top: make([]uint16, n), bottom: make([]uint16, n), rng: rand.New(rand.NewPCG(seed, 7))}
	for i := range c.p {
		c.p[i] = float32(c.rng.NormFloat64())
		if c.rng.IntN(200) == 0 {
			c.p[i] = actSpecials[c.rng.IntN(len(actSpecials))]
		}
	}
	splitBF16Span(c.top, c.bottom, c.p)
	return c
}

// grad returns a fresh bfloat16 gradient and its exact widening.
func (c *splitCase) grad() ([]uint16, []float32) {
	g16 := make([]uint16, len(c.p))
	g32 := make([]float32, len(c.p))
	for i := range g16 {
		g16[i] = BF16FromF32(float32(c.rng.NormFloat64() * 0.1))
		if c.rng.IntN(300) == 0 {
			g16[i] = BF16FromF32(actSpecials[c.rng.IntN(len(actSpecials))])
		}
		g32[i] = F32FromBF16(g16[i])
	}
	return g16, g32
}

// check fails unless the joined split parameter and the FP32 state of the
// split step are bit for bit the FP32 step's.
func (c *splitCase) check(t *testing.T, what string, state ...[2][]float32) {
	t.Helper()
	for i, f := range c.p {
		j := math.Float32frombits(uint32(c.top[i])<<16 | uint32(c.bottom[i]))
		if math.Float32bits(j) != math.Float32bits(f) {
			t.Fatalf("%s: n=%d element %d: split master %#08x (%v), FP32 %#08x (%v)", what, len(c.p), i, math.Float32bits(j), j, math.Float32bits(f), f)
		}
	}
	for k, s := range state {
		for i := range s[0] {
			if math.Float32bits(s[0][i]) != math.Float32bits(s[1][i]) {
				t.Fatalf("%s: n=%d state %d element %d: split %v, FP32 %v", what, len(c.p), k, i, s[0][i], s[1][i])
			}
		}
	}
}

// TestSGDSplitStepMatchesFP32 runs SGD on split and FP32 parameters with
// the same bfloat16 gradients for several steps, at every level, and
// requires identical masters and buffers after each step.
func TestSGDSplitStepMatchesFP32(t *testing.T) {
	configs := []SGDConfig{
		{LR: 0.1},
		{LR: 0.1, WeightDecay: 1e-4, Maximize: true},
		{LR: 0.1, Momentum: 0.9, Keep: 0.9, WeightDecay: 1e-4},
		{LR: 0.1, Momentum: 0.9, Keep: 1, WeightDecay: 1e-2, Nesterov: true},
	}
	forEachLevel(t, func(t *testing.T, l Level) {
		defer useSplitLevel(l)()
		for ci, cfg := range configs {
			for _, n := range splitSizes {
				c := newSplitCase(n, uint64(n+ci))
				f := SGDStep{Param: c.p, Buf: make([]float32, n), SGDConfig: cfg, Init: true}
				s := SGDSplitStep{Top: c.top, Bottom: c.bottom, Buf: make([]float32, n), SGDConfig: cfg, Init: true}
				for step := range 4 {
					g16, g32 := c.grad()
					f.Grad = g32
					s.Grad = SplitGrad{BF16: g16}
					if step == 3 {
						s.Grad = SplitGrad{F32: g32} // a float32 gradient works too
					}
					f.Run()
					s.Run()
					f.Init, s.Init = false, false
					c.check(t, fmt.Sprintf("config %d step %d", ci, step), [2][]float32{s.Buf, f.Buf})
				}
			}
		}
	})
}

// TestAdamSplitStepMatchesFP32 is TestSGDSplitStepMatchesFP32 for Adam,
// AdamW and AMSGrad.
func TestAdamSplitStepMatchesFP32(t *testing.T) {
	configs := []AdamConfig{
		{Beta1: 0.9, Beta2: 0.999, Keep1: 0.1, Keep2: 0.001, Eps: 1e-8},
		{Beta1: 0.9, Beta2: 0.999, Keep1: 0.1, Keep2: 0.001, Eps: 1e-8, WeightDecay: 1e-2, Maximize: true},
		{Beta1: 0.8, Beta2: 0.99, Keep1: 0.2, Keep2: 0.01, Eps: 1e-6, Decoupled: true, DecayScale: 0.999, AMSGrad: true},
	}
	forEachLevel(t, func(t *testing.T, l Level) {
		defer useSplitLevel(l)()
		for ci, cfg := range configs {
			for _, n := range splitSizes {
				c := newSplitCase(n, uint64(n+ci))
				z := func() []float32 { return make([]float32, n) }
				f := AdamStep{Param: c.p, ExpAvg: z(), ExpAvgSq: z(), MaxExpAvgSq: z()}
				s := AdamSplitStep{Top: c.top, Bottom: c.bottom, ExpAvg: z(), ExpAvgSq: z(), MaxExpAvgSq: z()}
				for step := range 4 {
					t1 := float64(step + 1)
					cfg.NegStepSize = float32(-1e-3 / (1 - math.Pow(float64(cfg.Beta1), t1)))
					cfg.BiasCorrection2Sqrt = float32(math.Sqrt(1 - math.Pow(float64(cfg.Beta2), t1)))
					f.AdamConfig, s.AdamConfig = cfg, cfg
					g16, g32 := c.grad()
					f.Grad, s.Grad = g32, SplitGrad{BF16: g16}
					f.Run()
					s.Run()
					c.check(t, fmt.Sprintf("config %d step %d", ci, step),
						[2][]float32{s.ExpAvg, f.ExpAvg}, [2][]float32{s.ExpAvgSq, f.ExpAvgSq}, [2][]float32{s.MaxExpAvgSq, f.MaxExpAvgSq})
				}
			}
		}
	})
}

// TestAdagradSplitStepMatchesFP32 is TestSGDSplitStepMatchesFP32 for
// Adagrad.
func TestAdagradSplitStepMatchesFP32(t *testing.T) {
	configs := []AdagradConfig{
		{NegLR: -0.01, Eps: 1e-10},
		{NegLR: -0.05, Eps: 1e-6, WeightDecay: 1e-2, Maximize: true},
	}
	forEachLevel(t, func(t *testing.T, l Level) {
		defer useSplitLevel(l)()
		for ci, cfg := range configs {
			for _, n := range splitSizes {
				c := newSplitCase(n, uint64(n+ci))
				f := AdagradStep{Param: c.p, Sum: make([]float32, n), AdagradConfig: cfg}
				s := AdagradSplitStep{Top: c.top, Bottom: c.bottom, Sum: make([]float32, n), AdagradConfig: cfg}
				for step := range 4 {
					g16, g32 := c.grad()
					f.Grad, s.Grad = g32, SplitGrad{BF16: g16}
					f.Run()
					s.Run()
					c.check(t, fmt.Sprintf("config %d step %d", ci, step), [2][]float32{s.Sum, f.Sum})
				}
			}
		}
	})
}

// TestSplitStepsAgreeAcrossLevels runs the split steps at every level
// against the Generic FP32 spans (scalar loops, no tails) on the whole
// array: the vector bodies and padded tails give the same masters.
func TestSplitStepsAgreeAcrossLevels(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		defer useSplitLevel(l)()
		for _, n := range splitSizes {
			c := newSplitCase(n, uint64(3*n))
			sgdC := SGDConfig{LR: 0.1, Momentum: 0.9, Keep: 1, WeightDecay: 1e-4}
			adamC := AdamConfig{Beta1: 0.9, Beta2: 0.999, Keep1: 0.1, Keep2: 0.001, Eps: 1e-8, NegStepSize: -1e-2, BiasCorrection2Sqrt: 0.0316}
			adaC := AdagradConfig{NegLR: -0.01, Eps: 1e-10}
			z := func() []float32 { return make([]float32, n) }
			fb, sb := z(), z()
			fm, fv, sm, sv := z(), z(), z(), z()
			fs, ss := z(), z()
			for step := range 3 {
				g16, g32 := c.grad()
				sgdSpan(&sgdC, step == 0, c.p, g32, fb)
				(&SGDSplitStep{Top: c.top, Bottom: c.bottom, Grad: SplitGrad{BF16: g16}, Buf: sb, SGDConfig: sgdC, Init: step == 0}).Run()
				adamSpan(&adamC, c.p, g32, fm, fv, nil)
				(&AdamSplitStep{Top: c.top, Bottom: c.bottom, Grad: SplitGrad{BF16: g16}, ExpAvg: sm, ExpAvgSq: sv, AdamConfig: adamC}).Run()
				adagradSpan(&adaC, c.p, g32, fs)
				(&AdagradSplitStep{Top: c.top, Bottom: c.bottom, Grad: SplitGrad{BF16: g16}, Sum: ss, AdagradConfig: adaC}).Run()
				c.check(t, fmt.Sprintf("step %d", step), [2][]float32{sb, fb}, [2][]float32{sm, fm}, [2][]float32{sv, fv}, [2][]float32{ss, fs})
			}
		}
	})
}

func TestSplitStepPanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	u := func(n int) []uint16 { return make([]uint16, n) }
	f := func(n int) []float32 { return make([]float32, n) }
	mustPanic("bottom length", func() {
		(&SGDSplitStep{Top: u(4), Bottom: u(3), Grad: SplitGrad{BF16: u(4)}, SGDConfig: SGDConfig{LR: 1}}).Run()
	})
	mustPanic("no gradient", func() { (&SGDSplitStep{Top: u(4), Bottom: u(4), SGDConfig: SGDConfig{LR: 1}}).Run() })
	mustPanic("two gradients", func() {
		(&AdagradSplitStep{Top: u(4), Bottom: u(4), Grad: SplitGrad{BF16: u(4), F32: f(4)}, Sum: f(4)}).Run()
	})
	mustPanic("state length", func() {
		(&AdamSplitStep{Top: u(4), Bottom: u(4), Grad: SplitGrad{BF16: u(4)}, ExpAvg: f(4), ExpAvgSq: f(3)}).Run()
	})
	mustPanic("join length", func() { JoinBF16(f(3), u(3), u(2)) })
	mustPanic("split length", func() { SplitBF16(u(3), u(2), f(3)) })
}

func TestSplitStepsDoNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	n := 1 << 16
	u := func() []uint16 { return make([]uint16, n) }
	f := func() []float32 { return make([]float32, n) }
	sgd := SGDSplitStep{Top: u(), Bottom: u(), Grad: SplitGrad{BF16: u()}, Buf: f(), SGDConfig: SGDConfig{LR: 0.1, Momentum: 0.9, Keep: 1}}
	adam := AdamSplitStep{Top: u(), Bottom: u(), Grad: SplitGrad{BF16: u()}, ExpAvg: f(), ExpAvgSq: f(),
		AdamConfig: AdamConfig{Beta1: 0.9, Beta2: 0.999, Keep1: 0.1, Keep2: 0.001, Eps: 1e-8, NegStepSize: -1e-3, BiasCorrection2Sqrt: 1}}
	ada := AdagradSplitStep{Top: u(), Bottom: u(), Grad: SplitGrad{BF16: u()}, Sum: f(), AdagradConfig: AdagradConfig{NegLR: -0.01, Eps: 1e-10}}
	for name, run := range map[string]func(){"SGD": sgd.Run, "Adam": adam.Run, "Adagrad": ada.Run} {
		run()
		if a := testing.AllocsPerRun(20, run); a != 0 {
			t.Errorf("%s: Run allocates %v times per call", name, a)
		}
	}
}

// BenchmarkSplitStep times each optimizer's split-BF16 step beside its FP32
// step on the same number of parameters, at the dispatch level: SGD with
// momentum and weight decay, Adam, Adagrad. The FP32 steps read float32
// gradients, the split steps bfloat16 ones, as in mixed-precision training.
// Bytes are those each form moves per element.
func BenchmarkSplitStep(b *testing.B) {
	for _, sz := range benchSizes {
		n := sz.n
		p, g, s1, s2 := benchFilled(n, 1), benchFilled(n, 0.5), benchFilled(n, 0.25), benchFilled(n, 0.125)
		top, bottom, g16 := make([]uint16, n), make([]uint16, n), make([]uint16, n)
		SplitBF16(top, bottom, p)
		for i := range g16 {
			g16[i] = 0x3f00
		}
		sgdC := SGDConfig{LR: 0.1, Momentum: 0.9, Keep: 1, WeightDecay: 1e-4}
		adamC := AdamConfig{Beta1: 0.9, Beta2: 0.999, Keep1: 0.1, Keep2: 0.001, Eps: 1e-8, NegStepSize: -1e-3, BiasCorrection2Sqrt: 1}
		adaC := AdagradConfig{NegLR: -0.01, Eps: 1e-10}
		cases := []struct {
			name       string
			bytes      int64
			run        func()
			split      bool
			splitBytes int64
		}{
			{"SGD/fp32", 20, (&SGDStep{Param: p, Grad: g, Buf: s1, SGDConfig: sgdC}).Run, false, 0},
			{"SGD/split", 18, (&SGDSplitStep{Top: top, Bottom: bottom, Grad: SplitGrad{BF16: g16}, Buf: s1, SGDConfig: sgdC}).Run, true, 0},
			{"Adam/fp32", 28, (&AdamStep{Param: p, Grad: g, ExpAvg: s1, ExpAvgSq: s2, AdamConfig: adamC}).Run, false, 0},
			{"Adam/split", 26, (&AdamSplitStep{Top: top, Bottom: bottom, Grad: SplitGrad{BF16: g16}, ExpAvg: s1, ExpAvgSq: s2, AdamConfig: adamC}).Run, true, 0},
			{"Adagrad/fp32", 20, (&AdagradStep{Param: p, Grad: g, Sum: s1, AdagradConfig: adaC}).Run, false, 0},
			{"Adagrad/split", 18, (&AdagradSplitStep{Top: top, Bottom: bottom, Grad: SplitGrad{BF16: g16}, Sum: s1, AdagradConfig: adaC}).Run, true, 0},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/%s", c.name, sz.name), func(b *testing.B) {
				b.SetBytes(int64(n) * c.bytes)
				for b.Loop() {
					c.run()
				}
			})
		}
	}
}
