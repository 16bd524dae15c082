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
	n := 1 << 16 // large enough to go through the worker pool
	s := SGDStep{Param: make([]float32, n), Grad: make([]float32, n), Buf: make([]float32, n),
		SGDConfig: SGDConfig{LR: 0.1, Momentum: 0.9, Keep: 1}}
	s.Run()
	if a := testing.AllocsPerRun(20, s.Run); a != 0 {
		t.Fatalf("Run allocates %v times per call", a)
	}
}

func BenchmarkSGDStep(b *testing.B) {
	for _, n := range []int{1 << 14, 1 << 20} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchmarkSGDStep(b, n) })
	}
}

func benchmarkSGDStep(b *testing.B, n int) {
	s := SGDStep{Param: make([]float32, n), Grad: make([]float32, n), Buf: make([]float32, n),
		SGDConfig: SGDConfig{LR: 0.1, Momentum: 0.9, Keep: 1, WeightDecay: 1e-4}}
	b.SetBytes(int64(n) * 4 * 5)
	for b.Loop() {
		s.Run()
	}
}
