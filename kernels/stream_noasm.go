//go:build !amd64 || noasm

package kernels

// Without assembly there are no non-temporal stores: streamed output is
// copied out of its buffer.
var streamStore = streamCopy

func storeFence() {}
