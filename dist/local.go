package dist

import (
	"fmt"
	"sync"
)

// Local returns a world of n ranks inside this process, one Communicator
// per rank: hand comms[r] to the goroutine that plays rank r. Collectives
// meet in memory; sums run in rank order, each rank adding its share of
// the elements, so every rank gets the same bits. It is the backend of
// the package's tests and a way to use the API on one machine.
func Local(n int) ([]Communicator, error) {
	if n < 1 {
		return nil, fmt.Errorf("dist: Local: world size %d, want at least 1", n)
	}
	w := &localWorld{n: n, posts: make([]localPost, n)}
	w.cond = sync.NewCond(&w.mu)
	comms := make([]Communicator, n)
	for r := range comms {
		e, err := startEngine(nil)
		if err != nil {
			return nil, err
		}
		comms[r] = &localComm{w: w, rank: r, e: e}
	}
	return comms, nil
}

// localWorld is where the ranks of a Local world meet.
type localWorld struct {
	n    int
	mu   sync.Mutex
	cond *sync.Cond
	// count ranks have reached the barrier of generation gen.
	count, gen int
	err        error // set by Abort
	posts      []localPost
	scratch    any // the reduced values of the current Allreduce
}

// localPost is what one rank brings to a collective.
type localPost struct {
	kind       string
	send, recv Buffer
	op         Op
	root       int
	counts     []int
}

type localComm struct {
	w       *localWorld
	rank    int
	e       *engine
	scratch []float32 // Float32Parts packed, on the engine's thread
}

func (c *localComm) Rank() int { return c.rank }
func (c *localComm) Size() int { return c.w.n }

// barrier returns once every rank has reached it, or the world's abort
// error.
func (w *localWorld) barrier() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	gen := w.gen
	w.count++
	if w.count == w.n {
		w.count, w.gen = 0, w.gen+1
		w.cond.Broadcast()
		return nil
	}
	for gen == w.gen && w.err == nil {
		w.cond.Wait()
	}
	if gen == w.gen {
		return w.err
	}
	return nil
}

// collective runs one collective for rank: post p, wait for every rank,
// check the posts agree, read (from every rank's posts, writing only what
// rank owns or its share of the scratch), wait, then write (rank's own
// buffers from the scratch), and wait until no rank reads rank's buffers.
func (w *localWorld) collective(rank int, p localPost, read, write func(posts []localPost) error) error {
	w.mu.Lock()
	w.posts[rank] = p
	w.mu.Unlock()
	if err := w.barrier(); err != nil {
		return err
	}
	if err := w.agree(); err != nil {
		// Every rank sees the same posts and returns the same error, after
		// one more meeting so no rank posts again before all have read.
		w.barrier()
		return err
	}
	if err := read(w.posts); err != nil {
		return err
	}
	if err := w.barrier(); err != nil {
		return err
	}
	if write != nil {
		if err := write(w.posts); err != nil {
			return err
		}
	}
	return w.barrier()
}

// agree returns an error wrapping ErrMismatch unless every rank posted the
// same collective with matching buffers.
func (w *localWorld) agree() error {
	p0 := w.posts[0]
	for r, p := range w.posts[1:] {
		r++
		switch {
		case p.kind != p0.kind:
			return fmt.Errorf("%w: rank 0 called %s, rank %d %s", ErrMismatch, p0.kind, r, p.kind)
		case p.send.dtype != p0.send.dtype:
			return fmt.Errorf("%w: %s: rank 0 has %v, rank %d %v", ErrMismatch, p.kind, p0.send.dtype, r, p.send.dtype)
		case p.kind == "Allreduce" && p.op != p0.op:
			return fmt.Errorf("%w: Allreduce: rank 0 asks for %v, rank %d %v", ErrMismatch, p0.op, r, p.op)
		case p.kind != "Allgatherv" && p.send.n != p0.send.n:
			return fmt.Errorf("%w: %s: rank 0 has %d elements, rank %d %d", ErrMismatch, p.kind, p0.send.n, r, p.send.n)
		case p.kind == "Bcast" && p.root != p0.root:
			return fmt.Errorf("%w: Bcast: rank 0 names root %d, rank %d root %d", ErrMismatch, p0.root, r, p.root)
		}
		if p.kind == "Allgatherv" {
			for i, c := range p.counts {
				if c != p0.counts[i] {
					return fmt.Errorf("%w: Allgatherv: rank 0 counts %v, rank %d %v", ErrMismatch, p0.counts, r, p.counts)
				}
			}
			if p.send.n != p.counts[r] {
				return fmt.Errorf("%w: Allgatherv: rank %d sends %d elements, counts say %d", ErrMismatch, r, p.send.n, p.counts[r])
			}
		}
	}
	return nil
}

func (c *localComm) Allreduce(buf Buffer, op Op) error {
	if err := checkReduce(buf, op); err != nil {
		return err
	}
	return c.e.do(func() error { return c.allreduce(buf, op) })
}

func (c *localComm) Iallreduce(buf Buffer, op Op) *Request {
	if err := checkReduce(buf, op); err != nil {
		r := newRequest()
		r.finish(err)
		return r
	}
	return c.e.submit(func() error { return c.allreduce(buf, op) })
}

func (c *localComm) allreduce(buf Buffer, op Op) error {
	if buf.dtype == BFloat16 {
		return allreduceBF16(buf, op, c.allreduce)
	}
	buf, unpack := packed(buf, &c.scratch)
	w, n := c.w, buf.n
	w.mu.Lock()
	if c.rank == 0 {
		// Rank 0 sizes the scratch before the first meeting; no rank reads
		// it until after.
		w.scratch = makeLike(buf)
	}
	w.mu.Unlock()
	lo, hi := c.rank*n/w.n, (c.rank+1)*n/w.n
	read := func(posts []localPost) error {
		switch dst := w.scratch.(type) {
		case []float32:
			reduceInto(dst, sends[float32](posts), lo, hi, op)
		case []float64:
			reduceInto(dst, sends[float64](posts), lo, hi, op)
		case []int64:
			reduceInto(dst, sends[int64](posts), lo, hi, op)
		}
		return nil
	}
	write := func([]localPost) error {
		copyBuffer(buf, 0, Buffer{buf.dtype, w.scratch, n})
		return nil
	}
	err := w.collective(c.rank, localPost{kind: "Allreduce", send: buf, op: op}, read, write)
	if err == nil {
		unpack()
	}
	return err
}

// makeLike returns a new slice of buf's type and length.
func makeLike(buf Buffer) any {
	switch buf.dtype {
	case Float32:
		return make([]float32, buf.n)
	case Float64:
		return make([]float64, buf.n)
	case Int64:
		return make([]int64, buf.n)
	case BFloat16:
		return make([]uint16, buf.n)
	}
	return make([]byte, buf.n)
}

// sends returns every rank's send slice.
func sends[T any](posts []localPost) [][]T {
	s := make([][]T, len(posts))
	for r, p := range posts {
		s[r] = p.send.data.([]T)
	}
	return s
}

func (c *localComm) Bcast(buf Buffer, root int) error {
	if err := checkBcast(buf, root, c.w.n); err != nil {
		return err
	}
	return c.e.do(func() error {
		read := func(posts []localPost) error {
			if c.rank != root {
				copyBuffer(buf, 0, posts[root].send)
			}
			return nil
		}
		return c.w.collective(c.rank, localPost{kind: "Bcast", send: buf, root: root}, read, nil)
	})
}

func (c *localComm) Allgather(send, recv Buffer) error {
	if err := checkGather(send, recv, c.w.n); err != nil {
		return err
	}
	return c.e.do(func() error {
		read := func(posts []localPost) error {
			for r, p := range posts {
				copyBuffer(recv, r*send.n, p.send)
			}
			return nil
		}
		return c.w.collective(c.rank, localPost{kind: "Allgather", send: send}, read, nil)
	})
}

func (c *localComm) Allgatherv(send, recv Buffer, counts []int) error {
	if err := checkGatherv(send, recv, counts, c.rank, c.w.n); err != nil {
		return err
	}
	return c.e.do(func() error {
		read := func(posts []localPost) error {
			off := 0
			for r, p := range posts {
				copyBuffer(recv, off, p.send)
				off += counts[r]
			}
			return nil
		}
		return c.w.collective(c.rank, localPost{kind: "Allgatherv", send: send, counts: counts}, read, nil)
	})
}

func (c *localComm) Barrier() error {
	return c.e.do(func() error {
		return c.w.collective(c.rank, localPost{kind: "Barrier"}, func([]localPost) error { return nil }, nil)
	})
}

func (c *localComm) Abort(code int, reason string) {
	w := c.w
	w.mu.Lock()
	if w.err == nil {
		w.err = fmt.Errorf("%w by rank %d (code %d): %s", ErrAborted, c.rank, code, reason)
	}
	w.cond.Broadcast()
	w.mu.Unlock()
}

func (c *localComm) Close() error { return c.e.stop(nil) }
