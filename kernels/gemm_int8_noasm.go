//go:build !amd64 || noasm

package kernels

import "unsafe"

// Without assembly the INT8 GEMM runs its reference loops.
var u8s8StripVariants = [levelCount]int8StripFunc{Generic: u8s8StripGeneric}

// prefetchRows is a hint that does nothing without assembly.
func prefetchRows(p unsafe.Pointer, n int, stride int, rows int) {}
