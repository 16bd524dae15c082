package kernels

import (
	"math"
)

// CrossEntropyShape describes a cross-entropy over logits viewed as
// Outer × Classes × Inner in memory (as SoftmaxShape, with the classes
// along N). Position p = o·Inner + i has the class index target[p]. For
// row-major [N, C, d…] logits Outer = N and Inner = the product of d…; for
// channels-last logits Outer = N·H·W and Inner = 1.
type CrossEntropyShape struct {
	Outer, Classes, Inner int
	// Smoothing is the label smoothing ε in [0, 1]: the target
	// distribution is (1−ε)·onehot + ε/Classes.
	Smoothing float64
	// A position whose target equals IgnoreIndex, when HasIgnore is set,
	// contributes no loss and gets no gradient.
	IgnoreIndex int64
	HasIgnore   bool
}

func (s *CrossEntropyShape) check(op string, lens map[string][2]int) {
	if s.Outer < 0 || s.Classes <= 0 || s.Inner < 0 || !(s.Smoothing >= 0 && s.Smoothing <= 1) {
		fail(ErrShape, op, "inconsistent shape %+v", *s)
	}
	checkLens(op, lens)
}

func (s *CrossEntropyShape) ignored(t int64) bool { return s.HasIgnore && t == s.IgnoreIndex }

// CrossEntropyForward computes, in one log-softmax pass over each
// position's logits, loss[p] = (1−ε)·(lse − x[target]) + ε·(lse − mean x)
// and the log-sum-exp lse[p] the backward pass needs, both in float64.
// Ignored positions get loss 0. Every other target must lie in
// [0, Classes); callers validate them first (this panics otherwise).
func CrossEntropyForward(s *CrossEntropyShape, x []float32, target []int64, loss, lse []float64) {
	np := s.Outer * s.Inner
	s.check("CrossEntropyForward", map[string][2]int{"x": {len(x), np * s.Classes},
		"target": {len(target), np}, "loss": {len(loss), np}, "lse": {len(lse), np}})
	C, st, eps := s.Classes, s.Inner, s.Smoothing
	ss := SoftmaxShape{Outer: s.Outer, N: C, Inner: st}
	softmaxTiles(ss, 12, 3, func(o, i0, w int, acc []float64) {
		base, p0 := o*C*st+i0, o*st+i0
		mx, sum, mean := acc[:w], acc[w:2*w], acc[2*w:3*w]
		softmaxMaxSum(x, nil, base, C, st, w, mx, sum)
		if eps != 0 {
			clear(mean)
			for k := 0; k < C; k++ {
				for c, v := range x[base+k*st : base+k*st+w] {
					mean[c] += float64(v)
				}
			}
		}
		for c := range w {
			p := p0 + c
			t := target[p]
			if s.ignored(t) {
				loss[p], lse[p] = 0, 0
				continue
			}
			if t < 0 || t >= int64(C) {
				fail(ErrIndex, "CrossEntropyForward", "target %d out of range for %d classes", t, C)
			}
			l := mx[c] + math.Log(sum[c])
			lse[p] = l
			nll := l - float64(x[base+int(t)*st+c])
			if eps != 0 {
				nll = (1-eps)*nll + eps*(l-mean[c]/float64(C))
			}
			loss[p] = nll
		}
	})
}

// CrossEntropyBackward writes the logit gradient of CrossEntropyForward:
// dx = scale·g·(softmax(x) − (1−ε)·onehot(target) − ε/Classes) at each
// position, and 0 at ignored ones. g holds one value shared by every
// position (a reduced loss) or one per position. dx is overwritten.
func CrossEntropyBackward(s *CrossEntropyShape, x []float32, target []int64, lse []float64, g []float32, scale float64, dx []float32) {
	np := s.Outer * s.Inner
	gn := np
	if len(g) == 1 {
		gn = 1
	}
	s.check("CrossEntropyBackward", map[string][2]int{"x": {len(x), np * s.Classes}, "dx": {len(dx), np * s.Classes},
		"target": {len(target), np}, "lse": {len(lse), np}, "g": {len(g), gn}})
	C, st := s.Classes, s.Inner
	off, hit := s.Smoothing/float64(C), 1-s.Smoothing
	ss := SoftmaxShape{Outer: s.Outer, N: C, Inner: st}
	softmaxTiles(ss, 12, 1, func(o, i0, w int, acc []float64) {
		base, p0 := o*C*st+i0, o*st+i0
		gs := acc[:w]
		for c := range gs {
			switch p := p0 + c; {
			case s.ignored(target[p]):
				gs[c] = 0
			case gn == 1:
				gs[c] = scale * float64(g[0])
			default:
				gs[c] = scale * float64(g[p])
			}
		}
		tr, lr := target[p0:p0+w], lse[p0:p0+w]
		for k := 0; k < C; k++ {
			xr, dr := x[base+k*st:base+k*st+w], dx[base+k*st:base+k*st+w]
			for c, v := range xr {
				if s.ignored(tr[c]) {
					// Not 0·(…): a non-finite logit must not turn into NaN.
					dr[c] = 0
					continue
				}
				d := softmaxExp(float64(v)-lr[c]) - off
				if int64(k) == tr[c] {
					d -= hit
				}
				dr[c] = float32(gs[c] * d)
			}
		}
	})
}

// lossBlock is the number of elements each partial sum of a reduced loss
// covers. The blocks are fixed, so a sum is the same whatever the thread
// count.
const lossBlock = 4096

// lossSum adds f(lo, hi) over the fixed blocks of [0, n) in float64,
// computing the blocks in parallel and adding them in order.
func lossSum(n, cost int, f func(lo, hi int) float64) float64 {
	nb := (n + lossBlock - 1) / lossBlock
	if nb <= 1 {
		return f(0, n)
	}
	part := make([]float64, nb)
	Parallel(nb, n*cost, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			part[b] = f(b*lossBlock, min(n, (b+1)*lossBlock))
		}
	})
	s := 0.0
	for _, v := range part {
		s += v
	}
	return s
}

// lossEach calls f on chunks of [0, n), in parallel when n is large.
func lossEach(n, cost int, f func(lo, hi int)) { Parallel(n, n*cost, f) }

func lossCheck(op string, x, t []float32, others map[string][]float32) {
	if len(t) != len(x) {
		fail(ErrShape, op, "target has %d elements, x has %d", len(t), len(x))
	}
	for name, s := range others {
		if s != nil && len(s) != len(x) {
			fail(ErrShape, op, "%s has %d elements, x has %d", name, len(s), len(x))
		}
	}
}

// lossGradStep checks g (one shared value or one per element of x) and
// returns the step with which to read it.
func lossGradStep(op string, g []float32, n int) int {
	switch {
	case len(g) == 1 && n != 1:
		return 0
	case len(g) == n:
		return 1
	}
	fail(ErrShape, op, "gradient has %d elements, want 1 or %d", len(g), n)
	return 0
}

// bceWithLogits is max(x,0) − x·t + log(1+exp(−|x|)), which neither
// overflows for large |x| nor loses the small tail for large negative x.
func bceWithLogits(x, t float32) float64 {
	xf := float64(x)
	return max(xf, 0) - xf*float64(t) + math.Log1p(math.Exp(-math.Abs(xf)))
}

// BCEWithLogits writes the binary cross entropy of logits x against
// probabilities t to out, elementwise; like
// torch.nn.functional.binary_cross_entropy_with_logits(reduction='none').
func BCEWithLogits(x, t, out []float32) {
	lossCheck("BCEWithLogits", x, t, map[string][]float32{"out": out})
	lossEach(len(x), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = float32(bceWithLogits(x[i], t[i]))
		}
	})
}

// BCEWithLogitsSum returns the float64 sum of BCEWithLogits over all
// elements.
func BCEWithLogitsSum(x, t []float32) float64 {
	lossCheck("BCEWithLogitsSum", x, t, nil)
	return lossSum(len(x), 16, func(lo, hi int) float64 {
		s := 0.0
		for i := lo; i < hi; i++ {
			s += bceWithLogits(x[i], t[i])
		}
		return s
	})
}

// BCEWithLogitsBackward writes dx = scale·g·(sigmoid(x) − t) and
// dt = −scale·g·x; either may be nil to skip it. g holds one shared value
// or one per element.
func BCEWithLogitsBackward(x, t, g []float32, scale float64, dx, dt []float32) {
	lossCheck("BCEWithLogitsBackward", x, t, map[string][]float32{"dx": dx, "dt": dt})
	gs := lossGradStep("BCEWithLogitsBackward", g, len(x))
	lossEach(len(x), 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gi := scale * float64(g[i*gs])
			xf := float64(x[i])
			if dx != nil {
				dx[i] = float32(gi * (1/(1+math.Exp(-xf)) - float64(t[i])))
			}
			if dt != nil {
				dt[i] = float32(-gi * xf)
			}
		}
	})
}

// bceClampLog is the floor PyTorch's binary_cross_entropy puts under each
// log, so that a probability of exactly 0 or 1 costs 100, not infinity.
const bceClampLog = -100

// bceEpsilon is ATen's EPSILON as the float32 its BCE gradient divides by
// when p·(1−p) is smaller.
const bceEpsilon = float64(float32(1e-12))

// bce is −(t·log p + (1−t)·log(1−p)) with each log floored at −100,
// written as ATen 1.13 does: (t−1)·max(log(1−p), −100) − t·max(log p, −100),
// with 1−p rounded to float32 (not log1p(−p)), so a p below 2⁻²⁵ with t = 0
// costs exactly 0 as in PyTorch. The rest is float64.
func bce(p, t float32) float64 {
	tf := float64(t)
	return (tf-1)*max(math.Log(float64(1-p)), bceClampLog) - tf*max(math.Log(float64(p)), bceClampLog)
}

// BCE writes the binary cross entropy of probabilities p against targets
// t to out, elementwise; like
// torch.nn.functional.binary_cross_entropy(reduction='none'). Callers
// check that every p lies in [0, 1].
func BCE(p, t, out []float32) {
	lossCheck("BCE", p, t, map[string][]float32{"out": out})
	lossEach(len(p), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = float32(bce(p[i], t[i]))
		}
	})
}

// BCESum returns the float64 sum of BCE over all elements.
func BCESum(p, t []float32) float64 {
	lossCheck("BCESum", p, t, nil)
	return lossSum(len(p), 16, func(lo, hi int) float64 {
		s := 0.0
		for i := lo; i < hi; i++ {
			s += bce(p[i], t[i])
		}
		return s
	})
}

// BCEBackward writes ATen's gradients of BCE:
// dp = scale·g·(p − t) / max((1 − p)·p, 1e-12) and
// dt = scale·g·(log(1 − p) − log p), the latter without the clamp, so it
// is infinite at p = 0 or 1 as in PyTorch. 1 − p is rounded to float32 as
// in BCE. Either may be nil to skip it; g holds one shared value or one
// per element.
func BCEBackward(p, t, g []float32, scale float64, dp, dt []float32) {
	lossCheck("BCEBackward", p, t, map[string][]float32{"dp": dp, "dt": dt})
	gs := lossGradStep("BCEBackward", g, len(p))
	lossEach(len(p), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gi := scale * float64(g[i*gs])
			pf, qf := float64(p[i]), float64(1-p[i])
			if dp != nil {
				dp[i] = float32(gi * (pf - float64(t[i])) / max(qf*pf, bceEpsilon))
			}
			if dt != nil {
				dt[i] = float32(gi * (math.Log(qf) - math.Log(pf)))
			}
		}
	})
}

// MSE writes the squared error (x−t)² to out, elementwise; like
// torch.nn.functional.mse_loss(reduction='none').
func MSE(x, t, out []float32) {
	lossCheck("MSE", x, t, map[string][]float32{"out": out})
	lossEach(len(x), 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := float64(x[i]) - float64(t[i])
			out[i] = float32(d * d)
		}
	})
}

// MSESum returns the float64 sum of (x−t)² over all elements.
func MSESum(x, t []float32) float64 {
	lossCheck("MSESum", x, t, nil)
	return lossSum(len(x), 1, func(lo, hi int) float64 {
		s := 0.0
		for i := lo; i < hi; i++ {
			d := float64(x[i]) - float64(t[i])
			s += d * d
		}
		return s
	})
}

// MSEBackward writes dx = 2·scale·g·(x−t) and dt = −dx; either may be nil
// to skip it. g holds one shared value or one per element.
func MSEBackward(x, t, g []float32, scale float64, dx, dt []float32) {
	lossCheck("MSEBackward", x, t, map[string][]float32{"dx": dx, "dt": dt})
	gs := lossGradStep("MSEBackward", g, len(x))
	lossEach(len(x), 2, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := float32(2 * scale * float64(g[i*gs]) * (float64(x[i]) - float64(t[i])))
			if dx != nil {
				dx[i] = d
			}
			if dt != nil {
				dt[i] = -d
			}
		}
	})
}
