//go:build amd64 && !noasm

package kernels

// adagradSplitAVX512 is AdagradSplitStep's fused update of the first
// len(top)&^7 elements (see split_adagrad_amd64.s); it touches g16 only
// with flags&16 and g32 only without.
//
//go:noescape
func adagradSplitAVX512(top, bottom, g16 []uint16, g32, s []float32, wd float64, negLR, eps, sign float32, flags int)

// adagradSplitFusedFor returns level l's fused split Adagrad update, nil
// below AVX512.
func adagradSplitFusedFor(l Level) func(s *AdagradSplitStep, lo, hi int) int {
	if l >= AVX512 {
		return adagradSplitFusedAVX512
	}
	return nil
}

// adagradSplitFusedAVX512 updates [lo, lo+(hi−lo)&^7) of s in one pass, in
// chunks of splitChunk elements, and returns where it stopped.
func adagradSplitFusedAVX512(s *AdagradSplitStep, lo, hi int) int {
	c := &s.AdagradConfig
	flags := 0
	if c.WeightDecay != 0 {
		flags |= 1
	}
	if s.Grad.BF16 != nil {
		flags |= 16
	}
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	wd := float64(c.WeightDecay)
	end := lo + (hi-lo)&^7
	for a := lo; a < end; a += splitChunk {
		b := min(a+splitChunk, end)
		var g16 []uint16
		var g32 []float32
		if flags&16 != 0 {
			g16 = s.Grad.BF16[a:b]
		} else {
			g32 = s.Grad.F32[a:b]
		}
		adagradSplitAVX512(s.Top[a:b], s.Bottom[a:b], g16, g32, s.Sum[a:b], wd, c.NegLR, c.Eps, sign, flags)
	}
	return end
}
