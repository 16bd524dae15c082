package kernels

// SGDConfig holds the hyper-parameters of one SGD update, as float32 scalars
// because that is how PyTorch's float32 kernels see them.
type SGDConfig struct {
	LR, Momentum, WeightDecay float32
	// Keep is 1 − dampening, computed in float64 and then rounded, as
	// PyTorch passes it (rounding dampening first can differ by an ulp).
	Keep               float32
	Nesterov, Maximize bool
}

// sgdCost is the rough work per element handed to Parallel: the update is
// memory bound, reading three arrays and writing two.
const sgdCost = 4

// SGDStep is one parameter's SGD update over its parameter, gradient and
// momentum buffer slices, which must have the same length and the same
// physical order. Keep an SGDStep per parameter and call Run on every
// optimizer step: after the first call Run allocates nothing.
type SGDStep struct {
	Param, Grad []float32
	// Buf is the momentum buffer; it is neither read nor written when
	// Momentum is 0 and may then be nil.
	Buf []float32
	SGDConfig
	// Init says Buf holds no history yet: Run sets it to the (decayed)
	// gradient rather than blending into it, as PyTorch does on a
	// parameter's first step. The caller clears it after the first Run.
	Init bool

	span func(lo, hi int) // s.run, bound once so Run does not allocate
}

// Run applies the update in one pass over memory, splitting large
// parameters across the worker pool. Each element follows the sequence of
// PyTorch 1.13's torch.optim.SGD with its float32 roundings:
//
//	d = ±grad                                  (− when Maximize)
//	d = d + wd·p                               (when WeightDecay ≠ 0)
//	b = d on the first step, else b·m + Keep·d   (when Momentum ≠ 0)
//	d = d + m·b if Nesterov, else b            (when Momentum ≠ 0)
//	p = p − lr·d
//
// PyTorch's vectorised CPU kernels compute each "x + α·y" with a fused
// multiply-add (one rounding); Run does the same by computing in float64,
// where the product of two float32 values is exact.
func (s *SGDStep) Run() {
	n := len(s.Param)
	if len(s.Grad) != n || (s.Momentum != 0 && len(s.Buf) != n) {
		fail(ErrShape, "SGDStep", "slices differ in length")
	}
	if s.span == nil {
		s.span = s.run
	}
	Parallel(n, n*sgdCost, s.span)
}

// SGD applies one update to param, like SGDStep.Run, for callers that do not
// keep an SGDStep (it allocates a little per call).
func SGD(param, grad, buf []float32, c SGDConfig, init bool) {
	s := SGDStep{Param: param, Grad: grad, Buf: buf, SGDConfig: c, Init: init}
	s.Run()
}

// run updates elements [lo, hi) with the variant of the dispatch level.
func (s *SGDStep) run(lo, hi int) {
	var b []float32
	if s.Momentum != 0 {
		b = s.Buf[lo:hi]
	}
	sgdSpanImpl(&s.SGDConfig, s.Init, s.Param[lo:hi], s.Grad[lo:hi], b)
}

// sgdSpanFor returns level l's SGD kernel; the Generic one is the reference.
func sgdSpanFor(l Level) func(c *SGDConfig, init bool, p, g, b []float32) {
	return pick(l, [levelCount]func(*SGDConfig, bool, []float32, []float32, []float32){Generic: sgdSpan, AVX2: sgdSpanAVX2})
}

var sgdSpanImpl = sgdSpanFor(level)

// sgdSpan is the reference update of p, g and (with momentum) b, which
// have the same length. The flags are turned into loop-invariant numbers (a
// sign for Maximize, a Nesterov weight) so the common cases run without
// branches in the loop.
func sgdSpan(c *SGDConfig, init bool, p, g, b []float32) {
	g = g[:len(p)]
	negLR := -float64(c.LR)
	wd := float64(c.WeightDecay)
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	if c.Momentum == 0 {
		for i := range p {
			d := sign * g[i]
			if wd != 0 {
				d = float32(float64(d) + wd*float64(p[i]))
			}
			p[i] = float32(float64(p[i]) + negLR*float64(d))
		}
		return
	}
	b = b[:len(p)]
	m := c.Momentum
	keep := float64(c.Keep)
	for i := range p {
		d := sign * g[i]
		if wd != 0 {
			d = float32(float64(d) + wd*float64(p[i]))
		}
		bi := d
		if !init {
			bi = float32(float64(b[i]*m) + keep*float64(d))
		}
		b[i] = bi
		if c.Nesterov {
			d = float32(float64(d) + float64(m)*float64(bi))
		} else {
			d = bi
		}
		p[i] = float32(float64(p[i]) + negLR*float64(d))
	}
}
