package kernels

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// testPool starts a pool of threads threads, whatever KILN_NUM_THREADS
// and the cores, and stops its workers when the test ends.
func testPool(t *testing.T, threads int) *pool {
	t.Helper()
	p := &pool{quit: make(chan struct{})}
	p.init(threads)
	var wg sync.WaitGroup
	for i := range p.slots {
		wg.Go(func() { p.work(&p.slots[i]) })
	}
	t.Cleanup(func() {
		close(p.quit)
		wg.Wait()
	})
	return p
}

// sumRange runs p over [0, n) in parts chunks (at most n, as Parallel
// cuts) and returns the sum of the indices it was called on; each index
// must come exactly once.
func sumRange(p *pool, n, parts int, inner func(i int)) int64 {
	var sum atomic.Int64
	p.run(n, min(n, parts), func(lo, hi int) {
		var s int64
		for i := lo; i < hi; i++ {
			s += int64(i)
			if inner != nil {
				inner(i)
			}
		}
		sum.Add(s)
	})
	return sum.Load()
}

func triangle(n int) int64 { return int64(n) * int64(n-1) / 2 }

// TestParallelNestedThreeDeep runs Parallel inside Parallel inside
// Parallel, on pools of 2 to 33 threads; every level's tasks block on the
// level below while holding workers, which must not deadlock.
func TestParallelNestedThreeDeep(t *testing.T) {
	for _, threads := range []int{2, 3, 4, 8, 16, 33} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			p := testPool(t, threads)
			const n1, n2, n3 = 7, 9, 50
			var bad atomic.Int32
			for range 20 {
				got := sumRange(p, n1, threads, func(int) {
					if sumRange(p, n2, threads, func(int) {
						if sumRange(p, n3, threads, nil) != triangle(n3) {
							bad.Add(1)
						}
					}) != triangle(n2) {
						bad.Add(1)
					}
				})
				if got != triangle(n1) || bad.Load() != 0 {
					t.Fatalf("outer sum %d, want %d; %d inner sums wrong", got, triangle(n1), bad.Load())
				}
			}
		})
	}
	// The process-wide pool, as KILN_NUM_THREADS sizes it.
	var sum atomic.Int64
	Parallel(8, 1<<30, func(lo, hi int) {
		for range hi - lo {
			Parallel(8, 1<<30, func(lo, hi int) {
				for range hi - lo {
					Parallel(100, 1<<30, func(lo, hi int) { sum.Add(int64(hi - lo)) })
				}
			})
		}
	})
	if sum.Load() != 8*8*100 {
		t.Errorf("nested Parallel on the process pool covered %d indices, want %d", sum.Load(), 8*8*100)
	}
}

// TestParallelConcurrentCallers has many goroutines call Parallel at once
// on one pool, some of them nesting: workers busy with one call's chunk
// must be skipped, never given a second.
func TestParallelConcurrentCallers(t *testing.T) {
	cases := []struct {
		threads, callers, calls int
		nested                  bool
	}{
		{2, 2, 2000, false},
		{2, 8, 500, true},
		{4, 16, 500, false},
		{8, 3, 1000, true},
		{16, 32, 200, false},
		{16, 8, 100, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("threads=%d/callers=%d/nested=%v", c.threads, c.callers, c.nested), func(t *testing.T) {
			p := testPool(t, c.threads)
			var wg sync.WaitGroup
			for g := range c.callers {
				wg.Go(func() {
					for k := range c.calls {
						n := 1 + (g*31+k*7)%200
						parts := 1 + (g+k)%c.threads
						var inner func(int)
						if c.nested && k%5 == 0 {
							inner = func(i int) {
								if got := sumRange(p, i+1, c.threads, nil); got != triangle(i+1) {
									t.Errorf("inner call over %d: sum %d, want %d", i+1, got, triangle(i+1))
								}
							}
						}
						if got := sumRange(p, n, parts, inner); got != triangle(n) {
							t.Errorf("caller %d call %d over %d in %d parts: sum %d, want %d", g, k, n, parts, got, triangle(n))
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestParallelTakesBack hands chunks to slots whose workers never come:
// free ones that nobody polls and parked ones that nobody wakes, as when
// the OS is slow to run a worker. The caller takes the chunks back.
func TestParallelTakesBack(t *testing.T) {
	for _, state := range []*task{nil, parked} {
		p := &pool{}
		p.init(4)
		for range 3 {
			for i := range p.slots {
				p.slots[i].task.Store(state)
			}
			if got := sumRange(p, 100, 4, nil); got != triangle(100) {
				t.Errorf("slots in state %p: sum %d, want %d", state, got, triangle(100))
			}
			for i := range p.slots {
				if s := p.slots[i].task.Load(); s != nil {
					t.Errorf("slots in state %p: slot %d left in state %p", state, i, s)
				}
				select {
				case <-p.slots[i].wake: // the token a parked worker would take
				default:
				}
			}
		}
	}
}

// TestParallelPanics: a panic in the caller's chunk reaches the caller,
// and the pool goes on working.
func TestParallelPanics(t *testing.T) {
	p := testPool(t, 4)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		p.run(4, 4, func(lo, hi int) {
			if lo == 0 {
				panic("boom")
			}
		})
	}()
	if got := sumRange(p, 64, 4, nil); got != triangle(64) {
		t.Errorf("after a panic: sum %d, want %d", got, triangle(64))
	}
}
