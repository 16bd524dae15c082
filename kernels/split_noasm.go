//go:build !amd64 || noasm

package kernels

// Without assembly joining and splitting have only their Generic variants.
var (
	joinBF16AVX2Span  func(dst []float32, top, bottom []uint16)
	splitBF16AVX2Span func(top, bottom []uint16, src []float32)
)
