//go:build !amd64 || noasm

package kernels

// Without assembly the Adagrad updates have only their Generic variants.
var adagradSpanAVX2, adagradSparseSpanAVX2 func(c *AdagradConfig, p, g, s []float32)
