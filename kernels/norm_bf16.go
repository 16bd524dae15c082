package kernels

// Batch norm on bfloat16 activations with float32 arithmetic inside. Each
// kernel gives, bit for bit, what widening the whole tensor exactly,
// running the float32 kernel and rounding its result to nearest even
// (F32ToBF16) gives, without the whole-tensor float32 copies: the vector
// variants already work in blocks of rows (or pieces of runs) fixed by the
// shape, so each block is widened into per-task scratch just before the
// kit reads it and each output block rounded just after it is written,
// while it is in cache. Levels whose float32 kernels are the pure-Go
// references, which do not work in such blocks, convert whole tensors.

// bnBF16Kits is the kit the bfloat16 kernels block with at each level:
// one whose float32 primitives are those the float32 variants of
// bnStatsVariants, bnGradSumsVariants and bnApplyVariants use there (the
// AVX-512 kit shares the AVX2 kit's), since the blocked path must repeat
// their arithmetic exactly. The empty Generic slot makes pick return nil
// where those variants are the references.
var bnBF16Kits = [levelCount]*vecKit{AVX2: kitAt(AVX2), AVX512: kitAt(AVX512)}

var bnKitBF16 = pick(level, bnBF16Kits)

// bnBuf is one task's room for widened blocks: three slots of n float32s,
// for u, v and out.
type bnBuf struct {
	s []float32
	n int
}

// bnBufs keeps the rooms across calls, so a call allocates nothing once
// every worker has had one.
var bnBufs = freeList[bnBuf]{New: newOf[bnBuf]}

// room returns scratch for blocks of up to n elements of each bfloat16
// operand of a, or nil (which in, to and store accept) when a has none.
func (a *bnArgs) room(n int) *bnBuf {
	if a.u16 == nil && a.v16 == nil && a.out16 == nil {
		return nil
	}
	b := bnBufs.get()
	if cap(b.s) < 3*n {
		b.s = make([]float32, 3*n)
	}
	b.s, b.n = b.s[:3*n], n
	return b
}

func (b *bnBuf) release() {
	if b != nil {
		bnBufs.put(b)
	}
}

// in returns elements [i, j) of an operand as float32: f's own, or h's
// widened into slot of b; nil when the operand is absent.
func (b *bnBuf) in(slot int, f []float32, h []uint16, i, j int) []float32 {
	if h == nil {
		if f == nil {
			return nil
		}
		return f[i:j]
	}
	w := b.s[slot*b.n : slot*b.n+j-i]
	bf16ToF32Impl(w, h[i:j])
	return w
}

// to returns where a kit writes output elements [i, j): f's own, or the
// out slot of b when the output is h, which store then fills.
func (b *bnBuf) to(f []float32, h []uint16, i, j int) []float32 {
	if h == nil {
		return f[i:j]
	}
	return b.s[2*b.n : 2*b.n+j-i]
}

// store rounds a block written by to into h from element i on; nothing to
// do for a float32 output.
func (b *bnBuf) store(h []uint16, y []float32, i int) {
	if h != nil {
		f32ToBF16Impl(h[i:i+len(y)], y)
	}
}

// bf16Widened returns x widened exactly into pooled scratch.
func bf16Widened(x []uint16) *scratch[float32] {
	w := getScratchF32(len(x))
	BF16ToF32(w.s, x)
	return w
}

// BatchNormStatsBF16 is BatchNormStats on bfloat16 x: the same statistics,
// bit for bit, as BatchNormStats of x widened to float32.
func BatchNormStatsBF16(sp *BatchNormShape, x []uint16, mean, variance []float64) {
	s := *sp
	n := s.Outer * s.C * s.Inner
	s.check("BatchNormStatsBF16", map[string][2]int{"x": {len(x), n}, "mean": {len(mean), s.C}, "variance": {len(variance), s.C}})
	if bnKitBF16 == nil {
		w := bf16Widened(x)
		defer w.put()
		bnStats(s, w.s, mean, variance)
		return
	}
	bnStatsOn(bnArgs{k: bnKitBF16, s: s, u16: x}, mean, variance)
}

// BatchNormForwardBF16 is BatchNormForward on bfloat16 x and y, with relu
// BatchNormReLUForward: y is, bit for bit, the float32 kernel's result on
// x widened to float32, rounded to nearest even as F32ToBF16 rounds. y may
// be x.
func BatchNormForwardBF16(sp *BatchNormShape, x []uint16, mean, invStd []float64, weight, bias []float32, y []uint16, relu bool) {
	const op = "BatchNormForwardBF16"
	s := *sp
	bnForwardCheck(op, s, len(x), len(y), mean, invStd, weight, bias)
	if bnKitBF16 == nil {
		w := bf16Widened(x)
		defer w.put()
		batchNormForward(op, s, w.s, mean, invStd, weight, bias, w.s, relu)
		F32ToBF16(y, w.s)
		return
	}
	coef, alpha, beta := bnForwardCoef(s, mean, invStd, weight, bias)
	defer coef.put()
	bnApplyOn(bnArgs{k: bnKitBF16, s: s, u16: x, p: alpha, r: beta, out16: y, relu: relu})
}

// BatchNormBackwardBF16 is BatchNormBackward on bfloat16 x, dy and dx:
// dweight and dbias (float32) are, bit for bit, BatchNormBackward's on x
// and dy widened to float32, and dx is its dx rounded to nearest even as
// F32ToBF16 rounds.
func BatchNormBackwardBF16(sp *BatchNormShape, x, dy []uint16, mean, invStd []float64, weight []float32, batchStats bool, dx []uint16, dweight, dbias []float32) {
	s := *sp
	bnBackwardCheck("BatchNormBackwardBF16", s, len(x), len(dy), len(dx), dx != nil, mean, invStd, weight, dweight, dbias)
	if bnKitBF16 != nil {
		bnBackward(s, bnBackwardIO{k: bnKitBF16, x16: x, dy16: dy, dx16: dx}, mean, invStd, weight, batchStats, dweight, dbias)
		return
	}
	xw, gw := bf16Widened(x), bf16Widened(dy)
	defer xw.put()
	defer gw.put()
	var dxf []float32
	if dx != nil {
		dxf = gw.s // the map reads each element of dy before writing it
	}
	bnBackward(s, bnBackwardIO{x: xw.s, dy: gw.s, dx: dxf}, mean, invStd, weight, batchStats, dweight, dbias)
	if dx != nil {
		F32ToBF16(dx, dxf)
	}
}
