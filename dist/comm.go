package dist

import (
	"errors"
	"fmt"
)

// A DType is the element type of a Buffer.
type DType uint8

// The element types collectives carry. BFloat16 buffers hold raw bfloat16
// bits; Allreduce sums them in float32 (float32 on the wire) and rounds
// once, to nearest even.
const (
	Float32 DType = iota + 1
	Float64
	BFloat16
	Int64
	Uint8
)

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	case BFloat16:
		return "bfloat16"
	case Int64:
		return "int64"
	case Uint8:
		return "uint8"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size returns the bytes of one element.
func (d DType) Size() int {
	switch d {
	case Float32:
		return 4
	case Float64, Int64:
		return 8
	case BFloat16:
		return 2
	}
	return 1
}

// A Buffer is a typed slice handed to a collective, which reads it and, for
// the receiving side, writes it in place. Make one with Float32s,
// Float64s, BFloat16s, Int64s or Bytes.
type Buffer struct {
	dtype DType
	data  any
	n     int
}

// Float32s wraps s as a Buffer.
func Float32s(s []float32) Buffer { return Buffer{Float32, s, len(s)} }

// Float64s wraps s as a Buffer.
func Float64s(s []float64) Buffer { return Buffer{Float64, s, len(s)} }

// BFloat16s wraps s, bfloat16 bit patterns, as a Buffer.
func BFloat16s(s []uint16) Buffer { return Buffer{BFloat16, s, len(s)} }

// Int64s wraps s as a Buffer.
func Int64s(s []int64) Buffer { return Buffer{Int64, s, len(s)} }

// Bytes wraps s as a Buffer.
func Bytes(s []byte) Buffer { return Buffer{Uint8, s, len(s)} }

// Float32Parts wraps several slices as one float32 Buffer, their
// concatenation, for Allreduce and Iallreduce, which reduce every slice in
// place: a bucket of gradients reduced where they lie, with no copy into
// one buffer and back on the caller's thread. Other collectives refuse it.
func Float32Parts(parts ...[]float32) Buffer {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return Buffer{Float32, parts, n}
}

// whole returns an error naming op when b is made of parts.
func (b Buffer) whole(op string) error {
	if _, ok := b.data.([][]float32); ok {
		return fmt.Errorf("dist: %s takes one slice, not Float32Parts", op)
	}
	return nil
}

// DType returns the element type.
func (b Buffer) DType() DType { return b.dtype }

// Len returns the number of elements.
func (b Buffer) Len() int { return b.n }

// An Op is how Allreduce combines the ranks' values.
type Op uint8

const (
	// Sum adds the ranks' values.
	Sum Op = iota
	// Mean adds them and divides by the world size.
	Mean
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Mean:
		return "mean"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// A Communicator runs collectives among the ranks of one world. Every rank
// must call the same collectives in the same order with matching buffers
// (same dtype; lengths as each method says); a mismatch is an error where
// the backend can see it and undefined where it cannot (MPI).
//
// The methods are safe to call from several goroutines, but collectives
// run one at a time, in the order they were called; a blocking method
// waits behind earlier non-blocking ones.
type Communicator interface {
	// Rank is this process's rank, in [0, Size()).
	Rank() int
	// Size is the number of ranks.
	Size() int
	// Allreduce combines buf across the ranks with op and leaves the result
	// in every rank's buf. Every rank gets the same bits: the local and MPI
	// backends at two ranks add in rank order.
	Allreduce(buf Buffer, op Op) error
	// Iallreduce starts Allreduce and returns at once; buf must not be
	// touched until the Request completes.
	Iallreduce(buf Buffer, op Op) *Request
	// Bcast copies root's buf into every other rank's buf.
	Bcast(buf Buffer, root int) error
	// Allgather concatenates every rank's send, in rank order, into every
	// rank's recv, which must be Size() times as long as send.
	Allgather(send, recv Buffer) error
	// Allgatherv is Allgather for sends of different lengths: rank r sends
	// counts[r] elements; recv holds their sum.
	Allgatherv(send, recv Buffer, counts []int) error
	// Barrier returns once every rank has called it.
	Barrier() error
	// Abort ends the whole world: with MPI every process exits with code;
	// the local backend fails every pending and later collective of every
	// rank with an error wrapping ErrAborted and the reason.
	Abort(code int, reason string)
	// Close releases the communicator (MPI_Finalize for MPI). Collectives
	// after Close fail with ErrClosed.
	Close() error
}

var (
	// ErrAborted is wrapped by the errors of collectives in a world that
	// Abort ended.
	ErrAborted = errors.New("dist: world aborted")
	// ErrClosed is returned by collectives after Close.
	ErrClosed = errors.New("dist: communicator closed")
	// ErrMismatch is wrapped by errors of collectives whose buffers differ
	// between ranks (dtype or length) where the backend can check.
	ErrMismatch = errors.New("dist: buffers differ between ranks")
	// ErrTimeout is wrapped by the error DataParallel returns when a
	// collective did not finish within its timeout.
	ErrTimeout = errors.New("dist: collective timed out")
	// ErrNoMPI is wrapped by FromEnvironment's error in a binary built
	// without MPI but started by an MPI launcher.
	ErrNoMPI = errors.New("dist: built without MPI")
)

// A Request is a collective started by Iallreduce.
type Request struct {
	done chan struct{}
	err  error
}

func newRequest() *Request { return &Request{done: make(chan struct{})} }

func (r *Request) finish(err error) {
	r.err = err
	close(r.done)
}

// Wait blocks until the collective has finished and returns its error.
func (r *Request) Wait() error {
	<-r.done
	return r.err
}

// Done is closed when the collective has finished.
func (r *Request) Done() <-chan struct{} { return r.done }

// checkBcast returns an error unless buf is one slice and root is a rank
// of a world of size.
func checkBcast(buf Buffer, root, size int) error {
	if err := buf.whole("Bcast"); err != nil {
		return err
	}
	const op = "Bcast"
	if root < 0 || root >= size {
		return fmt.Errorf("dist: %s: root %d is not a rank of a world of %d", op, root, size)
	}
	return nil
}

// checkGather returns an error unless recv can hold size sends of send's
// length and dtype.
func checkGather(send, recv Buffer, size int) error {
	if err := errors.Join(send.whole("Allgather"), recv.whole("Allgather")); err != nil {
		return err
	}
	if send.dtype != recv.dtype {
		return fmt.Errorf("dist: Allgather: send is %v, recv is %v", send.dtype, recv.dtype)
	}
	if recv.n != send.n*size {
		return fmt.Errorf("dist: Allgather: recv holds %d elements, want %d (%d ranks × %d)", recv.n, send.n*size, size, send.n)
	}
	return nil
}

// checkGatherv returns an error unless counts has one entry per rank, the
// caller's entry is send's length and recv holds their sum.
func checkGatherv(send, recv Buffer, counts []int, rank, size int) error {
	if err := errors.Join(send.whole("Allgatherv"), recv.whole("Allgatherv")); err != nil {
		return err
	}
	if send.dtype != recv.dtype {
		return fmt.Errorf("dist: Allgatherv: send is %v, recv is %v", send.dtype, recv.dtype)
	}
	if len(counts) != size {
		return fmt.Errorf("dist: Allgatherv: %d counts for %d ranks", len(counts), size)
	}
	total := 0
	for r, c := range counts {
		if c < 0 {
			return fmt.Errorf("dist: Allgatherv: count %d of rank %d is negative", c, r)
		}
		total += c
	}
	if counts[rank] != send.n {
		return fmt.Errorf("dist: Allgatherv: rank %d sends %d elements, counts says %d", rank, send.n, counts[rank])
	}
	if recv.n != total {
		return fmt.Errorf("dist: Allgatherv: recv holds %d elements, counts sum to %d", recv.n, total)
	}
	return nil
}

// Any reports whether flag is true on any rank: a collective every rank
// calls at the same point, so that all stop together (after a signal that
// reached one, or a failure on one) rather than some waiting forever for
// the others.
func Any(c Communicator, flag bool) (bool, error) {
	if c.Size() == 1 {
		return flag, nil
	}
	v := []int64{0}
	if flag {
		v[0] = 1
	}
	if err := c.Allreduce(Int64s(v), Sum); err != nil {
		return false, err
	}
	return v[0] > 0, nil
}

// OnRank0 runs f on rank 0 only (writing a checkpoint, say) and returns
// its outcome on every rank: rank 0's error itself, the others an error
// with its text, so no rank goes on past a step that failed.
func OnRank0(c Communicator, f func() error) error {
	var err error
	if c.Rank() == 0 {
		err = f()
	}
	if c.Size() == 1 {
		return err
	}
	var msg []byte
	if err != nil {
		msg = []byte(err.Error())
	}
	n := []int64{int64(len(msg))}
	if e := c.Bcast(Int64s(n), 0); e != nil {
		return e
	}
	if c.Rank() != 0 {
		msg = make([]byte, n[0])
	}
	if e := c.Bcast(Bytes(msg), 0); e != nil {
		return e
	}
	if err == nil && len(msg) > 0 {
		err = fmt.Errorf("on rank 0: %s", msg)
	}
	return err
}
