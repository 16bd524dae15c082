//go:build amd64 && !noasm

package kernels

// The interaction's inner loops by level: YMM registers from AVX2 (the
// sixteen lanes in two), ZMM from AVX512, the reference loops below.
var (
	interactionTriangleVariants = [levelCount]func(dst []float32, rows [][]float32, self bool){Generic: interactionTriangleGo, AVX2: interactionTriangleY, AVX512: interactionTriangleZ}
	interactionGradsVariants    = [levelCount]gradsFunc{Generic: interactionGradsGo, AVX2: interactionGradsY, AVX512: interactionGradsZ}
)

// interactionGradsY is interactionGradsGo with the axpys on YMM registers.
var interactionGradsY = gradsWith(interactionAxpysY)

// tailMask16 is the lane mask of the last len%16 elements of a row.
func tailMask16(n int) int { return 1<<(n%16) - 1 }

// interactionTriangleZ is interactionTriangleGo on ZMM registers.
func interactionTriangleZ(dst []float32, rows [][]float32, self bool) {
	if f, d, ok := triangleArgs(dst, rows, self); ok {
		interactionTriangleAVX512(&dst[0], &rows[0], f, b2i(self), d, tailMask16(d))
	}
}

// interactionTriangleY is interactionTriangleGo on YMM registers.
func interactionTriangleY(dst []float32, rows [][]float32, self bool) {
	if f, d, ok := triangleArgs(dst, rows, self); ok {
		r := d % 16
		interactionTriangleAVX2(&dst[0], &rows[0], f, b2i(self), d, r, laneMask(min(r, 8)), laneMask(max(r-8, 0)))
	}
}

// triangleArgs checks a triangle's dst for the assembly and returns the
// row count and length, and whether there is anything to compute (when
// there is not, dst is done). Every row must hold the first row's length,
// read unchecked, as the callers' rows, sliced to Dim, do.
func triangleArgs(dst []float32, rows [][]float32, self bool) (f, d int, ok bool) {
	f = len(rows)
	if f == 0 {
		return 0, 0, false
	}
	d = len(rows[0])
	n := f * (f - 1) / 2
	if self {
		n += f
	}
	if len(dst) < n {
		panic("kernels: interactionTriangle: dst is shorter than the pairs")
	}
	if n > 0 && d == 0 {
		clear(dst[:n])
	}
	return f, d, n > 0 && d > 0
}

// laneMasks holds eight −1s then eight 0s: the eight lanes from
// &laneMasks[8−c] enable the first c.
var laneMasks = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

// laneMask returns the VMASKMOVPS mask of the first c of eight lanes.
func laneMask(c int) *int32 { return &laneMasks[8-c] }

// interactionGradsZ is interactionGradsGo on ZMM registers, four
// features at a time; below four features it is interactionGradsY. The
// assembly writes every feature, so nil rows of dst become sc.junk, and
// reads len(init) elements of every row unchecked, as
// interactionGradRows's rows, sliced to Dim, hold.
func interactionGradsZ(sc *interactionScratch, dst [][]float32, init []float32, rows [][]float32, g []float32, self bool) {
	f, d := len(rows), len(init)
	if f < 4 {
		interactionGradsY(sc, dst, init, rows, g, self)
		return
	}
	if d == 0 {
		return
	}
	for t, v := range dst {
		if v == nil {
			dst[t] = sc.junkRow(d)
		}
	}
	if len(dst) != f || len(g) < f*(f-1)/2+f*b2i(self) {
		panic("kernels: interactionGradsZ: too few gradients or dots")
	}
	interactionGradsAVX512(&dst[0], &init[0], &rows[0], &g[0], f, b2i(self), d, tailMask16(d))
}

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
// rows (d floats each) in interactionTriangleGo's order; tail is the mask
// of the last d%16. rows points at the first of f slice headers, 24 bytes
// apart, whose data pointers the assembly reads.
//
//go:noescape
func interactionTriangleAVX512(dst *float32, rows *[]float32, f, self, d int, tail int)

// interactionGradsAVX512 sets the f rows at dst (slice headers, d floats
// each) to the gradients of interactionGradsGo: row 0 from init, the
// others from zeros, plus the rows (headers, d floats each) times their
// coefficients among the dots; tail is the mask of the last d%16.
//
//go:noescape
func interactionGradsAVX512(dst *[]float32, init *float32, rows *[]float32, dots *float32, f, self, d int, tail int)

// interactionTriangleAVX2 is interactionTriangleAVX512 on YMM registers:
// tail is d%16, m0 and m1 the masks of its lanes in the two halves.
//
//go:noescape
func interactionTriangleAVX2(dst *float32, rows *[]float32, f, self, d int, tail int, m0, m1 *int32)

// interactionAxpysAVX2 sets dst (d floats) to init (zeros when nil) plus
// coef[m]·rows[m].data for m < n, in order, but for the term with sk
// terms left (skipCount); m is the mask of the last d%8 lanes.
//
//go:noescape
func interactionAxpysAVX2(dst, init *float32, rows *[]float32, coef *float32, n, d int, m *int32, sk int)
