package kernels

import "fmt"

// Sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major float32
// matrices, where op(X) is X or its transpose. op(A) is m×k, op(B) is k×n
// and C is m×n; lda, ldb and ldc are the row strides of A, B and C as
// stored. When beta is 0, C is overwritten without being read, so it may
// hold NaNs.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if m == 0 || n == 0 {
		return
	}
	Parallel(m, m*n*k, func(lo, hi int) {
		sgemmRef(transA, transB, lo, hi, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	})
}

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
			panic(fmt.Sprintf("kernels: Sgemm negative size %s %d×%d", name, rows, cols))
		}
		if rows == 0 || cols == 0 {
			return
		}
		if ld < cols {
			panic(fmt.Sprintf("kernels: Sgemm %s leading dimension %d < %d columns", name, ld, cols))
		}
		if have < (rows-1)*ld+cols {
			panic(fmt.Sprintf("kernels: Sgemm %s has %d elements, needs %d", name, have, (rows-1)*ld+cols))
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
