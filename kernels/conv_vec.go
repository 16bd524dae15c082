package kernels

// The short vector loops the convolution paths spend their non-GEMM time
// in: adding col2im rows back onto the input gradient, adding the bias,
// summing the bias gradient, and the depthwise stencils. Each has a pure-Go
// reference and, where assembly pays, faster variants chosen once by level.

// convVec is one level's set of convolution vector loops. Every function
// works on len(dst) elements; callers pass operands at least that long.
type convVec struct {
	// addTo adds src to dst elementwise.
	addTo func(dst, src []float32)
	// mulAddTo adds a·b to dst elementwise.
	mulAddTo func(dst, a, b []float32)
	// addConst adds c to every element of dst.
	addConst func(dst []float32, c float32)
	// sum returns the sum of x.
	sum func(x []float32) float32
	// transpose writes the rows×cols matrix src (row stride lds) to dst as
	// its cols×rows transpose (row stride ldd).
	transpose func(dst []float32, ldd int, src []float32, lds, rows, cols int)
	// copyRuns copies count runs of runLen floats, run i from
	// src[i·srcStride:] to dst[i·dstStride:]: the rows of an im2col matrix
	// that one kernel row of a small-channel convolution fills, one call
	// instead of one copy per pixel.
	copyRuns func(dst []float32, dstStride int, src []float32, srcStride, count, runLen int)
}

// convVecs holds the variants by level; the assembly file fills in its own.
var convVecs = [levelCount]*convVec{
	Generic: {addTo: addToGeneric, mulAddTo: mulAddToGeneric, addConst: addConstGeneric,
		sum: func(x []float32) float32 { return float32(vecGo.sum(x)) }, transpose: transposeGo, copyRuns: copyRunsGo},
}

func copyRunsGo(dst []float32, dstStride int, src []float32, srcStride, count, runLen int) {
	if count <= 0 || runLen <= 0 {
		return
	}
	checkRuns(len(dst), dstStride, len(src), srcStride, count, runLen)
	for i := range count {
		copy(dst[i*dstStride:i*dstStride+runLen], src[i*srcStride:i*srcStride+runLen])
	}
}

// checkRuns panics unless count runs of runLen fit in slices of ld and ls
// floats at the given strides.
func checkRuns(ld, dstStride, ls, srcStride, count, runLen int) {
	if dstStride < 0 || srcStride < 0 || (count-1)*dstStride+runLen > ld || (count-1)*srcStride+runLen > ls {
		fail(ErrShape, "copyRuns", "%d runs of %d at strides %d, %d do not fit %d and %d floats",
			count, runLen, dstStride, srcStride, ld, ls)
	}
}

// convOps is the set in use, picked once; tests switch it level by level.
var convOps = pick(level, convVecs)

func addToGeneric(dst, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] += v
	}
}

func mulAddToGeneric(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] += a[i] * b[i]
	}
}

func addConstGeneric(dst []float32, c float32) {
	for i := range dst {
		dst[i] += c
	}
}
