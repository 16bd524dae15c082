//go:build amd64 && !noasm

package kernels

// The running maximum of the uint8 max pool, by level: VPMAXUB on 32
// bytes at a time from AVX2 up.
var maxU8Variants = [levelCount]func(y, x []uint8){Generic: maxU8Go, AVX2: maxU8AVX2}

// maxU8AVX2 sets y[i] = max(y[i], x[i]) for i < len(y); x is at least as
// long.
//
//go:noescape
func maxU8AVX2(y, x []uint8)
