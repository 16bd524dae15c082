package kernels

import "sync"

// freeList is a stack of reusable scratch objects. Unlike sync.Pool it
// neither drops them at a garbage collection nor strands one in a P's
// private slot when a goroutine moves between Ps, either of which made a
// steady stream of calls allocate now and then; it never shrinks, so it
// suits scratch whose peak use is small.
type freeList[T any] struct {
	mu    sync.Mutex
	items []*T
}

// get returns a free object, or nil when there is none.
func (f *freeList[T]) get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.items)
	if n == 0 {
		return nil
	}
	x := f.items[n-1]
	f.items[n-1] = nil
	f.items = f.items[:n-1]
	return x
}

// put makes x free for a later get.
func (f *freeList[T]) put(x *T) {
	f.mu.Lock()
	f.items = append(f.items, x)
	f.mu.Unlock()
}
