//go:build amd64 && !noasm

package kernels

// fmaLoopAVX2 runs iters rounds of twelve independent VFMADD231PS on YMM
// registers; iters must be positive.
//
//go:noescape
func fmaLoopAVX2(iters int)

// fmaLoopAVX512 is fmaLoopAVX2 on ZMM registers (sixteen lanes).
//
//go:noescape
func fmaLoopAVX512(iters int)

// triadAVX2Blocks computes a[i] = b[i] + s·c[i] for the first
// len(a)/32·32 elements; b and c must be at least as long.
//
//go:noescape
func triadAVX2Blocks(a, b, c []float32, s float32)

// fmaLoopFlopsAVX2 runs fmaLoopAVX2 and returns the flops it did: twelve
// FMAs of eight lanes, two flops each, per round.
func fmaLoopFlopsAVX2(iters int) float64 {
	fmaLoopAVX2(iters)
	return float64(iters) * 12 * 8 * 2
}

func fmaLoopFlopsAVX512(iters int) float64 {
	fmaLoopAVX512(iters)
	return float64(iters) * 12 * 16 * 2
}

// triadAVX2 is triadGeneric with the whole 32-element blocks in assembly
// and the tail in Go.
func triadAVX2(a, b, c []float32, s float32) {
	b, c = b[:len(a)], c[:len(a)]
	n := len(a) &^ 31
	if n > 0 {
		triadAVX2Blocks(a[:n], b[:n], c[:n], s)
	}
	triadGeneric(a[n:], b[n:], c[n:], s)
}

var (
	fmaLoopVariants = [levelCount]func(int) float64{Generic: fmaLoopGeneric, AVX2: fmaLoopFlopsAVX2, AVX512: fmaLoopFlopsAVX512}
	triadVariants   = [levelCount]func(a, b, c []float32, s float32){Generic: triadGeneric, AVX2: triadAVX2}
)
