package kernels

import "math"

// LambConfig holds the hyper-parameters of one Lamb update (IPEX's fused
// Lamb, torch_ipex::lamb_fused_step), as the float32 scalars the float32
// kernel sees. The per-step values (BiasCorrection1, BiasCorrection2) are
// computed by the caller in float64 from the step number and then rounded.
type LambConfig struct {
	// Beta1 and Beta2 multiply the running averages.
	Beta1, Beta2 float32
	// Keep1 and Keep2 are 1 − β1 and 1 − β2, computed in float64 and then
	// rounded.
	Keep1, Keep2 float32
	// BiasCorrection1 and BiasCorrection2 are 1 − β1^step and 1 − β2^step.
	BiasCorrection1, BiasCorrection2 float32
	// Eps is added to the root of the bias-corrected second moment.
	Eps float32
	// WeightDecay adds WeightDecay·p to the Adam direction (decoupled
	// decay inside the update, scaled by the trust ratio with it).
	WeightDecay float32
	// LR is the learning rate; it is multiplied by the trust ratio in
	// float64 and the product rounded once to float32.
	LR float64
}

// lambBlock is the number of elements whose squares are summed into one
// partial sum. It is fixed, not derived from the thread count, so the two
// norms (and with them every result) are the same however many workers
// share the work. It is a multiple of the 4 accumulator lanes.
const lambBlock = 4096

// lambCost is the rough work per element handed to Parallel for each of
// the two passes: a square root and two divisions per element, each pass
// reading three or four arrays.
const lambCost = 8

// LambStep is one parameter's Lamb update over its parameter, gradient,
// first and second moment slices, which must have the same length and the
// same physical order. Keep a LambStep per parameter and call Run on every
// optimizer step with that step's LambConfig: after the first call Run
// allocates nothing.
type LambStep struct {
	Param, Grad, ExpAvg, ExpAvgSq []float32
	LambConfig
	// TrustRatio is set by Run to the ratio ‖p‖/‖u‖ it applied (1 when
	// either norm is 0).
	TrustRatio float64

	sums     blockSums // ‖p‖² and ‖u‖² per block
	negScale float32   // −LR·TrustRatio, for pass 2
	pass1    func(lo, hi int)
	pass2    func(lo, hi int)
}

// Run applies the update in two passes over memory, each split across the
// worker pool. With m, v the moments, p the parameter and g the gradient,
// element by element, in float32 unless noted:
//
//	m = m·β1 + Keep1·g                           (the add fused)
//	v = v·β2 + (Keep2·g)·g                       (the add fused)
//	a = m / BiasCorrection1 / (√(v / BiasCorrection2) + Eps)
//	u = a + WeightDecay·p                        (fused; when WeightDecay ≠ 0)
//
// Pass 1 updates m and v and sums p² and u² in float64 (exact products),
// per block of lambBlock elements in four interleaved lanes (element i of a
// block into lane i mod 4, the lanes combined as (l0+l1)+(l2+l3)), the
// blocks' sums then added in order. The trust ratio is √Σp²/√Σu² in
// float64, or 1 when either is 0. Pass 2 recomputes u from the new m and
// v and the unchanged p, bit for bit as pass 1 did, so no scratch buffer
// is needed and the gradient is left alone, and sets
//
//	p = p + s·u,  s = float32(−LR·trust)         (the add fused)
//
// "Fused" means one rounding, computed in float64 where the product of two
// float32 values is exact.
func (s *LambStep) Run() {
	n := len(s.Param)
	if len(s.Grad) != n || len(s.ExpAvg) != n || len(s.ExpAvgSq) != n {
		fail(ErrShape, "LambStep", "slices differ in length")
	}
	if s.pass1 == nil {
		s.pass1, s.pass2 = s.runPass1, s.runPass2
	}
	s.TrustRatio = lambPasses(&s.sums, n, s.LR, &s.negScale, s.pass1, s.pass2)
}

// lambPasses runs pass 1 over the blocks of n elements, takes the trust
// ratio from the two summed norms, sets negScale to −lr·trust and runs
// pass 2; it returns the ratio. LambStep and LambSplitStep share it.
func lambPasses(sums *blockSums, n int, lr float64, negScale *float32, pass1, pass2 func(lo, hi int)) float64 {
	Parallel(sums.reset(n), n*lambCost, pass1)
	sp, su := sums.total()
	trust := TrustRatio(math.Sqrt(sp), math.Sqrt(su))
	*negScale = float32(-lr * trust)
	Parallel(n, n*lambCost, pass2)
	return trust
}

// TrustRatio returns num/den, or 1 when either is 0, the layer-wise trust
// ratio of Lamb (num = ‖p‖, den = ‖u‖).
func TrustRatio(num, den float64) float64 {
	if num == 0 || den == 0 {
		return 1
	}
	return num / den
}

// Lamb applies one update to param, like LambStep.Run, for callers that do
// not keep a LambStep (it allocates a little per call). It returns the
// trust ratio it applied.
func Lamb(param, grad, expAvg, expAvgSq []float32, c LambConfig) float64 {
	s := LambStep{Param: param, Grad: grad, ExpAvg: expAvg, ExpAvgSq: expAvgSq, LambConfig: c}
	s.Run()
	return s.TrustRatio
}

// blockSums holds each block's two sums of squares as eight lanes (see
// combineLanes), which workers fill in any order and total adds up in
// block order. The lanes live here, not on a worker's stack, because the
// kernels are called through function values and would make them escape.
type blockSums []float64

// reset sizes and clears the sums for n elements and returns the number
// of blocks.
func (b *blockSums) reset(n int) int {
	nb := (n + lambBlock - 1) / lambBlock
	if cap(*b) < 8*nb {
		*b = make([]float64, 8*nb)
	}
	*b = (*b)[:8*nb]
	clear(*b)
	return nb
}

// lanes returns block k's accumulators.
func (b blockSums) lanes(k int) *[8]float64 { return (*[8]float64)(b[8*k : 8*k+8]) }

// total returns the two sums over every block, added in block order.
func (b blockSums) total() (x, y float64) {
	for k := range len(b) / 8 {
		bx, by := combineLanes(b.lanes(k))
		x += bx
		y += by
	}
	return x, y
}

// runPass1 handles blocks [lo, hi).
func (s *LambStep) runPass1(lo, hi int) {
	n := len(s.Param)
	for b := lo; b < hi; b++ {
		i, j := b*lambBlock, min((b+1)*lambBlock, n)
		lambMomentsImpl(&s.LambConfig, s.Param[i:j], s.Grad[i:j], s.ExpAvg[i:j], s.ExpAvgSq[i:j], s.sums.lanes(b))
	}
}

// runPass2 handles elements [lo, hi).
func (s *LambStep) runPass2(lo, hi int) {
	lambApplyImpl(&s.LambConfig, s.negScale, s.Param[lo:hi], s.ExpAvg[lo:hi], s.ExpAvgSq[lo:hi])
}

// combineLanes returns the two sums of acc's four-lane accumulators
// (acc[0:4] and acc[4:8]), each as (l0+l1)+(l2+l3).
func combineLanes(acc *[8]float64) (x, y float64) {
	return (acc[0] + acc[1]) + (acc[2] + acc[3]), (acc[4] + acc[5]) + (acc[6] + acc[7])
}

// lambMomentsFor and lambApplyFor return level l's pass 1 and pass 2
// kernels; the Generic ones are the reference.
func lambMomentsFor(l Level) func(c *LambConfig, p, g, m, v []float32, acc *[8]float64) {
	return pick(l, [levelCount]func(*LambConfig, []float32, []float32, []float32, []float32, *[8]float64){Generic: lambMomentsSpan, AVX2: lambMomentsAVX2Span, AVX512: lambMomentsAVX512Span})
}

func lambApplyFor(l Level) func(c *LambConfig, negScale float32, p, m, v []float32) {
	return pick(l, [levelCount]func(*LambConfig, float32, []float32, []float32, []float32){Generic: lambApplySpan, AVX2: lambApplyAVX2Span, AVX512: lambApplyAVX512Span})
}

var (
	lambMomentsImpl = lambMomentsFor(level)
	lambApplyImpl   = lambApplyFor(level)
)

// lambDirection is u for one element from the updated moments.
func lambDirection(c *LambConfig, p, m, v float32) float32 {
	a := m / c.BiasCorrection1 / (float32(math.Sqrt(float64(v/c.BiasCorrection2))) + c.Eps)
	if c.WeightDecay != 0 {
		a = float32(float64(a) + float64(c.WeightDecay)*float64(p))
	}
	return a
}

// lambMomentsSpan is the reference pass 1 over (part of) one block, which
// starts at a multiple of 4 elements from the block's start: it updates m
// and v and adds p² into acc[i mod 4] and u² into acc[4 + i mod 4], in
// float64 where the squares are exact.
func lambMomentsSpan(c *LambConfig, p, g, m, v []float32, acc *[8]float64) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	b1, b2, k1, k2 := c.Beta1, c.Beta2, float64(c.Keep1), c.Keep2
	for i := range p {
		gi := g[i]
		mi := float32(float64(m[i]*b1) + k1*float64(gi))
		vi := float32(float64(v[i]*b2) + float64(k2*gi)*float64(gi))
		m[i], v[i] = mi, vi
		u := float64(lambDirection(c, p[i], mi, vi))
		pi := float64(p[i])
		acc[i&3] += pi * pi
		acc[4+i&3] += u * u
	}
}

// lambApplySpan is the reference pass 2: p = p + negScale·u, u recomputed
// from m and v.
func lambApplySpan(c *LambConfig, negScale float32, p, m, v []float32) {
	m, v = m[:len(p)], v[:len(p)]
	s := float64(negScale)
	for i := range p {
		u := lambDirection(c, p[i], m[i], v[i])
		p[i] = float32(float64(p[i]) + s*float64(u))
	}
}
