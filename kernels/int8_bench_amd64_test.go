//go:build amd64 && !noasm

package kernels

import "testing"

// BenchmarkInt8KernelL1 times the VNNI micro-kernel alone on operands in
// L1: the ceiling the GEMM's blocking can reach.
func BenchmarkInt8KernelL1(b *testing.B) {
	if !(level >= AVX512 && caps.vnni) {
		b.Skip("no AVX512_VNNI")
	}
	const kg, tiles, calls = 64, 2, 100
	a := make([]uint8, int8MR*4*kg)
	w := alignedInt8(tiles * kg * 4 * int8PanelWidth)
	c := make([]int32, int8MR*tiles*int8PanelWidth)
	for range b.N {
		for range calls {
			u8s8KernelVNNI(kg, &a[0], 4*kg, &w[0], kg*4*int8PanelWidth, &c[0], tiles*int8PanelWidth, tiles, 0)
		}
	}
	ops := 2 * float64(int8MR*int8PanelWidth*tiles*4*kg) * calls * float64(b.N)
	b.ReportMetric(ops/b.Elapsed().Seconds()/1e9, "GOP/s")
}

// BenchmarkInt8Kernel64L1 times the 6×64 VNNI micro-kernel alone on
// operands in L1.
func BenchmarkInt8Kernel64L1(b *testing.B) {
	if !(level >= AVX512 && caps.vnni) {
		b.Skip("no AVX512_VNNI")
	}
	const kg, calls = 64, 200
	a := make([]uint8, 6*4*kg)
	w := alignedInt8(2 * kg * 4 * int8PanelWidth)
	c := make([]int32, 6*2*int8PanelWidth)
	for range b.N {
		for range calls {
			u8s8KernelVNNI64(kg, &a[0], 4*kg, &w[0], kg*4*int8PanelWidth, &c[0], 2*int8PanelWidth, 0)
		}
	}
	ops := 2 * float64(6*2*int8PanelWidth*4*kg) * calls * float64(b.N)
	b.ReportMetric(ops/b.Elapsed().Seconds()/1e9, "GOP/s")
}
