package kernels

import "time"

// MeasurePeakInt8 returns this CPU's INT8 multiply-add throughput in
// GOP/s (a multiply-add of a byte pair counts as two operations) over
// threads concurrent OS threads, measured for about d each: vpdpbusd for
// a loop of twenty independent VPDPBUSD chains on ZMM registers (64
// multiply-adds an instruction), the ceiling of the VNNI GEMM, and
// vpmaddwd for a loop of VPMADDWD and VPADDD pairs on YMM registers (16
// multiply-adds a pair), the ceiling of the exact AVX2 GEMM. Neither loop
// touches memory.
//
// vpdpbusd is 0 where the CPU lacks AVX512_VNNI, and both are 0 where it
// lacks AVX2 or the build has no assembly (-tags noasm, not amd64). Like
// MeasurePeakFMA it measures the CPU's ceiling, whatever KILN_ISA selects.
func MeasurePeakInt8(threads int, d time.Duration) (vpdpbusd, vpmaddwd float64) {
	dp, mw := int8PeakLoops()
	// As in MeasurePeakFMA: one call is some tens of microseconds.
	const iters = 1 << 13
	if dp != nil {
		vpdpbusd = median(peakRun(threads, d, func(int) float64 { return dp(iters) })) / 1e9
	}
	if mw != nil {
		vpmaddwd = median(peakRun(threads, d, func(int) float64 { return mw(iters) })) / 1e9
	}
	return vpdpbusd, vpmaddwd
}
