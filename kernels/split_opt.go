package kernels

import (
	"math"
)

// Split-BF16 forms of the fused optimizer steps.
//
// A split parameter keeps each FP32 master value as two 16-bit halves: Top,
// the high half, is the bfloat16 weight the model computes with, and
// Bottom the low half (see package amp). The split steps below make one
// pass over Top, Bottom, the gradient and the FP32 state: span by span
// (splitSpan elements, small enough to stay in L1) they join the halves
// into a scratch buffer, widen a bfloat16 gradient exactly, run the very
// span routine the FP32 step runs, and split the result back. The FP32
// arithmetic is therefore the FP32 step's on the joined values, element
// for element, so the masters come out bit for bit as the FP32 step's.

// splitSpan is the number of elements joined into scratch at a time: 4 KiB
// of parameter and 4 KiB of gradient.
const splitSpan = 1024

type splitScratch struct{ p, g [splitSpan]float32 }

var splitScratches = freeList[splitScratch]{New: newOf[splitScratch]}

// SplitGrad is the gradient of a split step: bfloat16 bits (BF16, widened
// exactly) or float32 values (F32); exactly one is set (non-nil).
type SplitGrad struct {
	BF16 []uint16
	F32  []float32
}

func (g SplitGrad) len() int {
	if g.BF16 != nil {
		return len(g.BF16)
	}
	return len(g.F32)
}

// load joins top and bottom [a, b) into sc.p and returns it with the
// gradient of the same elements as float32.
func (sc *splitScratch) load(top, bottom []uint16, grad SplitGrad, a, b int) (p, g []float32) {
	p = sc.p[:b-a]
	joinBF16Impl(p, top[a:b], bottom[a:b])
	if grad.BF16 != nil {
		g = sc.g[:b-a]
		bf16ToF32Impl(g, grad.BF16[a:b])
	} else {
		g = grad.F32[a:b]
	}
	return p, g
}

// JoinBF16 writes the float32 whose high half is top[i] and low half
// bottom[i] to dst[i]. The slices must have the same length.
func JoinBF16(dst []float32, top, bottom []uint16) {
	if len(top) != len(dst) || len(bottom) != len(dst) {
		fail(ErrShape, "JoinBF16", "slices differ in length")
	}
	joinBF16Impl(dst, top, bottom)
}

// SplitBF16 stores the high and low halves of each src[i] in top[i] and
// bottom[i]: the inverse of JoinBF16. The slices must have the same
// length.
func SplitBF16(top, bottom []uint16, src []float32) {
	if len(top) != len(src) || len(bottom) != len(src) {
		fail(ErrShape, "SplitBF16", "slices differ in length")
	}
	splitBF16Impl(top, bottom, src)
}

// joinBF16Span and splitBF16Span are the reference loops.
func joinBF16Span(dst []float32, top, bottom []uint16) {
	top, bottom = top[:len(dst)], bottom[:len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(top[i])<<16 | uint32(bottom[i]))
	}
}

func splitBF16Span(top, bottom []uint16, src []float32) {
	top, bottom = top[:len(src)], bottom[:len(src)]
	for i, f := range src {
		b := math.Float32bits(f)
		top[i] = uint16(b >> 16)
		bottom[i] = uint16(b)
	}
}

func joinBF16For(l Level) func(dst []float32, top, bottom []uint16) {
	return pick(l, [levelCount]func([]float32, []uint16, []uint16){Generic: joinBF16Span, AVX2: joinBF16AVX2Span})
}

func splitBF16For(l Level) func(top, bottom []uint16, src []float32) {
	return pick(l, [levelCount]func([]uint16, []uint16, []float32){Generic: splitBF16Span, AVX2: splitBF16AVX2Span})
}

var (
	joinBF16Impl  = joinBF16For(level)
	splitBF16Impl = splitBF16For(level)
)

// checkSplit panics unless top, bottom and the gradient have the same
// length and exactly one gradient slice is set; it returns the length.
func checkSplit(name string, top, bottom []uint16, grad SplitGrad) int {
	n := len(top)
	if len(bottom) != n || grad.len() != n {
		fail(ErrShape, name, "slices differ in length")
	}
	if (grad.BF16 != nil) == (grad.F32 != nil) {
		fail(ErrArgument, name, "needs exactly one of Grad.BF16 and Grad.F32")
	}
	return n
}

// SGDSplitStep is SGDStep on a split parameter: Top and Bottom hold the
// halves of the FP32 parameter, Grad its gradient, Buf the FP32 momentum
// buffer (nil without momentum). All have the same length and physical
// order. After Run, Top and Bottom hold the halves of exactly the
// parameter SGDStep.Run computes from the joined values, and Buf exactly
// its buffer. Keep one per parameter: after the first call Run allocates
// nothing.
type SGDSplitStep struct {
	Top, Bottom []uint16
	Grad        SplitGrad
	Buf         []float32
	SGDConfig
	// Init is SGDStep's Init.
	Init bool

	span func(lo, hi int)
}

// Run applies the update in one pass over memory, across the worker pool.
func (s *SGDSplitStep) Run() {
	n := checkSplit("SGDSplitStep", s.Top, s.Bottom, s.Grad)
	if s.Momentum != 0 && len(s.Buf) != n {
		fail(ErrShape, "SGDSplitStep", "slices differ in length")
	}
	if s.span == nil {
		s.span = s.run
	}
	Parallel(n, n*sgdCost, s.span)
}

// sgdSplitFusedImpl, where the dispatch level has one, updates a prefix
// of [lo, hi) in one fused pass (no scratch) and returns where it stopped.
var sgdSplitFusedImpl = sgdSplitFusedFor(level)

func (s *SGDSplitStep) run(lo, hi int) {
	if sgdSplitFusedImpl != nil {
		if lo = sgdSplitFusedImpl(s, lo, hi); lo == hi {
			return
		}
	}
	sc := splitScratches.get()
	for a := lo; a < hi; a += splitSpan {
		b := min(a+splitSpan, hi)
		p, g := sc.load(s.Top, s.Bottom, s.Grad, a, b)
		var buf []float32
		if s.Momentum != 0 {
			buf = s.Buf[a:b]
		}
		sgdSpanImpl(&s.SGDConfig, s.Init, p, g, buf)
		splitBF16Impl(s.Top[a:b], s.Bottom[a:b], p)
	}
	splitScratches.put(sc)
}

// AdamSplitStep is AdamStep on a split parameter, as SGDSplitStep is
// SGDStep: the moments stay FP32.
type AdamSplitStep struct {
	Top, Bottom                   []uint16
	Grad                          SplitGrad
	ExpAvg, ExpAvgSq, MaxExpAvgSq []float32
	AdamConfig

	span func(lo, hi int)
}

// Run applies the update in one pass over memory, across the worker pool.
func (s *AdamSplitStep) Run() {
	n := checkSplit("AdamSplitStep", s.Top, s.Bottom, s.Grad)
	if len(s.ExpAvg) != n || len(s.ExpAvgSq) != n || (s.AMSGrad && len(s.MaxExpAvgSq) != n) {
		fail(ErrShape, "AdamSplitStep", "slices differ in length")
	}
	if s.span == nil {
		s.span = s.run
	}
	Parallel(n, n*adamCost, s.span)
}

// adamSplitFusedImpl is sgdSplitFusedImpl for Adam.
var adamSplitFusedImpl = adamSplitFusedFor(level)

func (s *AdamSplitStep) run(lo, hi int) {
	if adamSplitFusedImpl != nil {
		if lo = adamSplitFusedImpl(s, lo, hi); lo == hi {
			return
		}
	}
	sc := splitScratches.get()
	for a := lo; a < hi; a += splitSpan {
		b := min(a+splitSpan, hi)
		p, g := sc.load(s.Top, s.Bottom, s.Grad, a, b)
		var vmax []float32
		if s.AMSGrad {
			vmax = s.MaxExpAvgSq[a:b]
		}
		adamSpanImpl(&s.AdamConfig, p, g, s.ExpAvg[a:b], s.ExpAvgSq[a:b], vmax)
		splitBF16Impl(s.Top[a:b], s.Bottom[a:b], p)
	}
	splitScratches.put(sc)
}

// AdagradSplitStep is AdagradStep on a split parameter, as SGDSplitStep
// is SGDStep: the sum of squares stays FP32.
type AdagradSplitStep struct {
	Top, Bottom []uint16
	Grad        SplitGrad
	Sum         []float32
	AdagradConfig

	span func(lo, hi int)
}

// Run applies the update in one pass over memory, across the worker pool.
func (s *AdagradSplitStep) Run() {
	n := checkSplit("AdagradSplitStep", s.Top, s.Bottom, s.Grad)
	if len(s.Sum) != n {
		fail(ErrShape, "AdagradSplitStep", "slices differ in length")
	}
	if s.span == nil {
		s.span = s.run
	}
	Parallel(n, n*adagradCost, s.span)
}

// adagradSplitFusedImpl is sgdSplitFusedImpl for Adagrad.
var adagradSplitFusedImpl = adagradSplitFusedFor(level)

func (s *AdagradSplitStep) run(lo, hi int) {
	if adagradSplitFusedImpl != nil {
		if lo = adagradSplitFusedImpl(s, lo, hi); lo == hi {
			return
		}
	}
	sc := splitScratches.get()
	for a := lo; a < hi; a += splitSpan {
		b := min(a+splitSpan, hi)
		p, g := sc.load(s.Top, s.Bottom, s.Grad, a, b)
		adagradSpanImpl(&s.AdagradConfig, p, g, s.Sum[a:b])
		splitBF16Impl(s.Top[a:b], s.Bottom[a:b], p)
	}
	splitScratches.put(sc)
}
