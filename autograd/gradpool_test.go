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
	if gradCache.bytes != 0 {
		t.Errorf("cache holds %d bytes after FreeCachedGradients and a miss", gradCache.bytes)
	}

	// The cache never keeps more than its cap.
	big := gradCacheCap/4/2 + 1
	x, y := gradBuffer(big), gradBuffer(big)
	releaseGradBuffer(x)
	releaseGradBuffer(y)
	if gradCache.bytes > gradCacheCap {
		t.Errorf("cache holds %d bytes, cap %d", gradCache.bytes, gradCacheCap)
	}
}
