//go:build amd64 && !noasm

package kernels

//go:noescape
func streamStoreAVX2(dst, src []float32)

//go:noescape
func streamStoreAVX512(dst, src []float32)

// streamStore is the non-temporal copy of the dispatch level. The streaming
// paths are in AVX2 and AVX-512 kernels, but conformance suites run those
// whatever KILN_ISA selects, so the generic level has a plain copy.
var streamStore = pick(level, [levelCount]func(dst, src []float32){Generic: streamCopy, AVX2: streamStoreAVX2, AVX512: streamStoreAVX512})

func storeFence()
