package dist

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnml/kiln/kernels"
)

// world runs fn once per rank of a Local world of n, each in its own
// goroutine, and closes the communicators after.
func world(t *testing.T, n int, fn func(c Communicator)) {
	t.Helper()
	comms, err := Local(n)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(c)
		}()
	}
	wg.Wait()
	for _, c := range comms {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}
}

// rankValues returns rank r's values for an Allreduce test: awkward
// magnitudes so the order of the additions shows in the bits.
func rankValues(r, n int) []float64 {
	rng := rand.New(rand.NewPCG(uint64(r), 7))
	v := make([]float64, n)
	for i := range v {
		v[i] = (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(12)-6))
	}
	return v
}

func TestAllreduceExact(t *testing.T) {
	for _, size := range []int{1, 2, 3, 4} {
		for _, n := range []int{0, 1, 7, 1000} {
			for _, op := range []Op{Sum, Mean} {
				// The reference: rank-order sums, one rounding per addition.
				want32, want64 := make([]float32, n), make([]float64, n)
				for r := range size {
					v := rankValues(r, n)
					for i := range n {
						if r == 0 {
							want32[i], want64[i] = float32(v[i]), v[i]
						} else {
							want32[i] += float32(v[i])
							want64[i] += v[i]
						}
					}
				}
				if op == Mean {
					for i := range n {
						want32[i] /= float32(size)
						want64[i] /= float64(size)
					}
				}
				world(t, size, func(c Communicator) {
					v := rankValues(c.Rank(), n)
					b32, b64 := make([]float32, n), v
					for i := range v {
						b32[i] = float32(v[i])
					}
					if err := c.Allreduce(Float32s(b32), op); err != nil {
						t.Error(err)
					}
					if err := c.Allreduce(Float64s(b64), op); err != nil {
						t.Error(err)
					}
					for i := range n {
						if math.Float32bits(b32[i]) != math.Float32bits(want32[i]) || math.Float64bits(b64[i]) != math.Float64bits(want64[i]) {
							t.Errorf("size %d n %d %v rank %d: element %d = %g, %g; want %g, %g", size, n, op, c.Rank(), i, b32[i], b64[i], want32[i], want64[i])
							return
						}
					}
				})
			}
		}
	}
}

func TestAllreduceBFloat16(t *testing.T) {
	const size, n = 3, 33
	want := make([]float32, n)
	for r := range size {
		for i, v := range rankValues(r, n) {
			want[i] += kernels.F32FromBF16(kernels.BF16FromF32(float32(v)))
		}
	}
	wantBits := make([]uint16, n)
	kernels.F32ToBF16(wantBits, want)
	world(t, size, func(c Communicator) {
		v := rankValues(c.Rank(), n)
		b := make([]uint16, n)
		for i := range v {
			b[i] = kernels.BF16FromF32(float32(v[i]))
		}
		if err := c.Allreduce(BFloat16s(b), Sum); err != nil {
			t.Error(err)
		}
		for i := range b {
			if b[i] != wantBits[i] {
				t.Errorf("rank %d element %d: %#04x, want %#04x", c.Rank(), i, b[i], wantBits[i])
				return
			}
		}
	})
}

func TestBcastGather(t *testing.T) {
	for _, size := range []int{1, 2, 4} {
		world(t, size, func(c Communicator) {
			r := c.Rank()
			root := size - 1
			b := []int64{int64(r), int64(r * 10), 3}
			if err := c.Bcast(Int64s(b), root); err != nil {
				t.Error(err)
			}
			if b[0] != int64(root) || b[1] != int64(root*10) {
				t.Errorf("size %d rank %d: Bcast gave %v", size, r, b)
			}
			recv := make([]float32, 2*size)
			if err := c.Allgather(Float32s([]float32{float32(r), -float32(r)}), Float32s(recv)); err != nil {
				t.Error(err)
			}
			for q := range size {
				if recv[2*q] != float32(q) || recv[2*q+1] != -float32(q) {
					t.Errorf("size %d rank %d: Allgather gave %v", size, r, recv)
					break
				}
			}
			// Rank q sends q+1 bytes of value q.
			counts, total := make([]int, size), 0
			for q := range counts {
				counts[q] = q + 1
				total += q + 1
			}
			send := make([]byte, r+1)
			for i := range send {
				send[i] = byte(r)
			}
			got := make([]byte, total)
			if err := c.Allgatherv(Bytes(send), Bytes(got), counts); err != nil {
				t.Error(err)
			}
			off := 0
			for q, cnt := range counts {
				for _, v := range got[off : off+cnt] {
					if v != byte(q) {
						t.Errorf("size %d rank %d: Allgatherv gave %v", size, r, got)
					}
				}
				off += cnt
			}
			if err := c.Barrier(); err != nil {
				t.Error(err)
			}
		})
	}
}

// Non-blocking allreduces complete in call order and leave the caller
// free meanwhile.
func TestIallreduceOrder(t *testing.T) {
	world(t, 2, func(c Communicator) {
		a, b := []float32{1, 2}, []float32{10}
		ra := c.Iallreduce(Float32s(a), Sum)
		rb := c.Iallreduce(Float32s(b), Mean)
		if err := rb.Wait(); err != nil {
			t.Error(err)
		}
		select {
		case <-ra.Done():
		default:
			t.Error("a later collective finished before an earlier one")
		}
		if err := ra.Wait(); err != nil {
			t.Error(err)
		}
		if a[0] != 2 || a[1] != 4 || b[0] != 10 {
			t.Errorf("rank %d: got %v %v", c.Rank(), a, b)
		}
	})
}

func TestCollectiveErrors(t *testing.T) {
	comms, _ := Local(2)
	c := comms[0]
	cases := []struct {
		name string
		err  error
	}{
		{"Allreduce of bytes", c.Allreduce(Bytes([]byte{1}), Sum)},
		{"unknown op", c.Allreduce(Float32s(nil), Op(9))},
		{"Bcast root", c.Bcast(Float32s(nil), 2)},
		{"Allgather size", c.Allgather(Float32s(make([]float32, 2)), Float32s(make([]float32, 3)))},
		{"Allgather dtype", c.Allgather(Float32s(nil), Float64s(nil))},
		{"Allgatherv counts", c.Allgatherv(Float32s(nil), Float32s(nil), []int{0})},
		{"Allgatherv own count", c.Allgatherv(Float32s(nil), Float32s(make([]float32, 1)), []int{1, 0})},
	}
	for _, tc := range cases {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	for _, c := range comms {
		c.Close()
	}
	if err := c.Barrier(); !errors.Is(err, ErrClosed) {
		t.Errorf("Barrier after Close: %v, want ErrClosed", err)
	}
	if _, err := Local(0); err == nil {
		t.Error("Local(0): no error")
	}
}

// Ranks that call different collectives, or with different buffers, all
// get an error wrapping ErrMismatch instead of reading past a buffer.
func TestMismatch(t *testing.T) {
	world(t, 2, func(c Communicator) {
		n := 2 + c.Rank()
		err := c.Allreduce(Float32s(make([]float32, n)), Sum)
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("rank %d: lengths differ: %v", c.Rank(), err)
		}
		if c.Rank() == 0 {
			err = c.Barrier()
		} else {
			err = c.Bcast(Float32s(nil), 0)
		}
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("rank %d: different collectives: %v", c.Rank(), err)
		}
		if err := c.Barrier(); err != nil {
			t.Errorf("rank %d: the world is unusable after a mismatch: %v", c.Rank(), err)
		}
	})
}

// A rank waiting for a peer that never comes is freed by Abort.
func TestAbortFreesWaiters(t *testing.T) {
	comms, _ := Local(2)
	done := make(chan error)
	go func() { done <- comms[0].Allreduce(Float32s([]float32{1}), Sum) }()
	time.Sleep(10 * time.Millisecond)
	comms[1].Abort(3, "rank 1 gives up")
	select {
	case err := <-done:
		if !errors.Is(err, ErrAborted) {
			t.Errorf("got %v, want ErrAborted", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Abort did not free the waiting rank")
	}
	if err := comms[1].Barrier(); !errors.Is(err, ErrAborted) {
		t.Errorf("collective after Abort: %v", err)
	}
	for _, c := range comms {
		c.Close()
	}
}

func TestFromEnvironment(t *testing.T) {
	for _, v := range launcherVars {
		t.Setenv(v, "")
	}
	c, err := FromEnvironment()
	if err != nil || c.Size() != 1 || c.Rank() != 0 {
		t.Fatalf("no launcher: %v, %v", c, err)
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	_, err = FromEnvironment()
	if MPIBuilt {
		t.Skip("MPI backend built: the launcher check is make test-mpi's")
	}
	if !errors.Is(err, ErrNoMPI) {
		t.Errorf("under mpirun without MPI: %v, want ErrNoMPI", err)
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "x")
	if _, err := FromEnvironment(); err == nil {
		t.Error("bad OMPI_COMM_WORLD_SIZE: no error")
	}
}

// A watched world whose peer never comes fails within the timeout, and
// aborts the world.
func TestWatch(t *testing.T) {
	comms, _ := Local(2)
	w := Watch(comms[0], 100*time.Millisecond)
	start := time.Now()
	for _, call := range []func() error{
		func() error { return w.Barrier() },
		func() error { return w.Allreduce(Float32s([]float32{1}), Sum) },
	} {
		if err := call(); !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrAborted) {
			t.Errorf("got %v, want ErrTimeout or ErrAborted", err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if err := comms[1].Barrier(); !errors.Is(err, ErrAborted) {
		t.Errorf("the other rank's collective after the watchdog fired: %v, want ErrAborted", err)
	}
	if s := Single(); Watch(s, time.Second) != s {
		t.Error("Watch wraps a world of one")
	}
	for _, c := range comms {
		c.Close()
	}
}

func TestAnyOnRank0(t *testing.T) {
	world(t, 3, func(c Communicator) {
		for _, up := range []int{-1, 0, 2} {
			got, err := Any(c, c.Rank() == up)
			if err != nil || got != (up >= 0) {
				t.Errorf("rank %d, flag up on rank %d: Any = %v, %v", c.Rank(), up, got, err)
			}
		}
		if err := OnRank0(c, func() error { return nil }); err != nil {
			t.Errorf("rank %d: %v", c.Rank(), err)
		}
		ran := false
		err := OnRank0(c, func() error { ran = true; return errors.New("disk full") })
		if ran != (c.Rank() == 0) || err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("rank %d: ran %v, error %v", c.Rank(), ran, err)
		}
	})
}

// Float32Parts reduce in place, as one buffer would; other collectives
// refuse them.
func TestFloat32Parts(t *testing.T) {
	world(t, 3, func(c Communicator) {
		buf := make([]float32, 10)
		for i := range buf {
			buf[i] = float32(c.Rank()*100 + i)
		}
		if err := c.Allreduce(Float32Parts(buf[:3], buf[3:3], buf[3:]), Mean); err != nil {
			t.Error(err)
		}
		for i, v := range buf {
			if v != float32(100+i) {
				t.Errorf("rank %d: %v", c.Rank(), buf)
				break
			}
		}
		p := Float32Parts(buf)
		if c.Bcast(p, 0) == nil || c.Allgather(p, p) == nil || c.Allgatherv(p, p, []int{1, 1, 1}) == nil {
			t.Errorf("rank %d: a collective other than Allreduce took parts", c.Rank())
		}
	})
	s := Single()
	if s.Allreduce(Float32Parts([]float32{1}), Sum) != nil || s.Bcast(Float32Parts(), 0) == nil {
		t.Error("Single: Float32Parts")
	}
}
