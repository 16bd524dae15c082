//go:build amd64 && !noasm

package kernels

// dpbf16Loop runs iters rounds of sixteen independent VDPBF16PS on ZMM
// registers; iters must be positive, and the CPU must have AVX512_BF16.
//
//go:noescape
func dpbf16Loop(iters int)

// dpbf16LoopFlops runs dpbf16Loop and returns the flops it did: sixteen
// VDPBF16PS per round, each sixteen lanes of two multiply-adds.
func dpbf16LoopFlops(iters int) float64 {
	dpbf16Loop(iters)
	return float64(iters) * 16 * 16 * 2 * 2
}

// bf16PeakLoop returns the BF16 peak loop, or nil where the CPU lacks
// AVX512_BF16.
func bf16PeakLoop() func(int) float64 {
	if caps.best >= AVX512BF16 {
		return dpbf16LoopFlops
	}
	return nil
}
