//go:build !amd64 || noasm

package kernels

// Without assembly the peak loops are the pure-Go ones.
var (
	fmaLoopVariants = [levelCount]func(int) float64{Generic: fmaLoopGeneric}
	triadVariants   = [levelCount]func(a, b, c []float32, s float32){Generic: triadGeneric}
)
