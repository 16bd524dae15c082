package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// sgdReference follows PyTorch's _single_tensor_sgd literally: one
// whole-array pass per tensor operation, each "x.add(y, alpha=a)" rounded
// once as a fused multiply-add.
func sgdReference(p, g, b []float32, c SGDConfig, init bool) {
	fma := func(x, a, y float32) float32 { return float32(math.FMA(float64(y), float64(a), float64(x))) }
	d := append([]float32(nil), g...)
	if c.Maximize {
		for i := range d {
			d[i] = -d[i]
		}
	}
	if c.WeightDecay != 0 {
		for i := range d {
			d[i] = fma(d[i], c.WeightDecay, p[i])
		}
	}
	if c.Momentum != 0 {
		if init {
			copy(b, d)
		} else {
			for i := range b {
				b[i] *= c.Momentum
			}
			for i := range b {
				b[i] = fma(b[i], c.Keep, d[i])
			}
		}
		if c.Nesterov {
			for i := range d {
				d[i] = fma(d[i], c.Momentum, b[i])
			}
		} else {
			copy(d, b)
		}
	}
	for i := range p {
		p[i] = fma(p[i], -c.LR, d[i])
	}
}

func TestSGDStepMatchesReference(t *testing.T) {
	configs := []SGDConfig{
		{LR: 0.1},
		{LR: 0.1, WeightDecay: 1e-4, Maximize: true},
		{LR: 0.05, Momentum: 0.9, Keep: 1},
		{LR: 0.1, Momentum: 0.9, Keep: 0.9, WeightDecay: 1e-4},
		{LR: 0.1, Momentum: 0.9, Keep: 1, WeightDecay: 1e-2, Nesterov: true},
		{LR: 0.3, Momentum: 0.5, Keep: 1, Nesterov: true, Maximize: true},
	}
	const guard = 4
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 31, 1000, 100003} {
		for ci, c := range configs {
			t.Run(fmt.Sprintf("n=%d/config=%d", n, ci), func(t *testing.T) {
				// Each array has guard elements past its end that must stay
				// untouched.
				mk := func() []float32 {
					a := make([]float32, n+guard)
					for i := range a {
						a[i] = float32(rng.NormFloat64())
					}
					return a
				}
				p, g, b := mk(), mk(), mk()
				wantP := append([]float32(nil), p...)
				wantB := append([]float32(nil), b...)
				s := SGDStep{Param: p[:n], Grad: g[:n], Buf: b[:n], SGDConfig: c, Init: true}
				for step := range 3 {
					s.Run()
					sgdReference(wantP[:n], g[:n], wantB[:n], c, step == 0)
					s.Init = false
					for i := range p {
						if p[i] != wantP[i] || (c.Momentum != 0 && b[i] != wantB[i]) {
							t.Fatalf("step %d element %d: param %v buf %v, want %v %v", step, i, p[i], b[i], wantP[i], wantB[i])
						}
					}
					if c.Momentum == 0 {
						for i := range b {
							if b[i] != wantB[i] {
								t.Fatalf("step %d: momentum buffer written with momentum 0", step)
							}
						}
					}
				}
			})
		}
	}
}

func TestSGDStepNilBufferWithoutMomentum(t *testing.T) {
	p := []float32{1, 2}
	SGD(p, []float32{0.5, -1}, nil, SGDConfig{LR: 0.5}, true)
	if p[0] != 0.75 || p[1] != 2.5 {
		t.Fatalf("got %v, want [0.75 2.5]", p)
	}
}

func TestSGDStepLengthMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a short momentum buffer")
		}
	}()
	SGD(make([]float32, 4), make([]float32, 4), make([]float32, 3), SGDConfig{LR: 1, Momentum: 0.9, Keep: 1}, false)
}

func TestSGDStepDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	n := 1 << 16 // large enough to go through the worker pool
	s := SGDStep{Param: make([]float32, n), Grad: make([]float32, n), Buf: make([]float32, n),
		SGDConfig: SGDConfig{LR: 0.1, Momentum: 0.9, Keep: 1}}
	s.Run()
	if a := testing.AllocsPerRun(20, s.Run); a != 0 {
		t.Fatalf("Run allocates %v times per call", a)
	}
}

// TestSGDConformance compares every level's SGD kernel with the reference,
// bit for bit, on suite sizes with guard cells around the parameter and the
// momentum buffer, for each combination of the update's options.
func TestSGDConformance(t *testing.T) {
	configs := []SGDConfig{
		{LR: 0.1},
		{LR: 0.1, WeightDecay: 1e-4, Maximize: true},
		{LR: 0.05, Momentum: 0.9, Keep: 1},
		{LR: 0.1, Momentum: 0.9, Keep: 0.9, WeightDecay: 1e-4},
		{LR: 0.1, Momentum: 0.9, Keep: 1, WeightDecay: 1e-2, Nesterov: true},
		{LR: 0.3, Momentum: 0.5, Keep: 1, Nesterov: true, Maximize: true},
	}
	forEachLevel(t, func(t *testing.T, l Level) {
		span := sgdSpanFor(l)
		rng := rand.New(rand.NewPCG(31, 32))
		for ci, c := range configs {
			for _, n := range suiteSizes(8) {
				mk := func() []float32 {
					a := make([]float32, n)
					for i := range a {
						a[i] = float32(rng.NormFloat64())
						if rng.IntN(50) == 0 {
							a[i] = actSpecials[rng.IntN(len(actSpecials))]
						}
					}
					return a
				}
				p0, g, b0 := mk(), mk(), mk()
				for _, init := range []bool{true, false} {
					wantP, wantB := append([]float32(nil), p0...), append([]float32(nil), b0...)
					sgdSpan(&c, init, wantP, g, wantB)
					p, checkP := guarded(t, n)
					b, checkB := guarded(t, n)
					copy(p, p0)
					copy(b, b0)
					span(&c, init, p, g, b)
					checkP()
					checkB()
					for i := range p {
						if !actSame(p[i], wantP[i]) || !actSame(b[i], wantB[i]) {
							t.Fatalf("config %d n=%d init=%v element %d: param %v buf %v, reference %v %v",
								ci, n, init, i, p[i], b[i], wantP[i], wantB[i])
						}
					}
				}
			}
		}
	})
}

// useSGDLevel switches the SGD kernel to level l's variant until the
// returned function restores it.
func useSGDLevel(l Level) (restore func()) {
	old := sgdSpanImpl
	sgdSpanImpl = sgdSpanFor(l)
	return func() { sgdSpanImpl = old }
}

// BenchmarkSGDStep times a momentum step with weight decay (three arrays
// read, two written: 20 bytes per element) at 1M and 25M parameters, each
// level through SGDStep.Run, beside a plain copy (8 bytes per element) and a
// STREAM triad a = b + s·c (12 bytes per element) of the same size split
// the same way across the worker pool, which bound what a memory-bound pass
// can reach.
func BenchmarkSGDStep(b *testing.B) {
	for _, sz := range benchSizes {
		n := sz.n
		for _, l := range Levels() {
			b.Run(fmt.Sprintf("step/%s/%v", sz.name, l), func(b *testing.B) {
				defer useSGDLevel(l)()
				benchmarkSGDStep(b, n)
			})
		}
		x, y, z := benchFilled(n, 1), benchFilled(n, 2), benchFilled(n, 3)
		b.Run(fmt.Sprintf("copy/%s", sz.name), func(b *testing.B) {
			b.SetBytes(int64(n) * 8)
			for b.Loop() {
				Parallel(n, n*sgdCost, func(lo, hi int) { copy(x[lo:hi], y[lo:hi]) })
			}
		})
		b.Run(fmt.Sprintf("triad/%s", sz.name), func(b *testing.B) {
			b.SetBytes(int64(n) * 12)
			for b.Loop() {
				Parallel(n, n*sgdCost, func(lo, hi int) {
					xs, ys, zs := x[lo:hi], y[lo:hi], z[lo:hi]
					ys, zs = ys[:len(xs)], zs[:len(xs)]
					for i := range xs {
						xs[i] = ys[i] + 0.5*zs[i]
					}
				})
			}
		})
	}
}

func benchmarkSGDStep(b *testing.B, n int) {
	s := SGDStep{Param: benchFilled(n, 1), Grad: benchFilled(n, 0.5), Buf: benchFilled(n, 0.25),
		SGDConfig: SGDConfig{LR: 0.1, Momentum: 0.9, Keep: 1, WeightDecay: 1e-4}}
	b.SetBytes(int64(n) * 4 * 5)
	for b.Loop() {
		s.Run()
	}
	reportElems(b, n)
}

// benchFilled returns n copies of v. Benchmarks must write every page of
// their inputs: a fresh allocation that is only read maps the kernel's
// shared zero page, which stays in cache and fakes the memory bandwidth.
func benchFilled(n int, v float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = v
	}
	return s
}
