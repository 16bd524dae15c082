//go:build amd64 && !noasm

package kernels

// joinBF16AVX2 and splitBF16AVX2 handle the first len&^7 elements; the
// caller does the rest.
//
//go:noescape
func joinBF16AVX2(dst []float32, top, bottom []uint16)

//go:noescape
func splitBF16AVX2(top, bottom []uint16, src []float32)

var (
	joinBF16AVX2Span  = joinBF16Asm
	splitBF16AVX2Span = splitBF16Asm
)

// splitChunk is the most elements one assembly call handles, so no call
// holds up the garbage collector for long.
const splitChunk = 1 << 15

func joinBF16Asm(dst []float32, top, bottom []uint16) {
	top, bottom = top[:len(dst)], bottom[:len(dst)]
	for lo := 0; lo < len(dst); lo += splitChunk {
		hi := min(lo+splitChunk, len(dst))
		joinBF16AVX2(dst[lo:hi], top[lo:hi], bottom[lo:hi])
	}
	t := len(dst) &^ 7
	joinBF16Span(dst[t:], top[t:], bottom[t:])
}

func splitBF16Asm(top, bottom []uint16, src []float32) {
	top, bottom = top[:len(src)], bottom[:len(src)]
	for lo := 0; lo < len(src); lo += splitChunk {
		hi := min(lo+splitChunk, len(src))
		splitBF16AVX2(top[lo:hi], bottom[lo:hi], src[lo:hi])
	}
	t := len(src) &^ 7
	splitBF16Span(top[t:], bottom[t:], src[t:])
}
