package autograd

import (
	"github.com/kilnml/kiln/kernels"
)

// castTo converts t's elements to dtype without recording on the tape.
// Float to integer conversion truncates toward zero; float32 to bfloat16
// rounds to nearest even.
func (t *Tensor) castTo(dtype DType) *Tensor { return t.castToIn(t.mode, dtype) }

// castToIn is castTo for a result in mode m, which says where its memory
// comes from (see Arena).
func (t *Tensor) castToIn(m Mode, dtype DType) *Tensor {
	m = m.arenaMode()
	out := &Tensor{dtype: dtype, shape: cloneInts(t.shape), format: t.format, data: makeUninitIn(m, dtype, t.Numel()), mode: m}
	t.castInto(out)
	return out
}

// castInto writes t's elements, converted to out's dtype, into out, a
// tensor of t's shape and format.
func (t *Tensor) castInto(out *Tensor) {
	dtype := out.dtype
	switch {
	case t.dtype == dtype:
		copyData(out.data, t.data)
	case t.dtype == Float32 && dtype == BFloat16:
		kernels.F32ToBF16(out.data.([]uint16), t.data.([]float32))
	case t.dtype == BFloat16 && dtype == Float32:
		kernels.BF16ToF32(out.data.([]float32), t.data.([]uint16))
	case !t.dtype.IsFloat():
		// Through float64 an int64 beyond 2⁵³ would lose its low bits
		// before narrowing, and reach float32 rounded twice.
		for i, n := 0, t.Numel(); i < n; i++ {
			out.setInt(i, t.intAt(i))
		}
	default:
		for i, n := 0, t.Numel(); i < n; i++ {
			out.setFloat(i, t.floatAt(i))
		}
	}
}

// bindCopy binds a copy of x's elements into y, of x's dtype: laid out in
// y's format where y has x's shape, else in row-major order into a
// contiguous y with as many elements (a reshape). It returns nil for any
// other y.
func bindCopy(x, y *Tensor) func() {
	if x.dtype != y.dtype || x.Numel() != y.Numel() {
		return nil
	}
	dst := y
	if !sameShape(x.shape, y.shape) {
		if y.format != Contiguous {
			return nil
		}
		dst = &Tensor{dtype: y.dtype, shape: x.shape, format: Contiguous, data: y.data, mode: y.mode.arenaMode()}
	}
	return func() { x.reformatInto(dst) }
}

func init() {
	// The binders of the ops that copy or convert elements take no
	// attributes: Cast converts to its result's dtype, the others copy
	// into its layout.
	defineBind("Cast", func(_ any, ins, outs []*Tensor, _ []bool) func() {
		x, y := ins[0], outs[0]
		if x.format != y.format || !sameShape(x.shape, y.shape) {
			return nil
		}
		return func() { x.castInto(y) }
	})
	// Identity and Dropout are identities in a graph (evaluation mode),
	// copies there so no two values share storage, as Clone is.
	for _, op := range []string{"Reshape", "Flatten", "Clone", "To", "Identity", "Dropout"} {
		defineBind(op, func(_ any, ins, outs []*Tensor, _ []bool) func() { return bindCopy(ins[0], outs[0]) })
	}
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		x, d := in[0], attrs.(castAttrs).dtype()
		checkCast(x, d)
		return []TensorType{{DType: d, Shape: x.shape, Format: x.format}}
	}, "Cast")
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		x, f := in[0], attrs.(toAttrs).format()
		checkTo(x, f)
		return []TensorType{{DType: x.dtype, Shape: x.shape, Format: f}}
	}, "To")
	// The elementwise ops give their operand's type, once their
	// attributes pass the checks their eager forms make.
	registerInfer(func(op string, attrs any, in []*Tensor) []TensorType {
		checkActAttrs(op, attrs)
		return []TensorType{in[0].Type()}
	}, "Clone", "Identity", "Dropout", "ReLU", "Sigmoid", "Tanh", "SiLU", "Neg", "Exp", "Log", "Sqrt",
		"HardTanh", "Clamp", "ELU", "GELU", "Pow", "AddScalar", "MulScalar")
	defineEager("Cast", castAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(Cast(in[0], a.(castAttrs).dtype())) })
	defineEager("To", toAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(in[0].To(a.(toAttrs).format())) })
	clone := func(_ any, in []*Tensor) []*Tensor { return one(in[0].Detach().Clone()) }
	defineEager("Clone", nil, clone)
	defineEager("Identity", nil, clone)
	// A graph runs Dropout in evaluation mode, reading no attribute; the
	// p a trace records is for the reader.
	defineEager("Dropout", nil, clone)
}

// The attribute structs of Cast and To name the dtype and memory format
// converted to as their String methods do.
type (
	castAttrs struct {
		DType string `kiln:"dtype"`
	}
	toAttrs struct{ Format string }
)

func (a castAttrs) dtype() DType {
	d, err := ParseDType(a.DType)
	if err != nil {
		failDType("Cast", "%v", err)
	}
	return d
}

func (a toAttrs) format() MemoryFormat {
	f, err := ParseFormat(a.Format)
	if err != nil {
		Fail("To", "%v", err)
	}
	return f
}

// checkCast fails unless t can be cast to dtype.
func checkCast(t *Tensor, dtype DType) {
	if t == nil {
		Fail("Cast", "input is nil")
	}
	if dtype < Float32 || dtype > Int64 {
		failDType("Cast", "unknown dtype %v", dtype)
	}
}

// checkTo fails unless t can be laid out in format f.
func checkTo(t *Tensor, f MemoryFormat) {
	checkFormat("To", f)
	if r := f.rank(); r != 0 && len(t.shape) != r {
		failShape("To", "%v needs a %d-D tensor, got shape %v", f, r, t.shape)
	}
}

// intAt reads physical element i of an integer tensor.
func (t *Tensor) intAt(i int) int64 {
	switch d := t.data.(type) {
	case []int8:
		return int64(d[i])
	case []uint8:
		return int64(d[i])
	case []int32:
		return int64(d[i])
	case []int64:
		return d[i]
	}
	panic("unreachable")
}

// setInt writes v to physical element i: narrower integers keep its low
// bits, as PyTorch's C++ casts do, and floats round it once.
func (t *Tensor) setInt(i int, v int64) {
	switch d := t.data.(type) {
	case []float32:
		d[i] = float32(v)
	case []uint16:
		d[i] = kernels.BF16FromF32(float32(v))
	case []int8:
		d[i] = int8(v)
	case []uint8:
		d[i] = uint8(v)
	case []int32:
		d[i] = int32(v)
	case []int64:
		d[i] = v
	}
}

// Cast returns t converted to dtype, like t.to(dtype). Between floating
// types it is differentiable: the gradient is cast back.
func Cast(t *Tensor, dtype DType) *Tensor {
	var m Mode
	if t != nil {
		m = t.mode
	}
	return castIn(m, t, dtype)
}

// castIn is Cast running in mode m besides t's own: autocast's casts run
// in the mode of the op they serve, so a trace records them.
func castIn(m Mode, t *Tensor, dtype DType) *Tensor {
	checkCast(t, dtype)
	if t.dtype == dtype {
		return t
	}
	m = m.union(t.mode)
	out := t.castToIn(m, dtype)
	if m.trace != nil {
		traceIn(m, "Cast", castAttrs{dtype.String()}, []*Tensor{t}, []*Tensor{out})
	}
	if !dtype.IsFloat() || !t.dtype.IsFloat() {
		out.mode = m
		return out
	}
	src := t.dtype
	return recordIn(m, "Cast", out, []*Tensor{t}, func(g *Tensor) []*Tensor {
		return []*Tensor{castGrad(g, src)}
	})
}

// castGrad returns gradient g cast to dtype in memory for a gradient
// (gradFor's): from g's arena, where Backward may hand it back as soon as
// it is used, else from the gradient cache.
func castGrad(g *Tensor, dtype DType) *Tensor {
	if dtype != Float32 && dtype != BFloat16 {
		return g.castTo(dtype)
	}
	out := gradFor(g, dtype, g.format)
	g.castInto(out)
	return out
}

// To returns t laid out in memory format f, like
// t.to(memory_format=...): the same tensor when it already is, else a
// reordered copy. ChannelsLast needs a 4-D tensor and ChannelsLast3d a 5-D
// one. The gradient flows back in t's format.
func (t *Tensor) To(f MemoryFormat) *Tensor {
	checkTo(t, f)
	if f == t.format {
		return t
	}
	src := t.format
	out := t.reformat(f)
	if traced(t) {
		trace("To", toAttrs{f.String()}, []*Tensor{t}, []*Tensor{out})
	}
	return record("To", out, []*Tensor{t}, func(g *Tensor) []*Tensor {
		return []*Tensor{g.reformat(src)}
	})
}

// Contiguous returns t in row-major logical order (t itself when it already
// is).
func (t *Tensor) Contiguous() *Tensor { return t.To(Contiguous) }

// Clone returns a differentiable copy of t with its own memory, in the same
// format.
func (t *Tensor) Clone() *Tensor {
	out := t.reformat(t.format)
	if traced(t) {
		trace("Clone", nil, []*Tensor{t}, []*Tensor{out})
	}
	return record("Clone", out, []*Tensor{t}, func(g *Tensor) []*Tensor {
		return []*Tensor{g}
	})
}

// CopyFrom overwrites t's elements with src's (same shape; dtype and format
// are converted), outside of autograd. It is how optimizers and state-dict
// loading write into parameters.
func (t *Tensor) CopyFrom(src *Tensor) {
	if src == nil {
		Fail("CopyFrom", "source is nil")
	}
	if !sameShape(t.shape, src.shape) {
		failShape("CopyFrom", "source shape %v does not match destination %v", src.shape, t.shape)
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
		failGrad("SetFormat", "tensor is the result of %s; only leaves can be reordered in place", t.node.op)
	}
	checkFormat("SetFormat", f)
	if r := f.rank(); r != 0 && len(t.shape) != r {
		failShape("SetFormat", "%v needs a %d-D tensor, got shape %v", f, r, t.shape)
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
