//go:build !amd64 || noasm

package kernels

import "unsafe"

// Without assembly the INT8 GEMM runs its reference loops.
var u8s8StripVariants = [levelCount]int8StripFunc{Generic: u8s8StripGeneric}

// indTileFor is the indirect convolution's reference tile at every level.
func indTileFor(Level) int8IndTileFunc { return u8s8IndTileGeneric }

// prefetchRows is a hint that does nothing without assembly.
func prefetchRows(p unsafe.Pointer, n int, stride int, rows int) {}
