package kernels

// SgemmBatched runs Sgemm once per batch entry i on the matrices starting
// at a[aOff[i]:], b[bOff[i]:] and c[cOff[i]:], all with the same sizes and
// leading dimensions. Entries whose C offsets coincide accumulate: the first
// of them (in order) applies beta, the later ones add with beta 1, so
// C = alpha·Σ op(A_i)·op(B_i) + beta·C over them. This is how a gradient is
// summed over broadcast batch dimensions. Entries with distinct C run in
// parallel.
func SgemmBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, aOff []int, lda int,
	b []float32, bOff []int, ldb int, beta float32, c []float32, cOff []int, ldc int) {
	if len(aOff) != len(cOff) || len(bOff) != len(cOff) {
		fail(ErrShape, "SgemmBatched", "%d A, %d B and %d C offsets", len(aOff), len(bOff), len(cOff))
	}
	for i := range cOff {
		if aOff[i] < 0 || bOff[i] < 0 || cOff[i] < 0 || aOff[i] > len(a) || bOff[i] > len(b) || cOff[i] > len(c) {
			fail(ErrShape, "SgemmBatched", "entry %d offsets (%d, %d, %d) outside A, B, C (%d, %d, %d elements)",
				i, aOff[i], bOff[i], cOff[i], len(a), len(b), len(c))
		}
	}
	// Group the entries by C offset, groups in order of first appearance.
	first := make(map[int]int, len(cOff))
	var groups [][]int
	for i, o := range cOff {
		g, ok := first[o]
		if !ok {
			g = len(groups)
			first[o] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	Parallel(len(groups), len(cOff)*m*n*k, func(lo, hi int) {
		for _, g := range groups[lo:hi] {
			bt := beta
			for _, i := range g {
				Sgemm(transA, transB, m, n, k, alpha, a[aOff[i]:], lda, b[bOff[i]:], ldb, bt, c[cOff[i]:], ldc)
				bt = 1
			}
		}
	})
}
