//go:build !amd64 || noasm

package kernels

// Without assembly softmax has only its Generic kernels.
var smAVX2, smAVX512 *smKernels
