//go:build noasm || !amd64

package kernels

func amxAsmKernel() amxStripFunc { return nil }
