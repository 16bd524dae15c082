//go:build !amd64 || noasm

package kernels

// Without assembly the SGD update has only its Generic variant.
var sgdSpanAVX2 func(c *SGDConfig, init bool, p, g, b []float32)
