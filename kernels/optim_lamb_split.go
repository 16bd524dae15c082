package kernels

// Split-BF16 forms of the two-pass steps, Lamb and LARS. Their trust ratios
// need norms of the whole tensor, so pass 1 joins Top and Bottom span by
// span (as the one-pass split steps do) and reduces the joined FP32 values
// through the FP32 step's own pass-1 routine, into the same blocks and
// lanes: spans start at multiples of splitSpan from a block's start, a
// multiple of every vector width, and the routines continue their lanes
// across calls, so the norms, the ratio and every update come out bit for
// bit as the FP32 step's on the joined values.

// LambSplitStep is LambStep on a split parameter (see SGDSplitStep): Top
// and Bottom hold the halves of the FP32 parameter, Grad its gradient, and
// the moments stay FP32. After Run, Top and Bottom hold the halves of
// exactly the parameter LambStep.Run computes from the joined values, the
// moments and TrustRatio exactly its own. Keep one per parameter: after the
// first call Run allocates nothing.
type LambSplitStep struct {
	Top, Bottom      []uint16
	Grad             SplitGrad
	ExpAvg, ExpAvgSq []float32
	LambConfig
	// TrustRatio is set by Run to the ratio it applied.
	TrustRatio float64

	sums         blockSums
	negScale     float32
	pass1, pass2 func(lo, hi int)
}

// Run applies the update in two passes over memory, each split across the
// worker pool.
func (s *LambSplitStep) Run() {
	n := checkSplit("LambSplitStep", s.Top, s.Bottom, s.Grad)
	if len(s.ExpAvg) != n || len(s.ExpAvgSq) != n {
		fail(ErrShape, "LambSplitStep", "slices differ in length")
	}
	if s.pass1 == nil {
		s.pass1, s.pass2 = s.runPass1, s.runPass2
	}
	s.TrustRatio = lambPasses(&s.sums, n, s.LR, &s.negScale, s.pass1, s.pass2)
}

// forBlockSpans calls fn on the joined parameter and the float32 gradient
// of each span of blocks [lo, hi) of an n-element split parameter, with
// the span's element range and block.
func forBlockSpans(top, bottom []uint16, grad SplitGrad, lo, hi int, fn func(a, e, block int, p, g []float32)) {
	n := len(top)
	sc := splitScratches.get()
	for b := lo; b < hi; b++ {
		for a, j := b*lambBlock, min((b+1)*lambBlock, n); a < j; a += splitSpan {
			e := min(a+splitSpan, j)
			p, g := sc.load(top, bottom, grad, a, e)
			fn(a, e, b, p, g)
		}
	}
	splitScratches.put(sc)
}

// runPass1 handles blocks [lo, hi): the moments, and the norms of the
// joined parameter and of the update.
func (s *LambSplitStep) runPass1(lo, hi int) {
	forBlockSpans(s.Top, s.Bottom, s.Grad, lo, hi, func(a, e, b int, p, g []float32) {
		lambMomentsImpl(&s.LambConfig, p, g, s.ExpAvg[a:e], s.ExpAvgSq[a:e], s.sums.lanes(b))
	})
}

// runPass2 handles elements [lo, hi): join, apply, split.
func (s *LambSplitStep) runPass2(lo, hi int) {
	sc := splitScratches.get()
	for a := lo; a < hi; a += splitSpan {
		e := min(a+splitSpan, hi)
		p := sc.p[:e-a]
		joinBF16Impl(p, s.Top[a:e], s.Bottom[a:e])
		lambApplyImpl(&s.LambConfig, s.negScale, p, s.ExpAvg[a:e], s.ExpAvgSq[a:e])
		splitBF16Impl(s.Top[a:e], s.Bottom[a:e], p)
	}
	splitScratches.put(sc)
}

// LARSSplitStep is LARSStep on a split parameter, as LambSplitStep is
// LambStep: pass 1 takes the norms of the joined parameter and the
// gradient, and pass 2 is SGDSplitStep with the scaled learning rate. The
// momentum buffer stays FP32.
type LARSSplitStep struct {
	Top, Bottom []uint16
	Grad        SplitGrad
	// Buf is the momentum buffer; nil when SGD.Momentum is 0.
	Buf []float32
	LARSConfig
	// Init says Buf holds no history yet (see SGDStep.Init).
	Init bool
	// TrustRatio is set by Run to the ratio it applied.
	TrustRatio float64

	sums  blockSums
	pass1 func(lo, hi int)
	sgd   SGDSplitStep
}

// Run applies the update in two passes over memory, each split across the
// worker pool.
func (s *LARSSplitStep) Run() {
	n := checkSplit("LARSSplitStep", s.Top, s.Bottom, s.Grad)
	if s.SGD.Momentum != 0 && len(s.Buf) != n {
		fail(ErrShape, "LARSSplitStep", "slices differ in length")
	}
	if s.pass1 == nil {
		s.pass1 = s.runPass1
	}
	s.TrustRatio = larsTrust(&s.sums, n, &s.LARSConfig, s.pass1)
	k := &s.sgd
	k.Top, k.Bottom, k.Grad, k.Buf, k.Init = s.Top, s.Bottom, s.Grad, s.Buf, s.Init
	k.SGDConfig = s.SGD
	k.LR = float32(s.LR * s.TrustRatio)
	k.Run()
	k.Grad = SplitGrad{} // do not keep a freed gradient alive
}

// runPass1 sums the squares of blocks [lo, hi) of the joined parameter and
// the gradient.
func (s *LARSSplitStep) runPass1(lo, hi int) {
	forBlockSpans(s.Top, s.Bottom, s.Grad, lo, hi, func(_, _, b int, p, g []float32) {
		sumSquares2Impl(p, g, s.sums.lanes(b))
	})
}
