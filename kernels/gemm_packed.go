package kernels

// PackedB is a k×n matrix op(B) packed once into the panels the GEMM
// micro-kernel reads, for weights used in many products (inference, the
// filters of a convolution): SgemmPacked then skips packing B. It does not
// refer to the matrix it was packed from, and is safe for concurrent use by
// any number of SgemmPacked calls.
type PackedB struct {
	k, n   int
	kc, nr int       // K block and panel width of the layout
	data   []float32 // K blocks back to back, each kc·npad floats (the last shorter)
}

// K returns the inner dimension of the packed matrix.
func (pb *PackedB) K() int { return pb.k }

// N returns the number of columns of the packed matrix.
func (pb *PackedB) N() int { return pb.n }

// npad is n rounded up to whole panels.
func (pb *PackedB) npad() int { return (pb.n + pb.nr - 1) / pb.nr * pb.nr }

// packBFunc packs rows [p0, p0+kc) and columns [j0, j0+cols) of op(B) in
// the layout of gemm_pack.go.
type packBFunc func(transB bool, b []float32, ldb, p0, kc, j0, cols int, dst []float32)

func packBGeneric(transB bool, b []float32, ldb, p0, kc, j0, cols int, dst []float32) {
	packBGo(transB, b, ldb, p0, kc, 0, j0, cols, dst)
}

// PackB packs op(B), k×n (B stored with row stride ldb, transposed when
// transB), for SgemmPacked. The result is the same whichever kernel
// variant packs it.
func PackB(transB bool, k, n int, b []float32, ldb int) *PackedB {
	return packBEntry(packBImpl, transB, k, n, b, ldb)
}

func packBEntry(pack packBFunc, transB bool, k, n int, b []float32, ldb int) *PackedB {
	checkGemm(false, transB, 0, n, k, 0, 0, len(b), ldb, 0, 0)
	pb := &PackedB{k: k, n: n, kc: gemmKBlock(k), nr: gemmNR}
	npad := pb.npad()
	pb.data = alignedFloats(k * npad)
	if n == 0 {
		return pb
	}
	blocks := (k + pb.kc - 1) / pb.kc
	Parallel(blocks, k*n, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			pc := q * pb.kc
			pack(transB, b, ldb, pc, min(pb.kc, k-pc), 0, n, pb.data[pc*npad:])
		}
	})
	return pb
}

// PackedMatchesSgemm reports whether SgemmPacked gives Sgemm's result bit
// for bit on an m×n×k product: it runs the same blocked product with the
// same K blocks, so it does wherever this CPU has the blocked GEMM and
// Sgemm would not cut K into slices summed afterwards (a long K under a
// small C, which splits across threads). Where it reports false the two
// differ only in the rounding of the sums.
func PackedMatchesSgemm(m, n, k int) bool { return packedMatchesSgemm(m, n, k) }

// sgemmPackedFunc is one variant of SgemmPacked; arguments are checked and
// m, n > 0.
type sgemmPackedFunc func(transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, ep Epilogue)

// SgemmPacked computes C = act(alpha*op(A)*B + beta*C + bias) as
// SgemmEpilogue does, with B prepacked by PackB: op(A) is m×pb.K(), C is
// m×pb.N().
func SgemmPacked(transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, ep Epilogue) {
	sgemmPackedEntry(sgemmPackedImpl, transA, m, alpha, a, lda, pb, beta, c, ldc, ep)
}

func sgemmPackedEntry(impl sgemmPackedFunc, transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, ep Epilogue) {
	if pb == nil {
		fail(ErrArgument, "SgemmPacked", "nil PackedB")
	}
	n, k := pb.n, pb.k
	checkGemm(transA, false, m, n, k, len(a), lda, k*n, max(n, 1), len(c), ldc)
	ep.check(m, n, ldc)
	if m == 0 || n == 0 {
		return
	}
	impl(transA, m, alpha, a, lda, pb, beta, c, ldc, ep)
}

// sgemmPackedGeneric is the reference variant: plain loops that read B
// from the packed layout, whatever its block and panel sizes.
func sgemmPackedGeneric(transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, ep Epilogue) {
	n, k, nr := pb.n, pb.k, pb.nr
	npad := pb.npad()
	Parallel(m, m*n*k, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			crow := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(crow)
			} else if beta != 1 {
				for j := range crow {
					crow[j] *= beta
				}
			}
			for pc := 0; pc < k; pc += pb.kc {
				kc := min(pb.kc, k-pc)
				blk := pb.data[pc*npad:]
				for p := 0; p < kc; p++ {
					var av float32
					if transA {
						av = a[(pc+p)*lda+i]
					} else {
						av = a[i*lda+pc+p]
					}
					av *= alpha
					if av == 0 {
						continue
					}
					for j0 := 0; j0 < n; j0 += nr {
						row := blk[j0*kc+p*nr:]
						for jj, bv := range row[:min(nr, n-j0)] {
							crow[j0+jj] += av * bv
						}
					}
				}
			}
		}
		ep.apply(c, ldc, lo, hi, 0, n)
	})
}
