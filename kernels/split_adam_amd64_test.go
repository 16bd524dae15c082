//go:build amd64 && !noasm

package kernels

import (
	"fmt"
	"math"
	"testing"
)

// TestAdamSplitFusedMatchesSpan checks the fused AVX-512 split Adam update
// against the FP32 spans (Generic and AVX2) on the joined values, bit for
// bit, for every combination of options (L2 and decoupled weight decay,
// AMSGrad, maximize) and both gradient forms, at sizes with tails and
// offsets that are not multiples of 8, with guard cells, over several
// steps with step-dependent bias corrections and special values planted in
// the master, the gradient and every moment.
func TestAdamSplitFusedMatchesSpan(t *testing.T) {
	if caps.best < AVX512 {
		t.Skip("no AVX-512")
	}
	old := adamSplitFusedImpl
	adamSplitFusedImpl = adamSplitFusedFor(AVX512)
	defer func() { adamSplitFusedImpl = old }()
	spans := map[string]func(*AdamConfig, []float32, []float32, []float32, []float32, []float32){
		"Generic": adamSpan, "AVX2": adamSpanAVX2,
	}
	special := func(c *splitCase, x float32) float32 {
		if c.rng.IntN(200) == 0 {
			return actSpecials[c.rng.IntN(len(actSpecials))]
		}
		return x
	}
	const lr, b1, b2 = 1e-3, 0.9, 0.999
	for _, wd := range []float32{0, 1e-2} {
		for _, dec := range []bool{false, true} {
			for _, ams := range []bool{false, true} {
				for _, max := range []bool{false, true} {
					for _, f32 := range []bool{false, true} {
						for _, n := range []int{1, 8, 15, 16, 17, 1023, 1<<15 + 9, 70001} {
							c := newSplitCase(n, uint64(n))
							top, checkT := guarded16(t, n)
							bottom, checkB := guarded16(t, n)
							copy(top, c.top)
							copy(bottom, c.bottom)
							sm, checkM := guarded(t, n)
							sv, checkV := guarded(t, n)
							svmax, checkVmax := guarded(t, n)
							for i := range n {
								sm[i] = special(c, float32(c.rng.NormFloat64()*0.1))
								sv[i] = special(c, float32(c.rng.Float64()*0.01))
								svmax[i] = special(c, float32(c.rng.Float64()*0.01))
							}
							type state struct{ p, m, v, vmax []float32 }
							refs := map[string]*state{}
							for name := range spans {
								r := &state{make([]float32, n), append([]float32(nil), sm...), append([]float32(nil), sv...), append([]float32(nil), svmax...)}
								JoinBF16(r.p, top, bottom)
								refs[name] = r
							}
							for step := 1; step <= 3; step++ {
								cfg := AdamConfig{
									Beta1: b1, Beta2: b2, Keep1: float32(1 - float64(float32(b1))), Keep2: float32(1 - float64(float32(b2))),
									WeightDecay: wd, Decoupled: dec, DecayScale: float32(1 - lr*0.05),
									NegStepSize:         float32(-lr / (1 - math.Pow(b1, float64(step)))),
									BiasCorrection2Sqrt: float32(math.Sqrt(1 - math.Pow(b2, float64(step)))),
									Eps:                 1e-8, AMSGrad: ams, Maximize: max,
								}
								name := fmt.Sprintf("wd=%v decoupled=%v amsgrad=%v maximize=%v f32=%v n=%d step %d", wd, dec, ams, max, f32, n, step)
								g16, g32 := c.grad()
								for sn, span := range spans {
									r := refs[sn]
									var vm []float32
									if ams {
										vm = r.vmax
									}
									span(&cfg, r.p, g32, r.m, r.v, vm)
								}
								s := AdamSplitStep{Top: top, Bottom: bottom, Grad: SplitGrad{BF16: g16}, ExpAvg: sm, ExpAvgSq: sv, AdamConfig: cfg}
								if ams {
									s.MaxExpAvgSq = svmax
								}
								if f32 {
									s.Grad = SplitGrad{F32: g32}
								}
								// Odd span boundaries, as the worker pool may hand out.
								for _, r := range [][2]int{{0, n / 3}, {n / 3, n/3 + n/5}, {n/3 + n/5, n}} {
									s.run(r[0], r[1])
								}
								checkT()
								checkB()
								checkM()
								checkV()
								checkVmax()
								for sn, r := range refs {
									for i := range n {
										j := uint32(top[i])<<16 | uint32(bottom[i])
										if j != math.Float32bits(r.p[i]) {
											t.Fatalf("%s element %d: fused %#08x, %s span %#08x", name, i, j, sn, math.Float32bits(r.p[i]))
										}
										for _, x := range []struct {
											what string
											a, b []float32
										}{{"m", sm, r.m}, {"v", sv, r.v}, {"vmax", svmax, r.vmax}} {
											if math.Float32bits(x.a[i]) != math.Float32bits(x.b[i]) {
												t.Fatalf("%s %s element %d: fused %#08x, %s span %#08x", name, x.what, i, math.Float32bits(x.a[i]), sn, math.Float32bits(x.b[i]))
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
	}
}

// BenchmarkAdamSplitFused times the split Adam step at 25M parameters with
// a bfloat16 gradient, fused ("split") and through the join / FP32 span /
// split path ("span"), beside the FP32 step ("fp32"), for Adam and for
// AdamW with AMSGrad. Run the three alternately to compare them on a
// noisy machine.
func BenchmarkAdamSplitFused(b *testing.B) {
	const n = 25_000_000
	p, g, m, v, vmax := benchFilled(n, 1), benchFilled(n, 0.5), benchFilled(n, 0.25), benchFilled(n, 0.125), benchFilled(n, 0.125)
	top, bottom, g16 := make([]uint16, n), make([]uint16, n), make([]uint16, n)
	SplitBF16(top, bottom, p)
	for i := range g16 {
		g16[i] = 0x3f00
	}
	for _, cfg := range []struct {
		name string
		c    AdamConfig
	}{
		{"Adam", AdamConfig{Beta1: 0.9, Beta2: 0.999, Keep1: 0.1, Keep2: 0.001, Eps: 1e-8, NegStepSize: -1e-3, BiasCorrection2Sqrt: 1}},
		{"AdamW-AMSGrad", AdamConfig{Beta1: 0.9, Beta2: 0.999, Keep1: 0.1, Keep2: 0.001, Eps: 1e-8, NegStepSize: -1e-3, BiasCorrection2Sqrt: 1,
			Decoupled: true, DecayScale: 0.99999, AMSGrad: true}},
	} {
		fp32 := &AdamStep{Param: p, Grad: g, ExpAvg: m, ExpAvgSq: v, MaxExpAvgSq: vmax, AdamConfig: cfg.c}
		split := &AdamSplitStep{Top: top, Bottom: bottom, Grad: SplitGrad{BF16: g16}, ExpAvg: m, ExpAvgSq: v, MaxExpAvgSq: vmax, AdamConfig: cfg.c}
		b.Run(cfg.name+"/fp32", func(b *testing.B) {
			for b.Loop() {
				fp32.Run()
			}
		})
		for _, fused := range []bool{true, false} {
			name := "/split"
			if !fused {
				name = "/span"
			}
			b.Run(cfg.name+name, func(b *testing.B) {
				old := adamSplitFusedImpl
				if !fused {
					adamSplitFusedImpl = nil
				}
				defer func() { adamSplitFusedImpl = old }()
				for b.Loop() {
					split.Run()
				}
			})
		}
	}
}
