package autograd

import (
	"github.com/kilnml/kiln/kernels"
)

// Softmax rescales x along dim so the elements there are positive and sum
// to 1, exp(x)/Σexp(x), like torch.nn.functional.softmax(x, dim). dim may
// be negative (counting from the end); x may have any rank, including 0.
// The maximum is subtracted before exponentiating and the denominator is
// summed in float64, so large logits neither overflow nor lose precision.
//
// The result is contiguous whatever x's format: PyTorch 1.13 also returns
// a contiguous tensor for a channels-last input (along any dim), so a
// channels-last x is converted first and its gradient converted back.
func Softmax(x *Tensor, dim int) *Tensor { return softmaxOp("Softmax", x, dim, false) }

// LogSoftmax is log(Softmax(x, dim)) computed directly as x − log Σexp(x),
// like torch.nn.functional.log_softmax(x, dim), which stays finite and
// accurate where the softmax itself underflows. Formats follow Softmax.
func LogSoftmax(x *Tensor, dim int) *Tensor { return softmaxOp("LogSoftmax", x, dim, true) }

// softmaxDim checks that dim names a dimension of shape (a 0-d tensor
// accepts 0 and −1, as in PyTorch) and returns it non-negative.
func softmaxDim(op string, shape []int, dim int) int {
	nd := max(len(shape), 1)
	if dim < -nd || dim >= nd {
		failIndex(op, "dim %d out of range for input of shape %v (valid: %d to %d)", dim, shape, -nd, nd-1)
	}
	if dim < 0 {
		dim += nd
	}
	return dim
}

// softmaxSplit views a tensor of shape laid out in format f as
// Outer × N × Inner around logical dimension dim: the sizes of the
// dimensions stored outside dim, of dim, and of those stored inside it.
func softmaxSplit(shape []int, f MemoryFormat, dim int) (outer, n, inner int) {
	outer, n, inner = 1, 1, 1
	if len(shape) == 0 {
		return
	}
	n = shape[dim]
	seen := false
	for _, d := range physicalOrder(f, len(shape)) {
		switch {
		case d == dim:
			seen = true
		case seen:
			inner *= shape[d]
		default:
			outer *= shape[d]
		}
	}
	return
}

func softmaxOp(op string, x *Tensor, dim int, log bool) *Tensor {
	x = autocastF32(modeOf(x), x)
	if x != nil && x.dtype == BFloat16 {
		// Outside autocast bfloat16 stays bfloat16, computed in float32.
		return viaFloat32(x, func(x *Tensor) *Tensor { return softmaxOp(op, x, dim, log) })
	}
	checkF32(op, "input", x)
	d := softmaxDim(op, x.shape, dim)
	s := softmaxShape(x.shape, d)
	out := resultIn(op, x.mode, Float32, cloneInts(x.shape), Contiguous, false) // every element written
	bindSoftmax(op, x, out, d)()
	y := out.Float32s()
	if traced(x) {
		trace(op, dimAttrs{d}, []*Tensor{x}, []*Tensor{out})
	}
	return record(op+"Backward", out, []*Tensor{x}, func(g *Tensor) []*Tensor {
		g = rowMajor(g)
		gx := gradFor(x, Float32, Contiguous) // overwritten
		if log {
			kernels.LogSoftmaxBackward(&s, y, g.Float32s(), gx.Float32s())
		} else {
			kernels.SoftmaxBackward(&s, y, g.Float32s(), gx.Float32s())
		}
		if x.format != Contiguous {
			gx = gx.reformat(x.format)
		}
		return []*Tensor{gx}
	})
}

// softmaxShape is the kernel shape of Softmax along dimension dim (not
// negative) of a contiguous tensor of shape.
func softmaxShape(shape []int, dim int) kernels.SoftmaxShape {
	o, n, in := softmaxSplit(shape, Contiguous, dim)
	return kernels.SoftmaxShape{Outer: o, N: n, Inner: in}
}

// bindSoftmax binds y = op(x) along dim, op "Softmax" or "LogSoftmax", y
// contiguous of x's dtype and shape (x itself for in place), or returns
// nil. A float32 x in another layout, or y itself, is read through
// row-major scratch; a bfloat16 x, contiguous, goes through float32 and is
// rounded once, as the op takes it.
func bindSoftmax(op string, x, y *Tensor, dim int) func() {
	if y.format != Contiguous || x.dtype != y.dtype || !sameShape(x.shape, y.shape) {
		return nil
	}
	s := softmaxShape(x.shape, softmaxDim(op, x.shape, dim))
	f := kernels.Softmax
	if op == "LogSoftmax" {
		f = kernels.LogSoftmax
	}
	switch x.dtype {
	case Float32:
		read, yd := rowMajorReader(x, x == y), y.Float32s()
		return func() { f(&s, read(), yd) }
	case BFloat16:
		if x.format != Contiguous {
			return nil
		}
		xd, yd := x.BFloat16s(), y.BFloat16s()
		xf, yf := make([]float32, len(xd)), make([]float32, len(yd))
		return func() {
			kernels.BF16ToF32(xf, xd)
			f(&s, xf, yf)
			kernels.F32ToBF16(yd, yf)
		}
	}
	return nil
}

func init() {
	for _, op := range []string{"Softmax", "LogSoftmax"} {
		defineBind(op, func(attrs any, ins, outs []*Tensor, _ []bool) func() {
			return bindSoftmax(op, ins[0], outs[0], attrs.(dimAttrs).Dim)
		})
	}
	// A contiguous result of x's dtype and shape, Softmax's widened as its
	// eager form widens x (see widen).
	registerInfer(func(op string, attrs any, in []*Tensor) []TensorType {
		x := in[0]
		if op == "Softmax" {
			x = widenType(x)
		}
		softmaxDim(op, x.shape, attrs.(dimAttrs).Dim)
		return []TensorType{{DType: x.dtype, Shape: x.shape}}
	}, "Softmax", "LogSoftmax")
	defineEager("Softmax", dimAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(Softmax(widen(in[0]), a.(dimAttrs).Dim)) })
	defineEager("LogSoftmax", dimAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(LogSoftmax(in[0], a.(dimAttrs).Dim)) })
}
