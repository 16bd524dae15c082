//go:build amd64 && !noasm

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemmDirectAMatchesPacked checks that the AVX-512 GEMM reading a
// stored A in place (rows spread over the L1's sets) gives the same bits
// as packing it (a 4 KiB row stride, where it packs): the same products
// summed in the same order, with the bias and ReLU epilogue, across K
// blocks, a last strip of fewer than 12 rows and both thread splits.
func TestSgemmDirectAMatchesPacked(t *testing.T) {
	if caps.best < AVX512 {
		t.Skip("no AVX-512")
	}
	if !gemmRowsSpread(803) || gemmRowsSpread(1024) || gemmRowsSpread(2048) || gemmRowsSpread(1025) {
		t.Fatal("gemmRowsSpread: want 803 spread, 1024, 1025 and 2048 not")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, mnk := range [][3]int{{50, 96, 800}, {24, 64, 13}, {61, 512, 415}} {
		m, n, k := mnk[0], mnk[1], mnk[2]
		src := randSlice(r, m*k)
		b := randSlice(r, n*k)
		bias := randSlice(r, n)
		ep := Epilogue{Bias: bias, Act: Act{Fn: ActReLU}, Activate: true}
		var out [2][]float32
		for i, lda := range []int{k + 3, 1024} {
			a := make([]float32, m*lda)
			for row := range m {
				copy(a[row*lda:row*lda+k], src[row*k:])
			}
			out[i] = make([]float32, m*n)
			sgemmAVX512(false, true, m, n, k, 1, a, lda, b, k, 0, out[i], n, ep)
		}
		for j := range out[0] {
			if math.Float32bits(out[0][j]) != math.Float32bits(out[1][j]) {
				t.Fatalf("%d×%d×%d: element %d is %v read in place, %v packed", m, n, k, j, out[0][j], out[1][j])
			}
		}
	}
}
