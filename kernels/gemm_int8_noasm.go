//go:build !amd64 || noasm

package kernels

// Without assembly the INT8 GEMM runs its reference loops.
var u8s8StripVariants = [levelCount]int8StripFunc{Generic: u8s8StripGeneric}
