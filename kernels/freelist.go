package kernels

import "sync"

// freeList is a stack of reusable scratch objects and per-call job
// state. Unlike sync.Pool it neither drops them at a garbage collection
// nor strands one in a P's private slot when a goroutine moves between Ps,
// either of which made a steady stream of calls allocate now and then, so
// a compiled graph's run allocates nothing, always. It never shrinks: it
// holds as many objects as were ever in use at once, one or two per
// thread.
type freeList[T any] struct {
	mu    sync.Mutex
	items []*T
	// New makes an object when none is free; without it get returns nil.
	New func() *T
}

// get returns a free object, a new one, or nil when there is none and no
// New.
func (f *freeList[T]) get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.items)
	if n == 0 {
		if f.New != nil {
			return f.New()
		}
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

// newOf is a freeList's New for objects whose zero value is ready to use.
func newOf[T any]() *T { return new(T) }
