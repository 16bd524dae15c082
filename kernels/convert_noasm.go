//go:build !amd64 || noasm

package kernels

// Without assembly the conversions have only their Generic variants.
var (
	f32ToBF16AVX2Span, f32ToBF16AVX512Span func(dst []uint16, src []float32)
	bf16ToF32AVX2Span, bf16ToF32AVX512Span func(dst []float32, src []uint16)
	roundBF16AVX2Span, roundBF16AVX512Span func(x []float32)

	bf16ReLUStageAVX2Span, bf16ReLUStageAVX512Span func(y []uint16, f []float32)

	bf16AddStageAVX2Span, bf16AddReLUStageAVX2Span     func(y []uint16, f []float32, res []uint16)
	bf16AddStageAVX512Span, bf16AddReLUStageAVX512Span func(y []uint16, f []float32, res []uint16)

	bf16AddAVX2Span, bf16AddAVX512Span                   func(dst, a, b []uint16, relu bool)
	bf16ReLUBackwardAVX2Span, bf16ReLUBackwardAVX512Span func(dst, a, b []uint16)
)
