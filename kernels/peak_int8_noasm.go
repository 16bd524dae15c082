//go:build !amd64 || noasm

package kernels

// int8PeakLoops: without assembly there are no INT8 peak loops.
func int8PeakLoops() (vpdpbusd, vpmaddwd func(int) float64) { return nil, nil }
