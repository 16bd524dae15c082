//go:build amd64 && !noasm

package kernels

// The bag gathers in merged_bag_amd64.s; see gatherF32Func.

//go:noescape
func bagGatherF32AVX512(out, table []float32, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)

//go:noescape
func bagGatherBF16AVX512(out []float32, table []uint16, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)

//go:noescape
func bagGatherF32AVX2(out, table []float32, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)

//go:noescape
func bagGatherBF16AVX2(out []float32, table []uint16, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)

var (
	bagGatherF32AVX2Impl, bagGatherF32AVX512Impl   gatherF32Func  = bagGatherF32AVX2, bagGatherF32AVX512
	bagGatherBF16AVX2Impl, bagGatherBF16AVX512Impl gatherBF16Func = bagGatherBF16AVX2, bagGatherBF16AVX512
)
