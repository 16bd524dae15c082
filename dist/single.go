package dist

// Single returns the communicator of a world of one: rank 0 of 1. Its
// collectives copy (Allgather) or leave buffers as they are (Allreduce of
// one rank's values is those values, Mean included).
func Single() Communicator { return &single{} }

type single struct{ closed bool }

func (*single) Rank() int { return 0 }
func (*single) Size() int { return 1 }

func (s *single) check() error {
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *single) Allreduce(buf Buffer, op Op) error {
	if err := checkReduce(buf, op); err != nil {
		return err
	}
	return s.check()
}

func (s *single) Iallreduce(buf Buffer, op Op) *Request {
	r := newRequest()
	r.finish(s.Allreduce(buf, op))
	return r
}

func (s *single) Bcast(buf Buffer, root int) error {
	if err := checkBcast(buf, root, 1); err != nil {
		return err
	}
	return s.check()
}

func (s *single) Allgather(send, recv Buffer) error {
	if err := checkGather(send, recv, 1); err != nil {
		return err
	}
	copyBuffer(recv, 0, send)
	return s.check()
}

func (s *single) Allgatherv(send, recv Buffer, counts []int) error {
	if err := checkGatherv(send, recv, counts, 0, 1); err != nil {
		return err
	}
	copyBuffer(recv, 0, send)
	return s.check()
}

func (s *single) Barrier() error { return s.check() }

func (s *single) Abort(code int, reason string) { abortProcess(code, reason) }

func (s *single) Close() error {
	s.closed = true
	return nil
}
