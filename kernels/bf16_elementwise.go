package kernels

import (
	"fmt"
)

// Elementwise kernels on bfloat16 data. Each runs the float32 span code of
// its float32 twin on short stretches widened exactly into stack buffers
// (they stay in L1) and rounds the results to nearest even: the result of
// computing in float32 and rounding once, which is what PyTorch's bf16
// CPU kernels give too. Memory sees only the 16-bit data.

// bf16Stretch is the number of elements widened at a time.
const bf16Stretch = 512

// bf16Job holds one call's operands for the worker pool; pooled, with its
// span methods bound once, so a call allocates nothing.
type bf16Job struct {
	act                 Act
	op                  BinOp
	dst, a, b           []uint16
	s                   float32
	left                bool
	stage               bf16Stage
	acc                 []float32
	actFwd, actBwd, bin func(lo, hi int)
	addReLU, scalar     func(lo, hi int)
	stageFn             func(lo, hi int)
}

var bf16Jobs = freeList[bf16Job]{New: func() *bf16Job {
	j := new(bf16Job)
	j.actFwd, j.actBwd, j.bin, j.addReLU, j.scalar = j.runActForward, j.runActBackward, j.runBinary, j.runAddReLU, j.runBinaryScalar
	j.stageFn = j.runStage
	return j
}}

func (j *bf16Job) release() {
	j.dst, j.a, j.b = nil, nil, nil
	bf16Jobs.put(j)
}

// ForwardBF16 is Forward on bfloat16 data: dst[i] = f(src[i]) computed in
// float32 and rounded to nearest even. dst may be src.
func (a Act) ForwardBF16(dst, src []uint16) {
	a.check("Act.ForwardBF16")
	if len(dst) != len(src) {
		fail(ErrShape, fmt.Sprintf("Act.ForwardBF16(%v)", a.Fn), "dst has %d elements, src %d", len(dst), len(src))
	}
	n := len(src)
	j := bf16Jobs.get()
	j.act, j.dst, j.a = a, dst, src
	Parallel(n, n*(actCost[a.Fn]+1), j.actFwd)
	j.release()
}

// BackwardBF16 is Backward on bfloat16 data: dx[i] = dy[i]·f′ at v[i],
// v being the forward's output where ReadsOutput says so, else its input
// (nil for the functions that read neither). dx may be dy.
func (a Act) BackwardBF16(dx, dy, v []uint16) {
	a.check("Act.BackwardBF16")
	n := len(dx)
	reads := a.ReadsOutput() || a.ReadsInput()
	if len(dy) != n || (reads && len(v) != n) {
		fail(ErrShape, fmt.Sprintf("Act.BackwardBF16(%v)", a.Fn), "dx has %d elements, dy %d, v %d", n, len(dy), len(v))
	}
	if !reads {
		v = nil
	}
	j := bf16Jobs.get()
	j.act, j.dst, j.a, j.b = a, dx, dy, v
	Parallel(n, n*(actCost[a.Fn]+2), j.actBwd)
	j.release()
}

// BinaryBF16 is Binary on bfloat16 operands of one length: dst = a op b,
// computed in float32 and rounded to nearest even. dst may be a or b.
func BinaryBF16(op BinOp, dst, a, b []uint16) {
	op.check("BinaryBF16")
	n := len(dst)
	if len(a) != n || len(b) != n {
		fail(ErrShape, fmt.Sprintf("BinaryBF16(%v)", op), "dst has %d elements, a %d, b %d", n, len(a), len(b))
	}
	j := bf16Jobs.get()
	j.op, j.dst, j.a, j.b = op, dst, a, b
	Parallel(n, n*(binCost+2), j.bin)
	j.release()
}

// BinaryScalarBF16 is BinaryScalar on a bfloat16 operand and a float32
// scalar: dst = a op s (s op a when scalarLeft), computed in float32 and
// rounded to nearest even. dst may be a.
func BinaryScalarBF16(op BinOp, dst, a []uint16, s float32, scalarLeft bool) {
	op.check("BinaryScalarBF16")
	n := len(dst)
	if len(a) != n {
		fail(ErrShape, fmt.Sprintf("BinaryScalarBF16(%v)", op), "dst has %d elements, a %d", n, len(a))
	}
	j := bf16Jobs.get()
	j.op, j.dst, j.a, j.s, j.left = op, dst, a, s, scalarLeft
	Parallel(n, n*(binCost+2), j.scalar)
	j.release()
}

// AddReLUBF16 is AddReLU on bfloat16 operands: dst = max(0, a + b), the
// sum rounded to bfloat16 (rounding commutes with the rectifier). dst may
// be a or b.
func AddReLUBF16(dst, a, b []uint16) {
	n := len(dst)
	if len(a) != n || len(b) != n {
		fail(ErrShape, "AddReLUBF16", "dst has %d elements, a %d, b %d", n, len(a), len(b))
	}
	j := bf16Jobs.get()
	j.dst, j.a, j.b = dst, a, b
	Parallel(n, n*(binCost+3), j.addReLU)
	j.release()
}

// bf16Stretches holds float32 scratch for the stretches: arrays on the
// stack would escape to the heap through the dispatched kernel variables,
// costing an allocation per call.
var bf16Stretches freeList[[2][bf16Stretch]float32]

func getStretches() *[2][bf16Stretch]float32 {
	if s := bf16Stretches.get(); s != nil {
		return s
	}
	return new([2][bf16Stretch]float32)
}

func (j *bf16Job) runActForward(lo, hi int) {
	s := getStretches()
	defer bf16Stretches.put(s)
	x := &s[0]
	for i := lo; i < hi; i += bf16Stretch {
		k := min(i+bf16Stretch, hi)
		f := x[:k-i]
		bf16ToF32Impl(f, j.a[i:k])
		actForwardImpl(j.act, f, f)
		f32ToBF16Impl(j.dst[i:k], f)
	}
}

// bf16ElemKernels are a level's fused elementwise kernels on bfloat16
// operands: each reads and writes bfloat16 once, with the float32 kernel's
// arithmetic and F32ToBF16's rounding (so the same bits as the widening
// path), on the first len(dst)&^15 elements; nil where the level has none.
type bf16ElemKernels struct {
	add     func(dst, a, b []uint16, relu bool) // a + b, rectified when relu
	reluBwd func(dst, dy, y []uint16)           // ReLU's backward from its output y
}

var bf16Elem = bf16ElemFor(level)

func bf16ElemFor(l Level) bf16ElemKernels {
	switch {
	case l >= AVX512:
		return bf16ElemKernels{add: bf16AddAVX512Span, reluBwd: bf16ReLUBackwardAVX512Span}
	case l >= AVX2:
		return bf16ElemKernels{add: bf16AddAVX2Span, reluBwd: bf16ReLUBackwardAVX2Span}
	}
	return bf16ElemKernels{}
}

// fusedChunk is the most elements one fused assembly call takes, so that
// it stays short.
const fusedChunk = 1 << 15

// fusedSpans runs f on [lo, hi) in pieces of whole sixteens of at most
// fusedChunk elements and returns where the remaining tail starts.
func fusedSpans(lo, hi int, f func(i, k int)) int {
	end := lo + (hi-lo)&^15
	for i := lo; i < end; i += fusedChunk {
		f(i, min(i+fusedChunk, end))
	}
	return end
}

func (j *bf16Job) runActBackward(lo, hi int) {
	if k := bf16Elem.reluBwd; k != nil && j.act.Fn == ActReLU && j.b != nil {
		if lo = fusedSpans(lo, hi, func(i, e int) { k(j.dst[i:e], j.a[i:e], j.b[i:e]) }); lo == hi {
			return
		}
	}
	s := getStretches()
	defer bf16Stretches.put(s)
	g, v := &s[0], &s[1]
	for i := lo; i < hi; i += bf16Stretch {
		k := min(i+bf16Stretch, hi)
		fg := g[:k-i]
		bf16ToF32Impl(fg, j.a[i:k])
		var fv []float32
		if j.b != nil {
			fv = v[:k-i]
			bf16ToF32Impl(fv, j.b[i:k])
		}
		actBackwardImpl(j.act, fg, fg, fv)
		f32ToBF16Impl(j.dst[i:k], fg)
	}
}

func (j *bf16Job) runBinary(lo, hi int) {
	if k := bf16Elem.add; k != nil && j.op == BinAdd {
		if lo = fusedSpans(lo, hi, func(i, e int) { k(j.dst[i:e], j.a[i:e], j.b[i:e], false) }); lo == hi {
			return
		}
	}
	s := getStretches()
	defer bf16Stretches.put(s)
	fa, fb := &s[0], &s[1]
	for i := lo; i < hi; i += bf16Stretch {
		k := min(i+bf16Stretch, hi)
		x, y := fa[:k-i], fb[:k-i]
		bf16ToF32Impl(x, j.a[i:k])
		bf16ToF32Impl(y, j.b[i:k])
		binarySameImpl(j.op, x, x, y)
		f32ToBF16Impl(j.dst[i:k], x)
	}
}

func (j *bf16Job) runBinaryScalar(lo, hi int) {
	s := getStretches()
	defer bf16Stretches.put(s)
	fa := &s[0]
	for i := lo; i < hi; i += bf16Stretch {
		k := min(i+bf16Stretch, hi)
		x := fa[:k-i]
		bf16ToF32Impl(x, j.a[i:k])
		binaryScalarImpl(j.op, x, x, j.s, j.left)
		f32ToBF16Impl(j.dst[i:k], x)
	}
}

func (j *bf16Job) runAddReLU(lo, hi int) {
	if k := bf16Elem.add; k != nil {
		if lo = fusedSpans(lo, hi, func(i, e int) { k(j.dst[i:e], j.a[i:e], j.b[i:e], true) }); lo == hi {
			return
		}
	}
	s := getStretches()
	defer bf16Stretches.put(s)
	fa, fb := &s[0], &s[1]
	relu := Act{Fn: ActReLU}
	for i := lo; i < hi; i += bf16Stretch {
		k := min(i+bf16Stretch, hi)
		x, y := fa[:k-i], fb[:k-i]
		bf16ToF32Impl(x, j.a[i:k])
		bf16ToF32Impl(y, j.b[i:k])
		binarySameImpl(BinAdd, x, x, y)
		actForwardImpl(relu, x, x)
		f32ToBF16Impl(j.dst[i:k], x)
	}
}
