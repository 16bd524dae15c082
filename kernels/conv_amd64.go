//go:build amd64 && !noasm

package kernels

func init() {
	convVecs[AVX2] = &convVec{addTo: addToAVX2Go, mulAddTo: mulAddToAVX2Go, addConst: addConstAVX2, sum: sumAVX2,
		transpose: transposeAVX2Go}
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

// addConstAVX2 adds c to every element of dst.
//
//go:noescape
func addConstAVX2(dst []float32, c float32)

// sumAVX2 returns the sum of x, accumulated in 32 float32 lanes.
//
//go:noescape
func sumAVX2(x []float32) float32

// transpose8AVX2 transposes tiles consecutive 8×8 tiles of an 8-row strip
// of src (row stride lds elements) into the 8-column strip of dst (row
// stride ldd): tile t covers source columns 8t…8t+7 and destination rows
// 8t…8t+7. The caller checks that both strips lie inside their slices.
//
//go:noescape
func transpose8AVX2(dst []float32, ldd int, src []float32, lds, tiles int)

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

// transposeAVX2Go transposes whole 8×8 tiles in assembly, one 8-row strip
// per call (a strip of up to a few thousand columns is well under the
// 0.1 ms an assembly call may take), and the ragged edges in Go.
func transposeAVX2Go(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	_ = src[(rows-1)*lds+cols-1]
	_ = dst[(cols-1)*ldd+rows-1]
	r8, c8 := rows&^7, cols&^7
	if c8 > 0 {
		for i := 0; i < r8; i += 8 {
			transpose8AVX2(dst[i:], ldd, src[i*lds:], lds, c8/8)
		}
	}
	if r8 < rows {
		transposeGeneric(dst[r8:], ldd, src[r8*lds:], lds, rows-r8, cols)
	}
	if c8 < cols {
		transposeGeneric(dst[c8*ldd:], ldd, src[c8:], lds, r8, cols-c8)
	}
}
