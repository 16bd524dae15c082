//go:build mpi || mpich

package dist

// The MPI backend: a small cgo binding, built with -tags mpi (Open MPI,
// found by pkg-config as ompi) or -tags mpich (MPICH, pkg-config mpich;
// Intel MPI ships an mpich-compatible ABI: point PKG_CONFIG_PATH at a
// mpich.pc for it, or set CGO_CFLAGS and CGO_LDFLAGS by hand).

/*
#cgo mpi pkg-config: ompi
#cgo mpi CPPFLAGS: -DKILN_OPEN_MPI
#cgo mpich pkg-config: mpich
#cgo mpich CPPFLAGS: -DKILN_MPICH
#include <mpi.h>

// The CPPFLAGS make the two builds differ for Go's build cache, which
// does not see pkg-config's output: without them a -tags mpich build
// would reuse a -tags mpi one, and link Open MPI.
#if defined(KILN_OPEN_MPI) && defined(KILN_MPICH)
#error "dist: build with -tags mpi (Open MPI) or -tags mpich (MPICH, Intel MPI), not both"
#endif

// The handles are macros, and MPI_IN_PLACE is no pointer Go may hold, so
// every call that names one goes through a wrapper.

static MPI_Datatype kiln_type(int d) {
	switch (d) {
	case 1: return MPI_FLOAT;     // Float32
	case 2: return MPI_DOUBLE;    // Float64
	case 3: return MPI_UINT16_T;  // BFloat16 bits, moved, never added
	case 4: return MPI_INT64_T;   // Int64
	}
	return MPI_BYTE;              // Uint8
}

static int kiln_init(int *provided) {
	return MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
}

static int kiln_world_size(int *size) { return MPI_Comm_size(MPI_COMM_WORLD, size); }

static int kiln_dup(MPI_Comm *c, int *rank) {
	int rc = MPI_Comm_dup(MPI_COMM_WORLD, c);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_rank(*c, rank);
}

static int kiln_allreduce_sum(void *buf, int n, int d, MPI_Comm c) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, kiln_type(d), MPI_SUM, c);
}

static int kiln_bcast(void *buf, int n, int d, int root, MPI_Comm c) {
	return MPI_Bcast(buf, n, kiln_type(d), root, c);
}

static int kiln_allgather(void *send, void *recv, int n, int d, MPI_Comm c) {
	return MPI_Allgather(send, n, kiln_type(d), recv, n, kiln_type(d), c);
}

static int kiln_allgatherv(void *send, int n, void *recv, int *counts, int *displs, int d, MPI_Comm c) {
	return MPI_Allgatherv(send, n, kiln_type(d), recv, counts, displs, kiln_type(d), c);
}

static int kiln_abort(int code) { return MPI_Abort(MPI_COMM_WORLD, code); }

// A shared-memory window on the ranks of c that share this node: bytes
// for each, mapped into every one of them (MPI-3's MPI_Win_allocate_shared),
// locked for the communicator's life. *node is MPI_COMM_NULL when the
// node's ranks are not all of c.
static int kiln_shm_open(MPI_Comm c, MPI_Aint bytes, MPI_Comm *node, MPI_Win *win, void **base) {
	int rc = MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, node);
	if (rc != MPI_SUCCESS) return rc;
	int n, size, all;
	MPI_Comm_size(*node, &n);
	MPI_Comm_size(c, &size);
	rc = MPI_Allreduce(&n, &all, 1, MPI_INT, MPI_MIN, c);
	if (rc != MPI_SUCCESS || all != size) {
		MPI_Comm_free(node);
		*node = MPI_COMM_NULL;
		return rc;
	}
	MPI_Comm_set_errhandler(*node, MPI_ERRORS_RETURN);
	rc = MPI_Win_allocate_shared(bytes, 4, MPI_INFO_NULL, *node, base, win);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Win_lock_all(MPI_MODE_NOCHECK, *win);
}

static int kiln_shm_query(MPI_Win win, int rank, void **base) {
	MPI_Aint size;
	int unit;
	return MPI_Win_shared_query(win, rank, &size, &unit, base);
}

// Every rank's stores to the window before, visible to every rank's
// loads after: the memory barrier of MPI's unified model on both sides of
// a barrier.
static int kiln_shm_sync(MPI_Win win, MPI_Comm node) {
	MPI_Win_sync(win);
	int rc = MPI_Barrier(node);
	MPI_Win_sync(win);
	return rc;
}

static int kiln_shm_close(MPI_Win *win, MPI_Comm *node) {
	MPI_Win_unlock_all(*win);
	int rc = MPI_Win_free(win);
	MPI_Comm_free(node);
	return rc;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// MPIBuilt reports whether this binary was built with an MPI backend.
const MPIBuilt = true

// mpiMaxCount is the most elements one MPI call carries (MPI counts are C
// ints). Longer Allreduce and Bcast buffers go in chunks; a gather whose
// result is longer goes as one Bcast per rank. Tests lower it to take
// those paths.
var mpiMaxCount = 1 << 30

// mpiProc is this process's MPI library. The first openMPI initialises it
// on the thread of an engine that every MPI communicator then shares, so
// that every MPI call comes from the thread that initialised MPI; the
// last Close finalises it, after which MPI cannot start again (MPI's rule).
var mpiProc struct {
	mu        sync.Mutex
	e         *engine
	size      int    // MPI_COMM_WORLD's size, once MPI has started
	library   string // MPI_Get_library_version's first line
	owned     bool   // MPI_Init was ours, so MPI_Finalize is too
	finalized bool
	comms     map[*mpiComm]bool
	// multiple: MPI runs with MPI_THREAD_MULTIPLE, so Abort may call
	// MPI_Abort from its own thread while the engine's is blocked inside a
	// collective.
	multiple atomic.Bool
}

// openMPI returns a communicator over MPI_COMM_WORLD (a duplicate of it,
// whose errors return rather than abort), starting MPI if this is the
// first. n is the world size the launcher announced in variable v; MPI
// must agree.
func openMPI(n int, v string) (Communicator, error) {
	p := &mpiProc
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.size != 0 && p.size != n {
		return nil, mismatchError(n, v, p.size)
	}
	if p.finalized {
		return nil, errors.New("dist: MPI was finalized when its last communicator closed and cannot start again in this process")
	}
	if p.e == nil {
		if err := startMPI(n, v); err != nil {
			return nil, err
		}
	}
	c := &mpiComm{e: p.e, size: p.size}
	err := c.e.do(func() error {
		var rank C.int
		if rc := C.kiln_dup(&c.comm, &rank); rc != C.MPI_SUCCESS {
			c.freed = true
			return mpiError("MPI_Comm_dup", rc)
		}
		c.rank = int(rank)
		return nil
	})
	if err != nil {
		if len(p.comms) == 0 {
			stopMPI()
		}
		return nil, err
	}
	p.comms[c] = true
	return c, nil
}

// startMPI starts the engine and MPI on its thread, and checks the world
// has n ranks. It runs with mpiProc.mu held.
func startMPI(n int, v string) error {
	p := &mpiProc
	p.library = mpiLibrary()
	// Open MPI spins in a blocking call while it waits for a peer. Its
	// waits here are the communication thread's, beside compute threads
	// that want every core: yielding gives them the core (ResNet-18
	// steps on 2 ranks of 1 thread, 2 cores: 123 -> 112 ms). The user's
	// own setting wins.
	if _, ok := os.LookupEnv("OMPI_MCA_mpi_yield_when_idle"); !ok {
		os.Setenv("OMPI_MCA_mpi_yield_when_idle", "1")
	}
	var size int
	var provided C.int
	var owned bool
	e, err := startEngine(func() error {
		var flag C.int
		C.MPI_Finalized(&flag)
		if flag != 0 {
			return errors.New("dist: MPI was finalized by other code in this process and cannot start again")
		}
		C.MPI_Initialized(&flag)
		if flag != 0 {
			// Other code in this process started MPI; this thread may
			// call it only if that code asked for MPI_THREAD_MULTIPLE.
			C.MPI_Query_thread(&provided)
			if provided != C.MPI_THREAD_MULTIPLE {
				return errors.New("dist: MPI was initialized by other code in this process without MPI_THREAD_MULTIPLE, so dist cannot call it from its own thread")
			}
		} else {
			if rc := C.kiln_init(&provided); rc != C.MPI_SUCCESS {
				return fmt.Errorf("dist: MPI_Init_thread failed (MPI error %d)", int(rc))
			}
			owned = true
		}
		var s C.int
		if rc := C.kiln_world_size(&s); rc != C.MPI_SUCCESS {
			err := mpiError("MPI_Comm_size", rc)
			if owned {
				C.MPI_Finalize()
			}
			return err
		}
		size = int(s)
		if size != n {
			if owned {
				// A rank that is its own world of one (the usual cause)
				// leaves cleanly.
				C.MPI_Finalize()
			}
			return mismatchError(n, v, size)
		}
		return nil
	})
	if size != 0 {
		p.size = size
	}
	if err != nil {
		p.finalized = p.finalized || owned
		return err
	}
	p.e, p.owned = e, owned
	p.comms = map[*mpiComm]bool{}
	p.multiple.Store(provided == C.MPI_THREAD_MULTIPLE)
	return nil
}

// stopMPI finalises MPI (if ours) and ends the engine, once the last
// communicator has closed. It runs with mpiProc.mu held.
func stopMPI() error {
	p := &mpiProc
	p.multiple.Store(false)
	owned := p.owned
	err := p.e.stop(func() error {
		if !owned {
			return nil
		}
		if rc := C.MPI_Finalize(); rc != C.MPI_SUCCESS {
			return fmt.Errorf("dist: MPI_Finalize failed (MPI error %d)", int(rc))
		}
		return nil
	})
	p.e = nil
	p.finalized = p.finalized || owned
	return err
}

// closeMPI closes every open MPI communicator, so MPI finalises: for a
// process (a test binary) whose code may have left one open.
func closeMPI() error {
	p := &mpiProc
	p.mu.Lock()
	var open []*mpiComm
	for c := range p.comms {
		open = append(open, c)
	}
	p.mu.Unlock()
	var err error
	for _, c := range open {
		if e := c.Close(); err == nil {
			err = e
		}
	}
	return err
}

func mismatchError(n int, v string, size int) error {
	lib := mpiProc.library
	if lib == "" {
		lib = "this MPI library"
	}
	return fmt.Errorf("dist: the launcher started %d ranks (%s=%d) but MPI sees a world of %d; "+
		"this binary is built against %s: was it started by the launcher of another MPI implementation? "+
		"Build with -tags mpi for Open MPI's mpirun, -tags mpich for MPICH's or Intel MPI's mpiexec",
		n, v, n, size, lib)
}

// mpiLibrary returns the first line of MPI_Get_library_version, which MPI
// answers before MPI_Init too.
func mpiLibrary() string {
	var buf [C.MPI_MAX_LIBRARY_VERSION_STRING]C.char
	var n C.int
	if C.MPI_Get_library_version(&buf[0], &n) != C.MPI_SUCCESS {
		return ""
	}
	s := C.GoStringN(&buf[0], n)
	s, _, _ = strings.Cut(s, "\n")
	s, _, _ = strings.Cut(s, ",")
	return strings.Join(strings.Fields(s), " ")
}

// mpiError turns an MPI error code into an error naming the call.
func mpiError(call string, rc C.int) error {
	var buf [C.MPI_MAX_ERROR_STRING]C.char
	var n C.int
	if C.MPI_Error_string(rc, &buf[0], &n) != C.MPI_SUCCESS {
		return fmt.Errorf("dist: %s failed (MPI error %d)", call, int(rc))
	}
	return fmt.Errorf("dist: %s: %s (MPI error %d)", call, C.GoStringN(&buf[0], n), int(rc))
}

// mpiComm is a Communicator over a duplicate of MPI_COMM_WORLD. Every MPI
// call runs on the engine; comm and freed belong to it.
type mpiComm struct {
	e          *engine
	comm       C.MPI_Comm
	freed      bool
	rank, size int
	closed     atomic.Bool
	shm        *mpiShm   // nil until the first large float32 Allreduce
	noShm      bool      // the ranks share no node, or KILN_MPI_SHM=0
	scratch    []float32 // Float32Parts packed for MPI_Allreduce
}

func (c *mpiComm) Rank() int { return c.rank }
func (c *mpiComm) Size() int { return c.size }

// task wraps run for the engine: a communicator closed meanwhile fails it.
func (c *mpiComm) task(run func() error) func() error {
	return func() error {
		if c.freed {
			return ErrClosed
		}
		return run()
	}
}

func (c *mpiComm) do(run func() error) error { return c.e.do(c.task(run)) }

// addr is the address of buf's element off, or nil where buf ends first:
// MPI takes any pointer with a count of 0.
func addr(buf Buffer, off int) unsafe.Pointer {
	if off >= buf.n {
		return nil
	}
	switch d := buf.data.(type) {
	case []float32:
		return unsafe.Pointer(&d[off])
	case []float64:
		return unsafe.Pointer(&d[off])
	case []uint16:
		return unsafe.Pointer(&d[off])
	case []int64:
		return unsafe.Pointer(&d[off])
	case []byte:
		return unsafe.Pointer(&d[off])
	}
	panic(fmt.Sprintf("dist: buffer of %T", buf.data))
}

func (c *mpiComm) Allreduce(buf Buffer, op Op) error {
	if err := checkReduce(buf, op); err != nil {
		return err
	}
	return c.do(func() error { return c.allreduce(buf, op) })
}

// Iallreduce queues the Allreduce on the engine, which runs it as a
// blocking MPI_Allreduce while the caller goes on.
func (c *mpiComm) Iallreduce(buf Buffer, op Op) *Request {
	if err := checkReduce(buf, op); err != nil {
		r := newRequest()
		r.finish(err)
		return r
	}
	return c.e.submit(c.task(func() error { return c.allreduce(buf, op) }))
}

// allreduce runs on the engine: MPI_SUM in place, in chunks of at most
// mpiMaxCount elements; Mean divides after; bfloat16 travels as float32.
func (c *mpiComm) allreduce(buf Buffer, op Op) error {
	if buf.dtype == BFloat16 {
		return allreduceBF16(buf, op, c.allreduce)
	}
	if buf.dtype == Float32 && buf.n >= shmMinFloats && c.useShm() {
		err := c.shm.allreduce(buf)
		if err == nil && op == Mean {
			divide(buf, c.size)
		}
		return err
	}
	buf, unpack := packed(buf, &c.scratch)
	defer unpack()
	for off := 0; off < buf.n; off += mpiMaxCount {
		k := min(mpiMaxCount, buf.n-off)
		if rc := C.kiln_allreduce_sum(addr(buf, off), C.int(k), C.int(buf.dtype), c.comm); rc != C.MPI_SUCCESS {
			return mpiError("MPI_Allreduce", rc)
		}
	}
	if op == Mean {
		divide(buf, c.size)
	}
	return nil
}

func (c *mpiComm) Bcast(buf Buffer, root int) error {
	if err := checkBcast(buf, root, c.size); err != nil {
		return err
	}
	return c.do(func() error { return c.bcast(buf, 0, buf.n, root) })
}

// bcast broadcasts root's elements [off, off+n) of buf, in chunks.
func (c *mpiComm) bcast(buf Buffer, off, n, root int) error {
	for end := off + n; off < end; off += mpiMaxCount {
		k := min(mpiMaxCount, end-off)
		if rc := C.kiln_bcast(addr(buf, off), C.int(k), C.int(buf.dtype), C.int(root), c.comm); rc != C.MPI_SUCCESS {
			return mpiError("MPI_Bcast", rc)
		}
	}
	return nil
}

// gatherByBcast is a gather whose result is too long for one MPI call:
// this rank's send goes to its place in recv, then each rank broadcasts
// its part.
func (c *mpiComm) gatherByBcast(send, recv Buffer, counts []int) error {
	off := 0
	for r, k := range counts {
		if r == c.rank {
			copyBuffer(recv, off, send)
		}
		if err := c.bcast(recv, off, k, r); err != nil {
			return err
		}
		off += k
	}
	return nil
}

func (c *mpiComm) Allgather(send, recv Buffer) error {
	if err := checkGather(send, recv, c.size); err != nil {
		return err
	}
	return c.do(func() error {
		if recv.n > mpiMaxCount {
			counts := make([]int, c.size)
			for r := range counts {
				counts[r] = send.n
			}
			return c.gatherByBcast(send, recv, counts)
		}
		rc := C.kiln_allgather(addr(send, 0), addr(recv, 0), C.int(send.n), C.int(send.dtype), c.comm)
		if rc != C.MPI_SUCCESS {
			return mpiError("MPI_Allgather", rc)
		}
		return nil
	})
}

func (c *mpiComm) Allgatherv(send, recv Buffer, counts []int) error {
	if err := checkGatherv(send, recv, counts, c.rank, c.size); err != nil {
		return err
	}
	counts = append([]int(nil), counts...) // the caller may change its own meanwhile
	return c.do(func() error {
		if recv.n > mpiMaxCount {
			return c.gatherByBcast(send, recv, counts)
		}
		cs, ds := make([]C.int, c.size), make([]C.int, c.size)
		off := 0
		for r, k := range counts {
			cs[r], ds[r] = C.int(k), C.int(off)
			off += k
		}
		rc := C.kiln_allgatherv(addr(send, 0), C.int(send.n), addr(recv, 0), &cs[0], &ds[0], C.int(send.dtype), c.comm)
		if rc != C.MPI_SUCCESS {
			return mpiError("MPI_Allgatherv", rc)
		}
		return nil
	})
}

func (c *mpiComm) Barrier() error {
	return c.do(func() error {
		if rc := C.MPI_Barrier(c.comm); rc != C.MPI_SUCCESS {
			return mpiError("MPI_Barrier", rc)
		}
		return nil
	})
}

// Abort prints the reason and ends every rank with MPI_Abort. With
// MPI_THREAD_MULTIPLE (Open MPI's and MPICH's usual level) it calls
// MPI_Abort from the caller's thread, so it works while the engine is
// blocked inside a collective; otherwise it asks the engine and, if the
// engine is busy for a second, exits with code, which an MPI launcher
// takes as the job's failure and ends the other ranks.
func (c *mpiComm) Abort(code int, reason string) {
	fmt.Fprintf(os.Stderr, "dist: abort: %s\n", reason)
	if mpiProc.multiple.Load() {
		C.kiln_abort(C.int(code))
	} else if !c.closed.Load() {
		req := c.e.submit(func() error {
			C.kiln_abort(C.int(code))
			return nil
		})
		select {
		case <-req.Done():
		case <-time.After(time.Second):
		}
	}
	os.Exit(code)
}

// Close frees the communicator; closing the last one finalises MPI.
func (c *mpiComm) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	p := &mpiProc
	p.mu.Lock()
	defer p.mu.Unlock()
	err := c.e.do(func() error {
		if c.freed {
			return nil
		}
		c.freed = true
		if c.shm != nil {
			if rc := C.kiln_shm_close(&c.shm.win, &c.shm.node); rc != C.MPI_SUCCESS {
				return mpiError("MPI_Win_free", rc)
			}
		}
		if rc := C.MPI_Comm_free(&c.comm); rc != C.MPI_SUCCESS {
			return mpiError("MPI_Comm_free", rc)
		}
		return nil
	})
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	delete(p.comms, c)
	if len(p.comms) == 0 && p.e == c.e {
		if e := stopMPI(); err == nil {
			err = e
		}
	}
	return err
}

// shmMinFloats is the smallest float32 Allreduce that goes through shared
// memory; below it MPI's own, tuned for latency, is as fast. shmFloats is
// each rank's share of the window: longer buffers go in chunks.
const (
	shmMinFloats = 1 << 16
	shmFloats    = 4 << 20
)

// mpiShm is a float32 Allreduce through memory that all ranks map, for a
// world on one node. Open MPI's own moves a ResNet-18's 47 MB of
// gradients at about 2 GB/s here (23 ms on 2 ranks of a Zen 4), copying
// them through its transport's buffers; through a shared window each rank
// copies its values in once, adds its share of the elements across the
// ranks in rank order (the same sums on every rank, as Local's) and
// copies the result out. MPI still provides the memory and the
// synchronisation.
type mpiShm struct {
	node  C.MPI_Comm
	win   C.MPI_Win
	slots [][]float32 // every rank's part of the window
	rank  int
}

// useShm reports whether float32 Allreduce goes through shared memory,
// opening the window on the first call, which every rank makes at the
// same point (the same collective, the same length).
func (c *mpiComm) useShm() bool {
	if c.shm != nil || c.noShm {
		return c.shm != nil
	}
	if os.Getenv("KILN_MPI_SHM") == "0" {
		c.noShm = true
		return false
	}
	s := &mpiShm{rank: c.rank}
	var base unsafe.Pointer
	rc := C.kiln_shm_open(c.comm, C.MPI_Aint(4*shmFloats), &s.node, &s.win, &base)
	if rc != C.MPI_SUCCESS || s.node == C.MPI_COMM_NULL {
		c.noShm = true
		return false
	}
	for r := range c.size {
		var p unsafe.Pointer
		if C.kiln_shm_query(s.win, C.int(r), &p) != C.MPI_SUCCESS {
			C.kiln_shm_close(&s.win, &s.node)
			c.noShm = true
			return false
		}
		s.slots = append(s.slots, unsafe.Slice((*float32)(p), shmFloats))
	}
	c.shm = s
	return true
}

func (s *mpiShm) sync() error {
	if rc := C.kiln_shm_sync(s.win, s.node); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Barrier", rc)
	}
	return nil
}

// allreduce sums buf (one slice or parts) across the ranks in place,
// shmFloats at a time: in, each rank its 1/size of the elements (written
// to rank 0's slot, where only it touches them), out.
func (s *mpiShm) allreduce(buf Buffer) error {
	parts, ok := buf.data.([][]float32)
	if !ok {
		parts = [][]float32{buf.data.([]float32)}
	}
	size := len(s.slots)
	for off := 0; off < buf.n; off += shmFloats {
		k := min(shmFloats, buf.n-off)
		gatherParts(s.slots[s.rank][:k], parts, off)
		if err := s.sync(); err != nil {
			return err
		}
		lo, hi := s.rank*k/size, (s.rank+1)*k/size
		sum := s.slots[0][lo:hi]
		for _, slot := range s.slots[1:] {
			addInto(sum, slot[lo:hi])
		}
		if err := s.sync(); err != nil {
			return err
		}
		scatterParts(parts, off, s.slots[0][:k])
		// No rank may write the next chunk in before all have read this
		// one out.
		if err := s.sync(); err != nil {
			return err
		}
	}
	return nil
}

// addInto adds b to a. It runs on the communication thread beside the
// compute threads, so it takes no worker of the kernels' pool.
func addInto(a, b []float32) {
	b = b[:len(a)]
	i := 0
	for ; i+4 <= len(a); i += 4 {
		a[i] += b[i]
		a[i+1] += b[i+1]
		a[i+2] += b[i+2]
		a[i+3] += b[i+3]
	}
	for ; i < len(a); i++ {
		a[i] += b[i]
	}
}
