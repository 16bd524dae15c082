//go:build amd64 && !noasm

package kernels

// sgdSplitAVX512 is SGDSplitStep's fused update of the first len(top)&^7
// elements (see split_sgd_amd64.s); it touches g16 only with flags&16, g32
// only without, and b only with momentum (flags&2).
//
//go:noescape
func sgdSplitAVX512(top, bottom, g16 []uint16, g32, b []float32, negLR, wd, keep float64, m, sign float32, flags int)

// sgdSplitFusedFor returns level l's fused split SGD update, nil below
// AVX512 (there the join / FP32 span / split path runs).
func sgdSplitFusedFor(l Level) func(s *SGDSplitStep, lo, hi int) int {
	if l >= AVX512 {
		return sgdSplitFusedAVX512
	}
	return nil
}

// sgdSplitFusedAVX512 updates [lo, lo+(hi−lo)&^7) of s in one pass, in
// chunks of splitChunk elements, and returns where it stopped; the caller
// updates the rest.
func sgdSplitFusedAVX512(s *SGDSplitStep, lo, hi int) int {
	c := &s.SGDConfig
	flags := 0
	if c.WeightDecay != 0 {
		flags |= 1
	}
	if c.Momentum != 0 {
		flags |= 2
		if s.Init {
			flags |= 4
		}
		if c.Nesterov {
			flags |= 8
		}
	}
	if s.Grad.BF16 != nil {
		flags |= 16
	}
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	negLR, wd, keep := -float64(c.LR), float64(c.WeightDecay), float64(c.Keep)
	end := lo + (hi-lo)&^7
	for a := lo; a < end; a += splitChunk {
		b := min(a+splitChunk, end)
		var g16 []uint16
		var g32, buf []float32
		if flags&16 != 0 {
			g16 = s.Grad.BF16[a:b]
		} else {
			g32 = s.Grad.F32[a:b]
		}
		if flags&2 != 0 {
			buf = s.Buf[a:b]
		}
		sgdSplitAVX512(s.Top[a:b], s.Bottom[a:b], g16, g32, buf, negLR, wd, keep, c.Momentum, sign, flags)
	}
	return end
}
