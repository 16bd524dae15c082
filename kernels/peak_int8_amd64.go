//go:build amd64 && !noasm

package kernels

// vpdpbusdLoop runs iters rounds of twenty VPDPBUSD on ZMM registers
// (gemm_int8_amd64.s); iters must be positive and the CPU must have
// AVX512_VNNI.
//
//go:noescape
func vpdpbusdLoop(iters int)

// vpmaddwdLoop runs iters rounds of twelve VPMADDWD and VPADDD pairs on
// YMM registers; iters must be positive.
//
//go:noescape
func vpmaddwdLoop(iters int)

// int8PeakLoops returns the peak loops this CPU can run, each returning
// the operations it did; nil where it cannot.
func int8PeakLoops() (vpdpbusd, vpmaddwd func(int) float64) {
	if caps.best >= AVX512 && caps.vnni {
		vpdpbusd = func(iters int) float64 {
			vpdpbusdLoop(iters)
			return float64(iters) * 20 * 64 * 2
		}
	}
	if caps.best >= AVX2 {
		vpmaddwd = func(iters int) float64 {
			vpmaddwdLoop(iters)
			return float64(iters) * 12 * 16 * 2
		}
	}
	return vpdpbusd, vpmaddwd
}
