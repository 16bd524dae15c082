//go:build !amd64 || noasm

package kernels

// Without assembly there is no blocked GEMM to feed panels to: the
// forward convolution always unfolds its input (im2col).
func (j *convJob) forwardImplicit() bool { return false }

// Nor is there a direct kernel.
func (j *convJob) forwardDirect() bool { return false }

func (j *convJob) backwardDataDirect(dy, w, dx []float32) bool { return false }

func (j *convJob) backwardWeightDirect() bool { return false }

func (j *convJob) weightParts(lo, hi int)  {}
func (j *convJob) weightReduce(lo, hi int) {}

type directState struct{}

func (j *convJob) padRows(lo, hi int)     {}
func (j *convJob) directCells(lo, hi int) {}
