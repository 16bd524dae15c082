//go:build !amd64 || noasm

package kernels

// Without assembly the Adagrad update has only its Generic variant.
var adagradSpanAVX2 func(c *AdagradConfig, p, g, s []float32)
