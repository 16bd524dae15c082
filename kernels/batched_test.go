package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSgemmBatchedMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		m, n, k int
		cOff    []int // in units of one C matrix; repeats accumulate
	}{
		{3, 4, 5, []int{0, 1, 2}},
		{2, 3, 4, []int{0, 0, 1, 0}},
		{1, 1, 7, []int{1, 0}},
		{5, 2, 0, []int{0, 1}},
		{33, 17, 9, []int{2, 1, 0, 2, 1, 0}},
	} {
		for _, beta := range []float32{0, 0.5} {
			for _, trans := range [][2]bool{{false, false}, {true, false}, {false, true}} {
				m, n, k, nb := tc.m, tc.n, tc.k, len(tc.cOff)
				a, b := randSlice(r, nb*m*k+1), randSlice(r, nb*k*n+1)
				nc := 0
				for _, o := range tc.cOff {
					nc = max(nc, o+1)
				}
				c := randSlice(r, nc*m*n+2)
				c[len(c)-1], c[len(c)-2] = guard, guard
				want := append([]float32(nil), c...)
				aOff, bOff, cOff := make([]int, nb), make([]int, nb), make([]int, nb)
				lda, ldb := k, n
				if trans[0] {
					lda = m
				}
				if trans[1] {
					ldb = k
				}
				seen := map[int]bool{}
				for i := range nb {
					aOff[i], bOff[i], cOff[i] = i*m*k+1, i*k*n, tc.cOff[i]*m*n
					bt := beta
					if seen[cOff[i]] {
						bt = 1
					}
					seen[cOff[i]] = true
					naiveGemm(trans[0], trans[1], m, n, k, 1.5, a[aOff[i]:], lda, b[bOff[i]:], ldb, bt, want[cOff[i]:], n)
				}
				SgemmBatched(trans[0], trans[1], m, n, k, 1.5, a, aOff, lda, b, bOff, ldb, beta, c, cOff, n)
				for i := range want {
					if d := math.Abs(float64(c[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
						t.Fatalf("%+v beta %v trans %v: element %d = %v, want %v", tc, beta, trans, i, c[i], want[i])
					}
				}
			}
		}
	}
}
