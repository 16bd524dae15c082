package kernels

import (
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/kilnml/kiln/internal/uninit"
)

// GemmBF16 computes C = alpha·op(A)·op(B) + beta·C for bfloat16 A and B
// (uint16 bits, as autograd stores them) and float32 C, accumulating in
// float32: the mixed-precision product of BF16 training and inference. The
// arguments are Sgemm's; with beta 0, C is not read.
//
// On CPUs with AMX the product runs on tiles (TDPBF16PS), which add the
// products of 32 depths into each float32 sum at a time, in their own
// order, flushing subnormal inputs and results to zero. On CPUs with
// AVX512_BF16 the product runs on VDPBF16PS (twice the FP32
// rate): each instruction adds two products per lane, the odd depth first,
// each sum rounded to float32, and subnormal inputs and results are
// flushed to zero, as the hardware does. Elsewhere a pure-Go reference
// widens each value (exactly) and sums in float32, depth by depth, so the
// two differ in summation order only.
func GemmBF16(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	gemmBF16(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nil, nil, amxKernel())
}

// convGemmBF16 is GemmBF16 as the BF16 convolutions run it: not on AMX
// tiles, whose summation order differs, so that every path of a
// convolution (prepacked or not, float32 or bfloat16 output) gives the same
// bits until the convolutions have AMX kernels of their own.
func convGemmBF16(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	gemmBF16(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nil, nil, nil)
}

// gemmBF16 is GemmBF16 with, for the convolutions, B already packed for
// every block (pre, made by packSbgemmB of the same B; nil: packed here)
// and rows finished by ep once summed (nil: none). Both are taken only
// where the assembly path runs (sbgemmAsm), as the native convolutions
// do; k > 0 and alpha 1 there. With an AMX kernel (amx) the product runs
// on tiles; the convolutions pass none (convGemmBF16).
func gemmBF16(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int, pre *sbPackedB, ep *sbRowEpilogue, amx amxStripFunc) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		gemmScaleC(m, n, beta, c, ldc, &Epilogue{})
		return
	}
	// Calls are pooled, their methods bound once: a method value handed to
	// the worker pool escapes, so binding it per call would allocate.
	g := sbgemmCalls.get()
	g.sbgemmArgs = sbgemmArgs{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc, pre: pre, ep: ep}
	switch {
	case amx != nil:
		g.amx(amx)
	case sbgemmAsm():
		g.blocked()
	case level > Generic:
		g.widened()
	default:
		Parallel(m, m*n*k, g.genericFn)
	}
	g.sbgemmArgs = sbgemmArgs{}
	sbgemmCalls.put(g)
}

var sbgemmCalls = freeList[sbgemmCall]{New: func() *sbgemmCall {
	g := new(sbgemmCall)
	g.genericFn = g.generic
	g.amxState.packBFn, g.amxState.runFn = g.amxPackB, g.amxRun
	g.bindBlocked()
	return g
}}

// GemmBF16To computes C = alpha·op(A)·op(B) for bfloat16 A and B, as
// GemmBF16 does in float32, and stores it rounded to bfloat16 (nearest
// even) in c, m rows of n with row stride ldc: the BF16-output product.
// Elements of c between rows are left alone.
func GemmBF16To(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, c []uint16, ldc int) {
	if m > 0 && n > 0 && (ldc < n || len(c) < (m-1)*ldc+n) {
		fail(ErrShape, "GemmBF16To", "c has %d elements with row stride %d, want %d rows of %d", len(c), ldc, m, n)
	}
	acc := f32Scratch(m * n)
	GemmBF16(transA, transB, m, n, k, alpha, a, lda, b, ldb, 0, *acc, max(n, 1))
	for i := range m {
		F32ToBF16(c[i*ldc:i*ldc+n], (*acc)[i*n:(i+1)*n])
	}
	releaseF32Scratch(acc)
}

// widened runs the product on a CPU with float32 assembly but no
// AVX512_BF16: both operands are widened (exactly) into pooled float32
// copies and Sgemm's kernels sum the same products, so a BF16 model runs
// there at about its FP32 speed rather than at the reference loop's.
func (g *sbgemmCall) widened() {
	ar, ac := g.m, g.k
	if g.transA {
		ar, ac = ac, ar
	}
	br, bc := g.k, g.n
	if g.transB {
		br, bc = bc, br
	}
	b := widenedOperand(g.b[:(br-1)*g.ldb+bc])
	defer releaseF32Scratch(b)
	// A as it stands is widened by the GEMM as it packs it.
	if !g.transA && g.alpha == 1 && g.beta == 0 &&
		sgemmBF16A(g.m, g.n, g.k, g.a, g.lda, g.transB, *b, g.ldb, nil, g.c, g.ldc, Epilogue{}) {
		return
	}
	a := widenedOperand(g.a[:(ar-1)*g.lda+ac])
	Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, *a, g.lda, *b, g.ldb, g.beta, g.c, g.ldc)
	releaseF32Scratch(a)
}

// widenBufs holds float32 scratch between calls, widened operands and
// results before they are rounded to bfloat16, in power-of-two size
// classes: one list for every size would hand a small buffer to a large
// request and reallocate it, once per call of a network whose layers
// differ in size.
var widenBufs [bits.UintSize]freeList[[]float32]

// widenedOperand returns a pooled float32 copy of v (hand it back with
// releaseF32Scratch).
func widenedOperand(v []uint16) *[]float32 {
	b := f32Scratch(len(v))
	BF16ToF32(*b, v)
	return b
}

// f32Scratch returns a float32 buffer of length n with arbitrary
// contents (hand it back with releaseF32Scratch), pooled by power-of-two
// size class. Buffers above scratchKeep elements (a model's largest
// layers, megabytes each) are kept only while the free ones add up to at
// most scratchBigBudget bytes: fresh each call, they cost no zeroing
// (uninit) but were allocated and collected over and over, which cost a
// BF16 ResNet-50 training step 5–8% on Zen 4; kept without a bound they
// would hold every size a program ever used.
func f32Scratch(n int) *[]float32 {
	class := bits.Len(uint(max(n, 1) - 1))
	b := widenBufs[class].get()
	if b == nil {
		s := uninit.Slice[float32](1 << class)
		b = &s
	} else if cap(*b) > scratchKeep {
		scratchBigKept.Add(-int64(cap(*b)) * 4)
	}
	*b = (*b)[:n]
	return b
}

const (
	// scratchKeep is the largest f32Scratch buffer always pooled: 1 MiB.
	scratchKeep = 1 << 18
	// scratchBigBudget bounds the bytes of free pooled buffers above
	// scratchKeep.
	scratchBigBudget = 256 << 20
)

// scratchBigKept is the bytes of free pooled buffers above scratchKeep.
var scratchBigKept atomic.Int64

// releaseF32Scratch returns a buffer from f32Scratch to its pool, or to
// the garbage collector when keeping it would pass the budget.
func releaseF32Scratch(b *[]float32) {
	c := cap(*b)
	if c > scratchKeep {
		if scratchBigKept.Add(int64(c)*4) > scratchBigBudget {
			scratchBigKept.Add(-int64(c) * 4)
			return
		}
	}
	widenBufs[bits.Len(uint(c-1))].put(b)
}

// sbgemmCall is one GemmBF16 call: its arguments and block state, and its
// methods bound for the worker pool.
type sbgemmCall struct {
	sbgemmArgs
	amxState
	genericFn, packAFn, packBFn, rowsFn, colsFn func(lo, hi int)
}

// parallel is Parallel, or fn over the whole range where the call is
// one of several a caller already runs on every worker (serial).
func (g *sbgemmCall) parallel(n, work int, fn func(lo, hi int)) {
	if g.serial {
		fn(0, n)
		return
	}
	Parallel(n, work, fn)
}

// sbgemmArgs is what one GemmBF16 call computes and where it stands.
type sbgemmArgs struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b           []uint16
	lda, ldb       int
	c              []float32
	ldc            int

	// The current block: depth pairs [p0, p0+kp), columns [j0, j0+nc),
	// its beta (1 after the first depth block), A's row panels and B
	// packed.
	p0, kp, j0, nc int
	beta2          float32
	// ncStep is the column block width and block0 the index in pre of
	// the current depth block's first column block.
	ncStep, block0 int
	ap, bp         []uint16

	pre        *sbPackedB
	ep         *sbRowEpilogue
	packInRows bool // A packed chunk by chunk by the workers (one column block)

	// bsrc, where set, packs B in place of b: a matrix never stored whole
	// (the assembly path only).
	bsrc bPanelPacker
	// serial keeps the call on its goroutine: set by callers that run
	// several products at once on every worker, where splitting each
	// again only made the workers trade halves of each other's products.
	serial bool
}

// bPanelPacker packs panels of a GemmBF16 B operand that is never stored
// whole, such as a convolution's im2col matrix: into panel (kp·16 words)
// the 16 columns from j0 for depth pairs [p0, p0+kp), each pair of a
// column one word (the odd depth high), zeros past B's columns and depth.
type bPanelPacker interface {
	packBPanel(panel []uint32, p0, kp, j0 int)
}

// sbPackedB is a B operand of GemmBF16 packed once, block by block in the
// order the blocked loop takes them: a convolution's weights, which meet
// every input of an inference.
type sbPackedB struct {
	k, n   int
	blocks [][]uint16
}

// sbRowEpilogue finishes rows of a product whose last depth block is
// summed, while they are in cache: bias added (nil for none), then the
// bfloat16 stage, whose output y holds C's element (i, j) at
// off + i·ldc + j.
type sbRowEpilogue struct {
	bias  []float32
	stage bf16Stage
	off   int
}

var sbRowEpilogues = freeList[sbRowEpilogue]{New: newOf[sbRowEpilogue]}

// finish runs the epilogue on row, the finished columns [j0, j0+len(row))
// of C's element idx (i·ldc + j0).
func (e *sbRowEpilogue) finish(row []float32, j0, idx int, tmp *[2][bf16Stretch]float32) {
	if e.bias != nil {
		convOps.addTo(row, e.bias[j0:j0+len(row)])
	}
	e.stage.store(row, e.off+idx, tmp)
}

func (g *sbgemmArgs) aAt(i, p int) uint16 {
	if g.transA {
		return g.a[p*g.lda+i]
	}
	return g.a[i*g.lda+p]
}

func (g *sbgemmArgs) bAt(p, j int) uint16 {
	if g.transB {
		return g.b[j*g.ldb+p]
	}
	return g.b[p*g.ldb+j]
}

// generic is the reference for rows [lo, hi).
func (g *sbgemmArgs) generic(lo, hi int) {
	for i := lo; i < hi; i++ {
		row := g.c[i*g.ldc : i*g.ldc+g.n]
		for j := range row {
			var s float32
			for p := 0; p < g.k; p++ {
				s += F32FromBF16(g.aAt(i, p)) * F32FromBF16(g.bAt(p, j))
			}
			if g.beta == 0 {
				row[j] = g.alpha * s
			} else {
				row[j] = g.alpha*s + g.beta*row[j]
			}
		}
	}
}

// words views an even-length bfloat16 slice as the 32-bit pairs the
// kernel reads.
func words(s []uint16) []uint32 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&s[0])), len(s)/2)
}
