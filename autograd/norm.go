package autograd

import (
	"math"

	"github.com/kilnml/kiln/internal/opbind"
	"github.com/kilnml/kiln/kernels"
)

// normCheckChannelVec panics unless t (when non-nil) is a float32 [c]
// vector; x is the input, named in the message.
func normCheckChannelVec(op, what string, t *Tensor, c int, x *Tensor) {
	if t == nil {
		return
	}
	checkF32(op, what, t)
	if t.NDim() != 1 || t.shape[0] != c {
		failShape(op, "%s has shape %v, want [%d] for input %v", what, t.shape, c, x.shape)
	}
}

// normEps panics unless eps is a usable variance offset.
func normEps(op string, eps float64) {
	if !(eps >= 0) || math.IsInf(eps, 0) {
		Fail(op, "eps must be finite and non-negative, got %v", eps)
	}
}

// normF32s returns the float32 data of t, or nil for a nil t.
func normF32s(t *Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.Float32s()
}

// BatchNorm normalises each channel of x (dimension 1), like
// torch.nn.functional.batch_norm. x is [N, C], [N, C, L], [N, C, H, W]
// (contiguous or channels-last) or [N, C, D, H, W] (contiguous or
// channels-last-3d); higher ranks work as in PyTorch. weight and bias are
// [C] or nil (scale 1, shift 0); runningMean and runningVar are [C] or nil.
//
// With training the batch's mean and biased variance (over every dimension
// but 1, accumulated in float64) normalise x, and each non-nil running
// statistic is updated in place: running = (1−momentum)·running +
// momentum·stat, where the variance statistic is the unbiased one
// (n/(n−1) times the biased), as PyTorch does. Training needs more than one
// value per channel. Without training both running statistics must be
// given and normalise x; they are left unchanged.
//
// Channels-last input is normalised directly in its NHWC (NDHWC) order,
// with no reordering copy, and the result keeps x's format, as in PyTorch. Gradients flow to x, weight
// and bias; the running statistics are buffers, not differentiated, and
// must not require gradients.
//
// A bfloat16 x (with float32 parameters and statistics, PyTorch's mixed
// CPU batch norm) is normalised in float32 and gives a bfloat16 result
// and input gradient, each rounded once.
func BatchNorm(x, runningMean, runningVar, weight, bias *Tensor, training bool, momentum, eps float64) *Tensor {
	return batchNorm("BatchNorm", x, runningMean, runningVar, weight, bias, training, momentum, eps, false, false)
}

// BatchNormReLU is ReLU(BatchNorm(...)) with the same arguments and the
// same result, bit for bit, computed as one op: the normalised values are
// rectified while still in cache and never stored on their own, which
// saves a pass over memory and, in training, an activation (the backward
// needs only x and the output). Models use it where PyTorch's would run
// BatchNorm2d then ReLU(inplace=True).
func BatchNormReLU(x, runningMean, runningVar, weight, bias *Tensor, training bool, momentum, eps float64) *Tensor {
	return batchNorm("BatchNormReLU", x, runningMean, runningVar, weight, bias, training, momentum, eps, true, false)
}

// BatchNormInPlace is BatchNorm writing its result over x, which it
// returns, like an in-place op of PyTorch's: for inference, where x is a
// temporary nothing else reads. With relu it is BatchNormReLU in place. x
// must not need a gradient: under grad mode an x that requires one is an
// error, since autograd would need the values it overwrites.
func BatchNormInPlace(x, runningMean, runningVar, weight, bias *Tensor, training bool, momentum, eps float64, relu bool) *Tensor {
	return batchNorm("BatchNormInPlace", x, runningMean, runningVar, weight, bias, training, momentum, eps, relu, true)
}

// checkInPlace fails when an in-place op would overwrite values autograd
// may need.
// traceBatchNorm reports an evaluation-mode batch norm, and its fused
// ReLU as a ReLU of its own.
func traceBatchNorm(x, runningMean, runningVar, weight, bias *Tensor, eps float64, relu bool, out *Tensor) {
	ins := []*Tensor{x, runningMean, runningVar, weight, bias}
	if !relu {
		trace("BatchNorm", batchNormAttrs{eps}, ins, []*Tensor{out})
		return
	}
	y := out.meta()
	y.mode = modeOf(ins...) // the intermediate belongs to the traced computation
	trace("BatchNorm", batchNormAttrs{eps}, ins, []*Tensor{y})
	trace("ReLU", nil, []*Tensor{y}, []*Tensor{out})
}

func checkInPlace(op string, x *Tensor) {
	if x != nil && x.requiresGrad && !x.mode.noGrad {
		failGrad(op, "cannot overwrite a tensor that requires grad (shape %v) while gradients are recorded; use the out-of-place op, or run the computation under NoGrad", x.shape)
	}
}

func batchNorm(op string, x, runningMean, runningVar, weight, bias *Tensor, training bool, momentum, eps float64, relu, inPlace bool) *Tensor {
	if x != nil && x.dtype == BFloat16 {
		return batchNormBF16(op, x, runningMean, runningVar, weight, bias, training, momentum, eps, relu, inPlace)
	}
	checkF32(op, "input", x)
	s := bnShape(op, x, runningMean, runningVar, weight, bias, training, momentum, eps)
	xd := x.Float32s()
	mean, invStd := bnStatistics(op, s, xd, x.shape, runningMean, runningVar, training, momentum, eps)
	C := s.C
	var out *Tensor
	if inPlace {
		checkInPlace(op, x)
		out = x
	} else {
		out = resultIn(op, x.mode, Float32, cloneInts(x.shape), x.format, false) // every element written
	}
	bindBatchNorm(s, x, out, mean, invStd, weight, bias, relu)()
	if traced(x, runningMean, runningVar, weight, bias) && !training {
		traceBatchNorm(x, runningMean, runningVar, weight, bias, eps, relu, out)
	}
	if inPlace {
		return out
	}
	var yd []float32 // the rectified output, whose sign masks the gradient
	if relu {
		yd = out.Float32s()
	}
	return record(op+"Backward", out, []*Tensor{x, runningMean, runningVar, weight, bias}, func(g *Tensor) []*Tensor {
		if g.format != x.format {
			g = g.reformat(x.format)
		}
		if relu {
			masked := gradLike(g)
			kernels.Act{Fn: kernels.ActReLU}.Backward(masked.Float32s(), g.Float32s(), nil, yd)
			g = masked
		}
		var gx *Tensor
		var dx []float32
		if x.requiresGrad {
			gx = gradLike(x) // BatchNormBackward writes every element
			dx = gx.Float32s()
		}
		gw, gb, dw, db := bnParamGrads(weight, bias, C)
		kernels.BatchNormBackward(&s, xd, g.Float32s(), mean, invStd, normF32s(weight), training, dx, dw, db)
		if relu {
			releaseGrad(g) // the masked gradient: no one else has seen it
		}
		return []*Tensor{gx, nil, nil, gw, gb}
	})
}

// bnShape validates batch norm's operands (x of any float dtype) and
// returns the kernels' view of x.
func bnShape(op string, x, runningMean, runningVar, weight, bias *Tensor, training bool, momentum, eps float64) kernels.BatchNormShape {
	if x.NDim() < 2 {
		failShape(op, "expected input of at least 2 dimensions [N, C, ...], got shape %v", x.shape)
	}
	C := x.shape[1]
	normCheckChannelVec(op, "weight", weight, C, x)
	normCheckChannelVec(op, "bias", bias, C, x)
	normCheckChannelVec(op, "running mean", runningMean, C, x)
	normCheckChannelVec(op, "running variance", runningVar, C, x)
	for _, r := range []*Tensor{runningMean, runningVar} {
		if r != nil && r.requiresGrad {
			failGrad(op, "running statistics are updated in place and cannot require gradients")
		}
	}
	normEps(op, eps)
	if training && (runningMean != nil || runningVar != nil) && (math.IsNaN(momentum) || math.IsInf(momentum, 0)) {
		Fail(op, "momentum must be a finite number, got %v", momentum)
	}
	if !training && (runningMean == nil || runningVar == nil) {
		Fail(op, "running mean and variance are required when not training (input %v)", x.shape)
	}
	spatial := 1
	for _, d := range x.shape[2:] {
		spatial *= d
	}
	if x.format != Contiguous {
		// NHWC: every pixel is a row holding one value of each channel.
		return kernels.BatchNormShape{Outer: x.shape[0] * spatial, C: C, Inner: 1}
	}
	return kernels.BatchNormShape{Outer: x.shape[0], C: C, Inner: spatial}
}

// bnStatistics returns the per-channel mean and 1/sqrt(var+eps) that
// normalise x (float32 data of shape, in s's order): the batch's, updating
// the running statistics, when training, else the running ones.
func bnStatistics(op string, s kernels.BatchNormShape, xd []float32, shape []int, runningMean, runningVar *Tensor, training bool, momentum, eps float64) (mean, invStd []float64) {
	return bnStatisticsOf(op, s, shape, runningMean, runningVar, training, momentum, eps, func(mean, variance []float64) {
		kernels.BatchNormStats(&s, xd, mean, variance)
	})
}

// bnStatisticsOf is bnStatistics with the batch statistics taken by stats,
// so any dtype of x shares the running-statistics update.
func bnStatisticsOf(op string, s kernels.BatchNormShape, shape []int, runningMean, runningVar *Tensor, training bool, momentum, eps float64, stats func(mean, variance []float64)) (mean, invStd []float64) {
	C := s.C
	buf := make([]float64, 2*C)
	mean, invStd = buf[:C], buf[C:]
	if !training {
		rm, rv := runningMean.Float32s(), runningVar.Float32s()
		for c := range C {
			mean[c] = float64(rm[c])
			invStd[c] = 1 / math.Sqrt(float64(rv[c])+eps)
		}
		return mean, invStd
	}
	n := s.Count()
	if n <= 1 {
		failShape(op, "Expected more than 1 value per channel when training, got input of shape %v", shape)
	}
	variance := invStd // overwritten by invStd below
	stats(mean, variance)
	unbias := float64(n) / float64(n-1)
	if runningMean != nil {
		rm := runningMean.Float32s()
		for c := range C {
			rm[c] = float32((1-momentum)*float64(rm[c]) + momentum*mean[c])
		}
	}
	if runningVar != nil {
		rv := runningVar.Float32s()
		for c := range C {
			rv[c] = float32((1-momentum)*float64(rv[c]) + momentum*variance[c]*unbias)
		}
	}
	for c := range C {
		invStd[c] = 1 / math.Sqrt(variance[c]+eps)
	}
	return mean, invStd
}

// bnParamGrads returns zeroed gradients (and their data) for the weight
// and bias that need one, nil for the others.
func bnParamGrads(weight, bias *Tensor, c int) (gw, gb *Tensor, dw, db []float32) {
	if weight != nil && weight.requiresGrad {
		gw = Zeros(c)
		dw = gw.Float32s()
	}
	if bias != nil && bias.requiresGrad {
		gb = Zeros(c)
		db = gb.Float32s()
	}
	return gw, gb, dw, db
}

// batchNormBF16 is batchNorm on a bfloat16 x with float32 parameters and
// running statistics, as PyTorch's CPU batch norm takes it (autocast
// leaves batch norm to its input's dtype): normalised in float32 and the
// result rounded to bfloat16 once. The kernels widen x (and, backward, the
// gradient) a cache-sized block at a time, so no float32 copy of a whole
// activation is made, and only bfloat16 activations stay alive between
// the passes.
func batchNormBF16(op string, x, runningMean, runningVar, weight, bias *Tensor, training bool, momentum, eps float64, relu, inPlace bool) *Tensor {
	s := bnShape(op, x, runningMean, runningVar, weight, bias, training, momentum, eps)
	if inPlace {
		checkInPlace(op, x)
	}
	n := x.Numel()
	xd := x.BFloat16s()
	out := x
	if !inPlace {
		out = bf16EmptyLike(x)
	}
	mean, invStd := bnStatisticsOf(op, s, x.shape, runningMean, runningVar, training, momentum, eps, func(mean, variance []float64) {
		kernels.BatchNormStatsBF16(&s, xd, mean, variance)
	})
	bindBatchNorm(s, x, out, mean, invStd, weight, bias, relu)()
	if traced(x, runningMean, runningVar, weight, bias) && !training {
		traceBatchNorm(x, runningMean, runningVar, weight, bias, eps, relu, out)
	}
	if inPlace {
		return out
	}
	var yd []uint16 // the rectified output, whose sign masks the gradient
	if relu {
		yd = out.BFloat16s()
	}
	like, xNeeds := x.meta(), x.requiresGrad
	C := s.C
	return record(op+"Backward", out, []*Tensor{x, runningMean, runningVar, weight, bias}, func(g *Tensor) []*Tensor {
		gd := bf16GradData(g, like)
		if relu {
			masked := gradBufferBF16(n) // every element written
			defer releaseGradBufferBF16(masked)
			kernels.Act{Fn: kernels.ActReLU}.BackwardBF16(masked, gd, yd)
			gd = masked
		}
		var gx *Tensor
		var dx []uint16
		if xNeeds {
			gx = bf16GradLike(like) // BatchNormBackwardBF16 writes every element
			dx = gx.BFloat16s()
		}
		gw, gb, dw, db := bnParamGrads(weight, bias, C)
		kernels.BatchNormBackwardBF16(&s, xd, gd, mean, invStd, normF32s(weight), training, dx, dw, db)
		return []*Tensor{gx, nil, nil, gw, gb}
	})
}

// layerNormCheck checks LayerNorm's operands and eps.
func layerNormCheck(x *Tensor, normalizedShape []int, weight, bias *Tensor, eps float64) {
	const op = "LayerNorm"
	checkF32(op, "input", x)
	if len(normalizedShape) == 0 {
		failShape(op, "normalized shape must have at least one dimension (input %v)", x.shape)
	}
	k := len(normalizedShape)
	if x.NDim() < k || !sameShape(x.shape[x.NDim()-k:], normalizedShape) {
		failShape(op, "normalized shape %v does not match the trailing dimensions of input %v", normalizedShape, x.shape)
	}
	for _, p := range []struct {
		what string
		t    *Tensor
	}{{"weight", weight}, {"bias", bias}} {
		if p.t == nil {
			continue
		}
		checkF32(op, p.what, p.t)
		if !sameShape(p.t.shape, normalizedShape) {
			failShape(op, "%s has shape %v, want the normalized shape %v", p.what, p.t.shape, normalizedShape)
		}
	}
	normEps(op, eps)
}

// LayerNorm normalises x over its trailing dimensions normalizedShape,
// like torch.nn.functional.layer_norm: each group of trailing elements is
// shifted to zero mean and scaled to unit biased variance (statistics in
// float64), then multiplied by weight and shifted by bias, each of
// normalizedShape or nil. A channels-last x is read through a contiguous
// copy and, as in PyTorch, the result is contiguous. Gradients flow to x,
// weight and bias.
func LayerNorm(x *Tensor, normalizedShape []int, weight, bias *Tensor, eps float64) *Tensor {
	x = autocastF32(modeOf(x, weight, bias), x)
	const op = "LayerNorm"
	layerNormCheck(x, normalizedShape, weight, bias, eps)
	k := len(normalizedShape)
	n := 1
	for _, d := range normalizedShape {
		n *= d
	}
	rows := 1
	for _, d := range x.shape[:x.NDim()-k] {
		rows *= d
	}
	xc := rowMajor(x)
	stats := make([]float64, 2*rows)
	mean, rstd := stats[:rows], stats[rows:]
	out := resultIn(op, x.mode, Float32, cloneInts(x.shape), Contiguous, false) // every element written
	bindLayerNorm(xc, weight, bias, out, rows, n, eps, stats)()
	if traced(x, weight, bias) {
		trace(op, layerNormAttrs{cloneInts(normalizedShape), eps}, []*Tensor{x, weight, bias}, []*Tensor{out})
	}
	return record(op+"Backward", out, []*Tensor{x, weight, bias}, func(g *Tensor) []*Tensor {
		g = rowMajor(g)
		var gx, gw, gb *Tensor
		var dx, dw, db []float32
		if x.requiresGrad {
			gx = gradFor(x, Float32, Contiguous) // overwritten
			dx = gx.Float32s()
		}
		if weight != nil && weight.requiresGrad {
			gw = Zeros(normalizedShape...)
			dw = gw.Float32s()
		}
		if bias != nil && bias.requiresGrad {
			gb = Zeros(normalizedShape...)
			db = gb.Float32s()
		}
		kernels.LayerNormBackward(rows, n, xc.Float32s(), g.Float32s(), normF32s(weight), mean, rstd, dx, dw, db)
		if gx != nil && x.format != Contiguous {
			gx = gx.reformat(x.format)
		}
		return []*Tensor{gx, gw, gb}
	})
}

// bnForward is the batch norm forward kernel, with relu the one that
// rectifies too.
func bnForward(relu bool) func(s *kernels.BatchNormShape, x []float32, mean, invStd []float64, weight, bias, y []float32) {
	if relu {
		return kernels.BatchNormReLUForward
	}
	return kernels.BatchNormForward
}

// bindBatchNorm binds y = BatchNorm(x) on s, normalised with the
// per-channel mean and invStd (ReLU(BatchNorm(x)) with relu), y of x's
// dtype and format (x itself for in place), or returns nil for another
// dtype. A bfloat16 x is normalised in float32 and the result rounded
// once, a block at a time.
func bindBatchNorm(s kernels.BatchNormShape, x, y *Tensor, mean, invStd []float64, weight, bias *Tensor, relu bool) func() {
	forward, wd, bd := bnForward(relu), normF32s(weight), normF32s(bias)
	switch x.dtype {
	case Float32:
		xd, yd := x.Float32s(), y.Float32s()
		return func() { forward(&s, xd, mean, invStd, wd, bd, yd) }
	case BFloat16:
		xd, yd := x.BFloat16s(), y.BFloat16s()
		return func() { kernels.BatchNormForwardBF16(&s, xd, mean, invStd, wd, bd, yd, relu) }
	}
	return nil
}

// bindLayerNorm binds y = LayerNorm(x) over rows of size elements, x and
// y float32 and y contiguous (x itself for in place), keeping each row's
// mean and 1/std in stats (2·rows). x is read through a row-major copy
// when it is not contiguous or is y itself (the kernel writes y as it
// reads x).
func bindLayerNorm(x, weight, bias, y *Tensor, rows, size int, eps float64, stats []float64) func() {
	if x.dtype != Float32 || y.dtype != Float32 || y.format != Contiguous {
		return nil
	}
	mean, rstd := stats[:rows], stats[rows:]
	wd, bd, yd := normF32s(weight), normF32s(bias), y.Float32s()
	read := rowMajorReader(x, x == y)
	return func() { kernels.LayerNormForward(rows, size, read(), wd, bd, eps, yd, mean, rstd) }
}

// The attribute structs of evaluation-mode BatchNorm and of LayerNorm.
type (
	batchNormAttrs struct{ Eps float64 }
	layerNormAttrs struct {
		NormalizedShape []int
		Eps             float64
	}
)

// widen returns a bfloat16 x as float32, anything else as it is: the
// eager forms of LayerNorm and Softmax widen a bfloat16 operand as
// autocast does before them. Traces never give them one (autocast's cast,
// or the Cast nodes of a bfloat16 softmax outside autocast, come first),
// but a fused "…+LayerNorm" or "…+Softmax" that took autocast's cast in
// does.
func widen(x *Tensor) *Tensor {
	if x != nil && x.dtype == BFloat16 {
		return Cast(x, Float32)
	}
	return x
}

// widenType is widen on a type.
func widenType(x *Tensor) *Tensor {
	if x != nil && x.dtype == BFloat16 {
		return &Tensor{dtype: Float32, shape: x.shape, format: x.format}
	}
	return x
}

func init() {
	defineBind("LayerNorm", func(attrs any, ins, outs []*Tensor, _ []bool) func() {
		at := attrs.(layerNormAttrs)
		size := 1
		for _, d := range at.NormalizedShape {
			size *= d
		}
		if size == 0 {
			return nil
		}
		rows := ins[0].Numel() / size
		return bindLayerNorm(ins[0], ins[1], ins[2], outs[0], rows, size, at.Eps, make([]float64, 2*rows))
	})
	defineEager("LayerNorm", layerNormAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(layerNormAttrs)
		return one(LayerNorm(widen(in[0]), at.NormalizedShape, in[1], in[2], at.Eps))
	})
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		at := attrs.(layerNormAttrs)
		layerNormCheck(widenType(in[0]), at.NormalizedShape, in[1], in[2], at.Eps)
		return []TensorType{{DType: Float32, Shape: in[0].shape}}
	}, "LayerNorm")
	// Evaluation-mode BatchNorm's checks; its result is x's type. The
	// running statistics may be absent in a graph: inference names them.
	registerInfer(func(op string, attrs any, in []*Tensor) []TensorType {
		x := in[0]
		bnShape(op, x, in[1], in[2], in[3], in[4], false, 0, attrs.(batchNormAttrs).Eps)
		return []TensorType{{DType: x.dtype, Shape: x.shape, Format: x.format}}
	}, "BatchNorm")
	defineEager("BatchNorm", batchNormAttrs{}, func(a any, in []*Tensor) []*Tensor {
		return one(BatchNorm(in[0], in[1], in[2], in[3], in[4], false, 0.1, a.(batchNormAttrs).Eps))
	})
	// Evaluation-mode BatchNorm's binder needs constant running
	// statistics, which it turns into the normalising mean and
	// 1/sqrt(var+eps) once, here.
	defineBind("BatchNorm", func(attrs any, ins, outs []*Tensor, consts []bool) func() {
		const op = "BatchNorm"
		x, y := ins[0], outs[0]
		if !opbind.Const(consts, 1) || !opbind.Const(consts, 2) || x.format != y.format || x.dtype != y.dtype {
			return nil
		}
		eps := attrs.(batchNormAttrs).Eps
		s := bnShape(op, x, ins[1], ins[2], ins[3], ins[4], false, 0, eps)
		mean, invStd := bnStatistics(op, s, nil, x.shape, ins[1], ins[2], false, 0, eps)
		return bindBatchNorm(s, x, y, mean, invStd, ins[3], ins[4], false)
	})
}
