package kernels

import "math"

// AdagradConfig holds the hyper-parameters of one Adagrad update, as the
// float32 scalars PyTorch's float32 kernels see.
type AdagradConfig struct {
	// WeightDecay adds WeightDecay·p to the gradient (L2 penalty).
	WeightDecay float32
	// NegLR is −lr / (1 + (step − 1)·lr_decay), computed in float64 by the
	// caller, as torch.optim does in Python, and then rounded.
	NegLR float32
	// Eps is added to the root of the sum of squares.
	Eps float32
	// Maximize ascends the objective instead of descending it.
	Maximize bool
}

// adagradCost is the rough work per element handed to Parallel: three
// arrays read, two written, a square root and a division.
const adagradCost = 6

// AdagradStep is one parameter's Adagrad update over its parameter,
// gradient and sum-of-squares slices, which must have the same length and
// the same physical order. Keep an AdagradStep per parameter and call Run
// on every optimizer step: after the first call Run allocates nothing.
type AdagradStep struct {
	Param, Grad, Sum []float32
	AdagradConfig

	span func(lo, hi int) // s.run, bound once so Run does not allocate
}

// Run applies the update in one pass over memory, splitting large
// parameters across the worker pool. Each element follows PyTorch 1.13's
// _single_tensor_adagrad (dense gradients) with its float32 roundings:
//
//	d = ±grad                          (− when Maximize)
//	d = d + wd·p                       (when WeightDecay ≠ 0; fused)
//	s = s + d·d                        (fused)
//	p = p + (NegLR·d) / (√s + Eps)
//
// "Fused" means one rounding, computed in float64 where the product of two
// float32 values is exact.
func (s *AdagradStep) Run() {
	n := len(s.Param)
	if len(s.Grad) != n || len(s.Sum) != n {
		fail(ErrShape, "AdagradStep", "slices differ in length")
	}
	if s.span == nil {
		s.span = s.run
	}
	Parallel(n, n*adagradCost, s.span)
}

// Adagrad applies one update to param, like AdagradStep.Run, for callers
// that do not keep an AdagradStep (it allocates a little per call).
func Adagrad(param, grad, sum []float32, c AdagradConfig) {
	s := AdagradStep{Param: param, Grad: grad, Sum: sum, AdagradConfig: c}
	s.Run()
}

// run updates elements [lo, hi) with the variant of the dispatch level.
func (s *AdagradStep) run(lo, hi int) {
	adagradSpanImpl(&s.AdagradConfig, s.Param[lo:hi], s.Grad[lo:hi], s.Sum[lo:hi])
}

// adagradSpanFor returns level l's Adagrad kernel; the Generic one is the
// reference, and AVX-512 machines run the AVX2 one.
func adagradSpanFor(l Level) func(c *AdagradConfig, p, g, s []float32) {
	return pick(l, [levelCount]func(*AdagradConfig, []float32, []float32, []float32){Generic: adagradSpan, AVX2: adagradSpanAVX2})
}

var adagradSpanImpl = adagradSpanFor(level)

// adagradSpan is the reference update of p, g and s, which have the same
// length.
func adagradSpan(c *AdagradConfig, p, g, s []float32) {
	g, s = g[:len(p)], s[:len(p)]
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	wd := float64(c.WeightDecay)
	negLR, eps := c.NegLR, c.Eps
	for i := range p {
		d := sign * g[i]
		if wd != 0 {
			d = float32(float64(d) + wd*float64(p[i]))
		}
		si := float32(float64(s[i]) + float64(d)*float64(d))
		s[i] = si
		std := float32(math.Sqrt(float64(si))) + eps
		p[i] += (negLR * d) / std
	}
}
