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
	"unsafe"
)

// minParallelWork is the amount of work (in rough multiply-adds) below which
// splitting across workers costs more than it saves; handing work to a
// worker costs a few hundred nanoseconds.
const minParallelWork = 1 << 15

// minChunkWork is the least work Parallel hands a worker. Handing over a
// chunk costs the caller a CAS on the worker's slot and the worker a
// cache miss, or a wake-up when it has parked: hundreds of nanoseconds,
// and more on a virtual machine; a call of 64K multiply-adds cut 64 ways
// would spend longer handing out its chunks than computing them. At two
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
	slots   []slot        // one per background worker: the caller is the other thread
	quit    chan struct{} // closed to stop a Pool's workers; nil for workers
}

// init sizes p for threads threads; the caller starts a worker on each
// slot.
func (p *pool) init(threads int) {
	p.threads = threads
	p.slots = make([]slot, threads-1)
	for i := range p.slots {
		p.slots[i].wake = make(chan struct{}, 1)
	}
}

// slot is one worker's mailbox: a caller hands the worker a chunk with
// one CAS of the slot's task pointer from nil to the chunk's task, which
// the caller wrote beforehand in its job; the worker polls its own slot
// alone. When every idle worker polled one shared channel instead, each
// poll took the channel's lock, which the caller's sends and the
// finishing workers then waited for: at 16 workers on a 16-core VM a
// chunk cost 3.5–7 µs. Here a hand-over moves one cache line, the slot's,
// to the caller and back to the worker, and publishing with the CAS that
// claims the slot keeps it at one: a claim, then writes into the slot
// that the polling worker keeps reading, would move it back and forth.
//
// A slot fills 128 bytes so that no two workers poll the same cache line,
// wherever the slice starts (Intel CPUs also fetch lines in pairs).
type slot struct {
	slotFields
	_ [128 - unsafe.Sizeof(slotFields{})]byte
}

type slotFields struct {
	// task is nil while the worker polls for a chunk, the chunk's task
	// once handed one, and one of the marks below otherwise.
	task atomic.Pointer[task]
	wake chan struct{} // a parked worker's wake-up: one token per park
}

// The marks a slot holds while its worker is not polling for a chunk.
// Only a polling or parked worker is handed one: a chunk never waits
// behind a running one, so a task that calls Parallel in turn never
// waits on a worker that waits on it.
var (
	parked  = new(task) // the worker sleeps on wake after polling spinTime
	running = new(task) // the worker runs a chunk
	stopped = new(task) // the worker has returned: its Pool closed
)

// task is a chunk of a Parallel call, handed to the worker of slot.
type task struct {
	fn     func(lo, hi int)
	lo, hi int
	job    *job
	slot   *slot
}

// job is one Parallel call's chunks handed to workers. Jobs are pooled so
// a call allocates nothing.
type job struct {
	// pending counts the handed chunks not yet done, plus waiterAsleep
	// once the caller has stopped polling and blocks on done, so that the
	// last chunk knows whether to send it the one signal done has room for.
	pending atomic.Int32
	done    chan struct{}
	// tasks are the chunks handed out. Workers hold pointers into it, so
	// it is grown before any is handed out, never while.
	tasks []task
}

// waiterAsleep is far above any count of chunks.
const waiterAsleep = 1 << 30

var jobPool = freeList[job]{New: func() *job { return &job{done: make(chan struct{}, 1)} }}

// finish counts a handed chunk done.
func (j *job) finish() {
	if j.pending.Add(-1) == waiterAsleep {
		j.done <- struct{}{}
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
		threads, warning := chooseThreads(runtime.GOMAXPROCS(0), os.Getenv("KILN_NUM_THREADS"))
		if warning != "" {
			fmt.Fprintln(os.Stderr, "kiln:", warning)
		}
		p.init(threads)
		for i := range p.slots {
			go p.work(&p.slots[i])
		}
	})
}

// maxThreads bounds KILN_NUM_THREADS. Each thread is a goroutine that
// spins between kernel calls with a slot of its own, so an absurd
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

// pollsPerYield is how many times a worker or a waiting caller polls
// between yields of the processor (and looks at the clock). A poll is a
// load that hits the cache until the line changes, a nanosecond or two:
// yielding every 64, as suited a poll that was a channel receive, spent
// more time in the scheduler than polling, about 140 ns a chunk at two
// threads against 80 at 256. The yield still comes within a microsecond, so
// threads beyond the cores do not starve the others.
const pollsPerYield = 256

// work is the loop of the worker polling s: run the chunks handed to it,
// polling for spinTime after each before parking until the next.
func (p *pool) work(s *slot) {
	for {
		t := s.poll()
		if t == nil {
			if s.task.CompareAndSwap(nil, parked) && !p.park(s) {
				return
			}
			continue
		}
		if !s.task.CompareAndSwap(t, running) {
			continue // its caller took it back
		}
		fn, lo, hi, j := t.fn, t.lo, t.hi, t.job
		fn(lo, hi)
		// Free before done: a caller issuing its next call as soon as this
		// one returns finds the worker free.
		s.task.Store(nil)
		j.finish()
	}
}

// poll waits for a chunk in s: its task once there is one, nil once it
// has found none for spinTime. It yields the processor now and then so
// other goroutines and the GC still run.
func (s *slot) poll() *task {
	var start time.Time
	for i := 0; ; i++ {
		if t := s.task.Load(); t != nil {
			return t
		}
		if i%pollsPerYield == pollsPerYield-1 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > spinTime {
				return nil
			}
			runtime.Gosched()
		}
	}
}

// park blocks the worker of s, parked, until a caller hands it a chunk;
// false when its Pool closed first.
func (p *pool) park(s *slot) bool {
	select {
	case <-s.wake:
		return true
	case <-p.quit:
		if s.task.CompareAndSwap(parked, stopped) {
			return false
		}
		<-s.wake // a caller handed it a chunk first: its token is on the way
		return true
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

// run calls fn on parts balanced chunks of [0, n): it hands chunks 1 and
// on to free workers, polling ones first since a parked one starts only
// once the OS has woken it, and runs chunk 0, and every chunk no worker
// was free to take, itself.
func (p *pool) run(n, parts int, fn func(lo, hi int)) {
	if parts <= 1 {
		fn(0, n)
		return
	}
	j := jobPool.get()
	if cap(j.tasks) < parts-1 {
		j.tasks = make([]task, 0, parts-1)
	}
	// Counted before any is handed out: a worker may finish its chunk
	// before the next is handed.
	j.pending.Store(int32(parts - 1))
	i := 1
	for _, free := range [...]*task{nil, parked} {
		for k := 0; k < len(p.slots) && i < parts; k++ {
			s := &p.slots[k]
			// A parked worker's line is cold and nobody else's: the load
			// spares a CAS on each busy slot the first pass already tried.
			if free == parked && s.task.Load() != parked {
				continue
			}
			lo, hi := chunkBounds(n, parts, i)
			j.tasks = append(j.tasks, task{fn: fn, lo: lo, hi: hi, job: j, slot: s})
			if !s.task.CompareAndSwap(free, &j.tasks[len(j.tasks)-1]) {
				j.tasks = j.tasks[:len(j.tasks)-1]
				continue
			}
			if free == parked {
				s.wake <- struct{}{}
			}
			i++
		}
	}
	if i < parts {
		j.pending.Add(int32(i - parts))
	}
	_, hi := chunkBounds(n, parts, 0)
	fn(0, hi)
	for ; i < parts; i++ {
		fn(chunkBounds(n, parts, i))
	}
	j.wait()
	clear(j.tasks) // a pooled job keeps no caller's memory alive
	j.tasks = j.tasks[:0]
	jobPool.put(j)
}

// wait returns once the handed chunks are done. It polls first, since
// chunks handed out together usually finish within microseconds of each
// other, then blocks. It takes back unstarted chunks after its first
// pollsPerYield polls, under a microsecond: a worker polling on a core of
// its own has started by then, and taking back at once would run on the
// caller, one after another, chunks their workers were about to start
// (in BenchmarkParallelDispatch at two threads, 93% of them, not 8%).
func (j *job) wait() {
	var start time.Time
	for i := 0; j.pending.Load() != 0; i++ {
		if i%pollsPerYield != pollsPerYield-1 {
			continue
		}
		if i == pollsPerYield-1 {
			j.takeBack()
			continue // what is left was running: it may be done already
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > spinTime {
			if j.pending.Add(waiterAsleep) != waiterAsleep {
				<-j.done
			}
			return
		}
		runtime.Gosched()
	}
}

// takeBack runs the handed chunks no worker has started yet: a worker the
// OS is still waking, or one waiting for a core when there are more
// threads than cores, would otherwise hold the call up for longer than
// the chunk takes. A task is in its slot only until its worker starts it,
// so the CAS that takes it out cannot take another call's.
func (j *job) takeBack() {
	for k := range j.tasks {
		t := &j.tasks[k]
		if t.slot.task.Load() == t && t.slot.task.CompareAndSwap(t, nil) {
			t.fn(t.lo, t.hi)
			j.pending.Add(-1)
		}
	}
}
