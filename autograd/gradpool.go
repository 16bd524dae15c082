package autograd

import "sync"

// Gradient buffers. A backward pass makes a gradient for every activation
// and is done with most of them as soon as the op below has used them;
// runBackward hands those back here and the backward closures that
// overwrite every element of their result take their memory from here, so
// a training step reuses the same buffers instead of asking Go for (and
// zeroing) a fresh gigabyte each time. A sync.Pool per length lets the
// garbage collector drop buffers that stop being asked for.
var gradBufs sync.Map // int (length) → *sync.Pool of *[]float32

// gradBuffer returns a float32 slice of length n whose contents are
// arbitrary: only for results the caller overwrites entirely.
func gradBuffer(n int) []float32 {
	if p, ok := gradBufs.Load(n); ok {
		if b, ok := p.(*sync.Pool).Get().(*[]float32); ok {
			return *b
		}
	}
	return uninitF32(n)
}

// releaseGradBuffer offers b's memory for reuse; nothing may use b after.
func releaseGradBuffer(b []float32) {
	n := len(b)
	if n == 0 || n != cap(b) {
		return
	}
	p, ok := gradBufs.Load(n)
	if !ok {
		p, _ = gradBufs.LoadOrStore(n, new(sync.Pool))
	}
	p.(*sync.Pool).Put(&b)
}

// gradLike returns a float32 tensor with like's shape and format and
// arbitrary contents, for a gradient the caller overwrites entirely.
func gradLike(like *Tensor) *Tensor {
	return &Tensor{dtype: Float32, shape: cloneInts(like.shape), format: like.format, data: gradBuffer(numel("gradLike", like.shape))}
}
