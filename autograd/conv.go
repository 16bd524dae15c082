package autograd

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/internal/opbind"
	"github.com/kilnml/kiln/internal/shape"
	"github.com/kilnml/kiln/kernels"
)

// ConvOptions are the hyperparameters of Conv2d and Conv3d. Nil slices and
// a zero Groups take PyTorch's defaults: stride 1, padding 0, dilation 1,
// one group. A one-element slice applies to every spatial dimension;
// otherwise a slice has one entry per spatial dimension (height, width, or
// depth, height, width).
type ConvOptions struct {
	Stride, Padding, Dilation []int
	Groups                    int
}

// Conv2d applies a 2-D convolution, like torch.nn.functional.conv2d: x is
// [N, C, H, W] (or unbatched [C, H, W]), w is [O, C/groups, kh, kw] and b is
// [O] or nil. x and w may each be contiguous or channels-last. As in
// PyTorch the result is channels-last when x or w is, and is then computed
// natively in NHWC; the gradients come back in the formats of x and w.
//
// Bfloat16 operands (all; in an autocast computation float32 ones are cast) run on
// kernels.ConvForwardBF16 and its backwards, accumulating in float32, and
// give a bfloat16 result.
func Conv2d(x, w, b *Tensor, opt ConvOptions) *Tensor { return convNd("Conv2d", 2, x, w, b, opt, nil) }

// Conv3d applies a 3-D convolution, like torch.nn.functional.conv3d: x is
// [N, C, D, H, W] (or unbatched [C, D, H, W]), w is
// [O, C/groups, kd, kh, kw] and b is [O] or nil. Channels-last-3d x or w
// gives a channels-last-3d result, as Conv2d does in two dimensions.
func Conv3d(x, w, b *Tensor, opt ConvOptions) *Tensor { return convNd("Conv3d", 3, x, w, b, opt, nil) }

// PackedConvWeight is a convolution weight prepared once for the forward,
// for inference, where the same filters meet every input: a float32
// weight's panels packed (kernels.PackConvWeights); a bfloat16 weight
// widened and packed where the CPU runs BF16 convolutions on the float32
// kernels (kernels.PrepareConvWeightsBF16). It does not follow later
// changes to the weight's values: pack again after them.
type PackedConvWeight struct {
	w    *Tensor
	cw   *kernels.ConvWeights     // nil where no forward path reads packed weights
	cw16 *kernels.ConvWeightsBF16 // nil where the BF16 forward reads w as it is
}

// PackConvWeight packs w, a weight of Conv2d or Conv3d with groups (0
// meaning 1), for ConvPacked. Only channels-last weights of ungrouped
// convolutions have a packed form, float32 ones on CPUs with an assembly
// GEMM and bfloat16 ones on CPUs without AVX512_BF16; for any other w the
// result holds w alone and ConvPacked is the plain convolution.
func PackConvWeight(w *Tensor, groups int) *PackedConvWeight {
	if w == nil {
		Fail("PackConvWeight", "weight is nil")
	}
	p := &PackedConvWeight{w: w}
	nsp := w.NDim() - 2
	if groups > 1 || nsp < 2 || nsp > 3 || w.format == Contiguous {
		return p
	}
	s := kernels.ConvShape{C: w.shape[1], O: w.shape[0], Groups: 1, Kernel: [3]int{1, 1, 1}, ChannelsLast: true}
	for i := range nsp {
		s.Kernel[3-nsp+i] = w.shape[2+i]
	}
	p.pack(&s)
	return p
}

// pack prepares p.w for convolutions of s's geometry.
func (p *PackedConvWeight) pack(s *kernels.ConvShape) {
	switch p.w.dtype {
	case Float32:
		p.cw = kernels.PackConvWeights(s, p.w.Float32s())
	case BFloat16:
		p.cw16 = kernels.PrepareConvWeightsBF16(s, p.w.BFloat16s())
	}
}

// forShape returns p's packed forms where they fit a convolution of s on
// weight w, else nil ones.
func (p *PackedConvWeight) forShape(s *kernels.ConvShape, w *Tensor) (*kernels.ConvWeights, *kernels.ConvWeightsBF16) {
	if p == nil || p.w != w {
		return nil, nil
	}
	cw, cw16 := p.cw, p.cw16
	if cw != nil && !cw.Fits(s) {
		cw = nil
	}
	if cw16 != nil && !cw16.Fits(s) {
		cw16 = nil
	}
	return cw, cw16
}

// Weight returns the weight tensor that was packed.
func (p *PackedConvWeight) Weight() *Tensor { return p.w }

// ConvPacked is Conv2d (4-D or 3-D x) or Conv3d (5-D x) with the weight
// p.Weight(), reading its packed panels where the forward multiplies by
// them; the result, and the gradients, are the plain convolution's.
func ConvPacked(x *Tensor, p *PackedConvWeight, b *Tensor, opt ConvOptions) *Tensor {
	if p == nil {
		Fail("ConvPacked", "packed weight is nil")
	}
	if p.w.NDim() == 5 {
		return convNd("Conv3d", 3, x, p.w, b, opt, p)
	}
	return convNd("Conv2d", 2, x, p.w, b, opt, p)
}

// convSpatialArg expands an option to one value per spatial dimension: def
// when v is empty, v[0] everywhere when it has one element.
func convSpatialArg(op, name string, v []int, nsp, def int) []int {
	out := make([]int, nsp)
	switch len(v) {
	case 0:
		for i := range out {
			out[i] = def
		}
	case 1:
		for i := range out {
			out[i] = v[0]
		}
	case nsp:
		copy(out, v)
	default:
		Fail(op, "%s %v must have 1 or %d elements", name, v, nsp)
	}
	return out
}

// convWindow fails unless a window of k taps with the given stride,
// padding and dilation (all positive, padding non-negative) keeps the
// output-size arithmetic, in + 2·pad − dil·(k−1) − 1 rounded by stride,
// inside an int: stride, padding and the dilated span dil·(k−1)+1 may each
// be at most shape.MaxElements, more than any tensor holds. It returns the
// span. Unchecked, a huge dilation wraps the span around to a small one
// and the kernels read the wrong elements.
func convWindow(op string, x *Tensor, k, stride, pad, dil int) int {
	const limit = shape.MaxElements
	if stride > limit || pad > limit || (k > 1 && dil > (limit-1)/(k-1)) {
		failShape(op, "kernel size %d, stride %d, padding %d and dilation %d reach past 2^48 elements: the window does not fit input %v",
			k, stride, pad, dil, x.shape)
	}
	return dil*(k-1) + 1
}

// convGeometry validates a convolution's operands and options and returns
// the kernel shape (with ChannelsLast unset) and whether x is batched.
func convGeometry(op string, nsp int, x, w, b *Tensor, opt ConvOptions) (kernels.ConvShape, bool) {
	if x != nil && x.dtype == BFloat16 {
		for _, o := range []struct {
			what string
			t    *Tensor
		}{{"weight", w}, {"bias", b}} {
			if o.t != nil && o.t.dtype != BFloat16 {
				failDType(op, "%s has dtype %v but the input is bfloat16; cast it, or use amp.Autocast", o.what, o.t.dtype)
			}
		}
		if w == nil {
			Fail(op, "weight is nil")
		}
	} else {
		checkF32(op, "input", x)
		checkF32(op, "weight", w)
		if b != nil {
			checkF32(op, "bias", b)
		}
	}
	batched := x.NDim() == nsp+2
	if !batched && x.NDim() != nsp+1 {
		failShape(op, "expected %d-D (unbatched) or %d-D (batched) input, got shape %v", nsp+1, nsp+2, x.shape)
	}
	kdims := "kh, kw"
	if nsp == 3 {
		kdims = "kd, kh, kw"
	}
	if w.NDim() != nsp+2 {
		failShape(op, "weight must be %d-D [out, in/groups, %s], got shape %v", nsp+2, kdims, w.shape)
	}
	xs := x.shape
	if !batched {
		xs = append([]int{1}, xs...)
	}
	for _, d := range xs[1:] {
		if d == 0 {
			failShape(op, "input %v has a zero-size channel or spatial dimension", x.shape)
		}
	}
	for _, d := range w.shape {
		if d == 0 {
			failShape(op, "weight %v has a zero-size dimension", w.shape)
		}
	}
	groups := opt.Groups
	if groups == 0 {
		groups = 1
	}
	if groups < 0 {
		Fail(op, "groups must be positive, got %d", groups)
	}
	stride := convSpatialArg(op, "stride", opt.Stride, nsp, 1)
	pad := convSpatialArg(op, "padding", opt.Padding, nsp, 0)
	dil := convSpatialArg(op, "dilation", opt.Dilation, nsp, 1)
	for i := range nsp {
		if stride[i] <= 0 {
			Fail(op, "stride must be positive, got %v", stride)
		}
		if dil[i] <= 0 {
			Fail(op, "dilation must be positive, got %v", dil)
		}
		if pad[i] < 0 {
			Fail(op, "padding must be non-negative, got %v", pad)
		}
	}
	C, O := xs[1], w.shape[0]
	if O%groups != 0 {
		failShape(op, "weight %v has %d output channels, not divisible by groups(%d)", w.shape, O, groups)
	}
	if C != w.shape[1]*groups {
		failShape(op, "input has %d channels, weight %v expects %d×groups(%d)", C, w.shape, w.shape[1], groups)
	}
	if b != nil && (b.NDim() != 1 || b.shape[0] != O) {
		failShape(op, "bias has shape %v, want [%d] for weight %v", b.shape, O, w.shape)
	}
	s := kernels.ConvShape{N: xs[0], C: C, O: O, Groups: groups}
	// Spatial sizes fill the last nsp of the kernel's three slots.
	s.In, s.Kernel, s.Stride, s.Dil = [3]int{1, 1, 1}, [3]int{1, 1, 1}, [3]int{1, 1, 1}, [3]int{1, 1, 1}
	padded, eff := make([]int, nsp), make([]int, nsp)
	tooBig := false
	for i := range nsp {
		j := 3 - nsp + i
		s.In[j], s.Kernel[j] = xs[2+i], w.shape[2+i]
		s.Stride[j], s.Pad[j], s.Dil[j] = stride[i], pad[i], dil[i]
		padded[i], eff[i] = xs[2+i]+2*pad[i], convWindow(op, x, w.shape[2+i], stride[i], pad[i], dil[i])
		tooBig = tooBig || eff[i] > padded[i]
	}
	if tooBig {
		failShape(op, "kernel %s (%s with dilation %v) is larger than the padded input %s of input %v",
			convDims(w.shape[2:]), convDims(eff), dil, convDims(padded), x.shape)
	}
	for j := range 3 {
		s.Out[j] = kernels.ConvOutSize(s.In[j], s.Kernel[j], s.Stride[j], s.Pad[j], s.Dil[j])
	}
	// Padding can make the output far larger than the input; binders'
	// callers allocate it themselves, so it is counted here.
	numel(op, append([]int{s.N, s.O}, s.Out[3-nsp:]...))
	return s, batched
}

// traceConv reports a convolution with its options expanded to one value
// per spatial dimension.
func traceConv(op string, s kernels.ConvShape, x, w, b, out *Tensor) {
	nsp := w.NDim() - 2
	lo := 3 - nsp
	trace(op, ConvOptions{Stride: cloneInts(s.Stride[lo:]), Padding: cloneInts(s.Pad[lo:]),
		Dilation: cloneInts(s.Dil[lo:]), Groups: s.Groups}, []*Tensor{x, w, b}, []*Tensor{out})
}

// convDims writes sizes as 3×3.
func convDims(d []int) string {
	parts := make([]string, len(d))
	for i, v := range d {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, "×")
}

// convType checks a convolution's operands and options and returns the
// kernel shape and the result's type.
func convType(op string, nsp int, x, w, b *Tensor, opt ConvOptions) (kernels.ConvShape, TensorType) {
	s, batched := convGeometry(op, nsp, x, w, b, opt)
	clFormat := ChannelsLast
	if nsp == 3 {
		clFormat = ChannelsLast3d
	}
	// The layout the kernels run in, which is also the result's format. An
	// unbatched input has no channels-last form, though a 4-D unbatched
	// Conv3d input can be laid out channels-last as if it were NCHW; it is
	// read through a contiguous copy.
	layout := Contiguous
	if batched && (x.format == clFormat || w.format == clFormat) {
		layout = clFormat
	}
	s.ChannelsLast = layout != Contiguous
	outShape := []int{s.N, s.O}
	for j := 3 - nsp; j < 3; j++ {
		outShape = append(outShape, s.Out[j])
	}
	if !batched {
		outShape = outShape[1:]
	}
	return s, TensorType{DType: x.dtype, Shape: outShape, Format: layout}
}

func convNd(op string, nsp int, x, w, b *Tensor, opt ConvOptions, packed *PackedConvWeight) *Tensor {
	m := modeOf(x, w, b)
	x, w, b = autocastBF16(m, x), autocastBF16(m, w), autocastBF16(m, b)
	s, t := convType(op, nsp, x, w, b, opt)
	layout, outShape := t.Format, t.Shape
	xk, wk := x, w
	if x.format != layout {
		xk = x.reformat(layout)
	}
	if w.format != layout {
		wk = w.reformat(layout)
	}
	// Packed weights are w's: a reformatted copy is not what was packed.
	cw, cw16 := packed.forShape(&s, wk)
	if x.dtype == BFloat16 {
		return convBF16(op, m, s, x, w, b, xk, wk, cw16, layout, outShape)
	}
	out := resultIn(op, m, Float32, outShape, layout, false) // every element written
	bindConv(s, xk, wk, b, out, cw, nil, convEpilogue{})()
	if traced(x, w, b) {
		traceConv(op, s, x, w, b, out)
	}
	return record(op+"Backward", out, []*Tensor{x, w, b}, func(g *Tensor) []*Tensor {
		if g.format != layout {
			g = g.reformat(layout)
		}
		var gx, gw, gb *Tensor
		if x.requiresGrad {
			gx = gradFor(x, Float32, xk.format)
			kernels.ConvBackwardData(&s, g.Float32s(), wk.Float32s(), gx.Float32s())
			if gx.format != x.format {
				gx = gx.reformat(x.format)
			}
		}
		if w.requiresGrad {
			gw = &Tensor{dtype: Float32, shape: cloneInts(w.shape), format: layout, data: gradBuffer(w.Numel())}
			kernels.ConvBackwardWeight(&s, xk.Float32s(), g.Float32s(), gw.Float32s())
			if gw.format != w.format {
				gw = gw.reformat(w.format)
			}
		}
		if b != nil && b.requiresGrad {
			gb = Zeros(s.O)
			kernels.ConvBackwardBias(&s, g.Float32s(), gb.Float32s())
		}
		return []*Tensor{gx, gw, gb}
	})
}

// convBF16 is a convolution on bfloat16 operands: kernels.ConvForwardBF16
// and its backwards accumulate in float32 (the bias too); the result and
// the gradients are rounded to bfloat16 once.
func convBF16(op string, m Mode, s kernels.ConvShape, x, w, b, xk, wk *Tensor, cw16 *kernels.ConvWeightsBF16, layout MemoryFormat, outShape []int) *Tensor {
	out := resultIn(op, m, BFloat16, outShape, layout, false) // every element written
	bindConv(s, xk, wk, b, out, nil, cw16, convEpilogue{})()
	if traced(x, w, b) {
		traceConv(op, s, x, w, b, out)
	}
	xm, wm := x.meta(), w.meta()
	xNeeds, wNeeds, bNeeds := x.requiresGrad, w.requiresGrad, b != nil && b.requiresGrad
	return record(op+"Backward", out, []*Tensor{x, w, b}, func(g *Tensor) []*Tensor {
		if g.dtype != BFloat16 {
			g = g.castTo(BFloat16)
		}
		if g.format != layout {
			g = g.reformat(layout)
		}
		var gx, gw, gb *Tensor
		var dx, dw []uint16
		var db []float32
		// ConvBackwardBF16To writes every element of dx and dw.
		if xNeeds {
			gx = gradFor(xm, BFloat16, layout)
			dx = gx.BFloat16s()
		}
		if wNeeds {
			gw = &Tensor{dtype: BFloat16, shape: cloneInts(wm.shape), format: layout, data: alloc[uint16](numel(op, wm.shape), false)}
			dw = gw.BFloat16s()
		}
		if bNeeds {
			db = make([]float32, s.O)
		}
		kernels.ConvBackwardBF16To(&s, xk.BFloat16s(), wk.BFloat16s(), g.BFloat16s(), dx, dw, db)
		if gx != nil && xm.format != layout {
			gx = gx.reformat(xm.format)
		}
		if gw != nil && wm.format != layout {
			gw = gw.reformat(wm.format)
		}
		if bNeeds {
			gb = bf16Grad(b.mode, []int{s.O}, Contiguous, Contiguous, db)
		}
		return []*Tensor{gx, gw, gb}
	})
}

// convEpilogue is a fused convolution's epilogue, whatever its dtype: add
// res (a tensor laid out as the result, or nil), then apply act when
// activate is set.
type convEpilogue struct {
	res      *Tensor
	act      kernels.Act
	activate bool
}

// bindConv binds y = ep(conv(x, w) + b) on s, x, w and y laid out as s
// says and of one dtype, or returns nil. The epilogue runs on each output
// block while it is in cache, bit for bit the separate ops in turn (in
// bfloat16, each part rounded as the separate op rounds it). cw and cw16,
// when not nil, hold w packed for s (PackedConvWeight). A bfloat16 bias is
// widened on each call.
func bindConv(s kernels.ConvShape, x, w, b, y *Tensor, cw *kernels.ConvWeights, cw16 *kernels.ConvWeightsBF16, ep convEpilogue) func() {
	switch x.dtype {
	case Float32:
		var bias []float32
		if b != nil {
			bias = b.Float32s()
		}
		kep := kernels.ConvEpilogue{Act: ep.act, Activate: ep.activate}
		if ep.res != nil {
			kep.Residual = ep.res.Float32s()
		}
		xd, wd, yd := x.Float32s(), w.Float32s(), y.Float32s()
		return func() { kernels.ConvForwardEpilogue(&s, xd, wd, cw, bias, yd, kep) }
	case BFloat16:
		var bias []float32
		var bd []uint16
		if b != nil {
			bias, bd = make([]float32, s.O), b.BFloat16s()
		}
		kep := kernels.ConvEpilogueBF16{Act: ep.act, Activate: ep.activate}
		if ep.res != nil {
			kep.Residual = ep.res.BFloat16s()
		}
		xd, wd, yd := x.BFloat16s(), w.BFloat16s(), y.BFloat16s()
		return func() {
			if bd != nil {
				kernels.BF16ToF32(bias, bd)
			}
			kernels.ConvForwardEpilogueBF16To(&s, xd, wd, cw16, bias, yd, kep)
		}
	}
	return nil
}

// bindConvOp binds op (Conv2d or Conv3d) of x, w and b with opt into y,
// whose format is the layout the op runs in, with the epilogue ep, or
// returns nil. Where x has the other layout (weights in that layout
// decided it, PyTorch's rule) it is reordered into scratch first, as the
// op reorders it; a constant w (constW) is reordered and packed once,
// here.
func bindConvOp(op string, nsp int, opt ConvOptions, x, w, b, y *Tensor, constW bool, ep convEpilogue) func() {
	s, _ := convGeometry(op, nsp, x, w, b, opt)
	layout := y.format
	s.ChannelsLast = layout != Contiguous
	if x.dtype != y.dtype {
		return nil
	}
	if w.format != layout {
		if !constW {
			return nil
		}
		w = w.reformat(layout)
	}
	var cw *kernels.ConvWeights
	var cw16 *kernels.ConvWeightsBF16
	if constW {
		p := &PackedConvWeight{w: w}
		p.pack(&s)
		cw, cw16 = p.cw, p.cw16
	}
	if x.format == layout {
		return bindConv(s, x, w, b, y, cw, cw16, ep)
	}
	xr := &Tensor{dtype: x.dtype, shape: x.shape, format: layout, data: makeData(x.dtype, x.Numel())}
	conv := bindConv(s, xr, w, b, y, cw, cw16, ep)
	if conv == nil {
		return nil
	}
	return func() {
		x.reformatInto(xr)
		conv()
	}
}

// convEpilogueActs are the activations a float32 convolution applies in
// its own epilogue.
var convEpilogueActs = map[string]bool{"ReLU": true, "Sigmoid": true, "Tanh": true, "SiLU": true,
	"HardTanh": true, "ELU": true, "GELU": true}

func init() {
	// The convolutions' binders take ConvOptions, or opbind.Fused holding
	// them with an Add of a tensor like the result and/or one activation
	// of convEpilogueActs, which a float32 convolution applies in its
	// epilogue.
	for op, f := range map[string]func(x, w, b *Tensor, opt ConvOptions) *Tensor{"Conv2d": Conv2d, "Conv3d": Conv3d} {
		nsp := map[string]int{"Conv2d": 2, "Conv3d": 3}[op]
		defineEager(op, ConvOptions{}, func(a any, in []*Tensor) []*Tensor { return one(f(in[0], in[1], in[2], a.(ConvOptions))) })
		registerInfer(func(op string, attrs any, in []*Tensor) []TensorType {
			_, t := convType(op, nsp, in[0], in[1], in[2], attrs.(ConvOptions))
			return []TensorType{t}
		}, op)
		defineBind(op, func(attrs any, ins, outs []*Tensor, consts []bool) func() {
			x, w, b, y := ins[0], ins[1], ins[2], outs[0]
			var ep convEpilogue
			if f, fused := attrs.(opbind.Fused); fused {
				attrs = f.Attrs
				if f.Residual {
					if r := ins[3]; sameLayout(r, y) {
						ep.res = r
					} else {
						return nil
					}
				}
				if f.Act != "" {
					a, ok := actOf(f.Act, f.ActAttrs)
					if !ok || !convEpilogueActs[f.Act] {
						return nil
					}
					ep.act, ep.activate = a, true
				}
			}
			opt, ok := attrs.(ConvOptions)
			if !ok {
				return nil
			}
			return bindConvOp(op, nsp, opt, x, w, b, y, opbind.Const(consts, 1), ep)
		})
	}
}
