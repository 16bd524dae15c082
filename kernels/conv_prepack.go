package kernels

// ConvWeights are a convolution's filters packed once into the panels the
// GEMM micro-kernel reads (PackB of the [O, K] weight matrix, read
// transposed), for inference, where the same filters meet every input: a
// forward then skips packing them, about a tenth of a batch-1 ResNet-50
// forward on two AVX2 cores. They refer to nothing they were packed from;
// after the weights change, pack them again.
type ConvWeights struct {
	c, o, groups int
	kernel       [3]int
	pb           *PackedB
}

// PackConvWeights packs w (ConvForward's channels-last weight layout) for
// convolutions of s's geometry, or returns nil where no forward path reads
// packed weights: channels-first, several groups, or no assembly GEMM at
// this CPU's level.
func PackConvWeights(s *ConvShape, w []float32) *ConvWeights {
	if !s.ChannelsLast || s.Groups != 1 || level < AVX2 {
		return nil
	}
	if len(w) < s.wLen() {
		fail(ErrShape, "PackConvWeights", "w has %d elements, want %d for %d×%d×%v", len(w), s.wLen(), s.O, s.C, s.Kernel)
	}
	k := s.kSize() * s.C
	return &ConvWeights{c: s.C, o: s.O, groups: s.Groups, kernel: s.Kernel, pb: PackB(true, k, s.O, w, k)}
}

// Fits reports whether cw was packed for s's weight geometry.
func (cw *ConvWeights) Fits(s *ConvShape) bool {
	return cw.c == s.C && cw.o == s.O && cw.groups == s.Groups && cw.kernel == s.Kernel && s.ChannelsLast
}

// ConvForwardPacked is ConvForward with the weights also given packed
// (PackConvWeights of w for s's geometry); the paths that multiply by the
// weight matrix read the packed panels, the others (the AVX-512 direct
// kernels, which lay weights out their own way) read w. A nil cw is plain
// ConvForward. The result is ConvForward's, bit for bit.
func ConvForwardPacked(s *ConvShape, x, w []float32, cw *ConvWeights, bias, y []float32) {
	if cw == nil {
		ConvForward(s, x, w, bias, y)
		return
	}
	if !cw.Fits(s) {
		fail(ErrShape, "ConvForwardPacked", "weights packed for %d→%d %v (groups %d), convolution is %d→%d %v (groups %d, channels-last %v)",
			cw.c, cw.o, cw.kernel, cw.groups, s.C, s.O, s.Kernel, s.Groups, s.ChannelsLast)
	}
	convForward(s, x, w, cw.pb, bias, y)
}
