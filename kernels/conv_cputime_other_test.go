//go:build !unix

package kernels

// processCPU is not measured off Unix; benchmarks then report no CPU rate.
func processCPU() float64 { return 0 }
