package autograd

import "sync"

// Gradient buffers. A backward pass makes a gradient for every activation
// and is done with most of them as soon as the op below has used them;
// runBackward hands those back here and the backward closures that
// overwrite every element of their result take their memory from here, so
// a training step reuses the same buffers instead of asking Go for a fresh
// hundred megabytes each time.
//
// The buffers are kept by length across garbage collections (a sync.Pool
// empties at every other one, and a training step whose heap is mostly
// parameters collects several times a step), but only as many of a
// length as gradBuffer has handed out and not had back: gradients made
// elsewhere are released here too, and keeping those would hold memory
// no step asks for again. FreeCachedGradients hands them back to the
// collector.
var gradCache = struct {
	sync.Mutex
	free  map[int][][]float32 // length → buffers
	out   map[int]int         // length → buffers handed out, not yet back
	bytes int
}{free: map[int][][]float32{}, out: map[int]int{}}

// gradCacheCap bounds the memory the cache keeps: a few steps' worth of a
// model's largest gradients, not a copy of every activation.
const gradCacheCap = 64 << 20

// gradBuffer returns a float32 slice of length n whose contents are
// arbitrary: only for results the caller overwrites entirely.
func gradBuffer(n int) []float32 {
	gradCache.Lock()
	gradCache.out[n]++
	if l := gradCache.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		gradCache.free[n] = l[:len(l)-1]
		gradCache.bytes -= 4 * n
		gradCache.Unlock()
		return b
	}
	gradCache.Unlock()
	return uninitF32(n)
}

// releaseGradBuffer offers b's memory for reuse; nothing may use b after.
func releaseGradBuffer(b []float32) {
	n := len(b)
	if n == 0 || n != cap(b) {
		return
	}
	gradCache.Lock()
	if gradCache.out[n] > 0 && gradCache.bytes+4*n <= gradCacheCap {
		gradCache.out[n]--
		gradCache.free[n] = append(gradCache.free[n], b)
		gradCache.bytes += 4 * n
	}
	gradCache.Unlock()
}

// FreeCachedGradients hands the gradient buffers kept between backward
// passes back to the garbage collector, as torch.cuda.empty_cache does
// for PyTorch's caching allocator: for a program done training that
// wants its memory back. Later backward passes fill the cache again.
func FreeCachedGradients() {
	gradCache.Lock()
	clear(gradCache.free)
	clear(gradCache.out)
	gradCache.bytes = 0
	gradCache.Unlock()
}

// gradLike returns a float32 tensor with like's shape and format and
// arbitrary contents, for a gradient the caller overwrites entirely.
func gradLike(like *Tensor) *Tensor {
	return &Tensor{dtype: Float32, shape: cloneInts(like.shape), format: like.format, data: gradBuffer(numel("gradLike", like.shape))}
}
