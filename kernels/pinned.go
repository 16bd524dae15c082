package kernels

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Pool is a set of worker threads, each locked to its own OS thread and
// pinned to one core, that the kernels split their work across when they
// run inside Pool.Do. Two pools in one process run side by side without
// sharing workers, each on its own cores: several inference instances of
// a few cores each, or a multi-stream runner splitting a batch. Kernels
// called anywhere else use the process-wide workers (Threads).
//
// A Pool's threads are Go threads and need a GOMAXPROCS slot to run Go
// code: the pools in use should hold no more threads than GOMAXPROCS
// (every core, by default).
type Pool struct {
	cores  []int
	p      *pool
	calls  chan poolCall
	mu     sync.RWMutex // guards closed against sends on calls
	done   sync.WaitGroup
	closed bool
}

type poolCall struct {
	fn   func()
	done chan any // the panic value, or nil
}

var (
	livePools   atomic.Int32
	threadPools sync.Map // OS thread id → *pool, for the threads of live Pools
)

// NewPool starts a Pool on cores, one thread each; the first core's thread
// runs Do's functions. Cores must be distinct and allowed to this process
// (AvailableCores); an error names the first that is not.
func NewPool(cores []int) (*Pool, error) {
	if len(cores) == 0 {
		return nil, fmt.Errorf("kernels: NewPool: no cores")
	}
	avail, err := AvailableCores()
	if err != nil {
		return nil, fmt.Errorf("kernels: NewPool: %w", err)
	}
	for i, c := range cores {
		if slices.Contains(cores[:i], c) {
			return nil, fmt.Errorf("kernels: NewPool: core %d is listed twice", c)
		}
		if !slices.Contains(avail, c) {
			return nil, fmt.Errorf("kernels: NewPool: core %d is not one this process may run on (%v)", c, avail)
		}
	}
	p := &pool{quit: make(chan struct{})}
	p.once.Do(func() { p.init(len(cores)) }) // started here, not lazily
	P := &Pool{cores: slices.Clone(cores), p: p, calls: make(chan poolCall)}
	started := make(chan error, len(cores))
	livePools.Add(1)
	for i, c := range cores {
		P.done.Add(1)
		go P.thread(i, c, started)
	}
	for range cores {
		if e := <-started; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		P.Close()
		return nil, fmt.Errorf("kernels: NewPool: %w", err)
	}
	return P, nil
}

// thread is the pool's thread i: locked to its OS thread and pinned to
// core while the pool lives; the leader (thread 0) runs Do's functions,
// the others the kernels' chunks, thread i polling slot i-1. At the end
// the thread gets the process's mask back and returns to the scheduler;
// if that fails it stays locked, and so ends with the goroutine rather
// than run other goroutines on one core.
func (P *Pool) thread(i int, core int, started chan<- error) {
	defer P.done.Done()
	runtime.LockOSThread()
	if err := pinThread(core); err != nil {
		started <- fmt.Errorf("pinning a thread to core %d: %w", core, err)
		return
	}
	defer func() {
		if unpinThread() == nil {
			runtime.UnlockOSThread()
		}
	}()
	tid := gettid()
	threadPools.Store(tid, P.p)
	defer threadPools.Delete(tid)
	started <- nil
	if i > 0 {
		P.p.work(&P.p.slots[i-1])
		return
	}
	for c := range P.calls {
		c.done <- runCall(c.fn)
	}
}

// runCall runs fn and returns what it panicked with, so Do can panic with
// it in the caller's goroutine.
func runCall(fn func()) (r any) {
	defer func() { r = recover() }()
	fn()
	return nil
}

// Cores returns the cores the pool's threads are pinned to, the leader's
// first.
func (P *Pool) Cores() []int { return slices.Clone(P.cores) }

// Do runs fn on the pool's first thread, its kernels split across the
// pool's threads, and returns when fn does; a panic in fn is raised again
// in the caller. Calls from several goroutines take turns; a Do inside fn
// runs its function directly.
func (P *Pool) Do(fn func()) {
	if livePools.Load() > 0 {
		if p, ok := threadPools.Load(gettid()); ok && p == P.p {
			fn()
			return
		}
	}
	c := poolCall{fn: fn, done: make(chan any, 1)}
	P.mu.RLock()
	if P.closed {
		P.mu.RUnlock()
		fail(ErrArgument, "Pool.Do", "the pool on cores %v is closed", P.cores)
	}
	P.calls <- c
	P.mu.RUnlock()
	if r := <-c.done; r != nil {
		panic(r)
	}
}

// Close stops the pool's threads once the functions given to Do have
// returned. Do after Close panics.
func (P *Pool) Close() {
	P.mu.Lock()
	if P.closed {
		P.mu.Unlock()
		return
	}
	P.closed = true
	close(P.calls)
	close(P.p.quit)
	P.mu.Unlock()
	P.done.Wait()
	livePools.Add(-1)
}
