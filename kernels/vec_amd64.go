//go:build amd64 && !noasm

package kernels

// AVX2 row primitives in vec_amd64.s. Each takes its slices whole and
// trusts the lengths vecKit documents; the wrappers below add the row
// counts the assembly wants.

//go:noescape
func sumAVX2(x []float32) float64

//go:noescape
func sqDevAVX2(x []float32, m float64) float64

//go:noescape
func gradSumsAVX2(g, x []float32, m float64) (sg, sgx float64)

//go:noescape
func gradSumsWAVX2(dy, w, x []float32, m float64) (sg, sgx float64)

//go:noescape
func dotAVX2(a, b []float32) float64

//go:noescape
func colSumAVX2(s []float64, x []float32, rows int)

//go:noescape
func colSqDevAVX2(s []float64, x []float32, m []float64, rows int)

//go:noescape
func colGradSumsAVX2(s1, s2 []float64, g, x []float32, m []float64, rows int)

//go:noescape
func colSumHAVX2(s []float64, x []uint16, rows int)

//go:noescape
func colSqDevHAVX2(s []float64, x []uint16, m []float64, rows int)

//go:noescape
func colGradSumsHAVX2(s1, s2 []float64, g, x []uint16, m []float64, rows int)

//go:noescape
func colAffineHAVX2(y, x []uint16, a, b []float64, rows int, relu bool)

//go:noescape
func colAffine2HAVX2(y, u, v []uint16, p, q, r []float64, rows int)

//go:noescape
func colSumHAVX512(s []float64, x []uint16, rows int)

//go:noescape
func colSqDevHAVX512(s []float64, x []uint16, m []float64, rows int)

//go:noescape
func colGradSumsHAVX512(s1, s2 []float64, g, x []uint16, m []float64, rows int)

//go:noescape
func colAffineHAVX512(y, x []uint16, a, b []float64, rows int, relu bool)

//go:noescape
func colAffine2HAVX512(y, u, v []uint16, p, q, r []float64, rows int)

//go:noescape
func affineAVX2(y, x []float32, a, b float64)

//go:noescape
func affine2AVX2(y, u, v []float32, p, q, r float64)

//go:noescape
func colAffineAVX2(y, x []float32, a, b []float64, rows int)

//go:noescape
func colAffine2AVX2(y, u, v []float32, p, q, r []float64, rows int)

//go:noescape
func lnApplyAVX2(y, x, w, b []float32, m, rs float64)

//go:noescape
func lnNormAVX2(y, x []float32, m, rs float64)

//go:noescape
func lnBackwardAVX2(dx, dy, w, x []float32, m, rs, s1, s2 float64)

//go:noescape
func lnColAccAVX2(aw, ab []float64, dy, x []float32, m, rs float64)

//go:noescape
func lnBackwardAccAVX2(dx, dy, w, x []float32, m, rs, s1, s2 float64, aw, ab []float64)

//go:noescape
func accRowAVX2(acc []float64, x []float32)

//go:noescape
func accRowScaledAVX2(acc []float64, x []float32, k float64)

//go:noescape
func accRowsAVX2(acc []float64, table []float32, idx []int64, dim int)

//go:noescape
func accRowsScaledAVX2(acc []float64, table []float32, idx []int64, w []float32, dim int)

//go:noescape
func storeScaledAVX2(y []float32, acc []float64, k float64)

//go:noescape
func maxRowArgAVX2(y []float32, am []int64, x []float32, r int64)

// transpose8AVX2 transposes the 8×8 tiles of a rows×cols block (both
// multiples of 8).
//
//go:noescape
func transpose8AVX2(dst []float32, ldd int, src []float32, lds int, rows, cols int)

// transposeAVX2 runs the whole tiles in assembly and the ragged edges in Go.
func transposeAVX2(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	r8, c8 := rows&^7, cols&^7
	if r8 > 0 && c8 > 0 {
		// The last tile reads src[(r8-1)·lds + c8-1] and writes
		// dst[(c8-1)·ldd + r8-1]: both must lie inside the slices.
		_ = src[(r8-1)*lds+c8-1]
		_ = dst[(c8-1)*ldd+r8-1]
		transpose8AVX2(dst, ldd, src, lds, r8, c8)
	}
	for i := range r8 {
		for j := c8; j < cols; j++ {
			dst[j*ldd+i] = src[i*lds+j]
		}
	}
	for i := r8; i < rows; i++ {
		for j := range cols {
			dst[j*ldd+i] = src[i*lds+j]
		}
	}
}

//go:noescape
func prefetchRowsAVX2(table []float32, idx []int64, dim int)

// The window primitives take their steps in elements; the assembly
// converts them to bytes.

//go:noescape
func maxWindowAVX2(y []float32, idx []int32, x []float32, nh, nw, sh, sw int, pos0, ph, pw int32)

//go:noescape
func sumWindowAVX2(y, x []float32, nh, nw, sh, sw int, div float32)

//go:noescape
func addWindowAVX2(x []float32, nh, nw, sh, sw int, g []float32, div float32)

// colTiles calls f on the rows of a rows×c matrix of elem-byte values
// (elem counting every operand a row is read from), about 4 KiB of rows
// per call, in order. The column primitives walk their rows one strip of
// channels at a time; over a whole block that strided walk defeated the
// hardware prefetchers (BF16 batch-norm statistics of 256 channels read
// 6 GB/s from L3 on Zen 4), where a few rows at a time stay in L1 for
// every strip. The per-channel order of the sums is the same.
func colTiles(rows, c, elem int, f func(r0, r1 int)) {
	t := max(1, colTileBytes/(c*elem))
	for r := 0; r < rows; r += t {
		f(r, min(r+t, rows))
	}
}

const colTileBytes = 4 << 10

var vecAVX2 = &vecKit{
	sum:       sumAVX2,
	sqDev:     sqDevAVX2,
	gradSums:  gradSumsAVX2,
	gradSumsW: gradSumsWAVX2,
	dot:       dotAVX2,
	colSum: func(s []float64, x []float32) {
		if len(s) > 0 {
			colTiles(len(x)/len(s), len(s), 4, func(r0, r1 int) { colSumAVX2(s, x[r0*len(s):r1*len(s)], r1-r0) })
		}
	},
	colSqDev: func(s []float64, x []float32, m []float64) {
		if len(s) > 0 {
			colTiles(len(x)/len(s), len(s), 4, func(r0, r1 int) { colSqDevAVX2(s, x[r0*len(s):r1*len(s)], m, r1-r0) })
		}
	},
	colGradSums: func(s1, s2 []float64, g, x []float32, m []float64) {
		if len(s1) > 0 {
			colTiles(len(g)/len(s1), len(s1), 8, func(r0, r1 int) {
				colGradSumsAVX2(s1, s2, g[r0*len(s1):r1*len(s1)], x[r0*len(s1):r1*len(s1)], m, r1-r0)
			})
		}
	},
	affine:  affineAVX2,
	affine2: affine2AVX2,
	colAffine: func(y, x []float32, a, b []float64) {
		if len(a) > 0 {
			colAffineAVX2(y, x, a, b, len(y)/len(a))
		}
	},
	colAffine2: func(y, u, v []float32, p, q, r []float64) {
		if len(p) > 0 {
			colAffine2AVX2(y, u, v, p, q, r, len(y)/len(p))
		}
	},
	colSumH: func(s []float64, x []uint16) {
		if len(s) > 0 {
			colTiles(len(x)/len(s), len(s), 2, func(r0, r1 int) { colSumHAVX2(s, x[r0*len(s):r1*len(s)], r1-r0) })
		}
	},
	colSqDevH: func(s []float64, x []uint16, m []float64) {
		if len(s) > 0 {
			colTiles(len(x)/len(s), len(s), 2, func(r0, r1 int) { colSqDevHAVX2(s, x[r0*len(s):r1*len(s)], m, r1-r0) })
		}
	},
	colGradSumsH: func(s1, s2 []float64, g, x []uint16, m []float64) {
		if len(s1) > 0 {
			colTiles(len(g)/len(s1), len(s1), 4, func(r0, r1 int) {
				colGradSumsHAVX2(s1, s2, g[r0*len(s1):r1*len(s1)], x[r0*len(s1):r1*len(s1)], m, r1-r0)
			})
		}
	},
	colAffineH: func(y, x []uint16, a, b []float64, relu bool) {
		if len(a) > 0 {
			colAffineHAVX2(y, x, a, b, len(y)/len(a), relu)
		}
	},
	colAffine2H: func(y, u, v []uint16, p, q, r []float64) {
		if len(p) > 0 {
			colAffine2HAVX2(y, u, v, p, q, r, len(y)/len(p))
		}
	},
	lnNorm:        lnNormAVX2,
	lnApply:       lnApplyAVX2,
	lnBackward:    lnBackwardAVX2,
	lnColAcc:      lnColAccAVX2,
	lnBackwardAcc: lnBackwardAccAVX2,
	accRow:        accRowAVX2,
	accRowScaled:  accRowScaledAVX2,
	storeScaled:   storeScaledAVX2,
	accRows:       accRowsAVX2,
	accRowsScaled: accRowsScaledAVX2,
	maxRowArg:     maxRowArgAVX2,
	transpose:     transposeAVX2,
	prefetchRows:  prefetchRowsAVX2,
	maxWindow:     maxWindowAVX2,
	sumWindow:     sumWindowAVX2,
	addWindow:     addWindowAVX2,
}

// vecAVX512 is vecAVX2 with AVX-512 bfloat16 column primitives where the
// channel count is a multiple of 16 (every layer of the usual vision
// models); the arithmetic, and so every bit, is the same.
var vecAVX512 = func() *vecKit {
	k := *vecAVX2
	k.colSumH = func(s []float64, x []uint16) {
		if len(s)%16 != 0 {
			vecAVX2.colSumH(s, x)
		} else if len(s) > 0 {
			colTiles(len(x)/len(s), len(s), 2, func(r0, r1 int) { colSumHAVX512(s, x[r0*len(s):r1*len(s)], r1-r0) })
		}
	}
	k.colSqDevH = func(s []float64, x []uint16, m []float64) {
		if len(s)%16 != 0 {
			vecAVX2.colSqDevH(s, x, m)
		} else if len(s) > 0 {
			colTiles(len(x)/len(s), len(s), 2, func(r0, r1 int) { colSqDevHAVX512(s, x[r0*len(s):r1*len(s)], m, r1-r0) })
		}
	}
	k.colGradSumsH = func(s1, s2 []float64, g, x []uint16, m []float64) {
		if len(s1)%16 != 0 {
			vecAVX2.colGradSumsH(s1, s2, g, x, m)
		} else if len(s1) > 0 {
			colTiles(len(g)/len(s1), len(s1), 4, func(r0, r1 int) {
				colGradSumsHAVX512(s1, s2, g[r0*len(s1):r1*len(s1)], x[r0*len(s1):r1*len(s1)], m, r1-r0)
			})
		}
	}
	k.colAffineH = func(y, x []uint16, a, b []float64, relu bool) {
		if len(a)%16 != 0 {
			vecAVX2.colAffineH(y, x, a, b, relu)
		} else if len(a) > 0 {
			colAffineHAVX512(y, x, a, b, len(y)/len(a), relu)
		}
	}
	k.colAffine2H = func(y, u, v []uint16, p, q, r []float64) {
		if len(p)%16 != 0 {
			vecAVX2.colAffine2H(y, u, v, p, q, r)
		} else if len(p) > 0 {
			colAffine2HAVX512(y, u, v, p, q, r, len(y)/len(p))
		}
	}
	return &k
}()
