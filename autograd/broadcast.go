package autograd

import (
	"fmt"

	"github.com/kilnml/kiln/kernels"
)

// BroadcastShapes returns the shape two operands of shapes a and b
// broadcast to under NumPy's rules (PyTorch's torch.broadcast_shapes), or
// an error naming the first dimension where they disagree.
func BroadcastShapes(a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("shapes %v and %v cannot be broadcast together (dimension %d: %d vs %d)", a, b, i, da, db)
		}
	}
	return out, nil
}

// broadcastShapes is BroadcastShapes for ops, panicking with op's name
// when the shapes do not broadcast.
func broadcastShapes(op string, a, b []int) []int {
	out, err := BroadcastShapes(a, b)
	if err != nil {
		failShape(op, "%v", err)
	}
	return out
}

// broadcastStrides gives the strides with which an operand of shape (laid
// out in format f) is read when broadcast to out: 0 along broadcast
// dimensions.
func broadcastStrides(shape []int, f MemoryFormat, out []int) []int {
	st := stridesOf(shape, f)
	bs := make([]int, len(out))
	off := len(out) - len(shape)
	for i := range shape {
		if shape[i] != 1 || out[off+i] == 1 {
			bs[off+i] = st[i]
		}
	}
	return bs
}

// resultFormat picks the memory format of an elementwise result as
// PyTorch's TensorIterator does: the first operand that already has the
// output's shape decides, so contiguous+channels-last is contiguous and
// channels-last+contiguous is channels-last. Broadcast operands have
// ambiguous strides and defer to the next operand.
func resultFormat(out []int, ins ...*Tensor) MemoryFormat {
	for _, t := range ins {
		if sameShape(t.shape, out) {
			return t.format
		}
	}
	return Contiguous
}

// walk visits every element of shape in the memory order of the first
// stride set, calling inner for each run along the innermost physical
// dimension with the starting offsets into each operand. n is the run length
// and steps are the operands' strides along it.
func walk(shape []int, order []int, strides [][]int, inner func(offs []int, n int, steps []int)) {
	nd := len(shape)
	ops := len(strides)
	offs := make([]int, ops)
	if nd == 0 {
		inner(offs, 1, make([]int, ops))
		return
	}
	for _, d := range shape {
		if d == 0 {
			return
		}
	}
	last := order[nd-1]
	steps := make([]int, ops)
	for k := range strides {
		steps[k] = strides[k][last]
	}
	idx := make([]int, nd)
	for {
		inner(offs, shape[last], steps)
		p := nd - 2
		for ; p >= 0; p-- {
			d := order[p]
			idx[d]++
			for k := range strides {
				offs[k] += strides[k][d]
			}
			if idx[d] < shape[d] {
				break
			}
			for k := range strides {
				offs[k] -= idx[d] * strides[k][d]
			}
			idx[d] = 0
		}
		if p < 0 {
			return
		}
	}
}

// sumToShape reduces a gradient g of a broadcast result back to the shape
// (and format) of the operand that was broadcast, summing in float64.
func sumToShape(g *Tensor, shape []int, f MemoryFormat) *Tensor {
	if sameShape(g.shape, shape) {
		if g.format != f {
			return g.reformat(f)
		}
		return g
	}
	out := &Tensor{dtype: Float32, shape: cloneInts(shape), format: f, data: make([]float32, numel("sum_to", shape))}
	acc := make([]float64, out.Numel())
	gd := g.Float32s()
	strides := [][]int{stridesOf(g.shape, g.format), broadcastStrides(shape, f, g.shape)}
	walk(g.shape, physicalOrder(g.format, len(g.shape)), strides, func(offs []int, n int, steps []int) {
		gi, oi := offs[0], offs[1]
		for k := 0; k < n; k++ {
			acc[oi] += float64(gd[gi])
			gi += steps[0]
			oi += steps[1]
		}
	})
	od := out.Float32s()
	for i, v := range acc {
		od[i] = float32(v)
	}
	return out
}

// binaryF32 applies op elementwise to broadcast float32 operands and returns
// the result in the format resultFormat chooses, as bindBinary computes it.
func binaryF32(op string, a, b *Tensor, k kernels.BinOp) *Tensor {
	checkFloat32(op, a, b)
	t := binaryType(op, a, b)
	out := resultIn(op, modeOf(a, b), Float32, t.Shape, t.Format, false)
	bindBinary(k, a, b, out)()
	return out
}

// binaryType checks the operands of a binary op (both float32 unless one
// is bfloat16) and returns its result's type: the broadcast shape, in the
// format resultFormat picks, bfloat16 where binaryBF16 keeps it.
func binaryType(op string, a, b *Tensor) TensorType {
	bf16 := a != nil && b != nil && (a.dtype == BFloat16 || b.dtype == BFloat16)
	if !bf16 {
		checkFloat32(op, a, b)
	}
	shape := broadcastShapes(op, a.shape, b.shape)
	t := TensorType{DType: Float32, Shape: shape, Format: resultFormat(shape, a, b)}
	if bf16 && (a.dtype == BFloat16 || bf16Scalar(a)) && (b.dtype == BFloat16 || bf16Scalar(b)) {
		t.DType = BFloat16
	}
	return t
}

// bf16Scalar reports whether t is a 0-d float, which a binary op takes
// with a bfloat16 tensor in bfloat16.
func bf16Scalar(t *Tensor) bool { return (t.dtype == Float32 || t.dtype == BFloat16) && t.NDim() == 0 }

// bindBinary binds y = a k b, with a and b broadcast to y's shape, or
// returns nil for operands it does not take. Float32 operands laid out
// like y go to one vector kernel over the whole slice, a one-element
// operand to the scalar kernel, and anything else to the broadcast walk
// (done once, here), which hands each innermost run to the strided
// kernel. A bfloat16 y of two bfloat16 operands like it runs on
// BinaryBF16, of one like it and a 0-dimensional one on
// BinaryScalarBF16, of two bfloat16 operands that broadcast on widened
// copies through the float32 walk: each computes in float32 and rounds
// once.
func bindBinary(k kernels.BinOp, a, b, y *Tensor) func() {
	like := func(t *Tensor) bool { return sameLayout(t, y) }
	scalar := func(t *Tensor) bool { return t.NDim() == 0 && (t.dtype == Float32 || t.dtype == BFloat16) }
	switch {
	case a.dtype == Float32 && b.dtype == Float32 && y.dtype == Float32:
		ad, bd, yd := a.Float32s(), b.Float32s(), y.Float32s()
		switch {
		case len(yd) == 0:
			return func() {}
		case like(a) && like(b):
			return func() { kernels.Binary(k, yd, ad, bd) }
		case like(a) && len(bd) == 1:
			return func() { kernels.BinaryScalar(k, yd, ad, bd[0], false) }
		case like(b) && len(ad) == 1:
			return func() { kernels.BinaryScalar(k, yd, bd, ad[0], true) }
		}
		if !broadcastsTo(a.shape, y.shape) || !broadcastsTo(b.shape, y.shape) {
			return nil
		}
		type run struct{ n, o, os, i, is, j, js int }
		// The walk's runs span y's innermost dimension; y has one here,
		// as a 0-d y has 0-d operands, which the cases above take.
		order := physicalOrder(y.format, len(y.shape))
		runs := make([]run, 0, len(yd)/y.shape[order[len(order)-1]])
		strides := [][]int{stridesOf(y.shape, y.format), broadcastStrides(a.shape, a.format, y.shape), broadcastStrides(b.shape, b.format, y.shape)}
		walk(y.shape, order, strides, func(offs []int, n int, steps []int) {
			runs = append(runs, run{n, offs[0], steps[0], offs[1], steps[1], offs[2], steps[2]})
		})
		return func() {
			for _, r := range runs {
				kernels.BinaryStrided(k, r.n, yd[r.o:], r.os, ad[r.i:], r.is, bd[r.j:], r.js)
			}
		}
	case y.dtype != BFloat16:
	case like(a) && like(b):
		ad, bd, yd := a.BFloat16s(), b.BFloat16s(), y.BFloat16s()
		return func() { kernels.BinaryBF16(k, yd, ad, bd) }
	case like(a) && scalar(b):
		ad, yd := a.BFloat16s(), y.BFloat16s()
		return func() { kernels.BinaryScalarBF16(k, yd, ad, scalarValue(b), false) }
	case like(b) && scalar(a):
		bd, yd := b.BFloat16s(), y.BFloat16s()
		return func() { kernels.BinaryScalarBF16(k, yd, bd, scalarValue(a), true) }
	case a.dtype == BFloat16 && b.dtype == BFloat16:
		a32, b32, y32 := a.meta(), b.meta(), y.meta()
		for _, t := range []*Tensor{a32, b32, y32} {
			t.dtype, t.data = Float32, uninitF32(numel("Binary", t.shape))
		}
		f := bindBinary(k, a32, b32, y32)
		if f == nil {
			return nil
		}
		ad, bd, yd := a.BFloat16s(), b.BFloat16s(), y.BFloat16s()
		ad32, bd32, yd32 := a32.Float32s(), b32.Float32s(), y32.Float32s()
		return func() {
			kernels.BF16ToF32(ad32, ad)
			kernels.BF16ToF32(bd32, bd)
			f()
			kernels.F32ToBF16(yd, yd32)
		}
	}
	return nil
}

// broadcastsTo reports whether shape broadcasts to out without growing it.
func broadcastsTo(shape, out []int) bool {
	if len(shape) > len(out) {
		return false
	}
	for i, d := range shape {
		if o := out[len(out)-len(shape)+i]; d != o && d != 1 {
			return false
		}
	}
	return true
}

func init() {
	// The binary ops' binders take no attributes.
	for op, k := range map[string]kernels.BinOp{"Add": kernels.BinAdd, "Sub": kernels.BinSub, "Mul": kernels.BinMul, "Div": kernels.BinDiv} {
		defineBind(op, func(_ any, ins, outs []*Tensor, _ []bool) func() {
			return bindBinary(k, ins[0], ins[1], outs[0])
		})
	}
	registerInfer(func(op string, _ any, in []*Tensor) []TensorType {
		return []TensorType{binaryType(op, in[0], in[1])}
	}, "Add", "Sub", "Mul", "Div")
	for op, f := range map[string]func(a, b *Tensor) *Tensor{"Add": Add, "Sub": Sub, "Mul": Mul, "Div": Div} {
		defineEager(op, nil, func(_ any, in []*Tensor) []*Tensor { return one(f(in[0], in[1])) })
	}
}

// unaryF32 applies fn to every element of a float32 tensor, keeping its
// shape and format.
func unaryF32(op string, a *Tensor, fn func(x float32) float32) *Tensor {
	checkFloat32(op, a)
	out := &Tensor{dtype: Float32, shape: cloneInts(a.shape), format: a.format, data: uninitF32(a.Numel())}
	od, ad := out.Float32s(), a.Float32s()
	for i, x := range ad {
		od[i] = fn(x)
	}
	return out
}

// checkFloat32 panics unless every operand is a non-nil float32 tensor.
func checkFloat32(op string, ts ...*Tensor) {
	for i, t := range ts {
		checkF32(op, fmt.Sprintf("operand %d", i), t)
	}
}
