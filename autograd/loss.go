package autograd

import (
	"fmt"

	"github.com/kilnml/kiln/kernels"
)

// Reduction says how a loss combines its per-element values, like the
// reduction argument of PyTorch's losses. The zero value is ReductionMean,
// PyTorch's default.
type Reduction int

const (
	// ReductionMean averages the per-element losses into a 0-d tensor.
	ReductionMean Reduction = iota
	// ReductionSum adds the per-element losses into a 0-d tensor.
	ReductionSum
	// ReductionNone returns the per-element losses unreduced.
	ReductionNone
)

// String returns PyTorch's name for r: "mean", "sum" or "none".
func (r Reduction) String() string {
	switch r {
	case ReductionMean:
		return "mean"
	case ReductionSum:
		return "sum"
	case ReductionNone:
		return "none"
	}
	return fmt.Sprintf("Reduction(%d)", int(r))
}

func lossCheckReduction(op string, r Reduction) {
	if r < ReductionMean || r > ReductionNone {
		Fail(op, "invalid reduction %v (want ReductionMean, ReductionSum or ReductionNone)", r)
	}
}

// CrossEntropyOptions are the options of CrossEntropy. The zero value is
// PyTorch's default except for IgnoreIndex (see there).
type CrossEntropyOptions struct {
	Reduction Reduction
	// LabelSmoothing ε in [0, 1] blends the one-hot target with the
	// uniform distribution: the loss becomes (1−ε)·nll + ε·mean over the
	// classes of −log p, as in PyTorch 1.13.
	LabelSmoothing float64
	// IgnoreIndex, when not nil, is a target value that contributes no
	// loss, no gradient, and no count to the mean's denominator. Nil
	// ignores nothing: PyTorch's default of −100 only differs from that
	// when a target is −100, which here is rejected as out of range.
	IgnoreIndex *int64
}

// CrossEntropy is the cross entropy between logits and class-index
// targets, like torch.nn.functional.cross_entropy: the negative
// log-softmax of each target class, reduced by opt.Reduction. logits are
// [N, C] with target [N], or [N, C, d1, …] with target [N, d1, …], or
// unbatched [C] with a 0-d target; targets are Int64 in [0, C) or the
// ignore index. With ReductionNone the result has the target's shape; the
// mean over no counted targets (all ignored, or N = 0) is NaN, as in
// PyTorch.
//
// It runs fused: one log-softmax pass per position, with no intermediate
// tensors on the tape. Channels-last logits are read in place and get a
// channels-last gradient, as in PyTorch. Probability (float) targets and
// class weights are not supported.
func CrossEntropy(logits, target *Tensor, opt CrossEntropyOptions) *Tensor {
	logits = autocastF32(modeOf(logits, target), logits)
	const op = "CrossEntropy"
	lossCheckReduction(op, opt.Reduction)
	switch {
	case logits == nil:
		Fail(op, "logits are nil")
	case target == nil:
		Fail(op, "target is nil")
	case logits.dtype != Float32:
		failDType(op, "logits have dtype %v; %s supports float32", logits.dtype, op)
	case target.dtype == Float32 || target.dtype == BFloat16:
		failDType(op, "target has dtype %v; %s takes int64 class indices (probability targets are not supported)", target.dtype, op)
	case target.dtype != Int64:
		failDType(op, "target has dtype %v; %s takes int64 class indices", target.dtype, op)
	}
	if ls := opt.LabelSmoothing; !(ls >= 0 && ls <= 1) {
		Fail(op, "label smoothing must be in [0, 1], got %v", ls)
	}
	nd := logits.NDim()
	classDim := 1
	var posShape []int
	switch nd {
	case 0:
		failShape(op, "logits must be [C], [N, C] or [N, C, d1, ...], got a 0-d tensor")
	case 1:
		classDim, posShape = 0, []int{}
	default:
		posShape = append([]int{logits.shape[0]}, logits.shape[2:]...)
	}
	C := logits.shape[classDim]
	if C == 0 {
		failShape(op, "logits %v have no classes (dimension %d is 0)", logits.shape, classDim)
	}
	if !sameShape(target.shape, posShape) {
		failShape(op, "target shape %v does not fit logits %v: want %v", target.shape, logits.shape, posShape)
	}
	s := kernels.CrossEntropyShape{Classes: C, Smoothing: opt.LabelSmoothing}
	if opt.IgnoreIndex != nil {
		s.IgnoreIndex, s.HasIgnore = *opt.IgnoreIndex, true
	}
	// Positions are visited in the row-major order of the target's shape,
	// so a channels-last target (of 5-D logits) is read through a copy.
	tc := target
	if tc.format != Contiguous {
		tc = tc.reformat(Contiguous)
	}
	ts := tc.Int64s()
	count := 0
	for _, t := range ts {
		if s.HasIgnore && t == s.IgnoreIndex {
			continue
		}
		if t < 0 || t >= int64(C) {
			failIndex(op, "target %d is out of range for %d classes (want 0 to %d%s)", t, C, C-1, lossIgnoreNote(opt.IgnoreIndex))
		}
		count++
	}
	s.Outer, _, s.Inner = softmaxSplit(logits.shape, logits.format, classDim)
	loss := make([]float64, len(ts))
	lse := make([]float64, len(ts))
	x := logits.Float32s()
	kernels.CrossEntropyForward(&s, x, ts, loss, lse)

	var out *Tensor
	scale := 1.0
	switch opt.Reduction {
	case ReductionNone:
		out = Zeros(posShape...)
		od := out.Float32s()
		for i, v := range loss {
			od[i] = float32(v)
		}
	case ReductionSum:
		out = Scalar(float32(lossSum64(loss)))
	case ReductionMean:
		// 0/0 is NaN, PyTorch's answer when no target counts.
		scale = 1 / float64(count)
		out = Scalar(float32(lossSum64(loss) / float64(count)))
	}
	return record(op+"Backward", out, []*Tensor{logits, target}, func(g *Tensor) []*Tensor {
		if g.format != Contiguous {
			g = g.reformat(Contiguous)
		}
		gx := gradFor(logits, Float32, logits.format)
		clear(gx.Float32s())
		kernels.CrossEntropyBackward(&s, x, ts, lse, g.Float32s(), scale, gx.Float32s())
		return []*Tensor{gx, nil}
	})
}

func lossIgnoreNote(ignore *int64) string {
	if ignore == nil {
		return ""
	}
	return fmt.Sprintf(", or the ignore index %d", *ignore)
}

func lossSum64(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

// BCEWithLogits is the binary cross entropy between sigmoid(x) and the
// probabilities target, like
// torch.nn.functional.binary_cross_entropy_with_logits (no weight or
// pos_weight), computed in the stable form
// max(x, 0) − x·t + log(1 + exp(−|x|)) and reduced by r. target must be
// float32 with x's shape; both get gradients when they require them. With
// ReductionNone the result is in target's memory format, as PyTorch's is.
func BCEWithLogits(x, target *Tensor, r Reduction) *Tensor {
	return lossPointwise("BCEWithLogits", x, target, r, false, lossKernels{
		each: kernels.BCEWithLogits, sum: kernels.BCEWithLogitsSum, backward: kernels.BCEWithLogitsBackward,
	})
}

// BCELoss is the binary cross entropy between probabilities p and target,
// −(t·log p + (1−t)·log(1−p)) reduced by r, like
// torch.nn.functional.binary_cross_entropy (no weight). As in PyTorch 1.13,
// each log is floored at −100, so p of exactly 0 or 1 gives a finite loss;
// 1 − p is rounded to float32 before its log is taken; and the gradient of
// p is (p − t)/max((1 − p)·p, 1e-12), so it stays finite too, while the
// gradient of target, log(1−p) − log p, is not clamped. Every p must lie
// in [0, 1] (PyTorch's check; NaN fails it); target is not checked, as in
// PyTorch. target must be float32 with p's shape; both get gradients when
// they require them. With ReductionNone the result is in p's memory
// format, as PyTorch's is. On logits, BCEWithLogits is both stabler and
// cheaper.
func BCELoss(p, target *Tensor, r Reduction) *Tensor {
	return lossPointwise("BCELoss", p, target, r, true, lossKernels{
		each: kernels.BCE, sum: kernels.BCESum, backward: kernels.BCEBackward, check: bceCheckProbs,
	})
}

// bceCheckProbs fails unless every input is a probability, before any
// loss is computed from it.
func bceCheckProbs(op string, p, _ []float32) {
	for _, v := range p {
		if !(v >= 0 && v <= 1) {
			Fail(op, "input holds %v; %s takes probabilities in [0, 1] (BCEWithLogits takes logits)", v, op)
		}
	}
}

// MSELoss is the squared error (x − target)² reduced by r, like
// torch.nn.functional.mse_loss. Unlike PyTorch, which warns and
// broadcasts, target must have x's shape exactly. Both operands get
// gradients when they require them. With ReductionNone the result is in
// x's memory format, as PyTorch's is.
func MSELoss(x, target *Tensor, r Reduction) *Tensor {
	return lossPointwise("MSELoss", x, target, r, true, lossKernels{
		each: kernels.MSE, sum: kernels.MSESum, backward: kernels.MSEBackward,
	})
}

// lossKernels are the slice kernels of an elementwise loss.
type lossKernels struct {
	each     func(x, t, out []float32)
	sum      func(x, t []float32) float64
	backward func(x, t, g []float32, scale float64, dx, dt []float32)
	// check, if not nil, validates the operands' values.
	check func(op string, x, t []float32)
}

// lossPointwise runs an elementwise loss of x against target. Both operands
// are brought to one memory format, the one PyTorch's unreduced result has:
// x's when layoutOfX, else target's (PyTorch's BCE-with-logits formula
// starts from the target, its MSE from the input).
func lossPointwise(op string, x, target *Tensor, r Reduction, layoutOfX bool, k lossKernels) *Tensor {
	lossCheckReduction(op, r)
	m := modeOf(x, target)
	x, target = autocastF32(m, x), autocastF32(m, target)
	switch {
	case x == nil:
		Fail(op, "input is nil")
	case target == nil:
		Fail(op, "target is nil")
	case x.dtype != Float32:
		failDType(op, "input has dtype %v; %s supports float32", x.dtype, op)
	case target.dtype != Float32:
		failDType(op, "target has dtype %v; %s supports float32", target.dtype, op)
	case !sameShape(x.shape, target.shape):
		failShape(op, "input shape %v and target shape %v differ (%s does not broadcast)", x.shape, target.shape, op)
	}
	f := target.format
	if layoutOfX {
		f = x.format
	}
	xk, tk := x, target
	if xk.format != f {
		xk = x.reformat(f)
	}
	if tk.format != f {
		tk = target.reformat(f)
	}
	xd, td := xk.Float32s(), tk.Float32s()
	if k.check != nil {
		k.check(op, xd, td)
	}
	n := len(xd)
	var out *Tensor
	scale := 1.0
	switch r {
	case ReductionNone:
		out = &Tensor{dtype: Float32, shape: cloneInts(x.shape), format: f, data: make([]float32, n)}
		k.each(xd, td, out.Float32s())
	case ReductionSum:
		out = Scalar(float32(k.sum(xd, td)))
	case ReductionMean:
		// The mean of no elements is 0/0 = NaN, as in PyTorch.
		scale = 1 / float64(n)
		out = Scalar(float32(k.sum(xd, td) / float64(n)))
	}
	return record(op+"Backward", out, []*Tensor{x, target}, func(g *Tensor) []*Tensor {
		if g.format != out.format {
			g = g.reformat(out.format)
		}
		var dx, dt []float32
		if x.requiresGrad {
			dx = make([]float32, n)
		}
		if target.requiresGrad {
			dt = make([]float32, n)
		}
		k.backward(xd, td, g.Float32s(), scale, dx, dt)
		return []*Tensor{lossGradIn(dx, x, f), lossGradIn(dt, target, f)}
	})
}

// lossGradIn wraps a gradient computed in format f as a tensor in t's
// format, or returns nil when there is none.
func lossGradIn(d []float32, t *Tensor, f MemoryFormat) *Tensor {
	if d == nil {
		return nil
	}
	g := &Tensor{dtype: Float32, shape: cloneInts(t.shape), format: f, data: d}
	if f != t.format {
		g = g.reformat(t.format)
	}
	return g
}
