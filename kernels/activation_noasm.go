//go:build !amd64 || noasm

package kernels

// Without assembly the elementwise functions have only their Generic
// variants; pick falls back to them.
var (
	actForwardAVX2    func(a Act, dst, src []float32)
	actBackwardAVX2   func(a Act, dx, dy, v []float32)
	actForwardAVX512  func(a Act, dst, src []float32)
	actBackwardAVX512 func(a Act, dx, dy, v []float32)
	dropoutSpanAVX2   func(dst, src []float32, keep []uint8, scale float32)
)
