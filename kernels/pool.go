package kernels

import (
	"os"
	"runtime"
	"strconv"
	"sync"
)

// minParallelWork is the amount of work (in rough multiply-adds) below which
// splitting across workers costs more than it saves; handing work to a
// worker costs a few hundred nanoseconds.
const minParallelWork = 1 << 15

// pool is the one persistent set of workers every kernel splits its work
// across. Workers are started lazily and live for the life of the process,
// so no kernel call starts a goroutine.
type pool struct {
	once    sync.Once
	threads int
	tasks   chan task
}

type task struct {
	fn     func(lo, hi int)
	lo, hi int
	wg     *sync.WaitGroup
}

var workers pool

var wgPool = sync.Pool{New: func() any { return new(sync.WaitGroup) }}

// Threads reports how many workers kernels split their work across. It is
// KILN_NUM_THREADS when that is set to a positive integer, else GOMAXPROCS.
func Threads() int {
	workers.start()
	return workers.threads
}

func (p *pool) start() {
	p.once.Do(func() {
		p.threads = runtime.GOMAXPROCS(0)
		if s := os.Getenv("KILN_NUM_THREADS"); s != "" {
			if n, err := strconv.Atoi(s); err == nil && n > 0 {
				p.threads = n
			}
		}
		p.tasks = make(chan task, p.threads)
		// The calling goroutine always runs one share itself, so threads-1
		// background workers suffice.
		for i := 1; i < p.threads; i++ {
			go func() {
				for t := range p.tasks {
					t.fn(t.lo, t.hi)
					t.wg.Done()
				}
			}()
		}
	})
}

// Parallel splits the index range [0, n) into contiguous chunks and calls fn
// on each, using the worker pool when work (the rough cost of the whole
// range) is large enough to pay for it. fn must be safe to call
// concurrently on disjoint ranges.
func Parallel(n int, work int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers.start()
	parts := workers.threads
	if parts > n {
		parts = n
	}
	if parts <= 1 || work < minParallelWork {
		fn(0, n)
		return
	}
	wg := wgPool.Get().(*sync.WaitGroup)
	chunk := (n + parts - 1) / parts
	lo := chunk // the first chunk runs on the caller
	for ; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		workers.tasks <- task{fn: fn, lo: lo, hi: hi, wg: wg}
	}
	fn(0, min(chunk, n))
	wg.Wait()
	wgPool.Put(wg)
}
