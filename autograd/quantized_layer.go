package autograd

import (
	"slices"

	"github.com/kilnml/kiln/kernels"
)

// QuantizedLayerAttrs are the attributes of QuantizedConv2d,
// QuantizedConv3d and QuantizedLinear: the int8 layers an int8 graph runs
// in place of Dequantize → layer → [Add] → [activation] → [Quantize].
//
// Per output channel c the layer computes, exactly in int32,
// acc = Σ x_q·w_q − z_x·Σ w_q (a convolution's padding reads z_x, so it
// adds nothing), then y = float32(acc)·float32(s_x·s_w[c]) + b[c], rounded
// after the multiply and after the add; with a residual it adds r (float32)
// or float32(r_q − z_r)·s_r (8-bit); then the activation; and the result is
// y, or y quantized with the output's scale and zero point. Int8
// activations run as uint8 with 128 added to values and zero point.
type QuantizedLayerAttrs struct {
	// Stride, Padding, Dilation and Groups are a convolution's, as in
	// ConvOptions; a linear layer has none.
	Stride, Padding, Dilation []int
	Groups                    int
	// Scale and ZeroPoint are the input's quantization.
	Scale     float64
	ZeroPoint int
	// Residual is "" for none, "float32" for a float32 residual operand,
	// "quantized" for an 8-bit one with ResidualScale and
	// ResidualZeroPoint.
	Residual          string
	ResidualScale     float64
	ResidualZeroPoint int
	// Act is "", "ReLU", "GELU" (with Approximate, as GELU's) or
	// "Sigmoid", applied by Kiln's float32 activation kernels.
	Act         string
	Approximate string
	// OutDType is "float32", or "uint8" or "int8" for a result quantized
	// with OutScale and OutZeroPoint.
	OutDType     string
	OutScale     float64
	OutZeroPoint int
}

// QuantizedConv2d is the int8 2-D convolution of the 8-bit x (N, C, H, W;
// uint8 or int8) by the int8 weight w ([O, C/groups, kh, kw], zero point
// 0) with per-output-channel weight scales wScales (float32 [O]), float32
// bias b ([O] or nil) and residual (nil unless a.Residual is set), as
// QuantizedLayerAttrs describes. The result is channels-last when x or w
// is, as Conv2d's; it is not differentiable.
func QuantizedConv2d(x, w, wScales, b, residual *Tensor, a QuantizedLayerAttrs) *Tensor {
	return quantizedLayer("QuantizedConv2d", x, w, wScales, b, residual, a)
}

// QuantizedConv3d is QuantizedConv2d in three spatial dimensions.
func QuantizedConv3d(x, w, wScales, b, residual *Tensor, a QuantizedLayerAttrs) *Tensor {
	return quantizedLayer("QuantizedConv3d", x, w, wScales, b, residual, a)
}

// QuantizedLinear is the int8 linear layer y = x·wᵀ of the 8-bit x
// ([…, in]) by the int8 weight w ([out, in]), with QuantizedConv2d's
// scales, bias, residual and attributes (the convolution ones unset).
func QuantizedLinear(x, w, wScales, b, residual *Tensor, a QuantizedLayerAttrs) *Tensor {
	return quantizedLayer("QuantizedLinear", x, w, wScales, b, residual, a)
}

func quantizedLayer(op string, x, w, wScales, b, residual *Tensor, a QuantizedLayerAttrs) *Tensor {
	ins := []*Tensor{x, w, wScales, b, residual}
	t := quantizedLayerType(op, a, ins)
	y := &Tensor{dtype: t.DType, shape: t.Shape, format: t.Format, data: makeData(t.DType, numel(op, t.Shape))}
	f := bindQuantizedLayer(op, a, quantizedLayerOperands(op, a, ins, t.Format), []*Tensor{y}, nil)
	f()
	return y
}

// quantizedLayerOperands returns ins with x and the residual in the
// layout the kernels read, layout (copies where they are not).
func quantizedLayerOperands(op string, a QuantizedLayerAttrs, ins []*Tensor, layout MemoryFormat) []*Tensor {
	ins = slices.Clone(ins)
	for _, j := range []int{0, 4} {
		if ins[j] != nil && ins[j].format != layout {
			ins[j] = ins[j].To(layout)
		}
	}
	return ins
}

// quantizedNsp is the number of spatial dimensions of op, 0 for linear.
func quantizedNsp(op string) int {
	switch op {
	case "QuantizedConv2d":
		return 2
	case "QuantizedConv3d":
		return 3
	}
	return 0
}

// quantizedLayerType checks the operands and attributes and returns the
// result's type.
func quantizedLayerType(op string, a QuantizedLayerAttrs, ins []*Tensor) TensorType {
	_, t := quantizedLayerShape(op, a, ins)
	return t
}

// quantizedLayerShape checks the operands and attributes and returns the
// convolution's kernel shape (zero for linear) and the result's type.
func quantizedLayerShape(op string, a QuantizedLayerAttrs, ins []*Tensor) (kernels.ConvShape, TensorType) {
	x, w, ws, b, r := ins[0], ins[1], ins[2], ins[3], ins[4]
	if x == nil || w == nil || ws == nil {
		Fail(op, "input, weight and weight scales are required")
	}
	if x.dtype != Uint8 && x.dtype != Int8 {
		failDType(op, "input has dtype %v, want uint8 or int8", x.dtype)
	}
	if w.dtype != Int8 {
		failDType(op, "weight has dtype %v, want int8", w.dtype)
	}
	checkScale(op, float32(a.Scale))
	checkZeroPoint(op, a.ZeroPoint, x.dtype)
	out := Float32
	if a.OutDType != "float32" {
		out = parseQuantDType(op, a.OutDType)
		checkScale(op, float32(a.OutScale))
		checkZeroPoint(op, a.OutZeroPoint, out)
	}
	if _, ok := quantizedAct(a); !ok {
		Fail(op, "unknown activation %q (want ReLU, GELU or Sigmoid)", a.Act)
	}
	if ws.dtype != Float32 || ws.NDim() != 1 || ws.shape[0] != w.shape[0] {
		failShape(op, "weight scales are %v %v, want float32 [%d]", ws.dtype, ws.shape, w.shape[0])
	}
	var s kernels.ConvShape
	var t TensorType
	if nsp := quantizedNsp(op); nsp > 0 {
		// The geometry is Conv2d's; its dtype checks are for float
		// operands, so it sees stand-ins of x's and w's shapes.
		xf := &Tensor{dtype: Float32, shape: x.shape, format: x.format}
		wf := &Tensor{dtype: Float32, shape: w.shape, format: w.format}
		s, t = convType(op, nsp, xf, wf, b, ConvOptions{Stride: a.Stride, Padding: a.Padding, Dilation: a.Dilation, Groups: a.Groups})
		if x.NDim() != nsp+2 {
			failShape(op, "input %v must be batched", x.shape)
		}
	} else {
		if x.NDim() < 1 || w.NDim() != 2 || x.shape[x.NDim()-1] != w.shape[1] {
			failShape(op, "input %v and weight %v do not multiply (want [..., in] and [out, in])", x.shape, w.shape)
		}
		if b != nil && (b.dtype != Float32 || b.NDim() != 1 || b.shape[0] != w.shape[0]) {
			failShape(op, "bias is %v %v, want float32 [%d]", b.dtype, b.shape, w.shape[0])
		}
		if w.shape[1] > kernels.Int8MaxK {
			failShape(op, "input features %d exceed %d, past which int32 sums could overflow", w.shape[1], kernels.Int8MaxK)
		}
		t = TensorType{Shape: append(slices.Clone(x.shape[:x.NDim()-1]), w.shape[0]), Format: Contiguous}
	}
	t.DType = out
	switch a.Residual {
	case "":
		if r != nil {
			Fail(op, "a residual operand was given but the attributes name none")
		}
	case "float32", "quantized":
		if r == nil {
			Fail(op, "the %s residual operand is missing", a.Residual)
		}
		if !slices.Equal(r.shape, t.Shape) {
			failShape(op, "residual has shape %v, the result %v", r.shape, t.Shape)
		}
		if a.Residual == "float32" && r.dtype != Float32 {
			failDType(op, "residual has dtype %v, want float32", r.dtype)
		}
		if a.Residual == "quantized" {
			if r.dtype != Uint8 && r.dtype != Int8 {
				failDType(op, "quantized residual has dtype %v, want uint8 or int8", r.dtype)
			}
			checkScale(op, float32(a.ResidualScale))
			checkZeroPoint(op, a.ResidualZeroPoint, r.dtype)
		}
	default:
		Fail(op, "unknown residual kind %q (want float32 or quantized)", a.Residual)
	}
	return s, t
}

// quantizedAct is the activation a names.
func quantizedAct(a QuantizedLayerAttrs) (kernels.Act, bool) {
	switch a.Act {
	case "":
		return kernels.Act{}, true
	case "ReLU", "Sigmoid":
		return actOf(a.Act, nil)
	case "GELU":
		return actOf("GELU", geluAttrs{a.Approximate})
	}
	return kernels.Act{}, false
}

// bindQuantizedLayer binds the int8 kernels over ins and outs: the weight
// is packed now, once; int8 activations and residuals are shifted into
// uint8 scratch each run. It returns nil where x or the residual is not in
// the result's layout.
func bindQuantizedLayer(op string, a QuantizedLayerAttrs, ins, outs []*Tensor, _ []bool) func() {
	s, t := quantizedLayerShape(op, a, ins)
	x, w, ws, b, r, y := ins[0], ins[1], ins[2], ins[3], ins[4], outs[0]
	if x.format != t.Format || (r != nil && r.format != t.Format) || y.format != t.Format || y.dtype != t.DType {
		return nil
	}
	act, _ := quantizedAct(a)
	ep := kernels.Int8Epilogue{Scale: float32(a.Scale), WScales: ws.Float32s(), Act: act, Activate: a.Act != "",
		OutScale: float32(a.OutScale), OutZero: int32(a.OutZeroPoint)}
	if b != nil {
		ep.Bias = b.Float32s()
	}
	zx := int32(a.ZeroPoint)
	xu, shiftX := eightBitAsUint8(x)
	if shiftX != nil {
		zx += 128
	}
	var shiftR func()
	switch a.Residual {
	case "float32":
		ep.Residual = r.Float32s()
	case "quantized":
		ep.ResidualU8, shiftR = eightBitAsUint8(r)
		ep.ResidualScale, ep.ResidualZero = float32(a.ResidualScale), int32(a.ResidualZeroPoint)
		if shiftR != nil {
			ep.ResidualZero += 128
		}
	}
	var run func()
	if quantizedNsp(op) > 0 {
		// The kernels read the weight in the layout of the convolution's
		// shape: channels-last filters for a channels-last one.
		wl := w
		if s.ChannelsLast {
			if wl.format != t.Format {
				wl = w.To(t.Format)
			}
		} else if wl.format != Contiguous {
			wl = w.To(Contiguous)
		}
		cw := kernels.PackConvInt8(&s, wl.Int8s())
		switch y.dtype {
		case Float32:
			yd := y.Float32s()
			run = func() { kernels.ConvU8S8(&s, xu, zx, cw, yd, ep) }
		case Uint8:
			yd := y.Uint8s()
			run = func() { kernels.ConvU8S8ToU8(&s, xu, zx, cw, yd, ep) }
		default:
			yd := y.Int8s()
			run = func() { kernels.ConvU8S8ToS8(&s, xu, zx, cw, yd, ep) }
		}
	} else {
		n, k := w.shape[0], w.shape[1]
		m := numel(op, x.shape) / max(k, 1)
		pw := kernels.PackInt8(n, k, w.Contiguous().Int8s(), k)
		switch y.dtype {
		case Float32:
			yd := y.Float32s()
			run = func() { kernels.GemmU8S8(m, xu, k, zx, pw, yd, n, ep) }
		case Uint8:
			yd := y.Uint8s()
			run = func() { kernels.GemmU8S8ToU8(m, xu, k, zx, pw, yd, n, ep) }
		default:
			yd := y.Int8s()
			run = func() { kernels.GemmU8S8ToS8(m, xu, k, zx, pw, yd, n, ep) }
		}
	}
	return func() {
		if shiftX != nil {
			shiftX()
		}
		if shiftR != nil {
			shiftR()
		}
		run()
	}
}

// eightBitAsUint8 returns t's data as uint8: a uint8 t's own, or for an
// int8 t scratch and the function that fills it with t's values plus 128
// (the sign bit flipped), which keeps their order and differences.
func eightBitAsUint8(t *Tensor) ([]uint8, func()) {
	if t.dtype == Uint8 {
		return t.Uint8s(), nil
	}
	src := t.Int8s()
	dst := make([]uint8, len(src))
	return dst, func() {
		for i, v := range src {
			dst[i] = uint8(v) ^ 0x80
		}
	}
}

func init() {
	for _, op := range []string{"QuantizedConv2d", "QuantizedConv3d", "QuantizedLinear"} {
		defineBind(op, func(attrs any, ins, outs []*Tensor, consts []bool) func() {
			return bindQuantizedLayer(op, attrs.(QuantizedLayerAttrs), ins, outs, consts)
		})
		registerInfer(func(op string, attrs any, ins []*Tensor) []TensorType {
			return []TensorType{quantizedLayerType(op, attrs.(QuantizedLayerAttrs), ins)}
		}, op)
		defineEager(op, QuantizedLayerAttrs{}, func(attrs any, in []*Tensor) []*Tensor {
			return one(quantizedLayer(op, in[0], in[1], in[2], in[3], in[4], attrs.(QuantizedLayerAttrs)))
		})
	}
}
