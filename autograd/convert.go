package autograd

import "github.com/kilnml/kiln/kernels"

// castTo converts t's elements to dtype without recording on the tape.
// Float to integer conversion truncates toward zero; float32 to bfloat16
// rounds to nearest even.
func (t *Tensor) castTo(dtype DType) *Tensor {
	out := &Tensor{dtype: dtype, shape: cloneInts(t.shape), format: t.format, data: makeData(dtype, t.Numel())}
	switch {
	case t.dtype == dtype:
		copyData(out.data, t.data)
	case t.dtype == Float32 && dtype == BFloat16:
		kernels.F32ToBF16(out.data.([]uint16), t.data.([]float32))
	case t.dtype == BFloat16 && dtype == Float32:
		kernels.BF16ToF32(out.data.([]float32), t.data.([]uint16))
	default:
		for i, n := 0, t.Numel(); i < n; i++ {
			out.setFloat(i, t.floatAt(i))
		}
	}
	return out
}

func bf16Add(a, b uint16) uint16 {
	return kernels.BF16FromF32(kernels.F32FromBF16(a) + kernels.F32FromBF16(b))
}

// Cast returns t converted to dtype, like t.to(dtype). Between floating
// types it is differentiable: the gradient is cast back.
func Cast(t *Tensor, dtype DType) *Tensor {
	if t.dtype == dtype {
		return t
	}
	out := t.castTo(dtype)
	if !dtype.IsFloat() || !t.dtype.IsFloat() {
		return out
	}
	src := t.dtype
	return record("Cast", out, []*Tensor{t}, func(g *Tensor) []*Tensor {
		return []*Tensor{g.castTo(src)}
	})
}

// To returns t laid out in memory format f, like
// t.to(memory_format=...): the same tensor when it already is, else a
// reordered copy. ChannelsLast needs a 4-D tensor and ChannelsLast3d a 5-D
// one. The gradient flows back in t's format.
func (t *Tensor) To(f MemoryFormat) *Tensor {
	if r := f.rank(); r != 0 && len(t.shape) != r {
		Fail("To", "%v needs a %d-D tensor, got shape %v", f, r, t.shape)
	}
	if f == t.format {
		return t
	}
	src := t.format
	return record("To", t.reformat(f), []*Tensor{t}, func(g *Tensor) []*Tensor {
		return []*Tensor{g.reformat(src)}
	})
}

// Contiguous returns t in row-major logical order (t itself when it already
// is).
func (t *Tensor) Contiguous() *Tensor { return t.To(Contiguous) }

// Clone returns a differentiable copy of t with its own memory, in the same
// format.
func (t *Tensor) Clone() *Tensor {
	return record("Clone", t.reformat(t.format), []*Tensor{t}, func(g *Tensor) []*Tensor {
		return []*Tensor{g}
	})
}

// CopyFrom overwrites t's elements with src's (same shape; dtype and format
// are converted), outside of autograd. It is how optimizers and state-dict
// loading write into parameters.
func (t *Tensor) CopyFrom(src *Tensor) {
	if !sameShape(t.shape, src.shape) {
		Fail("CopyFrom", "source shape %v does not match destination %v", src.shape, t.shape)
	}
	s := src
	if s.dtype != t.dtype {
		s = s.castTo(t.dtype)
	}
	if s.format != t.format {
		s = s.reformat(t.format)
	}
	copyData(t.data, s.data)
}

// SetFormat reorders a leaf tensor's memory in place into format f, keeping
// the same *Tensor (and its gradient, which is reordered too). It is how a
// module converts its parameters to channels-last, like PyTorch's
// model.to(memory_format=...), without breaking optimizers that hold them.
func (t *Tensor) SetFormat(f MemoryFormat) {
	if t.node != nil {
		Fail("SetFormat", "tensor is the result of %s; only leaves can be reordered in place", t.node.op)
	}
	if r := f.rank(); r != 0 && len(t.shape) != r {
		Fail("SetFormat", "%v needs a %d-D tensor, got shape %v", f, r, t.shape)
	}
	if f == t.format {
		return
	}
	t.data = t.reformat(f).data
	t.format = f
	if t.grad != nil {
		t.grad.SetFormat(f)
	}
}
