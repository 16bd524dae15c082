package autograd

import (
	"math"

	"github.com/kilnml/kiln/kernels"
)

// Affine INT8 quantization, PyTorch's quantize_per_tensor and
// quantize_per_channel: a float32 x is stored as the 8-bit
// q = clamp(round-half-even(x·float32(1/s)) + z) and read back as
// float32(q − z)·s (the kernels' rule, kernels/quant.go). Kiln has no
// quantized tensor type: a quantized tensor is a plain Uint8 or Int8 one,
// and its scale and zero point travel as the ops' arguments, so a graph
// holds them as attributes (per tensor) or as a constant operand (per
// channel) rather than inside a value.
//
// Where PyTorch's result is undefined behaviour in C++ (a NaN or ±Inf
// converted to an integer) Kiln follows its kernels instead: a NaN
// quantizes to the zero point and ±Inf to the ends of the range, where
// PyTorch 1.13's x86 build gives the bottom of the range for all three.

// QuantizeAttrs are the attributes of Quantize and FakeQuantize: the scale,
// used as float32(Scale), the zero point and the 8-bit dtype ("uint8" or
// "int8").
type QuantizeAttrs struct {
	Scale     float64
	ZeroPoint int
	DType     string `kiln:"dtype"`
}

// DequantizeAttrs are the attributes of Dequantize; the operand's dtype
// says which 8-bit type it is.
type DequantizeAttrs struct {
	Scale     float64
	ZeroPoint int
}

// QuantizePerChannelAttrs are the attributes of QuantizePerChannel and
// FakeQuantizePerChannel; the scales are their second operand.
type QuantizePerChannelAttrs struct {
	Axis  int
	DType string `kiln:"dtype"`
}

// DequantizePerChannelAttrs are the attributes of DequantizePerChannel.
type DequantizePerChannelAttrs struct{ Axis int }

// quantKind is what a quantOp computes.
type quantKind int

const (
	quantizeKind   quantKind = iota // float to 8-bit
	dequantizeKind                  // 8-bit to float32
	fakeKind                        // float to float32 through the 8-bit grid
)

// quantOp is one validated quantization over a tensor's elements in
// memory order: runs of inner consecutive elements share a scale, run r
// taking scales[r % len(scales)]. That covers both forms in every memory
// format: per tensor there is one run of every element, and per channel
// along an axis the elements between two steps of that axis in memory
// (its stride) share its index.
type quantOp struct {
	op    string
	kind  quantKind
	dtype DType // Uint8 or Int8
	zero  int32
	// scales are checked when the op is made, per tensor; per channel
	// they are a tensor's data, which a bound graph refills between runs,
	// so each run checks them.
	scales      []float32
	checkScales bool
	inner       int
}

// quantRange is dtype's range, failing unless it is an 8-bit type.
func quantRange(op string, dtype DType) (lo, hi int) {
	switch dtype {
	case Uint8:
		return 0, 255
	case Int8:
		return -128, 127
	}
	failDType(op, "dtype %v is not a quantized type; want uint8 or int8", dtype)
	return 0, 0
}

// parseQuantDType is the 8-bit dtype an attribute names.
func parseQuantDType(op, s string) DType {
	d, err := ParseDType(s)
	if err != nil {
		failDType(op, "%v", err)
	}
	quantRange(op, d)
	return d
}

// checkScale fails unless s is a scale the kernels take: a subnormal's
// reciprocal overflows, and 0·Inf would then turn a zero into NaN.
func checkScale(op string, s float32) {
	if !(s > 0) || math.IsInf(float64(s), 0) || math.IsInf(float64(1/s), 0) {
		Fail(op, "scale %v is not a positive finite number with a finite reciprocal", s)
	}
}

// checkZeroPoint fails unless z lies in dtype's range.
func checkZeroPoint(op string, z int, dtype DType) {
	if lo, hi := quantRange(op, dtype); z < lo || z > hi {
		Fail(op, "zero point %d is outside [%d, %d], the range of %v", z, lo, hi, dtype)
	}
}

// checkQuantOperand fails unless x is a tensor the op's kind takes: a
// float32 or bfloat16 one to quantize, one of the 8-bit dtype to
// dequantize (per tensor, any 8-bit dtype: it says which).
func checkQuantOperand(op string, kind quantKind, x *Tensor) {
	if x == nil {
		Fail(op, "input is nil")
	}
	if kind == dequantizeKind {
		if x.dtype != Uint8 && x.dtype != Int8 {
			failDType(op, "input has dtype %v (shape %v); %s takes uint8 or int8", x.dtype, x.shape, op)
		}
		return
	}
	if !x.dtype.IsFloat() {
		failDType(op, "input has dtype %v (shape %v); %s takes float32 or bfloat16", x.dtype, x.shape, op)
	}
}

// perTensorOp validates x, scale and zero for a per-tensor op of kind on
// the 8-bit dtype.
func perTensorOp(op string, kind quantKind, x *Tensor, scale float32, zero int, dtype DType) *quantOp {
	checkQuantOperand(op, kind, x)
	checkScale(op, scale)
	checkZeroPoint(op, zero, dtype)
	return &quantOp{op: op, kind: kind, dtype: dtype, zero: int32(zero), scales: []float32{scale},
		inner: max(numel(op, x.shape), 1)}
}

// perChannelAxis validates x, scales and axis for a per-channel op of kind
// and returns axis non-negative.
func perChannelAxis(op string, kind quantKind, x, scales *Tensor, axis int) int {
	checkQuantOperand(op, kind, x)
	nd := x.NDim()
	if axis < -nd || axis >= nd {
		failIndex(op, "axis %d out of range for a %d-D input of shape %v", axis, nd, x.shape)
	}
	if axis < 0 {
		axis += nd
	}
	if scales == nil {
		Fail(op, "scales is nil")
	}
	if scales.dtype != Float32 || scales.NDim() != 1 {
		failDType(op, "scales must be a 1-D float32 tensor, got %v of shape %v", scales.dtype, scales.shape)
	}
	if scales.shape[0] != x.shape[axis] {
		failShape(op, "scales has %d elements, dimension %d of input shape %v has %d", scales.shape[0], axis, x.shape, x.shape[axis])
	}
	return axis
}

// perChannelOp validates a per-channel op of kind on the 8-bit dtype with
// zero point 0.
func perChannelOp(op string, kind quantKind, x, scales *Tensor, axis int, dtype DType) *quantOp {
	axis = perChannelAxis(op, kind, x, scales, axis)
	quantRange(op, dtype)
	o := &quantOp{op: op, kind: kind, dtype: dtype, scales: scales.Float32s(), checkScales: true, inner: x.Strides()[axis]}
	o.runs(0, nil) // the scales, checked before anything is written
	return o
}

// runs calls f for each run of the first n elements with its scale.
func (o *quantOp) runs(n int, f func(lo, hi int, s float32)) {
	if o.checkScales {
		for _, s := range o.scales {
			checkScale(o.op, s)
		}
	}
	for lo, r := 0, 0; lo < n; lo, r = lo+o.inner, r+1 {
		f(lo, lo+o.inner, o.scales[r%len(o.scales)])
	}
}

// convert quantizes f into q, of o's dtype, or with back dequantizes q
// into f. Each run is one kernel call; a per-channel axis with a short
// stride (the last one) makes many short calls, which is slower but
// computes the same values.
func (o *quantOp) convert(f []float32, q any, back bool) {
	o.runs(len(f), func(lo, hi int, s float32) {
		f := f[lo:hi]
		switch d := q.(type) {
		case []uint8:
			if back {
				kernels.DequantizeU8(f, d[lo:hi], s, o.zero)
			} else {
				kernels.QuantizeU8(d[lo:hi], f, s, o.zero)
			}
		case []int8:
			if back {
				kernels.DequantizeS8(f, d[lo:hi], s, o.zero)
			} else {
				kernels.QuantizeS8(d[lo:hi], f, s, o.zero)
			}
		}
	})
}

// passGrad sets gx to g times a mask, 1 where x's unclamped quantized
// value round-half-even(x·float32(1/s)) + z lies in the dtype's range and
// 0 elsewhere (a product, as PyTorch's, so a negative g gives −0 and an
// infinite one NaN): the straight-through estimator of PyTorch's
// fake_quantize_per_tensor_affine and fake_quantize_per_channel_affine,
// whose mask is taken before clamping, so a value that rounds onto an end
// of the range passes its gradient and one beyond it (or a NaN) does not.
// The rounding is the kernels' reference rule, which their assembly
// matches bit for bit.
func (o *quantOp) passGrad(gx, g, x []float32) {
	lo, hi := quantRange(o.op, o.dtype)
	o.runs(len(x), func(a, b int, s float32) {
		inv := 1 / s
		for i := a; i < b; i++ {
			r := math.RoundToEven(float64(float32(x[i]*inv))) + float64(o.zero)
			var mask float32
			if r >= float64(lo) && r <= float64(hi) {
				mask = 1
			}
			gx[i] = g[i] * mask
		}
	})
}

// floats returns x's elements in memory order as float32: its own slice,
// or a bfloat16 x widened exactly into wide, of x's length.
func floats(x *Tensor, wide []float32) []float32 {
	if x.dtype == Float32 {
		return x.Float32s()
	}
	kernels.BF16ToF32(wide, x.BFloat16s())
	return wide
}

// bind binds o from x into y, of the type o's inference gives, or returns
// nil for any other pair. Fake quantization runs through an 8-bit scratch
// of x's length, a quarter of the result's bytes.
func (o *quantOp) bind(x, y *Tensor) func() {
	want := Float32
	if o.kind == quantizeKind {
		want = o.dtype
	}
	if y.dtype != want || x.format != y.format || !sameShape(x.shape, y.shape) {
		return nil
	}
	if o.kind == dequantizeKind {
		if x.dtype != o.dtype {
			return nil
		}
		q, f := x.data, y.Float32s()
		return func() { o.convert(f, q, true) }
	}
	if !x.dtype.IsFloat() {
		return nil
	}
	n := x.Numel()
	var wide []float32
	if x.dtype == BFloat16 {
		wide = make([]float32, n)
	}
	if o.kind == quantizeKind {
		return func() { o.convert(floats(x, wide), y.data, false) }
	}
	q, f := makeData(o.dtype, n), y.Float32s()
	return func() {
		o.convert(floats(x, wide), q, false)
		o.convert(f, q, true)
	}
}

// apply computes o on x (with scales, per channel, as its second operand),
// reports attrs to a trace and, for fake quantization, records the
// straight-through gradient. Quantizing and dequantizing record nothing:
// like PyTorch's, they are not differentiable.
func (o *quantOp) apply(x, scales *Tensor, attrs any) *Tensor {
	t := o.infer(x)
	out := &Tensor{dtype: t.DType, shape: t.Shape, format: t.Format, data: makeData(t.DType, x.Numel())}
	o.bind(x, out)()
	inputs := []*Tensor{x}
	if scales != nil {
		inputs = append(inputs, scales)
	}
	if traced(inputs...) {
		trace(o.op, attrs, inputs, []*Tensor{out})
	}
	if o.kind != fakeKind {
		out.mode = modeOf(inputs...)
		return out
	}
	// The backward keeps x's data, not x, as the activations do.
	like, xd := x.meta(), x.data
	return record(o.op+"Backward", out, inputs, func(g *Tensor) []*Tensor {
		xv := &Tensor{dtype: like.dtype, shape: like.shape, format: like.format, data: xd}
		gx := gradLike(like)
		var wide []float32
		if like.dtype == BFloat16 {
			wide = make([]float32, len(gx.Float32s()))
		}
		o.passGrad(gx.Float32s(), actGradData(g, like), floats(xv, wide))
		if like.dtype == BFloat16 {
			gx = bf16Grad(like.mode, like.shape, like.format, like.format, gx.Float32s())
		}
		return []*Tensor{gx, nil}[:len(inputs)]
	})
}

// infer is the type of o's result on x.
func (o *quantOp) infer(x *Tensor) TensorType {
	d := Float32
	if o.kind == quantizeKind {
		d = o.dtype
	}
	return TensorType{DType: d, Shape: cloneInts(x.shape), Format: x.format}
}

// Quantize quantizes a float32 (or bfloat16, widened exactly) x to dtype,
// Uint8 or Int8, with one scale and zero point, like
// torch.quantize_per_tensor(x, scale, zeroPoint, dtype).int_repr():
// q = clamp(round-half-even(x·float32(1/scale)) + zeroPoint). The result
// has x's shape and memory format. scale must be positive and finite, with
// a finite reciprocal, and zeroPoint must lie in dtype's range. It is not
// differentiable; FakeQuantize is its trainable form.
func Quantize(x *Tensor, scale float32, zeroPoint int, dtype DType) *Tensor {
	const op = "Quantize"
	o := perTensorOp(op, quantizeKind, x, scale, zeroPoint, dtype)
	return o.apply(x, nil, QuantizeAttrs{float64(scale), zeroPoint, dtype.String()})
}

// Dequantize returns the float32 values float32(q − zeroPoint)·scale of a
// Uint8 or Int8 q, like torch.Tensor.dequantize of the quantized tensor q
// stands for, in q's shape and memory format. It is not differentiable.
func Dequantize(q *Tensor, scale float32, zeroPoint int) *Tensor {
	const op = "Dequantize"
	checkQuantOperand(op, dequantizeKind, q)
	o := perTensorOp(op, dequantizeKind, q, scale, zeroPoint, q.dtype)
	return o.apply(q, nil, DequantizeAttrs{float64(scale), zeroPoint})
}

// QuantizePerChannel quantizes x to dtype with one scale per index along
// axis (negative counting from the end) and zero point 0, like
// torch.quantize_per_channel(x, scales, zeros, axis, dtype).int_repr()
// with zero points 0: the symmetric per-output-channel form of weights.
// scales is a 1-D float32 tensor of x.Shape()[axis] positive finite
// values. The result has x's shape and memory format.
func QuantizePerChannel(x, scales *Tensor, axis int, dtype DType) *Tensor {
	const op = "QuantizePerChannel"
	o := perChannelOp(op, quantizeKind, x, scales, axis, dtype)
	return o.apply(x, scales, QuantizePerChannelAttrs{axis, dtype.String()})
}

// DequantizePerChannel returns the float32 values float32(q)·scales[c] of
// a Uint8 or Int8 q quantized per channel along axis with zero point 0.
func DequantizePerChannel(q, scales *Tensor, axis int) *Tensor {
	const op = "DequantizePerChannel"
	checkQuantOperand(op, dequantizeKind, q)
	o := perChannelOp(op, dequantizeKind, q, scales, axis, q.dtype)
	return o.apply(q, scales, DequantizePerChannelAttrs{axis})
}

// FakeQuantize returns Dequantize(Quantize(x, scale, zeroPoint, dtype),
// scale, zeroPoint) as one differentiable op, like
// torch.fake_quantize_per_tensor_affine with dtype's range as
// [quant_min, quant_max]: the float32 result is x snapped to the
// quantization grid. Its gradient is the straight-through estimator: the
// output gradient passes where round-half-even(x·float32(1/scale)) +
// zeroPoint lies in the range before clamping, and is 0 elsewhere. A
// bfloat16 x gets a bfloat16 gradient.
func FakeQuantize(x *Tensor, scale float32, zeroPoint int, dtype DType) *Tensor {
	const op = "FakeQuantize"
	o := perTensorOp(op, fakeKind, x, scale, zeroPoint, dtype)
	return o.apply(x, nil, QuantizeAttrs{float64(scale), zeroPoint, dtype.String()})
}

// FakeQuantizePerChannel is FakeQuantize with QuantizePerChannel's scales
// along axis and zero point 0, like torch.fake_quantize_per_channel_affine.
// scales receives no gradient.
func FakeQuantizePerChannel(x, scales *Tensor, axis int, dtype DType) *Tensor {
	const op = "FakeQuantizePerChannel"
	o := perChannelOp(op, fakeKind, x, scales, axis, dtype)
	return o.apply(x, scales, QuantizePerChannelAttrs{axis, dtype.String()})
}

// quantKinds are the quantization ops' kinds, by name.
var quantKinds = map[string]quantKind{"Quantize": quantizeKind, "Dequantize": dequantizeKind, "FakeQuantize": fakeKind,
	"QuantizePerChannel": quantizeKind, "DequantizePerChannel": dequantizeKind, "FakeQuantizePerChannel": fakeKind}

// quantOpOf validates the operands and attributes of a node of op and
// returns its quantOp; a per-channel one has no scales yet, since the
// operands may be types without data.
func quantOpOf(op string, attrs any, ins []*Tensor) *quantOp {
	kind := quantKinds[op]
	x := ins[0]
	switch a := attrs.(type) {
	case QuantizeAttrs:
		return perTensorOp(op, kind, x, float32(a.Scale), a.ZeroPoint, parseQuantDType(op, a.DType))
	case DequantizeAttrs:
		checkQuantOperand(op, kind, x)
		return perTensorOp(op, kind, x, float32(a.Scale), a.ZeroPoint, x.dtype)
	case QuantizePerChannelAttrs:
		d := parseQuantDType(op, a.DType)
		axis := perChannelAxis(op, kind, x, ins[1], a.Axis)
		return &quantOp{op: op, kind: kind, dtype: d, inner: x.Strides()[axis]}
	}
	a := attrs.(DequantizePerChannelAttrs)
	checkQuantOperand(op, kind, x)
	axis := perChannelAxis(op, kind, x, ins[1], a.Axis)
	return &quantOp{op: op, kind: kind, dtype: x.dtype, inner: x.Strides()[axis]}
}

func init() {
	perTensor := []string{"Quantize", "Dequantize", "FakeQuantize"}
	perChannel := []string{"QuantizePerChannel", "DequantizePerChannel", "FakeQuantizePerChannel"}
	registerInfer(func(op string, attrs any, in []*Tensor) []TensorType {
		return []TensorType{quantOpOf(op, attrs, in).infer(in[0])}
	}, append(perTensor, perChannel...)...)
	for _, op := range perTensor {
		defineBind(op, func(attrs any, ins, outs []*Tensor, _ []bool) func() {
			return quantOpOf(op, attrs, ins).bind(ins[0], outs[0])
		})
	}
	for _, op := range perChannel {
		// The scales are the second operand's data, read and checked at
		// each run.
		defineBind(op, func(attrs any, ins, outs []*Tensor, _ []bool) func() {
			o := quantOpOf(op, attrs, ins)
			o.scales, o.checkScales = ins[1].Float32s(), true
			return o.bind(ins[0], outs[0])
		})
	}
	defineEager("Quantize", QuantizeAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(QuantizeAttrs)
		return one(Quantize(in[0], float32(at.Scale), at.ZeroPoint, parseQuantDType("Quantize", at.DType)))
	})
	defineEager("FakeQuantize", QuantizeAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(QuantizeAttrs)
		return one(FakeQuantize(in[0], float32(at.Scale), at.ZeroPoint, parseQuantDType("FakeQuantize", at.DType)))
	})
	defineEager("Dequantize", DequantizeAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(DequantizeAttrs)
		return one(Dequantize(in[0], float32(at.Scale), at.ZeroPoint))
	})
	defineEager("QuantizePerChannel", QuantizePerChannelAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(QuantizePerChannelAttrs)
		return one(QuantizePerChannel(in[0], in[1], at.Axis, parseQuantDType("QuantizePerChannel", at.DType)))
	})
	defineEager("FakeQuantizePerChannel", QuantizePerChannelAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(QuantizePerChannelAttrs)
		return one(FakeQuantizePerChannel(in[0], in[1], at.Axis, parseQuantDType("FakeQuantizePerChannel", at.DType)))
	})
	defineEager("DequantizePerChannel", DequantizePerChannelAttrs{}, func(a any, in []*Tensor) []*Tensor {
		return one(DequantizePerChannel(in[0], in[1], a.(DequantizePerChannelAttrs).Axis))
	})
}
