//go:build amd64 && !noasm

package kernels

//go:noescape
func f32ToBF16AVX2(dst []uint16, src []float32)

//go:noescape
func bf16ToF32AVX2(dst []float32, src []uint16)

//go:noescape
func f32ToBF16AVX512(dst []uint16, src []float32)

//go:noescape
func bf16ToF32AVX512(dst []float32, src []uint16)

var (
	f32ToBF16AVX2Span   = f32ToBF16Asm
	bf16ToF32AVX2Span   = bf16ToF32Asm
	f32ToBF16AVX512Span = f32ToBF16Asm512
	bf16ToF32AVX512Span = bf16ToF32Asm512
)

// cvtChunk is the most elements one assembly call converts.
const cvtChunk = 1 << 15

func f32ToBF16Asm(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for lo := 0; lo < len(src); lo += cvtChunk {
		hi := min(lo+cvtChunk, len(src))
		f32ToBF16AVX2(dst[lo:hi], src[lo:hi])
	}
	tail := len(src) &^ 7
	f32ToBF16Span(dst[tail:], src[tail:])
}

func bf16ToF32Asm(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for lo := 0; lo < len(src); lo += cvtChunk {
		hi := min(lo+cvtChunk, len(src))
		bf16ToF32AVX2(dst[lo:hi], src[lo:hi])
	}
	tail := len(src) &^ 7
	bf16ToF32Span(dst[tail:], src[tail:])
}

// The AVX-512 spans convert sixteen elements at a time and leave the last
// fifteen or fewer to the AVX2 spans.
func f32ToBF16Asm512(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for lo := 0; lo < len(src); lo += cvtChunk {
		hi := min(lo+cvtChunk, len(src))
		f32ToBF16AVX512(dst[lo:hi], src[lo:hi])
	}
	tail := len(src) &^ 15
	f32ToBF16Asm(dst[tail:], src[tail:])
}

func bf16ToF32Asm512(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for lo := 0; lo < len(src); lo += cvtChunk {
		hi := min(lo+cvtChunk, len(src))
		bf16ToF32AVX512(dst[lo:hi], src[lo:hi])
	}
	tail := len(src) &^ 15
	bf16ToF32Asm(dst[tail:], src[tail:])
}
