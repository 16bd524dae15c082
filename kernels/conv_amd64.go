//go:build amd64 && !noasm

package kernels

func init() {
	convVecs[AVX2] = &convVec{addTo: addToAVX2Go, mulAddTo: mulAddToAVX2Go, addConst: addConstAVX2,
		sum: func(x []float32) float32 { return float32(sumAVX2(x)) }, transpose: transposeAVX2, copyRuns: copyRunsAVX2Go}
	convOps = pick(level, convVecs)
}

// addToAVX2 adds src to dst over len(dst) elements; src must be as long.
//
//go:noescape
func addToAVX2(dst, src []float32)

// mulAddToAVX2 adds a·b to dst over len(dst) elements with fused
// multiply-adds; a and b must be as long.
//
//go:noescape
func mulAddToAVX2(dst, a, b []float32)

// copyRunsAVX2 is convVec.copyRuns on pointers; it is in conv_amd64.s.
//
//go:noescape
func copyRunsAVX2(dst *float32, dstStride int, src *float32, srcStride, count, runLen int)

func copyRunsAVX2Go(dst []float32, dstStride int, src []float32, srcStride, count, runLen int) {
	if count <= 0 || runLen <= 0 {
		return
	}
	checkRuns(len(dst), dstStride, len(src), srcStride, count, runLen)
	copyRunsAVX2(&dst[0], dstStride, &src[0], srcStride, count, runLen)
}

// addConstAVX2 adds c to every element of dst.
//
//go:noescape
func addConstAVX2(dst []float32, c float32)

func addToAVX2Go(dst, src []float32) {
	if len(src) < len(dst) {
		panic("kernels: addTo: short source")
	}
	addToAVX2(dst, src)
}

func mulAddToAVX2Go(dst, a, b []float32) {
	if len(a) < len(dst) || len(b) < len(dst) {
		panic("kernels: mulAddTo: short operand")
	}
	mulAddToAVX2(dst, a, b)
}
