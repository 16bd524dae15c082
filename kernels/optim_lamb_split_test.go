package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// twoPassSizes cover vector tails, spans and blocks cut short, and more
// than one block and worker.
var twoPassSizes = []int{1, 3, 4, 17, 1023, 1025, 4095, 4097, 9001}

// splitInputs returns a random FP32 parameter, its halves, and a gradient
// as bfloat16 (or float32) values with the same values widened.
func splitInputs(rng *rand.Rand, n int, bf16 bool) (p []float32, top, bottom []uint16, g SplitGrad, g32 []float32) {
	p, g32 = make([]float32, n), make([]float32, n)
	var g16 []uint16
	if bf16 {
		g16 = make([]uint16, n)
	}
	for i := range p {
		p[i] = float32(rng.NormFloat64())
		g32[i] = float32(rng.NormFloat64() * 0.1)
		if bf16 {
			g16[i] = BF16FromF32(g32[i])
			g32[i] = F32FromBF16(g16[i])
		}
	}
	top, bottom = splitOf(p)
	if bf16 {
		return p, top, bottom, SplitGrad{BF16: g16}, g32
	}
	return p, top, bottom, SplitGrad{F32: slices.Clone(g32)}, g32
}

func bitsErr(what string, got, want []float32) error {
	if i := sameBits(got, want); i >= 0 {
		return fmt.Errorf("%s element %d: split %v, FP32 %v", what, i, got[i], want[i])
	}
	return nil
}

// The split two-pass steps give the FP32 step's masters, state and trust
// ratio bit for bit, step after step.
func TestTwoPassSplitStepsMatchFP32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	lamb := func(wd float32, step float64) LambConfig {
		return LambConfig{Beta1: 0.9, Beta2: 0.999, Keep1: float32(1 - 0.9), Keep2: float32(1 - 0.999),
			BiasCorrection1: float32(1 - math.Pow(0.9, step)), BiasCorrection2: float32(1 - math.Pow(0.999, step)), Eps: 1e-6, WeightDecay: wd, LR: 0.01}
	}
	lars := []LARSConfig{
		{LR: 0.1, Eeta: 1e-3},
		{LR: 0.1, Eeta: 0.02, WeightDecay: 1e-4, Eps: 1e-8, SGD: SGDConfig{Momentum: 0.9, Keep: 0.9, WeightDecay: 1e-4}},
		{LR: 0.5, Eeta: 1e-3, SGD: SGDConfig{Momentum: 0.9, Keep: 1, Nesterov: true}},
	}
	for _, n := range twoPassSizes {
		for _, bf16 := range []bool{true, false} {
			for _, wd := range []float32{0, 0.01} {
				t.Run(fmt.Sprintf("Lamb/n=%d/bf16=%v/wd=%v", n, bf16, wd), func(t *testing.T) {
					p, top, bottom, _, _ := splitInputs(rng, n, bf16)
					m, v := make([]float32, n), make([]float32, n)
					sm, sv := make([]float32, n), make([]float32, n)
					var k LambStep
					var ks LambSplitStep
					for step := 1.0; step <= 3; step++ {
						_, _, _, g, g32 := splitInputs(rng, n, bf16)
						k.Param, k.Grad, k.ExpAvg, k.ExpAvgSq, k.LambConfig = p, g32, m, v, lamb(wd, step)
						k.Run()
						ks.Top, ks.Bottom, ks.Grad, ks.ExpAvg, ks.ExpAvgSq, ks.LambConfig = top, bottom, g, sm, sv, lamb(wd, step)
						ks.Run()
						for _, err := range []error{bitsErr("master", joinOf(top, bottom), p), bitsErr("exp_avg", sm, m), bitsErr("exp_avg_sq", sv, v)} {
							if err != nil {
								t.Fatalf("step %v: %v", step, err)
							}
						}
						if ks.TrustRatio != k.TrustRatio {
							t.Fatalf("step %v: trust ratio %v, FP32 %v", step, ks.TrustRatio, k.TrustRatio)
						}
					}
				})
			}
			for ci, c := range lars {
				t.Run(fmt.Sprintf("LARS%d/n=%d/bf16=%v", ci, n, bf16), func(t *testing.T) {
					p, top, bottom, _, _ := splitInputs(rng, n, bf16)
					var buf, sbuf []float32
					if c.SGD.Momentum != 0 {
						buf, sbuf = make([]float32, n), make([]float32, n)
					}
					var ks LARSSplitStep
					for step := range 3 {
						_, _, _, g, g32 := splitInputs(rng, n, bf16)
						want := LARS(p, g32, buf, c, step == 0)
						ks.Top, ks.Bottom, ks.Grad, ks.Buf, ks.LARSConfig, ks.Init = top, bottom, g, sbuf, c, step == 0
						ks.Run()
						if err := bitsErr("master", joinOf(top, bottom), p); err != nil {
							t.Fatalf("step %d: %v", step, err)
						}
						if err := bitsErr("momentum buffer", sbuf, buf); err != nil {
							t.Fatalf("step %d: %v", step, err)
						}
						if ks.TrustRatio != want {
							t.Fatalf("step %d: trust ratio %v, FP32 %v", step, ks.TrustRatio, want)
						}
					}
				})
			}
		}
	}
}

func TestTwoPassSplitStepsDoNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 9001
	_, top, bottom, g, _ := splitInputs(rng, n, true)
	l := LambSplitStep{Top: top, Bottom: bottom, Grad: g, ExpAvg: make([]float32, n), ExpAvgSq: make([]float32, n),
		LambConfig: LambConfig{Beta1: 0.9, Beta2: 0.999, Keep1: 0.1, Keep2: 0.001, BiasCorrection1: 0.1, BiasCorrection2: 0.001, Eps: 1e-6, LR: 1e-3}}
	r := LARSSplitStep{Top: top, Bottom: bottom, Grad: g, Buf: make([]float32, n),
		LARSConfig: LARSConfig{LR: 0.1, Eeta: 1e-3, SGD: SGDConfig{Momentum: 0.9, Keep: 1}}}
	for name, run := range map[string]func(){"Lamb": l.Run, "LARS": r.Run} {
		run()
		if a := testing.AllocsPerRun(10, run); a != 0 {
			t.Errorf("%sSplitStep.Run allocates %v times per call", name, a)
		}
	}
}

func TestTwoPassSplitStepsRejectMismatches(t *testing.T) {
	top, bottom := make([]uint16, 4), make([]uint16, 4)
	g := SplitGrad{F32: make([]float32, 4)}
	cases := map[string]func(){
		"Lamb moments": func() {
			s := LambSplitStep{Top: top, Bottom: bottom, Grad: g, ExpAvg: make([]float32, 3), ExpAvgSq: make([]float32, 4)}
			s.Run()
		},
		"Lamb bottom": func() {
			s := LambSplitStep{Top: top, Bottom: bottom[:3], Grad: g, ExpAvg: make([]float32, 4), ExpAvgSq: make([]float32, 4)}
			s.Run()
		},
		"LARS buffer": func() {
			s := LARSSplitStep{Top: top, Bottom: bottom, Grad: g, Buf: make([]float32, 2), LARSConfig: LARSConfig{SGD: SGDConfig{Momentum: 0.9}}}
			s.Run()
		},
		"LARS two grads": func() {
			s := LARSSplitStep{Top: top, Bottom: bottom, Grad: SplitGrad{F32: g.F32, BF16: top}}
			s.Run()
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if _, ok := recover().(*Error); !ok {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}
