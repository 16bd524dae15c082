//go:build amd64 && !noasm

package kernels

import (
	"slices"
	"unsafe"
)

// The interaction's inner loops by level: YMM registers from AVX2 (the
// sixteen lanes in two), ZMM from AVX512, the reference loops below.
var (
	interactionTriangleVariants = [levelCount]triangleFunc{Generic: interactionTriangleGo, AVX2: interactionTriangleY, AVX512: interactionTriangleZ}
	interactionGradsVariants    = [levelCount]gradsFunc{Generic: interactionGradsGo, AVX2: interactionGradsY, AVX512: interactionGradsZ}
)

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
// every matrix; see gradsAsm for when it is interactionGradsGo.
func interactionGradsZ(sc *interactionScratch, grads [][]float32, g []float32, feats [][]float32, b, d int, self bool) {
	if !gradsAsm(grads, g, feats, b, d, self) {
		interactionGradsGo(sc, grads, g, feats, b, d, self)
		return
	}
	interactionGradsAVX512(&grads[0], &g[0], &feats[0], len(feats), b2i(self), d, tailMask16(d), b*d*4, b2i(streamable(grads, d)))
}

// interactionGradsY is interactionGradsZ on YMM registers.
func interactionGradsY(sc *interactionScratch, grads [][]float32, g []float32, feats [][]float32, b, d int, self bool) {
	if !gradsAsm(grads, g, feats, b, d, self) {
		interactionGradsGo(sc, grads, g, feats, b, d, self)
		return
	}
	interactionGradsAVX2(&grads[0], &g[0], &feats[0], len(feats), b2i(self), d, laneMask(d%8), b*d*4, b2i(streamable(grads, d)))
}

// gradsAsm checks a sample's gradients for the assembly, which reads and
// writes row b of every matrix unchecked, and reports whether it runs:
// not below four features (a block's), nor with a gradient skipped (the
// assembly writes every one; dlrm wants them all), nor with nothing to do.
func gradsAsm(grads [][]float32, g []float32, feats [][]float32, b, d int, self bool) bool {
	f := len(feats)
	if f < 4 || d == 0 || slices.ContainsFunc(grads, func(m []float32) bool { return m == nil }) {
		return false
	}
	if len(grads) != f || len(g) < d+f*(f-1)/2+f*b2i(self) {
		panic("kernels: interactionGrads: too few gradients or dots")
	}
	for t := range feats {
		_, _ = feats[t][(b+1)*d-1], grads[t][(b+1)*d-1]
	}
	return true
}

// laneMasks holds eight −1s then eight 0s: the eight lanes from
// &laneMasks[8−c] enable the first c.
var laneMasks = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

// laneMask returns the VMASKMOVPS mask of the first c of eight lanes.
func laneMask(c int) *int32 { return &laneMasks[8-c] }

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
func interactionGradsAVX512(grads *[]float32, dout *float32, feats *[]float32, f, self, d int, tail int, off int, nt int)

// streamMinBytes is the gradients' size from which the AVX-512 kernel
// streams them.
var streamMinBytes = 4 << 20

// streamable reports whether the gradient rows (d floats each) are all
// 64-byte aligned and, in all, at least streamMinBytes, so the assembly
// kernels may store their whole blocks (64 columns, 16 on AVX2) with
// non-temporal stores (nt): DLRM's gradients, [2048, 64] per feature,
// are written once and read by the next op much later, and stored
// through the caches each line was first read from memory for nothing
// (14 MB of the backward's 45; 3.7 → 2.2 ms on Zen 4). Smaller ones may
// well be read again from the caches.
func streamable(grads [][]float32, d int) bool {
	if d%16 != 0 || len(grads)*len(grads[0])*4 < streamMinBytes {
		return false
	}
	for _, g := range grads {
		if uintptr(unsafe.Pointer(unsafe.SliceData(g)))%64 != 0 {
			return false
		}
	}
	return true
}

// interactionTriangleAVX2 is interactionTriangleAVX512 on YMM registers:
// tail is d%16, m0 and m1 the masks of its lanes in the two halves.
//
//go:noescape
func interactionTriangleAVX2(dst *float32, feats *[]float32, f, self, d int, tail int, m0, m1 *int32, off int)

// interactionGradsAVX2 is interactionGradsAVX512 on YMM registers, m the
// mask of the last d%8 lanes.
//
//go:noescape
func interactionGradsAVX2(grads *[]float32, dout *float32, feats *[]float32, f, self, d int, m *int32, off int, nt int)
