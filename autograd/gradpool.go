package autograd

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kilnml/kiln/internal/uninit"
)

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
//
// Float32 and bfloat16 gradients have a cache each; the cap bounds the
// two together.
var (
	gradCache     = newGradCache[float32]()
	gradCacheBF16 = newGradCache[uint16]()
)

// gradCacheOf is the free buffers of one element type by length, and how
// many of each length are handed out and not yet back.
type gradCacheOf[T float32 | uint16] struct {
	sync.Mutex
	free map[int][][]T
	out  map[int]int
}

func newGradCache[T float32 | uint16]() *gradCacheOf[T] {
	return &gradCacheOf[T]{free: map[int][][]T{}, out: map[int]int{}}
}

// gradCacheBytes is the bytes of free buffers in both caches.
var gradCacheBytes atomic.Int64

// gradCacheCap bounds the memory the caches keep: a few steps' worth of a
// model's largest gradients, not a copy of every activation. For a BF16
// ResNet-50 at batch 8, 64 MB still left its step allocating 796 MB of
// the 1157 it did without the bfloat16 cache; 128 MB brought it to 731.
// (A variable so that tests can lower it.)
var gradCacheCap int64 = 128 << 20

// take returns a buffer of length n whose contents are arbitrary.
func (c *gradCacheOf[T]) take(n int) []T {
	c.Lock()
	c.out[n]++
	if l := c.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		c.free[n] = l[:len(l)-1]
		gradCacheBytes.Add(-int64(n) * int64(unsafe.Sizeof(b[0])))
		c.Unlock()
		uninit.Reused(b)
		return b
	}
	c.Unlock()
	return alloc[T](n, false)
}

// give offers b's memory for reuse: kept when take handed out a buffer
// of its length that has not come back and the cap allows.
func (c *gradCacheOf[T]) give(b []T) {
	n := len(b)
	if n == 0 || n != cap(b) {
		return
	}
	size := int64(n) * int64(unsafe.Sizeof(b[0]))
	c.Lock()
	if c.out[n] > 0 {
		c.out[n]--
		if gradCacheBytes.Add(size) <= gradCacheCap {
			c.free[n] = append(c.free[n], b)
		} else {
			gradCacheBytes.Add(-size)
		}
	}
	c.Unlock()
}

// drop empties the cache.
func (c *gradCacheOf[T]) drop() {
	c.Lock()
	for n, l := range c.free {
		gradCacheBytes.Add(-int64(n*len(l)) * int64(unsafe.Sizeof(*new(T))))
	}
	clear(c.free)
	clear(c.out)
	c.Unlock()
}

// gradBuffer returns a float32 slice of length n whose contents are
// arbitrary: only for results the caller overwrites entirely.
func gradBuffer(n int) []float32 { return gradCache.take(n) }

// gradBufferBF16 is gradBuffer for bfloat16 gradients.
func gradBufferBF16(n int) []uint16 { return gradCacheBF16.take(n) }

// releaseGradBuffer offers b's memory for reuse; nothing may use b after.
func releaseGradBuffer(b []float32) { gradCache.give(b) }

// releaseGradBufferBF16 is releaseGradBuffer for bfloat16 gradients.
func releaseGradBufferBF16(b []uint16) { gradCacheBF16.give(b) }

// releaseGrad offers gradient g's memory, float32 or bfloat16, for
// reuse; nothing may use g after.
func releaseGrad(g *Tensor) {
	if releaseArenaGrad(g) {
		return
	}
	switch d := g.data.(type) {
	case []float32:
		releaseGradBuffer(d)
	case []uint16:
		releaseGradBufferBF16(d)
	}
}

// FreeCachedGradients hands the gradient buffers kept between backward
// passes back to the garbage collector, as torch.cuda.empty_cache does
// for PyTorch's caching allocator: for a program done training that
// wants its memory back. Later backward passes fill the cache again.
func FreeCachedGradients() {
	gradCache.drop()
	gradCacheBF16.drop()
}

// bf16GradLike is gradLike for a bfloat16 gradient.
func bf16GradLike(like *Tensor) *Tensor { return gradFor(like, BFloat16, like.format) }

// gradLike returns a float32 tensor with like's shape and format and
// arbitrary contents, for a gradient the caller overwrites entirely. Its
// memory comes from like's arena when like is in one (see Arena), else
// from the gradient cache.
func gradLike(like *Tensor) *Tensor { return gradFor(like, Float32, like.format) }

// gradSlice returns n elements of arbitrary contents for a gradient in
// mode m: from m's arena when it has one, else from the gradient cache.
func gradSlice[T float32 | uint16](m Mode, n int) []T {
	if m.arena != nil {
		return arenaSlice[T](m, n, true, false)
	}
	var v []T
	switch p := any(&v).(type) {
	case *[]float32:
		*p = gradBuffer(n)
	case *[]uint16:
		*p = gradBufferBF16(n)
	}
	return v
}

// releaseSlice offers s, memory gradSlice returned in mode m, for reuse;
// nothing may use s after.
func releaseSlice[T float32 | uint16](m Mode, s []T) {
	if m.arena != nil {
		if len(s) > 0 && m.live() {
			m.arena.giveBack(unsafe.Pointer(unsafe.SliceData(s)), len(s)*int(unsafe.Sizeof(s[0])))
		}
		return
	}
	switch s := any(s).(type) {
	case []float32:
		releaseGradBuffer(s)
	case []uint16:
		releaseGradBufferBF16(s)
	}
}

// gradData returns n float32 elements of arbitrary contents for the
// gradient of t, from t's arena when t is in one, else from the gradient
// cache. The tensor built on them must carry t's arena mode (linearGrad
// does), so that Backward gives them back to the right place.
func gradData(t *Tensor, n int) []float32 { return gradSlice[float32](t.mode.arenaMode(), n) }
