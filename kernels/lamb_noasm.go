//go:build !amd64 || noasm

package kernels

// Without assembly the Lamb and LARS passes have only their Generic
// variants.
var (
	lambMomentsAVX2Span func(c *LambConfig, p, g, m, v []float32, acc *[8]float64)
	lambApplyAVX2Span   func(c *LambConfig, negScale float32, p, m, v []float32)
	sumSquares2AVX2Span func(a, b []float32, acc *[8]float64)

	lambMomentsAVX512Span func(c *LambConfig, p, g, m, v []float32, acc *[8]float64)
	lambApplyAVX512Span   func(c *LambConfig, negScale float32, p, m, v []float32)
)
