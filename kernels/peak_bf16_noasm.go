//go:build !amd64 || noasm

package kernels

// bf16PeakLoop: without assembly there is no BF16 peak loop.
func bf16PeakLoop() func(int) float64 { return nil }
