//go:build amd64 && !noasm

package kernels

// The GEMM variants by level. The AVX-512 GEMM differs from the AVX2 one
// only in its micro-kernel, which reads the same packed panels, so both
// share the packers (and a PackedB made at either level serves both).
var (
	sgemmVariants       = [levelCount]sgemmFunc{Generic: sgemmGeneric, AVX2: sgemmAVX2, AVX512: sgemmAVX512}
	packBVariants       = [levelCount]packBFunc{Generic: packBGeneric, AVX2: packBAVX2}
	sgemmPackedVariants = [levelCount]sgemmPackedFunc{Generic: sgemmPackedGeneric, AVX2: sgemmPackedAVX2, AVX512: sgemmPackedAVX512}
)

// Implemented in gemm_amd64.s.

//go:noescape
func sgemmKernel6x16(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32)

// sgemmKernel6x16S is sgemmKernel6x16 with A's six rows unpacked, lda
// floats apart.
//
//go:noescape
func sgemmKernel6x16S(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32, lda int)

// sgemmKernel12x16 is sgemmKernel6x16 on ZMM registers with tiles of two
// A panels (12 rows); it is in gemm_avx512_amd64.s.
//
//go:noescape
func sgemmKernel12x16(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32)

// sgemmKernel12x16S is sgemmKernel12x16 with A's twelve rows unpacked, lda
// floats apart.
//
//go:noescape
func sgemmKernel12x16S(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32, lda int)

// sgemmKernel12x32 is sgemmKernel12x16 on tiles of two B panels (32
// columns), without a column mask.
//
//go:noescape
func sgemmKernel12x32(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int)

// sgemmKernel12x32S is sgemmKernel12x32 with A's rows unpacked, lda floats
// apart (gemm_avx512_amd64.s).
//
//go:noescape
func sgemmKernel12x32S(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, lda int)

// sgemmKernel12x32D is sgemmKernel12x32 with A's 12 rows consecutive
// floats and its depths ldk floats apart (gemm_avx512_amd64.s).
//
//go:noescape
func sgemmKernel12x32D(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, ldk int)

// convKernel12x32 is the direct convolution micro-kernel
// (gemm_avx512_amd64.s): 12 output pixels × 32 channels, the depth running
// over taps kernel taps of ct channels each, A read in place from the
// padded input at a + offs[t] bytes with rows lda floats apart.
//
//go:noescape
func convKernel12x32(taps int, offs *int, ct int, a *float32, lda int, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, bStep, cStep, colBiasStep int)

//go:noescape
func gemmPackBN16(kc int, b *float32, ldb int, dst *float32, panels int)

//go:noescape
func gemmPackBN16Mask(kc int, b *float32, ldb int, dst *float32, mask *int32)

//go:noescape
func gemmPackBT16(kc8 int, b *float32, ldb int, dst *float32, panelStride, panels int)

//go:noescape
func gemmPackAN6(kc8 int, a *float32, lda int, dst *float32)

//go:noescape
func gemmPackAN6BF16(kc8 int, a *uint16, lda int, dst *float32)

//go:noescape
func gemmPackAT6(kc int, a *float32, lda int, dst *float32)
