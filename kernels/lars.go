package kernels

import "math"

// LARSConfig holds the hyper-parameters of one LARS update, IPEX's fused
// LARS (torch_ipex::lars_fused_step, after You et al., "Large batch
// training of convolutional networks", arXiv:1708.03888): a per-tensor
// trust ratio scales the learning rate of an SGD step.
type LARSConfig struct {
	// LR is the base learning rate.
	LR float64
	// Eeta is the trust coefficient η.
	Eeta float64
	// WeightDecay enters the trust ratio's denominator; the SGD step's own
	// weight decay is SGD.WeightDecay (the caller sets both from the same
	// option).
	WeightDecay float64
	// Eps is added to the trust ratio's denominator.
	Eps float64
	// SGD is the configuration of the momentum SGD step that follows; its
	// LR is replaced by float32(LR·trust).
	SGD SGDConfig
}

// larsCost is the rough work per element of the norm pass handed to
// Parallel: two arrays read, two multiply-adds.
const larsCost = 2

// LARSStep is one parameter's LARS update over its parameter, gradient and
// momentum buffer slices, which must have the same length and the same
// physical order. Keep a LARSStep per parameter and call Run on every
// optimizer step: after the first call Run allocates nothing.
type LARSStep struct {
	Param, Grad []float32
	// Buf is the momentum buffer; it is neither read nor written when
	// SGD.Momentum is 0 and may then be nil.
	Buf []float32
	LARSConfig
	// Init says Buf holds no history yet (see SGDStep.Init).
	Init bool
	// TrustRatio is set by Run to the ratio it applied.
	TrustRatio float64

	sums  blockSums // ‖p‖² and ‖g‖² per block
	pass1 func(lo, hi int)
	sgd   SGDStep
}

// Run applies the update in two passes over memory, each split across the
// worker pool. Pass 1 sums p² and g² in float64, per block of lambBlock
// elements in four interleaved lanes, the blocks' sums added in order (so
// the result does not depend on the number of workers). Then, in float64,
//
//	trust = η·‖p‖ / (‖g‖ + WeightDecay·‖p‖ + Eps), or 1 when ‖p‖ or ‖g‖ is 0
//
// and pass 2 is SGDStep with learning rate float32(LR·trust): the gradient
// plus weight decay, momentum (with dampening or Nesterov) and p = p − lr·d.
func (s *LARSStep) Run() {
	n := len(s.Param)
	if len(s.Grad) != n || (s.SGD.Momentum != 0 && len(s.Buf) != n) {
		fail(ErrShape, "LARSStep", "slices differ in length")
	}
	if s.pass1 == nil {
		s.pass1 = s.runPass1
	}
	s.TrustRatio = larsTrust(&s.sums, n, &s.LARSConfig, s.pass1)
	k := &s.sgd
	k.Param, k.Grad, k.Buf, k.Init = s.Param, s.Grad, s.Buf, s.Init
	k.SGDConfig = s.SGD
	k.LR = float32(s.LR * s.TrustRatio)
	k.Run()
	k.Grad = nil // do not keep a freed gradient alive
}

// larsTrust runs the norm pass over the blocks of n elements and returns
// the trust ratio. LARSStep and LARSSplitStep share it.
func larsTrust(sums *blockSums, n int, c *LARSConfig, pass1 func(lo, hi int)) float64 {
	Parallel(sums.reset(n), n*larsCost, pass1)
	sp, sg := sums.total()
	return LARSTrustRatio(math.Sqrt(sp), math.Sqrt(sg), c.Eeta, c.WeightDecay, c.Eps)
}

// LARSTrustRatio returns η·pNorm/(gNorm + wd·pNorm + eps), or 1 when pNorm
// or gNorm is 0, as IPEX's lars_fused_step.
func LARSTrustRatio(pNorm, gNorm, eeta, wd, eps float64) float64 {
	if !(pNorm > 0 && gNorm > 0) {
		if math.IsNaN(pNorm) || math.IsNaN(gNorm) {
			return math.NaN()
		}
		return 1
	}
	return eeta * pNorm / (gNorm + wd*pNorm + eps)
}

// LARS applies one update to param, like LARSStep.Run, for callers that do
// not keep a LARSStep (it allocates a little per call). It returns the
// trust ratio it applied.
func LARS(param, grad, buf []float32, c LARSConfig, init bool) float64 {
	s := LARSStep{Param: param, Grad: grad, Buf: buf, LARSConfig: c, Init: init}
	s.Run()
	return s.TrustRatio
}

// runPass1 sums blocks [lo, hi).
func (s *LARSStep) runPass1(lo, hi int) {
	n := len(s.Param)
	for b := lo; b < hi; b++ {
		i, j := b*lambBlock, min((b+1)*lambBlock, n)
		sumSquares2Impl(s.Param[i:j], s.Grad[i:j], s.sums.lanes(b))
	}
}

// sumSquares2For returns level l's kernel of the norm pass; the Generic
// one is the reference.
func sumSquares2For(l Level) func(a, b []float32, acc *[8]float64) {
	return pick(l, [levelCount]func([]float32, []float32, *[8]float64){Generic: sumSquares2, AVX2: sumSquares2AVX2Span})
}

var sumSquares2Impl = sumSquares2For(level)

// sumSquares2 adds a[i]² into acc[i mod 4] and b[i]² into acc[4 + i mod 4],
// in float64 where the squares are exact.
func sumSquares2(a, b []float32, acc *[8]float64) {
	b = b[:len(a)]
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		acc[i&3] += x * x
		acc[4+i&3] += y * y
	}
}
