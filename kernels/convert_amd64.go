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

//go:noescape
func roundBF16AVX2(x []float32)

//go:noescape
func roundBF16AVX512(x []float32)

//go:noescape
func bf16ReLUStageAVX2(y []uint16, f []float32)

//go:noescape
func bf16AddStageAVX2(y []uint16, f []float32, res []uint16)

//go:noescape
func bf16AddReLUStageAVX2(y []uint16, f []float32, res []uint16)

//go:noescape
func bf16ReLUStageAVX512(y []uint16, f []float32)

//go:noescape
func bf16AddStageAVX512(y []uint16, f []float32, res []uint16)

//go:noescape
func bf16AddReLUStageAVX512(y []uint16, f []float32, res []uint16)

//go:noescape
func bf16AddAVX512(dst, a, b []uint16, relu bool)

//go:noescape
func bf16ReLUBackwardAVX512(dst, a, b []uint16)

//go:noescape
func bf16AddAVX2(dst, a, b []uint16, relu bool)

//go:noescape
func bf16ReLUBackwardAVX2(dst, a, b []uint16)

var (
	bf16ReLUStageAVX2Span      = bf16ReLUStageAVX2
	bf16AddStageAVX2Span       = bf16AddStageAVX2
	bf16AddReLUStageAVX2Span   = bf16AddReLUStageAVX2
	bf16ReLUStageAVX512Span    = bf16ReLUStageAVX512
	bf16AddStageAVX512Span     = bf16AddStageAVX512
	bf16AddReLUStageAVX512Span = bf16AddReLUStageAVX512
	bf16AddAVX512Span          = bf16AddAVX512
	bf16ReLUBackwardAVX512Span = bf16ReLUBackwardAVX512
	bf16AddAVX2Span            = bf16AddAVX2
	bf16ReLUBackwardAVX2Span   = bf16ReLUBackwardAVX2
	roundBF16AVX2Span          = roundBF16Asm
	roundBF16AVX512Span        = roundBF16Asm512
	f32ToBF16AVX2Span          = f32ToBF16Asm
	bf16ToF32AVX2Span          = bf16ToF32Asm
	f32ToBF16AVX512Span        = f32ToBF16Asm512
	bf16ToF32AVX512Span        = bf16ToF32Asm512
)

// cvtChunk is the most elements one assembly call converts.
const cvtChunk = 1 << 15

// cvtChunked runs kernel, which converts the first len&^(width−1)
// elements it is given, on chunks of at most cvtChunk elements (so no
// assembly call runs long unpreempted), and then tail on what is left.
func cvtChunked[D, S any](dst []D, src []S, kernel func([]D, []S), width int, tail func([]D, []S)) {
	n := len(src) &^ (width - 1)
	for lo := 0; lo < n; lo += cvtChunk {
		hi := min(lo+cvtChunk, n)
		kernel(dst[lo:hi], src[lo:hi])
	}
	if n < len(src) {
		tail(dst[n:len(src)], src[n:])
	}
}

func f32ToBF16Asm(dst []uint16, src []float32) {
	cvtChunked(dst, src, f32ToBF16AVX2, 8, f32ToBF16Span)
}

func bf16ToF32Asm(dst []float32, src []uint16) {
	cvtChunked(dst, src, bf16ToF32AVX2, 8, bf16ToF32Span)
}

// The AVX-512 spans convert sixteen elements at a time and leave the last
// fifteen or fewer to the AVX2 spans.
func f32ToBF16Asm512(dst []uint16, src []float32) {
	cvtChunked(dst, src, f32ToBF16AVX512, 16, f32ToBF16Asm)
}

func bf16ToF32Asm512(dst []float32, src []uint16) {
	cvtChunked(dst, src, bf16ToF32AVX512, 16, bf16ToF32Asm)
}

// The rounding spans work in place; cvtChunked's dst is the same slice.
func roundBF16Asm(x []float32) {
	cvtChunked(x, x, func(d, _ []float32) { roundBF16AVX2(d) }, 8, func(d, _ []float32) { roundBF16Span(d) })
}

func roundBF16Asm512(x []float32) {
	cvtChunked(x, x, func(d, _ []float32) { roundBF16AVX512(d) }, 16, func(d, _ []float32) { roundBF16Asm(d) })
}
