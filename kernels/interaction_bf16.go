package kernels

// The bfloat16 interaction widens a block of samples' rows at a time into
// a worker's scratch, runs the float32 per-sample loops on them and
// rounds the block's results to bfloat16. Widening is exact and rounding
// is per element, so the bits are those of widening the whole matrices,
// running the float32 kernel and rounding its result, without the
// float32 copies of whole matrices: in DLRM 27 features of [2048, 64],
// 14 MB for the features, as much again for their gradients.

// interactionBlockFloats bounds a block's widened feature rows (128 KiB,
// 18 DLRM samples), so that they, the block's gradients and its output
// rows stay in the L2 cache between widening, computing and rounding,
// while each conversion call still converts long rows: the DLRM backward
// takes 8.1 ms at 2 samples a block, 6.0 at 9, 5.6 at 18, 6.3 at 75.
const interactionBlockFloats = 32768

// InteractionForwardBF16 is InteractionForward on bfloat16 feature
// matrices with a bfloat16 out: each value is InteractionForward's on the
// widened features, rounded to nearest even.
func InteractionForwardBF16(s InteractionShape, feats [][]uint16, out []uint16) {
	checkInteraction(s, "InteractionForwardBF16", feats, "feature", nil, out, "out")
	interactionBF16Jobs.run(s.Batch, s.forwardWork(), interactionBF16Args{s: s, feats: feats, rows: out}, interactionRowsBF16)
}

// InteractionBackwardBF16 is InteractionBackward on bfloat16 feature
// matrices, output gradient and gradients (nil skips a feature): each
// gradient is InteractionBackward's on the widened operands, rounded to
// nearest even.
func InteractionBackwardBF16(s InteractionShape, feats [][]uint16, dout []uint16, grads [][]uint16) {
	checkInteraction(s, "InteractionBackwardBF16", feats, "feature", grads, dout, "dout")
	interactionBF16Jobs.run(s.Batch, s.backwardWork(), interactionBF16Args{s: s, feats: feats, rows: dout, grads: grads}, interactionGradRowsBF16)
}

type interactionBF16Args struct {
	s            InteractionShape
	feats, grads [][]uint16
	rows         []uint16 // the output, or its gradient
}

var interactionBF16Jobs parPool[interactionBF16Args]

// interactionRowsBF16 is InteractionForwardBF16 for samples [lo, hi).
func interactionRowsBF16(a *interactionBF16Args, lo, hi int) {
	s := a.s
	w := s.Width()
	sc := interactionScratches.get().grow(s.Features)
	defer sc.put()
	nb, out := sc.block(s, nil)
	for b0 := lo; b0 < hi; b0 += nb {
		n := min(nb, hi-b0)
		sc.widen(a.feats, b0, n, s.Dim)
		interactionRows(&interactionArgs{s: s, feats: sc.feats, out: out}, 0, n)
		f32ToBF16Impl(a.rows[b0*w:(b0+n)*w], out[:n*w])
	}
}

// interactionGradRowsBF16 is InteractionBackwardBF16 for samples [lo,
// hi).
func interactionGradRowsBF16(a *interactionBF16Args, lo, hi int) {
	s := a.s
	d, w := s.Dim, s.Width()
	sc := interactionScratches.get().grow(s.Features)
	defer sc.put()
	nb, dout := sc.block(s, a.grads)
	for b0 := lo; b0 < hi; b0 += nb {
		n := min(nb, hi-b0)
		sc.widen(a.feats, b0, n, d)
		bf16ToF32Impl(dout[:n*w], a.rows[b0*w:(b0+n)*w])
		for b := range n {
			interactionGradsImpl(sc, sc.grads, dout[b*w:(b+1)*w], sc.feats, b, d, s.Self)
		}
		for f, g := range a.grads {
			if g != nil {
				f32ToBF16Impl(g[b0*d:(b0+n)*d], sc.grads[f][:n*d])
			}
		}
	}
}

// block lays out sc.wide for blocks of nb samples of s, which it returns
// with the block's [nb, Width] output (or output gradient) rows: sc.feats
// holds every feature's [nb, Dim] rows, sc.grads those of the gradients
// in grads (nil where grads is; all nil for none). Each matrix starts a
// cache line past the end of the one before, so a sample's rows of
// different features fall in different L1 sets whatever the block's
// size: rows at one offset in their pages share the same few L1 sets,
// and the kernels read row b of every feature at once.
func (sc *interactionScratch) block(s InteractionShape, grads [][]uint16) (nb int, rows []float32) {
	nb = max(1, interactionBlockFloats/max(1, s.Features*s.Dim))
	n := nb * s.Dim
	stride := n + 16
	size := nb*s.Width() + s.Features*stride
	if grads != nil {
		size += s.Features * stride
	}
	if cap(sc.wide) < size {
		sc.wide = make([]float32, size)
	}
	rows, rest := sc.wide[:nb*s.Width()], sc.wide[nb*s.Width():size]
	for f := range sc.feats {
		sc.feats[f], rest = rest[:n:n], rest[stride:]
		sc.grads[f] = nil
		if grads != nil {
			if grads[f] != nil {
				sc.grads[f] = rest[:n:n]
			}
			rest = rest[stride:]
		}
	}
	return nb, rows
}

// widen sets sc.feats to the widened rows [b0, b0+n) of feats, [Batch,
// d] each.
func (sc *interactionScratch) widen(feats [][]uint16, b0, n, d int) {
	for f, m := range feats {
		bf16ToF32Impl(sc.feats[f][:n*d], m[b0*d:(b0+n)*d])
	}
}
