//go:build !amd64 || noasm

package kernels

func sbgemmKernel12x32(kp int, a, b *uint16, c *float32, ldc, tiles, rows int, alpha, beta float32) {
	panic("kernels: no BF16 GEMM kernel in this build")
}

func sbgemmAsm() bool { return false }

func (g *sbgemmCall) bindBlocked() {}

func (g *sbgemmCall) blocked() { panic("kernels: no BF16 GEMM kernel in this build") }

func sgemmBF16A(m, n, k int, a []uint16, lda int, transB bool, b []float32, ldb int, pb *PackedB, c []float32, ldc int, ep Epilogue) bool {
	return false
}

func packSbgemmB(transB bool, k, n int, b []uint16, ldb int) *sbPackedB { return nil }
