//go:build !amd64 || noasm

package kernels

// Without assembly the bag gathers have only their Generic variants.
var (
	bagGatherF32AVX2Impl, bagGatherF32AVX512Impl   gatherF32Func
	bagGatherBF16AVX2Impl, bagGatherBF16AVX512Impl gatherBF16Func
)
