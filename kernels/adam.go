package kernels

import "math"

// AdamConfig holds the hyper-parameters of one Adam or AdamW update, as the
// float32 scalars PyTorch's float32 kernels see. The per-step values
// (NegStepSize, BiasCorrection2Sqrt) are computed by the caller in float64
// from the step number, as torch.optim does in Python, and then rounded.
type AdamConfig struct {
	// Beta1 and Beta2 multiply the running averages.
	Beta1, Beta2 float32
	// Keep1 and Keep2 are 1 − β1 and 1 − β2, computed in float64 and then
	// rounded, as PyTorch passes them.
	Keep1, Keep2 float32
	// WeightDecay adds WeightDecay·p to the gradient (Adam's L2 penalty);
	// 0 for AdamW.
	WeightDecay float32
	// Decoupled selects AdamW's decoupled weight decay: the parameter is
	// first multiplied by DecayScale, 1 − lr·weight_decay computed in
	// float64 and then rounded.
	Decoupled  bool
	DecayScale float32
	// NegStepSize is −lr / (1 − β1^step).
	NegStepSize float32
	// BiasCorrection2Sqrt is √(1 − β2^step).
	BiasCorrection2Sqrt float32
	// Eps is added to the bias-corrected root of the second moment.
	Eps float32
	// AMSGrad normalises with the running maximum of the second moment
	// (MaxExpAvgSq) instead of the second moment itself.
	AMSGrad bool
	// Maximize ascends the objective instead of descending it.
	Maximize bool
}

// adamCost is the rough work per element handed to Parallel: the update
// reads four or five arrays and writes three or four, with a square root
// and a division.
const adamCost = 8

// AdamStep is one parameter's Adam (or AdamW) update over its parameter,
// gradient, first and second moment (and, with AMSGrad, maximum second
// moment) slices, which must have the same length and the same physical
// order. Keep an AdamStep per parameter and call Run on every optimizer
// step with that step's AdamConfig: after the first call Run allocates
// nothing.
type AdamStep struct {
	Param, Grad, ExpAvg, ExpAvgSq []float32
	// MaxExpAvgSq is the running maximum of ExpAvgSq; it is neither read
	// nor written without AMSGrad and may then be nil.
	MaxExpAvgSq []float32
	AdamConfig

	span func(lo, hi int) // s.run, bound once so Run does not allocate
}

// Run applies the update in one pass over memory, splitting large
// parameters across the worker pool. Each element follows the sequence of
// PyTorch 1.13's _single_tensor_adam (or _single_tensor_adamw) with its
// float32 roundings:
//
//	d = ±grad                                   (− when Maximize)
//	d = d + wd·p                                (when WeightDecay ≠ 0; fused)
//	p = p·DecayScale                            (when Decoupled)
//	m = m·β1 + Keep1·d                          (the add fused)
//	v = v·β2 + (Keep2·d)·d                      (the add fused)
//	vmax = max(vmax, v); v = vmax               (when AMSGrad; NaN wins)
//	p = p + (NegStepSize·m) / (√v / BiasCorrection2Sqrt + Eps)
//
// "Fused" means one rounding, as PyTorch's vectorised CPU kernels round
// add(alpha=) and addcmul; Run computes those in float64, where the
// product of two float32 values is exact.
func (s *AdamStep) Run() {
	n := len(s.Param)
	if len(s.Grad) != n || len(s.ExpAvg) != n || len(s.ExpAvgSq) != n || (s.AMSGrad && len(s.MaxExpAvgSq) != n) {
		fail(ErrShape, "AdamStep", "slices differ in length")
	}
	if s.span == nil {
		s.span = s.run
	}
	Parallel(n, n*adamCost, s.span)
}

// Adam applies one update to param, like AdamStep.Run, for callers that do
// not keep an AdamStep (it allocates a little per call).
func Adam(param, grad, expAvg, expAvgSq, maxExpAvgSq []float32, c AdamConfig) {
	s := AdamStep{Param: param, Grad: grad, ExpAvg: expAvg, ExpAvgSq: expAvgSq, MaxExpAvgSq: maxExpAvgSq, AdamConfig: c}
	s.Run()
}

// run updates elements [lo, hi) with the variant of the dispatch level.
func (s *AdamStep) run(lo, hi int) {
	var vmax []float32
	if s.AMSGrad {
		vmax = s.MaxExpAvgSq[lo:hi]
	}
	adamSpanImpl(&s.AdamConfig, s.Param[lo:hi], s.Grad[lo:hi], s.ExpAvg[lo:hi], s.ExpAvgSq[lo:hi], vmax)
}

// adamSpanFor returns level l's Adam kernel; the Generic one is the
// reference, and AVX-512 machines run the AVX2 one.
func adamSpanFor(l Level) func(c *AdamConfig, p, g, m, v, vmax []float32) {
	return pick(l, [levelCount]func(*AdamConfig, []float32, []float32, []float32, []float32, []float32){Generic: adamSpan, AVX2: adamSpanAVX2})
}

var adamSpanImpl = adamSpanFor(level)

// adamSpan is the reference update of p, g, m, v and (with AMSGrad) vmax,
// which have the same length.
func adamSpan(c *AdamConfig, p, g, m, v, vmax []float32) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	if c.AMSGrad {
		vmax = vmax[:len(p)]
	}
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	wd := float64(c.WeightDecay)
	scale := float32(1)
	if c.Decoupled {
		scale = c.DecayScale
	}
	b1, b2 := c.Beta1, c.Beta2
	k1, k2 := float64(c.Keep1), c.Keep2
	bc2, eps, negStep := c.BiasCorrection2Sqrt, c.Eps, c.NegStepSize
	for i := range p {
		pi := p[i]
		d := sign * g[i]
		if wd != 0 {
			d = float32(float64(d) + wd*float64(pi))
		}
		if c.Decoupled {
			pi *= scale
		}
		mi := float32(float64(m[i]*b1) + k1*float64(d))
		vi := float32(float64(v[i]*b2) + float64(k2*d)*float64(d))
		m[i], v[i] = mi, vi
		if c.AMSGrad {
			// torch.maximum(vmax, v) as ATen's vectorised kernel computes
			// it: v on a tie (of +0 and −0), NaN when either is.
			if m := vmax[i]; m > vi || m != m {
				vi = m
			}
			vmax[i] = vi
		}
		den := float32(math.Sqrt(float64(vi)))/bc2 + eps
		p[i] = pi + (negStep*mi)/den
	}
}
