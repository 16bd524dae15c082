//go:build amd64 && !noasm

package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSgemmDirectAMatchesPacked checks that the AVX2 and AVX-512 GEMMs
// reading a stored A in place (rows spread over the L1's sets) give the
// same bits as packing it (a 4 KiB row stride, where they pack): the same
// products summed in the same order, with the bias and ReLU epilogue,
// across K blocks, a last strip of fewer rows than a tile and both thread
// splits.
func TestSgemmDirectAMatchesPacked(t *testing.T) {
	for _, rows := range []int{6, 12} {
		if !gemmRowsSpread(803, rows) || !gemmRowsSpread(512, rows) || gemmRowsSpread(1024, rows) || gemmRowsSpread(2048, rows) || gemmRowsSpread(1025, rows) {
			t.Fatalf("gemmRowsSpread(·, %d): want 803 and 512 spread, 1024, 1025 and 2048 not", rows)
		}
	}
	for _, l := range Levels() {
		if l < AVX2 {
			continue
		}
		t.Run(l.String(), func(t *testing.T) { sgemmDirectAMatchesPacked(t, pick(l, sgemmVariants)) })
	}
}

func sgemmDirectAMatchesPacked(t *testing.T, gemm sgemmFunc) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, mnk := range [][3]int{{50, 96, 800}, {24, 64, 13}, {61, 512, 415}, {17, 48, 33}, {61, 415, 512}, {30, 49, 70}, {25, 17, 9}} {
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
			gemm(false, true, m, n, k, 1, a, lda, b, k, 0, out[i], n, ep)
		}
		for j := range out[0] {
			if math.Float32bits(out[0][j]) != math.Float32bits(out[1][j]) {
				t.Fatalf("%d×%d×%d: element %d is %v read in place, %v packed", m, n, k, j, out[0][j], out[1][j])
			}
		}
	}
}

// TestSgemmAVX512MatchesAVX2 checks that the AVX-512 GEMM gives the AVX2
// one's bits (both add each product with one rounding, in K order) on
// shapes that take every AVX-512 tile: pairs of panels, a ragged last
// tile of 17 to 31 columns on a scratch tile, a lone panel and a masked
// one, with A read in place and packed, and the epilogue.
func TestSgemmAVX512MatchesAVX2(t *testing.T) {
	if caps.best < AVX512 {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, mnk := range [][3]int{{61, 415, 512}, {30, 49, 70}, {25, 17, 9}, {50, 400, 30}, {13, 33, 600}} {
		m, n, k := mnk[0], mnk[1], mnk[2]
		for _, lda := range []int{k + 1, 1024 * (k/1024 + 1)} {
			a, b := randSlice(r, m*lda), randSlice(r, n*k)
			c0 := randSlice(r, m*n)
			ep := Epilogue{Bias: randSlice(r, n), Act: Act{Fn: ActReLU}, Activate: true}
			x, y := slices.Clone(c0), slices.Clone(c0)
			sgemmAVX2(false, true, m, n, k, 1.5, a, lda, b, k, 0.5, x, n, ep)
			sgemmAVX512(false, true, m, n, k, 1.5, a, lda, b, k, 0.5, y, n, ep)
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
					t.Fatalf("%d×%d×%d lda %d: element %d is %v at AVX-512, %v at AVX2", m, n, k, lda, i, y[i], x[i])
				}
			}
		}
	}
}
