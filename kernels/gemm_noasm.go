//go:build !amd64 || noasm

package kernels

// Without assembly every GEMM entry point runs its Generic variant.
var (
	sgemmVariants       = [levelCount]sgemmFunc{Generic: sgemmGeneric}
	packBVariants       = [levelCount]packBFunc{Generic: packBGeneric}
	sgemmPackedVariants = [levelCount]sgemmPackedFunc{Generic: sgemmPackedGeneric}
)

// The Generic variants of Sgemm and SgemmPacked sum in different orders.
func packedMatchesSgemm(m, n, k int) bool { return false }
