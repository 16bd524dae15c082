//go:build !noasm

package kernels

// Probes of the AVX512_BF16 instruction macros (bf16_amd64.s); only tests
// call them, on CPUs with AVX512_BF16.

//go:noescape
func bf16DotProbe(acc *float32, a, b *uint16, high bool)

//go:noescape
func bf16DotBcstProbe(acc *float32, pairs, b *uint16)

//go:noescape
func bf16PackProbe(dst *uint16, lo, hi *float32, high bool)

//go:noescape
func bf16NarrowProbe(dst *uint16, src *float32, high bool)
