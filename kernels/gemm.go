package kernels

import (
	"math"
)

// Sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major float32
// matrices, where op(X) is X or its transpose. op(A) is m×k, op(B) is k×n
// and C is m×n; lda, ldb and ldc are the row strides of A, B and C as
// stored. When beta is 0, C is overwritten without being read, so it may
// hold NaNs. When alpha is 0 or k is 0, A and B are not read.
//
// Large products are split across the worker pool; a call from inside a
// Parallel task is safe and runs on its own thread when the workers are
// busy. With the assembly kernels a call allocates nothing.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmEntry(sgemmImpl, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, Epilogue{})
}

// Epilogue is work a GEMM does on each element of C once the product is
// complete, while the tile is still in cache: the fused "linear + bias +
// activation" of inference graphs and of convolutions. The zero value does
// nothing.
type Epilogue struct {
	// Bias is added to every element: Bias[j] to column j (n values), or
	// Bias[i] to row i (m values) when BiasPerRow, as a convolution with
	// channels as rows needs. Nil adds nothing.
	Bias       []float32
	BiasPerRow bool
	// Act is applied after the bias when Activate is set (Act's zero value
	// is a function too, Neg). ReLU runs inside the assembly kernel; other
	// functions run in Go on each finished block of C.
	Act      Act
	Activate bool
	// Residual, when set, is added after the bias and before the
	// activation: element (i, j) of C gets Residual[i*ldc+j], so it is
	// laid out as C (a residual connection's other branch). ReLU then
	// runs in Go rather than in the assembly kernel.
	Residual []float32

	out16 bf16Stage // a BF16 convolution's output stage, last
}

// inGo reports whether the epilogue has a part that runs in Go on finished
// rows (finishRows), given whether the kernel applied the ReLU.
func (ep *Epilogue) inGo(relu bool) bool {
	return ep.Residual != nil || ep.Activate && !relu || ep.out16.on()
}

// finishRows runs finish on rows [i0, i0+rows), columns [j0, j0+w) of C.
func (ep *Epilogue) finishRows(c []float32, ldc, i0, rows, j0, w int, relu bool) {
	tmp := ep.out16.scratch()
	for i := i0; i < i0+rows; i++ {
		off := i*ldc + j0
		ep.finish(c[off:off+w], off, relu, tmp)
	}
	ep.out16.release(tmp)
}

// inAsmReLU reports whether the assembly kernel applies the epilogue's
// ReLU itself (clamping at 0 as it stores): only with no residual to add
// first.
func (ep *Epilogue) inAsmReLU() bool {
	return ep.Activate && ep.Act.Fn == ActReLU && ep.Residual == nil
}

// finish runs the epilogue's Go part, residual then activation, on one
// finished row segment of C starting at element off of C.
func (ep *Epilogue) finish(row []float32, off int, relu bool, tmp *[2][bf16Stretch]float32) {
	if ep.Residual != nil {
		binarySameImpl(BinAdd, row, row, ep.Residual[off:off+len(row)])
	}
	if ep.Activate && !relu {
		actForwardImpl(ep.Act, row, row)
	}
	if ep.out16.on() {
		ep.out16.store(row, off, tmp)
	}
}

// SgemmEpilogue computes C = act(alpha*op(A)*op(B) + beta*C + bias) with
// the bias and activation of ep, in one pass over C. The arguments are
// Sgemm's.
func SgemmEpilogue(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
	sgemmEntry(sgemmImpl, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep)
}

// sgemmFunc is one variant of the GEMM. Arguments are checked and m, n > 0.
type sgemmFunc func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue)

// The variants in use, chosen once from the CPU's level. The tables are in
// gemm_amd64.go and gemm_noasm.go.
var (
	sgemmImpl       = pick(level, sgemmVariants)
	packBImpl       = pick(level, packBVariants)
	sgemmPackedImpl = pick(level, sgemmPackedVariants)
)

func sgemmEntry(impl sgemmFunc, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	ep.check(m, n, ldc)
	if m == 0 || n == 0 {
		return
	}
	impl(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep)
}

// sgemmGeneric is the reference variant: the plain loops of sgemmRef over
// row blocks, then the epilogue on each block.
func sgemmGeneric(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
	Parallel(m, m*n*k, func(lo, hi int) {
		sgemmRef(transA, transB, lo, hi, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		ep.apply(c, ldc, lo, hi, 0, n)
	})
}

func (ep *Epilogue) check(m, n, ldc int) {
	if ep.Residual != nil && m > 0 && n > 0 && len(ep.Residual) < (m-1)*ldc+n {
		fail(ErrShape, "Sgemm", "epilogue residual has %d elements for %d rows of %d with stride %d", len(ep.Residual), m, n, ldc)
	}
	if ep.Bias != nil {
		want, what := n, "columns"
		if ep.BiasPerRow {
			want, what = m, "rows"
		}
		if len(ep.Bias) < want {
			fail(ErrShape, "Sgemm", "epilogue bias has %d elements for %d %s", len(ep.Bias), want, what)
		}
	}
	if ep.Activate {
		ep.Act.check("Sgemm epilogue")
	}
}

// apply runs the epilogue on rows [i0, i1), columns [j0, j1) of C.
func (ep *Epilogue) apply(c []float32, ldc, i0, i1, j0, j1 int) {
	if ep.Bias == nil && !ep.inGo(false) {
		return
	}
	tmp := ep.out16.scratch()
	defer ep.out16.release(tmp)
	for i := i0; i < i1; i++ {
		row := c[i*ldc+j0 : i*ldc+j1]
		if ep.Bias != nil {
			if ep.BiasPerRow {
				bi := ep.Bias[i]
				for j := range row {
					row[j] += bi
				}
			} else {
				for j, bj := range ep.Bias[j0:j1] {
					row[j] += bj
				}
			}
		}
		ep.finish(row, i*ldc+j0, false, tmp)
	}
}

// gemmScaleC is the whole GEMM when the product vanishes (k = 0 or
// alpha = 0): C = beta*C, then the epilogue. A and B are not read, as in
// BLAS, so an Inf there does not turn into NaN.
func gemmScaleC(m, n int, beta float32, c []float32, ldc int, ep *Epilogue) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
		} else if beta != 1 {
			for j := range row {
				row[j] *= beta
			}
		}
	}
	ep.apply(c, ldc, 0, m, 0, n)
}

// negInf is the lower clamp of "no activation" in the assembly epilogue.
var negInf = float32(math.Inf(-1))

// sgemmRef computes rows [lo, hi) of C. The inner loop runs along a row of
// B and C so the memory walk is sequential whatever the transposition of A.
func sgemmRef(transA, transB bool, lo, hi, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	var bt []float32
	if transB {
		// Read a transposed B through a row-major copy so the inner loop
		// below stays sequential.
		bt = make([]float32, k*n)
		for j := 0; j < n; j++ {
			for p := 0; p < k; p++ {
				bt[p*n+j] = b[j*ldb+p]
			}
		}
		b, ldb = bt, n
	}
	for i := lo; i < hi; i++ {
		crow := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(crow)
		} else if beta != 1 {
			for j := range crow {
				crow[j] *= beta
			}
		}
		for p := 0; p < k; p++ {
			var av float32
			if transA {
				av = a[p*lda+i]
			} else {
				av = a[i*lda+p]
			}
			av *= alpha
			if av == 0 {
				continue
			}
			brow := b[p*ldb : p*ldb+n]
			for j, bv := range brow {
				crow[j] += av * bv
			}
		}
	}
}

func checkGemm(transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) {
	need := func(name string, rows, cols, ld, have int) {
		if rows < 0 || cols < 0 {
			fail(ErrShape, "Sgemm", "negative size %s %d×%d", name, rows, cols)
		}
		if rows == 0 || cols == 0 {
			return
		}
		if ld < cols {
			fail(ErrShape, "Sgemm", "%s leading dimension %d < %d columns", name, ld, cols)
		}
		if have < (rows-1)*ld+cols {
			fail(ErrShape, "Sgemm", "%s has %d elements, needs %d", name, have, (rows-1)*ld+cols)
		}
	}
	if transA {
		need("A", k, m, lda, la)
	} else {
		need("A", m, k, lda, la)
	}
	if transB {
		need("B", n, k, ldb, lb)
	} else {
		need("B", k, n, ldb, lb)
	}
	need("C", m, n, ldc, lc)
}
