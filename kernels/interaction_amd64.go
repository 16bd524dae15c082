//go:build amd64 && !noasm

package kernels

import "slices"

// The interaction's inner loops by level: YMM registers from AVX2 (the
// sixteen lanes in two), ZMM from AVX512, the reference loops below.
var (
	interactionTriangleVariants = [levelCount]triangleFunc{Generic: interactionTriangleGo, AVX2: interactionTriangleY, AVX512: interactionTriangleZ}
	interactionGradsVariants    = [levelCount]gradsFunc{Generic: interactionGradsGo, AVX2: interactionGradsY, AVX512: interactionGradsZ}
)

// interactionGradsY is interactionGradsGo with the axpys on YMM registers.
var interactionGradsY = gradsWith(interactionAxpysY)

// tailMask16 is the lane mask of the last len%16 elements of a row.
func tailMask16(n int) int { return 1<<(n%16) - 1 }

// interactionTriangleZ is interactionTriangleGo on ZMM registers.
func interactionTriangleZ(dst []float32, feats [][]float32, b, d int, self bool) {
	if ok := triangleArgs(dst, feats, b, d, self); ok {
		interactionTriangleAVX512(&dst[0], &feats[0], len(feats), b2i(self), d, tailMask16(d), b*d*4)
	}
}

// interactionTriangleY is interactionTriangleGo on YMM registers.
func interactionTriangleY(dst []float32, feats [][]float32, b, d int, self bool) {
	if ok := triangleArgs(dst, feats, b, d, self); ok {
		r := d % 16
		interactionTriangleAVX2(&dst[0], &feats[0], len(feats), b2i(self), d, r, laneMask(min(r, 8)), laneMask(max(r-8, 0)), b*d*4)
	}
}

// triangleArgs checks a triangle's operands for the assembly, which reads
// row b of every matrix unchecked, and reports whether there is anything
// to compute (when there is not, dst is done).
func triangleArgs(dst []float32, feats [][]float32, b, d int, self bool) bool {
	f := len(feats)
	n := f*(f-1)/2 + f*b2i(self)
	if len(dst) < n {
		panic("kernels: interactionTriangle: dst is shorter than the pairs")
	}
	if n == 0 {
		return false
	}
	if d == 0 {
		clear(dst[:n])
		return false
	}
	for _, m := range feats {
		_ = m[(b+1)*d-1]
	}
	return true
}

// interactionGradsZ is interactionGradsGo on ZMM registers, four
// features at a time, in one assembly call that reads and writes row b of
// every matrix; with fewer than four features, or a gradient skipped, it
// is interactionGradsY.
func interactionGradsZ(sc *interactionScratch, grads [][]float32, g []float32, feats [][]float32, b, d int, self bool) {
	f := len(feats)
	if f < 4 || slices.ContainsFunc(grads, func(m []float32) bool { return m == nil }) {
		interactionGradsY(sc, grads, g, feats, b, d, self)
		return
	}
	if d == 0 {
		return
	}
	if len(grads) != f || len(g) < d+f*(f-1)/2+f*b2i(self) {
		panic("kernels: interactionGradsZ: too few gradients or dots")
	}
	for t := range feats {
		_, _ = feats[t][(b+1)*d-1], grads[t][(b+1)*d-1]
	}
	interactionGradsAVX512(&grads[0], &g[0], &feats[0], f, b2i(self), d, tailMask16(d), b*d*4)
}

// laneMasks holds eight −1s then eight 0s: the eight lanes from
// &laneMasks[8−c] enable the first c.
var laneMasks = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

// laneMask returns the VMASKMOVPS mask of the first c of eight lanes.
func laneMask(c int) *int32 { return &laneMasks[8-c] }

// interactionAxpysY is interactionAxpysGo on YMM registers.
func interactionAxpysY(dst, init []float32, rows [][]float32, coef []float32, skip int) {
	if ip, rp, cp, ok := axpysArgs(dst, init, rows, coef); ok {
		interactionAxpysAVX2(&dst[0], ip, rp, cp, len(coef), len(dst), laneMask(len(dst)%8), skipCount(skip, len(coef)))
	}
}

// skipCount is term skip of n as the assembly counts it: the terms left
// (n − skip) when it comes up, 0 (never) for no term of n.
func skipCount(skip, n int) int {
	if skip < 0 || skip >= n {
		return 0
	}
	return n - skip
}

// axpysArgs returns an axpys's operands for the assembly: their pointers
// (nil for no init, or no terms), and whether dst has elements. The
// assembly reads len(dst) elements of each row unchecked: the caller,
// interactionGradRows through gradsWith, slices every row to Dim.
func axpysArgs(dst, init []float32, rows [][]float32, coef []float32) (ip *float32, rp *[]float32, cp *float32, ok bool) {
	if len(dst) == 0 {
		return nil, nil, nil, false
	}
	rows = rows[:len(coef)]
	if init != nil {
		ip = &init[:len(dst)][0]
	}
	if len(coef) > 0 {
		rp, cp = &rows[0], &coef[0]
	}
	return ip, rp, cp, true
}

// interactionTriangleAVX512 sets dst to the dots of the pairs of the f
// rows (d floats each) at byte off of the matrices in
// interactionTriangleGo's order; tail is the mask of the last d%16. feats
// points at the first of f slice headers, 24 bytes apart, whose data
// pointers the assembly reads.
//
//go:noescape
func interactionTriangleAVX512(dst *float32, feats *[]float32, f, self, d int, tail int, off int)

// interactionGradsAVX512 sets the rows at byte off of the f gradient
// matrices (slice headers at grads) to interactionGradsGo's gradients:
// feature 0's from the first d floats at dout, the others from zeros,
// plus the rows at off of the feature matrices (headers at feats) times
// their coefficients among the dots after those d; tail is the mask of
// the last d%16.
//
//go:noescape
func interactionGradsAVX512(grads *[]float32, dout *float32, feats *[]float32, f, self, d int, tail int, off int)

// interactionTriangleAVX2 is interactionTriangleAVX512 on YMM registers:
// tail is d%16, m0 and m1 the masks of its lanes in the two halves.
//
//go:noescape
func interactionTriangleAVX2(dst *float32, feats *[]float32, f, self, d int, tail int, m0, m1 *int32, off int)

// interactionAxpysAVX2 sets dst (d floats) to init (zeros when nil) plus
// coef[m]·rows[m].data for m < n, in order, but for the term with sk
// terms left (skipCount); m is the mask of the last d%8 lanes.
//
//go:noescape
func interactionAxpysAVX2(dst, init *float32, rows *[]float32, coef *float32, n, d int, m *int32, sk int)
