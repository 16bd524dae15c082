//go:build !amd64 || noasm

package kernels

// Without assembly the binary operations have only their Generic variants.
var (
	binarySameAVX2    func(op BinOp, dst, a, b []float32)
	binaryScalarAVX2  func(op BinOp, dst, a []float32, s float32, left bool)
	binaryStridedAVX2 func(op BinOp, n int, dst []float32, ds int, a []float32, as int, b []float32, bs int)
)
