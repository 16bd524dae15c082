//go:build !amd64 || noasm

package kernels

// Without assembly the Adam update has only its Generic variant.
var adamSpanAVX2 func(c *AdamConfig, p, g, m, v, vmax []float32)
