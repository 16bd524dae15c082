package autograd

import (
	"testing"
	"unsafe"
)

func TestGradCache(t *testing.T) {
	FreeCachedGradients()
	defer FreeCachedGradients()
	const n = 1000
	same := func(a, b []float32) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }

	a := gradBuffer(n)
	releaseGradBuffer(a)
	if b := gradBuffer(n); !same(a, b) {
		t.Error("a released buffer was not handed out again")
	} else {
		releaseGradBuffer(b)
	}

	// A gradient the cache did not hand out is left to the collector:
	// keeping every released gradient would hold memory no step asks for.
	foreign := make([]float32, 2*n)
	releaseGradBuffer(foreign)
	if b := gradBuffer(2 * n); same(foreign, b) {
		t.Error("a buffer the cache never handed out was kept")
	}

	FreeCachedGradients()
	if b := gradBuffer(n); same(a, b) {
		t.Error("FreeCachedGradients kept a buffer")
	}
	if gradCacheBytes.Load() != 0 {
		t.Errorf("cache holds %d bytes after FreeCachedGradients and a miss", gradCacheBytes.Load())
	}

	// The cache never keeps more than its cap.
	defer func(c int64) { gradCacheCap = c }(gradCacheCap)
	gradCacheCap = 1 << 20
	big := int(gradCacheCap/4/2 + 1)
	x, y := gradBuffer(big), gradBuffer(big)
	releaseGradBuffer(x)
	releaseGradBuffer(y)
	if gradCacheBytes.Load() > gradCacheCap {
		t.Errorf("cache holds %d bytes, cap %d", gradCacheBytes.Load(), gradCacheCap)
	}
}

// TestGradCacheBF16 checks the bfloat16 cache, and that the cap bounds
// the two caches together.
func TestGradCacheBF16(t *testing.T) {
	FreeCachedGradients()
	defer FreeCachedGradients()
	a := gradBufferBF16(1000)
	releaseGradBufferBF16(a)
	if b := gradBufferBF16(1000); unsafe.SliceData(a) != unsafe.SliceData(b) {
		t.Error("a released bfloat16 buffer was not handed out again")
	}
	// A float32 buffer fills most of the cap; a bfloat16 one that would
	// pass it is not kept.
	defer func(c int64) { gradCacheCap = c }(gradCacheCap)
	gradCacheCap = 1 << 20
	f := gradBuffer(int(gradCacheCap/4 - 100))
	h := gradBufferBF16(1000)
	releaseGradBuffer(f)
	releaseGrad(&Tensor{dtype: BFloat16, data: h})
	if got := gradCacheBytes.Load(); got > gradCacheCap || got != int64(4*len(f)) {
		t.Errorf("caches hold %d bytes, want the float32 buffer's %d (cap %d)", got, 4*len(f), gradCacheCap)
	}
	FreeCachedGradients()
	if got := gradCacheBytes.Load(); got != 0 {
		t.Errorf("caches hold %d bytes after FreeCachedGradients", got)
	}
}
