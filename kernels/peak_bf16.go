package kernels

import "time"

// MeasurePeakBF16 returns this CPU's bfloat16 dot-product throughput in
// GFLOP/s over threads concurrent OS threads, measured for about d: each
// thread runs a loop of sixteen independent VDPBF16PS chains on ZMM
// registers (each instruction is 32 multiply-adds, 64 flops) and touches
// no memory. It is the ceiling of the BF16 GEMM and convolutions on a CPU
// with AVX512_BF16, as MeasurePeakFMA is of the float32 kernels.
//
// It returns 0 where the CPU (or the build: -tags noasm, not amd64) lacks
// AVX512_BF16; there the BF16 kernels widen to float32 and the FMA peak is
// their ceiling. Like MeasurePeakFMA it measures the CPU's ceiling,
// whatever KILN_ISA selects for the kernels.
func MeasurePeakBF16(threads int, d time.Duration) float64 {
	loop := bf16PeakLoop()
	if loop == nil {
		return 0
	}
	// As in MeasurePeakFMA: one call is some tens of microseconds.
	const iters = 1 << 14
	return median(peakRun(threads, d, func(int) float64 { return loop(iters) })) / 1e9
}

// MeasurePeakAMX returns this CPU's AMX bfloat16 throughput in GFLOP/s
// over threads concurrent OS threads, measured for about d: each thread
// runs TDPBF16PS on four accumulator tiles whose operands stay in tiles
// (each instruction is 16×16 sums of 32 products). It is the ceiling of
// GemmBF16 where the CPU has AMX, and 0 where it (or the build) has none.
func MeasurePeakAMX(threads int, d time.Duration) float64 {
	loop := amxPeakLoopFor()
	if loop == nil {
		return 0
	}
	// About 0.1 ms a call: 4096 rounds of four 16-cycle instructions.
	const iters = 1 << 12
	return median(peakRun(threads, d, func(int) float64 { return loop(iters) })) / 1e9
}
