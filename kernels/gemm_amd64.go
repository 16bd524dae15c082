//go:build amd64 && !noasm

package kernels

// The GEMM variants by level. AVX-512 has no variant of its own yet and
// falls back to AVX2 (pick); an AVX-512 kernel (e.g. 14×32 with ZMM
// accumulators) slots in here with its own panel width, which PackedB
// records so a mismatched layout is read by the Generic consumer.
var (
	sgemmVariants       = [levelCount]sgemmFunc{Generic: sgemmGeneric, AVX2: sgemmAVX2}
	packBVariants       = [levelCount]packBFunc{Generic: packBGeneric, AVX2: packBAVX2}
	sgemmPackedVariants = [levelCount]sgemmPackedFunc{Generic: sgemmPackedGeneric, AVX2: sgemmPackedAVX2}
)

// Implemented in gemm_amd64.s.

//go:noescape
func sgemmKernel6x16(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32)

//go:noescape
func gemmPackBN16(kc int, b *float32, ldb int, dst *float32, panels int)

//go:noescape
func gemmPackBN16Mask(kc int, b *float32, ldb int, dst *float32, mask *int32)

//go:noescape
func gemmPackBT16(kc8 int, b *float32, ldb int, dst *float32, panelStride, panels int)

//go:noescape
func gemmPackAN6(kc8 int, a *float32, lda int, dst *float32)

//go:noescape
func gemmPackAT6(kc int, a *float32, lda int, dst *float32)
