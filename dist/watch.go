package dist

import (
	"fmt"
	"time"
)

// Watch returns c with a watchdog on every collective: one that has not
// finished within timeout aborts the world (MPI: MPI_Abort, which ends
// every process of the job) with a message naming it, and returns an error
// wrapping ErrTimeout where Abort returns. A rank that hangs (stopped,
// deadlocked, on a dead node whose launcher has not noticed) then ends the
// job instead of leaving the others waiting forever. DataParallel has a
// watchdog of its own for its buckets; Watch covers the other collectives
// of a training loop.
func Watch(c Communicator, timeout time.Duration) Communicator {
	if c.Size() == 1 {
		return c // nothing to wait for
	}
	return &watched{Communicator: c, timeout: timeout}
}

type watched struct {
	Communicator
	timeout time.Duration
}

// watch waits for r; past the timeout it aborts the world.
func (w *watched) watch(what string, r *Request) error {
	t := time.NewTimer(w.timeout)
	defer t.Stop()
	select {
	case <-r.Done():
		return r.err
	case <-t.C:
		reason := fmt.Sprintf("rank %d: %s did not finish within %v (a rank died, hangs or stopped calling collectives)", w.Rank(), what, w.timeout)
		w.Abort(1, reason)
		return fmt.Errorf("%w: %s", ErrTimeout, reason)
	}
}

// run runs a blocking collective under the watchdog.
func (w *watched) run(what string, f func() error) error {
	r := newRequest()
	go func() { r.finish(f()) }()
	return w.watch(what, r)
}

func (w *watched) Allreduce(buf Buffer, op Op) error {
	return w.run(fmt.Sprintf("an Allreduce of %d %v", buf.n, buf.dtype), func() error { return w.Communicator.Allreduce(buf, op) })
}

func (w *watched) Iallreduce(buf Buffer, op Op) *Request {
	inner := w.Communicator.Iallreduce(buf, op)
	r := newRequest()
	go func() { r.finish(w.watch(fmt.Sprintf("an Iallreduce of %d %v", buf.n, buf.dtype), inner)) }()
	return r
}

func (w *watched) Bcast(buf Buffer, root int) error {
	return w.run(fmt.Sprintf("a Bcast of %d %v from rank %d", buf.n, buf.dtype, root), func() error { return w.Communicator.Bcast(buf, root) })
}

func (w *watched) Allgather(send, recv Buffer) error {
	return w.run(fmt.Sprintf("an Allgather of %d %v", send.n, send.dtype), func() error { return w.Communicator.Allgather(send, recv) })
}

func (w *watched) Allgatherv(send, recv Buffer, counts []int) error {
	return w.run(fmt.Sprintf("an Allgatherv of %d %v", recv.n, recv.dtype), func() error { return w.Communicator.Allgatherv(send, recv, counts) })
}

func (w *watched) Barrier() error {
	return w.run("a Barrier", w.Communicator.Barrier)
}
