package autograd

import (
	"github.com/kilnml/kiln/kernels"
)

// PoolOptions are the hyperparameters of MaxPool2d and AvgPool2d. Kernel is
// required; a nil Stride means Stride = Kernel, nil Padding means 0 and nil
// Dilation means 1, as in PyTorch. A one-element slice applies to both
// height and width. Padding may be at most half the kernel. CeilMode rounds
// the output size up, PyTorch's way (the last window must start inside the
// input or its left padding). CountIncludePad makes AvgPool2d count padding
// positions in its divisor; PyTorch's default is true, so set it explicitly.
type PoolOptions struct {
	Kernel, Stride, Padding, Dilation []int
	CeilMode                          bool
	CountIncludePad                   bool
}

// poolInput validates a pooling input, [N, C, H, W] or unbatched [C, H, W],
// and returns its sizes with N = 1 for an unbatched one.
func poolInput(op string, x *Tensor) (n, c, h, w int, batched bool) {
	if x != nil && (x.dtype == Uint8 || x.dtype == Int8) && op != "AvgPool2d" {
		// Quantized activations: the int8 graph pools them in place of
		// Dequantize→pool→Quantize with the same parameters.
	} else if x == nil || x.dtype != BFloat16 {
		checkF32(op, "input", x)
	}
	switch x.NDim() {
	case 4:
		n, c, h, w, batched = x.shape[0], x.shape[1], x.shape[2], x.shape[3], true
	case 3:
		n, c, h, w = 1, x.shape[0], x.shape[1], x.shape[2]
	default:
		failShape(op, "expected 3-D (unbatched) or 4-D (batched) input, got shape %v", x.shape)
	}
	if c == 0 || h == 0 || w == 0 {
		failShape(op, "input %v has a zero-size channel or spatial dimension", x.shape)
	}
	return n, c, h, w, batched
}

// poolGeometry validates x and opt and returns the kernel shape.
func poolGeometry(op string, x *Tensor, opt PoolOptions, dilation bool) (kernels.Pool2dShape, bool) {
	n, c, h, w, batched := poolInput(op, x)
	if len(opt.Kernel) == 0 {
		Fail(op, "kernel size is required")
	}
	k := convSpatialArg(op, "kernel size", opt.Kernel, 2, 0)
	stride := k
	if len(opt.Stride) > 0 {
		stride = convSpatialArg(op, "stride", opt.Stride, 2, 0)
	}
	pad := convSpatialArg(op, "padding", opt.Padding, 2, 0)
	dil := convSpatialArg(op, "dilation", opt.Dilation, 2, 1)
	if !dilation && (dil[0] != 1 || dil[1] != 1) {
		Fail(op, "dilation %v is not supported (PyTorch's avg pooling has none)", dil)
	}
	for i := range 2 {
		switch {
		case k[i] <= 0:
			Fail(op, "kernel size must be positive, got %v", k)
		case stride[i] <= 0:
			Fail(op, "stride must be positive, got %v", stride)
		case dil[i] <= 0:
			Fail(op, "dilation must be positive, got %v", dil)
		case pad[i] < 0:
			Fail(op, "padding must be non-negative, got %v", pad)
		case pad[i] > k[i]/2:
			Fail(op, "padding %v should be at most half of kernel size %v", pad, k)
		}
		convWindow(op, x, k[i], stride[i], pad[i], dil[i])
	}
	s := kernels.Pool2dShape{
		N: n, C: c, H: h, W: w,
		KH: k[0], KW: k[1], SH: stride[0], SW: stride[1], PH: pad[0], PW: pad[1], DH: dil[0], DW: dil[1],
		ChannelsLast: x.format == ChannelsLast,
	}
	s.OutH = kernels.PoolOutSize(h, k[0], stride[0], pad[0], dil[0], opt.CeilMode)
	s.OutW = kernels.PoolOutSize(w, k[1], stride[1], pad[1], dil[1], opt.CeilMode)
	if s.OutH < 1 || s.OutW < 1 {
		failShape(op, "output size %d×%d is too small for input %v (kernel %v, stride %v, padding %v, dilation %v)",
			s.OutH, s.OutW, x.shape, k, stride, pad, dil)
	}
	return s, batched
}

// poolType is the type of the result of pooling x to s's output size: in
// x's format and dtype.
func poolType(s *kernels.Pool2dShape, x *Tensor, batched bool) TensorType {
	shape := []int{s.N, s.C, s.OutH, s.OutW}
	if !batched {
		shape = shape[1:]
	}
	return TensorType{DType: x.dtype, Shape: shape, Format: x.format}
}

// poolOutput allocates the result of pooling x to s's output size.
func poolOutput(op string, s *kernels.Pool2dShape, x *Tensor, batched bool) *Tensor {
	t := poolType(s, x, batched)
	return resultIn(op, x.mode, t.DType, t.Shape, t.Format, false) // the kernels write every window
}

// poolApply runs op's forward kernel on x into a new result and records
// its backward kernel.
func poolApply(op string, x *Tensor, opt PoolOptions, s *kernels.Pool2dShape, batched bool) *Tensor {
	out := poolOutput(op, s, x, batched)
	if x.dtype == Uint8 || x.dtype == Int8 {
		// Like PyTorch's quantized pools, not differentiable.
		bindPoolU8(op, s, x, out)()
		return out
	}
	forward, backward := poolKernels(op, s, opt)
	bindPool(x, out, forward)()
	xm, om := x.meta(), out.meta()
	return record(op+"Backward", out, []*Tensor{x}, func(g *Tensor) []*Tensor {
		return []*Tensor{poolGrad(xm, om, g, backward)}
	})
}

// poolShape validates x and opt and returns op's kernel shape (for
// AdaptiveAvgPool2d, opt.Kernel is the output size).
func poolShape(op string, x *Tensor, opt PoolOptions) (kernels.Pool2dShape, bool) {
	switch op {
	case "MaxPool2d":
		return poolGeometry(op, x, opt, true)
	case "AvgPool2d":
		return poolGeometry(op, x, opt, false)
	}
	if len(opt.Kernel) != 2 {
		Fail(op, "output size must have 2 elements, got %v", opt.Kernel)
	}
	return adaptivePoolGeometry(x, opt.Kernel[0], opt.Kernel[1])
}

// poolKernels returns op's forward and backward kernels on s with opt;
// MaxPool2d's forward keeps each window's argmax for its backward.
func poolKernels(op string, s *kernels.Pool2dShape, opt PoolOptions) (forward, backward func(a, b []float32)) {
	switch op {
	case "MaxPool2d":
		idx := make([]int32, s.N*s.C*s.OutH*s.OutW)
		return func(x, y []float32) { kernels.MaxPool2d(s, x, y, idx) },
			func(dy, dx []float32) { kernels.MaxPool2dBackward(s, dy, idx, dx) }
	case "AvgPool2d":
		return func(x, y []float32) { kernels.AvgPool2d(s, x, opt.CountIncludePad, y) },
			func(dy, dx []float32) { kernels.AvgPool2dBackward(s, dy, opt.CountIncludePad, dx) }
	}
	return func(x, y []float32) { kernels.AdaptiveAvgPool2d(s, x, y) },
		func(dy, dx []float32) { kernels.AdaptiveAvgPool2dBackward(s, dy, dx) }
}

// bindPool binds a pooling forward kernel from x into y, or returns nil
// for a dtype it does not take. A bfloat16 x is widened exactly into
// scratch, pooled in float32 and the result rounded once, as PyTorch's
// bf16 pooling does (maxima and window sums computed in float32).
func bindPool(x, y *Tensor, forward func(x, y []float32)) func() {
	switch x.dtype {
	case Float32:
		xd, yd := x.Float32s(), y.Float32s()
		return func() { forward(xd, yd) }
	case BFloat16:
		xd, yd := x.BFloat16s(), y.BFloat16s()
		// Scratch the closure overwrites each run: the step's, in an arena.
		m := x.mode.arenaMode()
		xf, yf := makeUninitIn(m, Float32, len(xd)).([]float32), makeUninitIn(m, Float32, len(yd)).([]float32)
		return func() {
			kernels.BF16ToF32(xf, xd)
			forward(xf, yf)
			kernels.F32ToBF16(yd, yf)
		}
	}
	return nil
}

func init() {
	for _, op := range []string{"MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d"} {
		defineBind(op, func(attrs any, ins, outs []*Tensor, _ []bool) func() {
			opt := poolOptions(attrs)
			x, y := ins[0], outs[0]
			if x.format != y.format || x.dtype != y.dtype || (op == "AdaptiveAvgPool2d" && len(opt.Kernel) != 2) {
				return nil
			}
			s, _ := poolShape(op, x, opt)
			if x.dtype == Uint8 || x.dtype == Int8 {
				return bindPoolU8(op, &s, x, y)
			}
			forward, _ := poolKernels(op, &s, opt)
			return bindPool(x, y, forward)
		})
	}
	registerInfer(func(op string, attrs any, in []*Tensor) []TensorType {
		s, batched := poolShape(op, in[0], poolOptions(attrs))
		return []TensorType{poolType(&s, in[0], batched)}
	}, "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d")
	defineEager("MaxPool2d", PoolOptions{}, func(a any, in []*Tensor) []*Tensor { return one(MaxPool2d(in[0], a.(PoolOptions))) })
	defineEager("AvgPool2d", PoolOptions{}, func(a any, in []*Tensor) []*Tensor { return one(AvgPool2d(in[0], a.(PoolOptions))) })
	defineEager("AdaptiveAvgPool2d", adaptivePoolAttrs{}, func(a any, in []*Tensor) []*Tensor {
		k := a.(adaptivePoolAttrs).OutputSize
		if len(k) != 2 {
			Fail("AdaptiveAvgPool2d", "output size %v must have 2 elements", k)
		}
		return one(AdaptiveAvgPool2d(in[0], k[0], k[1]))
	})
}

// bindPoolU8 binds op's uint8 kernel from x into y: the result keeps x's
// scale and zero point, so the maximum is exact and the mean rounds as
// PyTorch's quantized adaptive_avg_pool2d does. Int8 values run as uint8
// with 128 added (the sign bit flipped) and taken off the result, which
// keeps their order, so the maximum stays exact and the mean within one
// step.
func bindPoolU8(op string, s *kernels.Pool2dShape, x, y *Tensor) func() {
	pool := kernels.AdaptiveAvgPool2dU8
	if op == "MaxPool2d" {
		pool = kernels.MaxPool2dU8
	}
	if x.dtype == Uint8 {
		xd, yd := x.Uint8s(), y.Uint8s()
		return func() { pool(s, xd, yd) }
	}
	xd, yd := x.Int8s(), y.Int8s()
	xu, yu := make([]uint8, len(xd)), make([]uint8, len(yd))
	return func() {
		for i, v := range xd {
			xu[i] = uint8(v) ^ 0x80
		}
		pool(s, xu, yu)
		for i, v := range yu {
			yd[i] = int8(v ^ 0x80)
		}
	}
}

// poolGrad runs a pooling backward kernel, which adds into a zeroed dx,
// for the output gradient g and returns the input gradient in x's format
// and dtype.
func poolGrad(x, out, g *Tensor, run func(dy, dx []float32)) *Tensor {
	if g.dtype != Float32 {
		g = g.castTo(Float32)
	}
	if g.format != out.format {
		g = g.reformat(out.format)
	}
	n := numel("poolGrad", x.shape)
	if x.dtype != BFloat16 {
		gx := gradFor(x, Float32, x.format)
		clear(gx.Float32s())
		run(g.Float32s(), gx.Float32s())
		return gx
	}
	dx := gradData(x, n)
	clear(dx)
	run(g.Float32s(), dx)
	return bf16Grad(x.mode, x.shape, x.format, x.format, dx)
}

// MaxPool2d takes the maximum over sliding windows, like
// torch.nn.functional.max_pool2d: x is [N, C, H, W] or [C, H, W],
// contiguous or channels-last, and the result keeps x's format. A NaN in a
// window is its maximum. The gradient flows to the position of each
// window's maximum (the first one on ties). A bfloat16 x gives a bfloat16
// result, as in PyTorch; so do AvgPool2d and AdaptiveAvgPool2d, whose sums
// are taken in float32.
func MaxPool2d(x *Tensor, opt PoolOptions) (out *Tensor) {
	s, batched := poolShape("MaxPool2d", x, opt)
	defer tracePool("MaxPool2d", x, opt, &out)
	return poolApply("MaxPool2d", x, opt, &s, batched)
}

// AvgPool2d averages over sliding windows, like
// torch.nn.functional.avg_pool2d with the same divisor rules: with
// CountIncludePad the divisor counts the padding positions a window covers
// (but not the extra positions ceil mode adds past the padding), without it
// only the input positions. Dilation must be nil or 1. The result keeps x's
// format.
func AvgPool2d(x *Tensor, opt PoolOptions) (out *Tensor) {
	s, batched := poolShape("AvgPool2d", x, opt)
	defer tracePool("AvgPool2d", x, opt, &out)
	return poolApply("AvgPool2d", x, opt, &s, batched)
}

// AdaptiveAvgPool2d averages x into an outH×outW grid, like
// torch.nn.functional.adaptive_avg_pool2d: output cell i along a dimension
// of input length in covers [floor(i·in/out), ceil((i+1)·in/out)). The
// result keeps x's format.
func AdaptiveAvgPool2d(x *Tensor, outH, outW int) (out *Tensor) {
	opt := PoolOptions{Kernel: []int{outH, outW}}
	s, batched := poolShape("AdaptiveAvgPool2d", x, opt)
	defer tracePool("AdaptiveAvgPool2d", x, PoolOptions{Kernel: []int{outH, outW}}, &out)
	return poolApply("AdaptiveAvgPool2d", x, opt, &s, batched)
}

// adaptivePoolGeometry validates x and the output size of
// AdaptiveAvgPool2d and returns the kernel shape.
func adaptivePoolGeometry(x *Tensor, outH, outW int) (kernels.Pool2dShape, bool) {
	const op = "AdaptiveAvgPool2d"
	n, c, h, w, batched := poolInput(op, x)
	if outH <= 0 || outW <= 0 {
		failShape(op, "output size %d×%d must be positive", outH, outW)
	}
	// The output size is the caller's, unrelated to x's: count it before
	// the caller allocates it.
	numel(op, []int{n, c, outH, outW})
	return kernels.Pool2dShape{N: n, C: c, H: h, W: w, OutH: outH, OutW: outW, ChannelsLast: x.format == ChannelsLast}, batched
}

// tracePool reports a pooling op once it has returned *out, with its
// options as given (AdaptiveAvgPool2d's output size, which it keeps as
// Kernel, as "output_size").
func tracePool(op string, x *Tensor, opt PoolOptions, out **Tensor) {
	if !traced(x) || *out == nil {
		return
	}
	var attrs any = opt
	if op == "AdaptiveAvgPool2d" {
		attrs = adaptivePoolAttrs{opt.Kernel}
	}
	trace(op, attrs, []*Tensor{x}, []*Tensor{*out})
}

// adaptivePoolAttrs are AdaptiveAvgPool2d's attributes; the other pools'
// are PoolOptions.
type adaptivePoolAttrs struct{ OutputSize []int }

// poolOptions is a pool's attribute struct as PoolOptions, which keeps
// AdaptiveAvgPool2d's output size as Kernel.
func poolOptions(attrs any) PoolOptions {
	if a, ok := attrs.(adaptivePoolAttrs); ok {
		return PoolOptions{Kernel: a.OutputSize}
	}
	return attrs.(PoolOptions)
}
