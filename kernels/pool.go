package kernels

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// minParallelWork is the amount of work (in rough multiply-adds) below which
// splitting across workers costs more than it saves; handing work to a
// worker costs a few hundred nanoseconds.
const minParallelWork = 1 << 15

// minChunkWork is the least work Parallel hands a worker. Handing over a
// chunk costs the caller a queue send and the worker a wake-up, a few
// hundred nanoseconds each; a call of 64K multiply-adds cut 64 ways would
// spend longer handing out its chunks than computing them. At two
// threads every call above minParallelWork still splits in two.
const minChunkWork = minParallelWork / 2

// parallelParts returns how many chunks Parallel cuts n units of work
// into on threads workers: one per worker, but no more than the units,
// nor than chunks of minChunkWork; and one below minParallelWork.
func parallelParts(n, work, threads int) int {
	if work < minParallelWork {
		return min(n, 1)
	}
	return min(n, threads, work/minChunkWork)
}

// pool is a persistent set of workers kernels split their work across:
// the process-wide one (workers), whose workers are started lazily and
// live for the life of the process, or a Pool's pinned threads. No kernel
// call starts a goroutine.
type pool struct {
	once    sync.Once
	threads int
	tasks   chan task
	quit    chan struct{} // closed to stop a Pool's workers; nil for workers
}

type task struct {
	fn     func(lo, hi int)
	lo, hi int
	job    *job
}

// job tracks the chunks of one Parallel call still running. Jobs are
// pooled so a call allocates nothing: done has room for the one signal the
// last chunk sends to the single waiter.
type job struct {
	pending atomic.Int32
	done    chan struct{}
}

var jobPool = freeList[job]{New: func() *job { return &job{done: make(chan struct{}, 1)} }}

func (t task) run() {
	t.fn(t.lo, t.hi)
	if t.job.pending.Add(-1) == 0 {
		t.job.done <- struct{}{}
	}
}

var workers pool

// currentPool is the pool of the calling thread: a Pool's when called on
// one of its threads (inside Pool.Do), else the process-wide one. The
// lookup costs a system call, so it is skipped while no Pool exists.
func currentPool() *pool {
	if livePools.Load() > 0 {
		if p, ok := threadPools.Load(gettid()); ok {
			return p.(*pool)
		}
	}
	workers.start()
	return &workers
}

// Threads reports how many workers kernels split their work across: inside
// Pool.Do the Pool's thread count; elsewhere KILN_NUM_THREADS when that is
// set to a whole number from 1 to maxThreads, else GOMAXPROCS.
func Threads() int {
	return currentPool().threads
}

func (p *pool) start() {
	p.once.Do(func() {
		var warning string
		p.threads, warning = chooseThreads(runtime.GOMAXPROCS(0), os.Getenv("KILN_NUM_THREADS"))
		if warning != "" {
			fmt.Fprintln(os.Stderr, "kiln:", warning)
		}
		p.tasks = make(chan task, p.threads)
		// The calling goroutine always runs one share itself, so threads-1
		// background workers suffice.
		for i := 1; i < p.threads; i++ {
			go p.work()
		}
	})
}

// maxThreads bounds KILN_NUM_THREADS. Each thread is a goroutine that
// spins between kernel calls and a slot in the task queue, so an absurd
// count (1e9) would exhaust memory starting them, and far more threads
// than cores only adds contention. A fixed bound, rather than a multiple
// of the cores, keeps a deliberate oversubscription (testing the split
// on a small machine) working anywhere; 1024 is above the hardware
// threads of any one machine Kiln runs on.
const maxThreads = 1024

// chooseThreads applies a KILN_NUM_THREADS request (empty for the
// default, def) and returns the count to use and, when the request is not
// a whole number from 1 to maxThreads, a warning to print: a typo must
// not silently change how a benchmark runs.
func chooseThreads(def int, req string) (int, string) {
	if req == "" {
		return def, ""
	}
	n, err := strconv.Atoi(req)
	if errors.Is(err, strconv.ErrRange) {
		err = nil // Atoi clamps n to ±MaxInt, which the cases below handle
	}
	switch {
	case err != nil || n < 1:
		return def, fmt.Sprintf("KILN_NUM_THREADS=%q is not a thread count (a whole number from 1 to %d); using %d", req, maxThreads, def)
	case n > maxThreads:
		return maxThreads, fmt.Sprintf("KILN_NUM_THREADS=%s is more than the %d threads allowed; using %d", req, maxThreads, maxThreads)
	}
	return n, ""
}

// spinTime is how long a worker, or a caller waiting for its workers,
// polls for the next task before it blocks. Waking a blocked thread goes
// through the OS and, on a virtual machine whose idle vCPU has halted,
// took 5–30 µs here, which is longer than many kernel calls; a training
// step issues kernel calls back to back, so a short poll keeps the
// workers awake between them at the price of some idle CPU.
const spinTime = 100 * time.Microsecond

// work is a worker's loop: run tasks, polling for a while after each
// before blocking for the next.
func (p *pool) work() {
	for {
		t, ok := p.poll(nil)
		if !ok {
			select {
			case t = <-p.tasks:
			case <-p.quit:
				return
			}
		}
		t.run()
	}
}

// poll waits up to spinTime for a task, yielding the processor between
// tries so other goroutines still run. With a non-nil j it returns early,
// with ok false, once j's chunks are all done.
func (p *pool) poll(j *job) (t task, ok bool) {
	var start time.Time
	for i := 0; ; i++ {
		select {
		case t = <-p.tasks:
			return t, true
		default:
		}
		if j != nil && j.pending.Load() == 0 {
			return t, false
		}
		if i%64 == 63 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > spinTime {
				return t, false
			}
			runtime.Gosched()
		}
	}
}

// Parallel splits the index range [0, n) into contiguous chunks (Chunks:
// one per worker, sizes within one of each other, and no more than work,
// the rough cost of the whole range, pays for: parallelParts) and calls fn
// on each, using the worker pool when there is more than one. fn must be safe to call
// concurrently on disjoint ranges.
func Parallel(n int, work int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	p := currentPool()
	p.run(n, parallelParts(n, work, p.threads), fn)
}

// parallelIn is Parallel with the number of chunks chosen by the caller
// (at most the pool's threads): a kernel that planned its units for that
// many workers.
func parallelIn(n, parts int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	p := currentPool()
	p.run(n, min(n, parts, p.threads), fn)
}

// run calls fn on parts balanced chunks of [0, n), the first on the
// calling goroutine, the others on the pool's workers.
func (p *pool) run(n, parts int, fn func(lo, hi int)) {
	if parts <= 1 {
		fn(0, n)
		return
	}
	j := jobPool.get()
	j.pending.Store(int32(parts))
	for i := 1; i < parts; i++ { // the first chunk runs on the caller
		lo, hi := chunkBounds(n, parts, i)
		t := task{fn: fn, lo: lo, hi: hi, job: j}
		select {
		case p.tasks <- t:
		default:
			t.run() // every worker is busy: no point queueing
		}
	}
	_, hi := chunkBounds(n, parts, 0)
	task{fn: fn, lo: 0, hi: hi, job: j}.run()
	// While waiting, run whatever is queued, ours or another call's. A
	// Parallel nested inside a worker's task then cannot deadlock: some
	// waiter always makes progress on the queue. Poll first: the other
	// chunks usually finish within microseconds.
	for {
		t, ok := p.poll(j)
		if !ok {
			break
		}
		t.run()
	}
	for {
		select {
		case <-j.done:
			jobPool.put(j)
			return
		case t := <-p.tasks:
			t.run()
		}
	}
}
