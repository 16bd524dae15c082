//go:build amd64 && !noasm

package kernels

import "unsafe"

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
func colSumAVX512(s []float64, x []float32, rows int)

//go:noescape
func colSqDevAVX512(s []float64, x []float32, m []float64, rows int)

//go:noescape
func colGradSumsAVX512(s1, s2 []float64, g, x []float32, m []float64, rows int)

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
// (elem counting every operand a row is read from), in order: about 4 KiB
// of rows per call, or one row per call when a row holds 1 KiB or more.
// The column primitives walk their rows one strip of channels at a time;
// over a whole block that strided walk defeated the hardware prefetchers
// (BF16 batch-norm statistics of 256 channels read 6 GB/s from L3 on Zen
// 4), where a few rows at a time stay in L1 for every strip. Rows of many
// strips are still walked across within a tile: one row a call keeps the
// reads sequential (float32 column sums of 256 channels from memory: 13.5
// → 27 GB/s on Zen 4). The per-channel order of the sums is the same.
func colTiles(rows, c, elem int, f func(r0, r1 int)) {
	t := 1
	if row := c * elem; row < colRowBytes {
		t = colTileBytes / row
	}
	for r := 0; r < rows; r += t {
		f(r, min(r+t, rows))
	}
}

const colTileBytes, colRowBytes = 4 << 10, 1 << 10

var vecAVX2 = &vecKit{
	sum:         sumAVX2,
	sqDev:       sqDevAVX2,
	gradSums:    gradSumsAVX2,
	gradSumsW:   gradSumsWAVX2,
	dot:         dotAVX2,
	colSum:      colSumWith(colSumAVX2, nil),
	colSqDev:    colSqDevWith(colSqDevAVX2, nil),
	colGradSums: colGradSumsWith(colGradSumsAVX2, nil),
	affine:      affineAVX2,
	affine2:     affine2AVX2,
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
	colSumH:      colSumWith(colSumHAVX2, nil),
	colSqDevH:    colSqDevWith(colSqDevHAVX2, nil),
	colGradSumsH: colGradSumsWith(colGradSumsHAVX2, nil),
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

// colSumWith, colSqDevWith and colGradSumsWith wrap a column kernel of
// either element type in colTiles. With narrow set, the kernel takes only
// channel counts that are multiples of 16 (the AVX-512 forms) and narrow,
// the AVX2 kit's primitive, takes the others.
func colSumWith[T float32 | uint16](f func(s []float64, x []T, rows int), narrow func(s []float64, x []T)) func(s []float64, x []T) {
	return func(s []float64, x []T) {
		if narrow != nil && len(s)%16 != 0 {
			narrow(s, x)
		} else if c := len(s); c > 0 {
			colTiles(len(x)/c, c, elemBytes[T](), func(r0, r1 int) { f(s, x[r0*c:r1*c], r1-r0) })
		}
	}
}

func colSqDevWith[T float32 | uint16](f func(s []float64, x []T, m []float64, rows int), narrow func(s []float64, x []T, m []float64)) func(s []float64, x []T, m []float64) {
	return func(s []float64, x []T, m []float64) {
		if narrow != nil && len(s)%16 != 0 {
			narrow(s, x, m)
		} else if c := len(s); c > 0 {
			colTiles(len(x)/c, c, elemBytes[T](), func(r0, r1 int) { f(s, x[r0*c:r1*c], m, r1-r0) })
		}
	}
}

func colGradSumsWith[T float32 | uint16](f func(s1, s2 []float64, g, x []T, m []float64, rows int), narrow func(s1, s2 []float64, g, x []T, m []float64)) func(s1, s2 []float64, g, x []T, m []float64) {
	return func(s1, s2 []float64, g, x []T, m []float64) {
		if narrow != nil && len(s1)%16 != 0 {
			narrow(s1, s2, g, x, m)
		} else if c := len(s1); c > 0 {
			colTiles(len(g)/c, c, 2*elemBytes[T](), func(r0, r1 int) { f(s1, s2, g[r0*c:r1*c], x[r0*c:r1*c], m, r1-r0) })
		}
	}
}

// elemBytes is the size of a T.
func elemBytes[T float32 | uint16]() int {
	var v T
	return int(unsafe.Sizeof(v))
}

// vecAVX512 is vecAVX2 with the AVX-512 column primitives of
// colwalk512_amd64.h (all of the bfloat16 ones, the float32 sums) where
// the channel count is a multiple of 16 (every layer of the usual vision
// models); the arithmetic, and so every bit, is the same.
var vecAVX512 = func() *vecKit {
	k := *vecAVX2
	k.colSum = colSumWith(colSumAVX512, vecAVX2.colSum)
	k.colSqDev = colSqDevWith(colSqDevAVX512, vecAVX2.colSqDev)
	k.colGradSums = colGradSumsWith(colGradSumsAVX512, vecAVX2.colGradSums)
	k.colSumH = colSumWith(colSumHAVX512, vecAVX2.colSumH)
	k.colSqDevH = colSqDevWith(colSqDevHAVX512, vecAVX2.colSqDevH)
	k.colGradSumsH = colGradSumsWith(colGradSumsHAVX512, vecAVX2.colGradSumsH)
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
