package dist

import (
	"runtime"
	"sync"

	"github.com/kilnml/kiln/kernels"
)

// engine runs a communicator's collectives one at a time, in the order they
// were submitted, on one goroutine locked to its OS thread. MPI wants every
// call from one thread (MPI_THREAD_FUNNELED), and collectives must be
// issued in the same order on every rank; a non-blocking collective is one
// whose caller does not wait for it here, so communication overlaps the
// caller's compute on the kernel workers.
type engine struct {
	mu     sync.Mutex
	closed bool
	tasks  chan engineTask
	exited chan struct{}
}

type engineTask struct {
	run func() error
	req *Request
}

// startEngine starts the engine goroutine and runs init on its thread
// first; an init error stops it.
func startEngine(init func() error) (*engine, error) {
	e := &engine{tasks: make(chan engineTask, 64), exited: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		defer close(e.exited)
		if init != nil {
			if err := init(); err != nil {
				ready <- err
				return
			}
		}
		ready <- nil
		for t := range e.tasks {
			t.req.finish(t.run())
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return e, nil
}

// submit queues run and returns its Request.
func (e *engine) submit(run func() error) *Request {
	req := newRequest()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		req.finish(ErrClosed)
		return req
	}
	e.tasks <- engineTask{run, req}
	return req
}

// do runs run on the engine and waits for it.
func (e *engine) do(run func() error) error { return e.submit(run).Wait() }

// stop runs fin after every queued collective, then ends the engine.
// Later submissions fail with ErrClosed; a second stop does nothing.
func (e *engine) stop(fin func() error) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	req := newRequest()
	if fin == nil {
		fin = func() error { return nil }
	}
	e.tasks <- engineTask{fin, req}
	e.closed = true
	close(e.tasks)
	e.mu.Unlock()
	err := req.Wait()
	<-e.exited
	return err
}

// allreduceBF16 is Allreduce of a bfloat16 buffer through reduce, the
// backend's float32 Allreduce: widened to float32 for the wire and the
// sums, rounded to nearest even once at the end, so a sum of bfloat16
// gradients loses no more than one rounding.
func allreduceBF16(buf Buffer, op Op, reduce func(Buffer, Op) error) error {
	bits := buf.data.([]uint16)
	wide := make([]float32, len(bits))
	kernels.BF16ToF32(wide, bits)
	if err := reduce(Float32s(wide), op); err != nil {
		return err
	}
	kernels.F32ToBF16(bits, wide)
	return nil
}
