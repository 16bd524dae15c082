//go:build amd64 && !noasm

package kernels

// AVX-512 layer-norm row primitives in vec_ln_avx512_amd64.s: the AVX2
// ones of vec_amd64.s on eight float64 lanes. The maps (lnNorm, lnApply,
// lnBackward and the outputs of lnColAcc and lnBackwardAcc) give the same
// bits as the references; the reductions (sum, sqDev, gradSumsW) add in
// another order, within a few float64 roundings.
//
// Speed: on AMD Zen 4 (512-bit operations split in two 256-bit halves, and
// VCVTPS2PD/VCVTPD2PS on Z registers slower than two on Y registers) these
// measured 0–25% slower than the AVX2 versions on rows of 1024, so wire
// them only where the cores have full-width 512-bit float64 units (not
// measured here).

//go:noescape
func sumAVX512(x []float32) float64

//go:noescape
func sqDevAVX512(x []float32, m float64) float64

//go:noescape
func gradSumsWAVX512(dy, w, x []float32, m float64) (sg, sgx float64)

//go:noescape
func lnNormAVX512(y, x []float32, m, rs float64)

//go:noescape
func lnApplyAVX512(y, x, w, b []float32, m, rs float64)

//go:noescape
func lnBackwardAVX512(dx, dy, w, x []float32, m, rs, s1, s2 float64)

//go:noescape
func lnColAccAVX512(aw, ab []float64, dy, x []float32, m, rs float64)

//go:noescape
func lnBackwardAccAVX512(dx, dy, w, x []float32, m, rs, s1, s2 float64, aw, ab []float64)

// withLNAVX512 sets k's layer-norm row primitives and the reductions they
// use to the AVX-512 ones. Only for a CPU with AVX-512 F, BW, VL and DQ.
func withLNAVX512(k *vecKit) {
	k.sum = sumAVX512
	k.sqDev = sqDevAVX512
	k.gradSumsW = gradSumsWAVX512
	k.lnNorm = lnNormAVX512
	k.lnApply = lnApplyAVX512
	k.lnBackward = lnBackwardAVX512
	k.lnColAcc = lnColAccAVX512
	k.lnBackwardAcc = lnBackwardAccAVX512
}
