//go:build amd64 && !noasm

package kernels

// adamSplitAVX512 is AdamSplitStep's fused update of the first
// len(top)&^7 elements (see split_adam_amd64.s); it touches g16 only with
// flags&16, g32 only without, and vmax only with AMSGrad (flags&2).
//
//go:noescape
func adamSplitAVX512(top, bottom, g16 []uint16, g32, m, v, vmax []float32, k1, wd float64, b1, b2, k2, scale, bc2, eps, negStep, sign float32, flags int)

// adamSplitFusedFor returns level l's fused split Adam update, nil below
// AVX512 (there the join / FP32 span / split path runs).
func adamSplitFusedFor(l Level) func(s *AdamSplitStep, lo, hi int) int {
	if l >= AVX512 {
		return adamSplitFusedAVX512
	}
	return nil
}

// adamSplitFusedAVX512 updates [lo, lo+(hi−lo)&^7) of s in one pass, in
// chunks of splitChunk elements, and returns where it stopped; the caller
// updates the rest. Its scalars are adamSpanAsm's.
func adamSplitFusedAVX512(s *AdamSplitStep, lo, hi int) int {
	c := &s.AdamConfig
	flags := 0
	if c.WeightDecay != 0 {
		flags |= 1
	}
	if c.AMSGrad {
		flags |= 2
	}
	if s.Grad.BF16 != nil {
		flags |= 16
	}
	sign, scale := float32(1), float32(1)
	if c.Maximize {
		sign = -1
	}
	if c.Decoupled {
		scale = c.DecayScale
	}
	k1, wd := float64(c.Keep1), float64(c.WeightDecay)
	end := lo + (hi-lo)&^7
	for a := lo; a < end; a += splitChunk {
		b := min(a+splitChunk, end)
		var g16 []uint16
		var g32, vmax []float32
		if flags&16 != 0 {
			g16 = s.Grad.BF16[a:b]
		} else {
			g32 = s.Grad.F32[a:b]
		}
		if flags&2 != 0 {
			vmax = s.MaxExpAvgSq[a:b]
		}
		adamSplitAVX512(s.Top[a:b], s.Bottom[a:b], g16, g32, s.ExpAvg[a:b], s.ExpAvgSq[a:b], vmax,
			k1, wd, c.Beta1, c.Beta2, c.Keep2, scale, c.BiasCorrection2Sqrt, c.Eps, c.NegStepSize, sign, flags)
	}
	return end
}
