//go:build !amd64 || noasm

package kernels

// Without assembly there is no blocked GEMM to feed panels to: the
// forward convolution always unfolds its input (im2col).
func (j *convJob) forwardImplicit() bool { return false }
