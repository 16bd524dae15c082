//go:build amd64 && !noasm

package kernels

import (
	"fmt"
	"math"
	"testing"
)

// TestSGDSplitFusedMatchesSpan checks the fused AVX-512 split SGD update
// against the Generic FP32 span on the joined values, bit for bit, for
// every combination of options and both gradient forms, at sizes with
// tails and offsets that are not multiples of 8, with guard cells.
func TestSGDSplitFusedMatchesSpan(t *testing.T) {
	if caps.best < AVX512 {
		t.Skip("no AVX-512")
	}
	old := sgdSplitFusedImpl
	sgdSplitFusedImpl = sgdSplitFusedFor(AVX512)
	defer func() { sgdSplitFusedImpl = old }()
	for _, wd := range []float32{0, 1e-2} {
		for _, mom := range []float32{0, 0.9} {
			for _, nest := range []bool{false, true} {
				for _, max := range []bool{false, true} {
					for _, f32 := range []bool{false, true} {
						if nest && mom == 0 {
							continue
						}
						cfg := SGDConfig{LR: 0.1, Momentum: mom, Keep: 0.9, WeightDecay: wd, Nesterov: nest, Maximize: max}
						for _, n := range []int{1, 8, 15, 16, 17, 1023, 1<<15 + 9, 70001} {
							name := fmt.Sprintf("%+v f32=%v n=%d", cfg, f32, n)
							c := newSplitCase(n, uint64(n))
							top, checkT := guarded16(t, n)
							bottom, checkB := guarded16(t, n)
							copy(top, c.top)
							copy(bottom, c.bottom)
							ref := make([]float32, n)
							rb := make([]float32, n)
							sb, checkS := guarded(t, n)
							for i := range rb {
								rb[i] = float32(c.rng.NormFloat64())
								sb[i] = rb[i]
							}
							for step := range 3 {
								g16, g32 := c.grad()
								JoinBF16(ref, top, bottom)
								sgdSpan(&cfg, step == 0, ref, g32, rb)
								s := SGDSplitStep{Top: top, Bottom: bottom, Buf: sb, SGDConfig: cfg, Init: step == 0, Grad: SplitGrad{BF16: g16}}
								if f32 {
									s.Grad = SplitGrad{F32: g32}
								}
								// Odd span boundaries, as the worker pool may hand out.
								for _, r := range [][2]int{{0, n / 3}, {n / 3, n/3 + n/5}, {n/3 + n/5, n}} {
									s.run(r[0], r[1])
								}
								checkT()
								checkB()
								checkS()
								for i := range ref {
									j := uint32(top[i])<<16 | uint32(bottom[i])
									if j != math.Float32bits(ref[i]) {
										t.Fatalf("%s step %d element %d: fused %#08x, span %#08x", name, step, i, j, math.Float32bits(ref[i]))
									}
									if mom != 0 && math.Float32bits(sb[i]) != math.Float32bits(rb[i]) {
										t.Fatalf("%s step %d buf element %d: fused %v, span %v", name, step, i, sb[i], rb[i])
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestAdagradSplitFusedMatchesSpan is TestSGDSplitFusedMatchesSpan for
// the fused AVX-512 split Adagrad update.
func TestAdagradSplitFusedMatchesSpan(t *testing.T) {
	if caps.best < AVX512 {
		t.Skip("no AVX-512")
	}
	old := adagradSplitFusedImpl
	adagradSplitFusedImpl = adagradSplitFusedFor(AVX512)
	defer func() { adagradSplitFusedImpl = old }()
	for _, wd := range []float32{0, 1e-2} {
		for _, max := range []bool{false, true} {
			for _, f32 := range []bool{false, true} {
				cfg := AdagradConfig{NegLR: -0.05, Eps: 1e-6, WeightDecay: wd, Maximize: max}
				for _, n := range []int{1, 8, 15, 16, 17, 1023, 1<<15 + 9, 70001} {
					name := fmt.Sprintf("%+v f32=%v n=%d", cfg, f32, n)
					c := newSplitCase(n, uint64(n))
					top, checkT := guarded16(t, n)
					bottom, checkB := guarded16(t, n)
					copy(top, c.top)
					copy(bottom, c.bottom)
					ref := make([]float32, n)
					rs := make([]float32, n)
					ss, checkS := guarded(t, n)
					for i := range rs {
						rs[i] = float32(c.rng.Float64())
						ss[i] = rs[i]
					}
					for step := range 3 {
						g16, g32 := c.grad()
						JoinBF16(ref, top, bottom)
						adagradSpan(&cfg, ref, g32, rs)
						s := AdagradSplitStep{Top: top, Bottom: bottom, Sum: ss, AdagradConfig: cfg, Grad: SplitGrad{BF16: g16}}
						if f32 {
							s.Grad = SplitGrad{F32: g32}
						}
						for _, r := range [][2]int{{0, n / 3}, {n / 3, n/3 + n/5}, {n/3 + n/5, n}} {
							s.run(r[0], r[1])
						}
						checkT()
						checkB()
						checkS()
						for i := range ref {
							j := uint32(top[i])<<16 | uint32(bottom[i])
							if j != math.Float32bits(ref[i]) {
								t.Fatalf("%s step %d element %d: fused %#08x, span %#08x", name, step, i, j, math.Float32bits(ref[i]))
							}
							if math.Float32bits(ss[i]) != math.Float32bits(rs[i]) {
								t.Fatalf("%s step %d sum element %d: fused %v, span %v", name, step, i, ss[i], rs[i])
							}
						}
					}
				}
			}
		}
	}
}
