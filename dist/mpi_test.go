//go:build cgo && (mpi || mpich)

package dist

// Tests of the MPI backend, for two ranks under mpirun (make test-mpi):
//
//	go test -c -tags mpi -o dist-mpi.test ./dist
//	mpirun -np 2 ./dist-mpi.test
//
// Outside mpirun the world is Single and these tests skip, but for the
// check of a launcher that disagrees with MPI.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln/kernels"
)

// mpiTestWorld is the process's communicator from FromEnvironment: MPI starts
// once per process, so every test shares it.
var mpiTestWorld Communicator

func TestMain(m *testing.M) {
	c, err := FromEnvironment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mpiTestWorld = c
	code := m.Run()
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "Close:", err)
		code = 1
	}
	// Communicators other tests opened and left open: MPI must finalise
	// before the process ends, or mpirun fails the job.
	if err := closeMPI(); err != nil {
		fmt.Fprintln(os.Stderr, "closing MPI:", err)
		code = 1
	}
	os.Exit(code)
}

// mpiWorld returns the world of two MPI ranks, or skips.
func mpiWorld(t *testing.T) Communicator {
	t.Helper()
	if mpiTestWorld.Size() == 1 {
		t.Skip("a world of one: run under mpirun -np 2 (make test-mpi)")
	}
	if _, ok := mpiTestWorld.(*mpiComm); !ok || mpiTestWorld.Size() != 2 {
		t.Fatalf("FromEnvironment under mpirun: %T of size %d, want MPI of 2", mpiTestWorld, mpiTestWorld.Size())
	}
	return mpiTestWorld
}

// withMPIMaxCount runs f with MPI calls cut at max elements (every rank must
// do the mpiSame).
func withMPIMaxCount(max int, f func()) {
	old := mpiMaxCount
	mpiMaxCount = max
	defer func() { mpiMaxCount = old }()
	f()
}

// value is rank r's element i: values of many magnitudes, so sums round.
func mpiValue(r, i int) float64 {
	return math.Sin(float64(i*7+r*13+1)) * math.Pow(10, float64(i%7-3))
}

var mpiSizes = []int{0, 1, 7, 1000, 4099}

func TestMPIWorld(t *testing.T) {
	c := mpiWorld(t)
	if r := c.Rank(); r < 0 || r >= 2 {
		t.Fatalf("rank %d", r)
	}
	ranks := make([]int64, 2)
	if err := c.Allgather(Int64s([]int64{int64(c.Rank())}), Int64s(ranks)); err != nil {
		t.Fatal(err)
	}
	if ranks[0] != 0 || ranks[1] != 1 {
		t.Fatalf("ranks %v, want [0 1]", ranks)
	}
}

func TestMPIAllreduce(t *testing.T) {
	c := mpiWorld(t)
	for _, max := range []int{1 << 30, 5} {
		withMPIMaxCount(max, func() {
			for _, op := range []Op{Sum, Mean} {
				for _, n := range mpiSizes {
					t.Run(fmt.Sprintf("max%d/%v/n%d", max, op, n), func(t *testing.T) {
						testMPIAllreduce32(t, c, op, n)
						testMPIAllreduce64(t, c, op, n)
						testMPIAllreduceInt(t, c, op, n)
						testMPIAllreduceBF16(t, c, op, n)
					})
				}
			}
		})
	}
}

func testMPIAllreduce32(t *testing.T, c Communicator, op Op, n int) {
	buf, want := make([]float32, n), make([]float32, n)
	for i := range buf {
		buf[i] = float32(mpiValue(c.Rank(), i))
		s := float32(mpiValue(0, i))
		s += float32(mpiValue(1, i))
		if op == Mean {
			s /= 2
		}
		want[i] = s
	}
	if err := c.Allreduce(Float32s(buf), op); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		if math.Float32bits(buf[i]) != math.Float32bits(want[i]) {
			t.Fatalf("float32 [%d] = %v, want %v", i, buf[i], want[i])
		}
	}
}

func testMPIAllreduce64(t *testing.T, c Communicator, op Op, n int) {
	buf, want := make([]float64, n), make([]float64, n)
	for i := range buf {
		buf[i] = mpiValue(c.Rank(), i)
		s := mpiValue(0, i)
		s += mpiValue(1, i)
		if op == Mean {
			s /= 2
		}
		want[i] = s
	}
	if err := c.Allreduce(Float64s(buf), op); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		if math.Float64bits(buf[i]) != math.Float64bits(want[i]) {
			t.Fatalf("float64 [%d] = %v, want %v", i, buf[i], want[i])
		}
	}
}

func testMPIAllreduceInt(t *testing.T, c Communicator, op Op, n int) {
	buf, want := make([]int64, n), make([]int64, n)
	for i := range buf {
		buf[i] = int64(i)<<33 + int64(c.Rank()*7+i)
		want[i] = (int64(i)<<33 + int64(i)) + (int64(i)<<33 + int64(7+i))
		if op == Mean {
			want[i] /= 2
		}
	}
	if err := c.Allreduce(Int64s(buf), op); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		if buf[i] != want[i] {
			t.Fatalf("int64 [%d] = %d, want %d", i, buf[i], want[i])
		}
	}
}

// testMPIAllreduceBF16: widened to float32, added in rank order, rounded once.
func testMPIAllreduceBF16(t *testing.T, c Communicator, op Op, n int) {
	bf := func(r int) []uint16 {
		f := make([]float32, n)
		for i := range f {
			f[i] = float32(mpiValue(r, i))
		}
		b := make([]uint16, n)
		kernels.F32ToBF16(b, f)
		return b
	}
	buf, b0, b1 := bf(c.Rank()), bf(0), bf(1)
	w0, w1 := make([]float32, n), make([]float32, n)
	kernels.BF16ToF32(w0, b0)
	kernels.BF16ToF32(w1, b1)
	for i := range w0 {
		w0[i] += w1[i]
		if op == Mean {
			w0[i] /= 2
		}
	}
	want := make([]uint16, n)
	kernels.F32ToBF16(want, w0)
	if err := c.Allreduce(BFloat16s(buf), op); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		if buf[i] != want[i] {
			t.Fatalf("bfloat16 [%d] = %#04x, want %#04x", i, buf[i], want[i])
		}
	}
}

// pattern fills a buffer of dtype d with rank r's elements from element
// off on, and is what they must be.
func mpiPattern(d DType, n, r, off int) Buffer {
	switch d {
	case Float32:
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(mpiValue(r, off+i))
		}
		return Float32s(s)
	case Float64:
		s := make([]float64, n)
		for i := range s {
			s[i] = mpiValue(r, off+i)
		}
		return Float64s(s)
	case BFloat16:
		s := make([]uint16, n)
		for i := range s {
			s[i] = uint16(r*40503 + (off+i)*977)
		}
		return BFloat16s(s)
	case Int64:
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(r)<<40 - int64(off+i)
		}
		return Int64s(s)
	}
	s := make([]byte, n)
	for i := range s {
		s[i] = byte(r*101 + (off+i)*3)
	}
	return Bytes(s)
}

// mpiSame reports the first element where a and b differ, bit for bit.
func mpiSame(a, b Buffer) error {
	if a.dtype != b.dtype || a.n != b.n {
		return fmt.Errorf("%v[%d] against %v[%d]", a.dtype, a.n, b.dtype, b.n)
	}
	for i := 0; i < a.n; i++ {
		var x, y any
		switch d := a.data.(type) {
		case []float32:
			x, y = math.Float32bits(d[i]), math.Float32bits(b.data.([]float32)[i])
		case []float64:
			x, y = math.Float64bits(d[i]), math.Float64bits(b.data.([]float64)[i])
		case []uint16:
			x, y = d[i], b.data.([]uint16)[i]
		case []int64:
			x, y = d[i], b.data.([]int64)[i]
		case []byte:
			x, y = d[i], b.data.([]byte)[i]
		}
		if x != y {
			return fmt.Errorf("%v element %d: %v, want %v", a.dtype, i, x, y)
		}
	}
	return nil
}

// mpiConcat joins the patterns of ranks with counts elements each.
func mpiConcat(d DType, counts []int) Buffer {
	total := 0
	for _, k := range counts {
		total += k
	}
	out := mpiPattern(d, total, 0, 0)
	off := 0
	for r, k := range counts {
		copyBuffer(out, off, mpiPattern(d, k, r, 0))
		off += k
	}
	return out
}

var mpiDTypes = []DType{Float32, Float64, BFloat16, Int64, Uint8}

func TestMPIBcast(t *testing.T) {
	c := mpiWorld(t)
	for _, max := range []int{1 << 30, 3} {
		withMPIMaxCount(max, func() {
			for _, d := range mpiDTypes {
				for _, n := range mpiSizes {
					buf := mpiPattern(d, n, c.Rank(), 0)
					if err := c.Bcast(buf, 1); err != nil {
						t.Fatal(err)
					}
					if err := mpiSame(buf, mpiPattern(d, n, 1, 0)); err != nil {
						t.Fatalf("max %d, %d elements from root 1: %v", max, n, err)
					}
				}
			}
		})
	}
	if err := c.Bcast(Float32s(nil), 2); err == nil {
		t.Error("Bcast from root 2 of 2: no error")
	}
}

func TestMPIAllgather(t *testing.T) {
	c := mpiWorld(t)
	for _, max := range []int{1 << 30, 5} {
		withMPIMaxCount(max, func() {
			for _, d := range mpiDTypes {
				for _, n := range mpiSizes {
					recv := mpiPattern(d, 2*n, 9, 0)
					if err := c.Allgather(mpiPattern(d, n, c.Rank(), 0), recv); err != nil {
						t.Fatal(err)
					}
					if err := mpiSame(recv, mpiConcat(d, []int{n, n})); err != nil {
						t.Fatalf("max %d, %d elements a rank: %v", max, n, err)
					}
				}
			}
		})
	}
}

func TestMPIAllgatherv(t *testing.T) {
	c := mpiWorld(t)
	for _, max := range []int{1 << 30, 4} {
		withMPIMaxCount(max, func() {
			for _, d := range mpiDTypes {
				for _, counts := range [][]int{{3, 5}, {0, 4}, {6, 0}, {0, 0}, {1000, 17}} {
					recv := mpiPattern(d, counts[0]+counts[1], 9, 0)
					if err := c.Allgatherv(mpiPattern(d, counts[c.Rank()], c.Rank(), 0), recv, counts); err != nil {
						t.Fatal(err)
					}
					if err := mpiSame(recv, mpiConcat(d, counts)); err != nil {
						t.Fatalf("max %d, counts %v: %v", max, counts, err)
					}
				}
			}
		})
	}
}

func TestMPIBarrier(t *testing.T) {
	c := mpiWorld(t)
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	const late = 300 * time.Millisecond
	if c.Rank() == 1 {
		time.Sleep(late)
	}
	start := time.Now()
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); c.Rank() == 0 && waited < late/2 {
		t.Errorf("rank 0 left the barrier after %v, rank 1 came %v late", waited, late)
	}
}

func TestMPIIallreduce(t *testing.T) {
	c := mpiWorld(t)
	const n = 1 << 16
	a, b := make([]float32, n), make([]float64, n)
	wantA, wantB := make([]float32, n), make([]float64, n)
	for i := range a {
		a[i] = float32(mpiValue(c.Rank(), i))
		b[i] = mpiValue(c.Rank(), i+n)
		s := float32(mpiValue(0, i))
		s += float32(mpiValue(1, i))
		wantA[i] = s
		wantB[i] = (mpiValue(0, i+n) + mpiValue(1, i+n)) / 2
	}
	ra := c.Iallreduce(Float32s(a), Sum)
	rb := c.Iallreduce(Float64s(b), Mean)
	// The caller goes on while the engine communicates.
	x := 0.0
	for i := range 100000 {
		x += math.Sqrt(float64(i))
	}
	if err := ra.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := rb.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := mpiSame(Float32s(a), Float32s(wantA)); err != nil {
		t.Error(err)
	}
	if err := mpiSame(Float64s(b), Float64s(wantB)); err != nil {
		t.Error(err)
	}
	if x <= 0 {
		t.Error("no compute")
	}
	// Requests finish in the order they were made.
	ra = c.Iallreduce(Float32s(a), Sum)
	rb = c.Iallreduce(Float64s(b), Sum)
	if err := rb.Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ra.Done():
	default:
		t.Error("the second Iallreduce finished before the first")
	}
	if err := ra.Wait(); err != nil {
		t.Fatal(err)
	}
	if r := c.Iallreduce(Bytes(nil), Sum); r.Wait() == nil {
		t.Error("Iallreduce of bytes: no error")
	}
}

// TestMPIMismatch: a launcher that announces another world size than MPI's
// is an error at once. Outside mpirun it starts MPI as a world of one.
func TestMPIMismatch(t *testing.T) {
	start := time.Now()
	c, err := openMPI(3, "TEST")
	if err == nil {
		c.Close()
		t.Fatal("a world of 3 announced: no error")
	}
	msg := err.Error()
	for _, s := range []string{"3 ranks", "TEST=3", fmt.Sprintf("world of %d", mpiTestWorld.Size())} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not say %q", msg, s)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the mismatch took %v", d)
	}
	t.Log(msg)
}

// TestMPIClosed: a second communicator of the world works beside the
// first, and fails with ErrClosed once closed.
func TestMPIClosed(t *testing.T) {
	mpiWorld(t)
	c, err := openMPI(2, "TEST")
	if err != nil {
		t.Fatal(err)
	}
	buf := []float64{1}
	if err := c.Allreduce(Float64s(buf), Sum); err != nil || buf[0] != 2 {
		t.Fatalf("second communicator: %v, %v", buf, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); !errors.Is(err, ErrClosed) {
		t.Errorf("Barrier after Close: %v, want ErrClosed", err)
	}
	if err := c.Iallreduce(Float64s(buf), Sum).Wait(); !errors.Is(err, ErrClosed) {
		t.Errorf("Iallreduce after Close: %v, want ErrClosed", err)
	}
	if err := mpiTestWorld.Barrier(); err != nil {
		t.Errorf("the world after closing another communicator: %v", err)
	}
}

// TestMPIGoSignals: MPI left Go's signal handlers in place, so a nil
// dereference is still a panic Go can recover.
func TestMPIGoSignals(t *testing.T) {
	mpiWorld(t)
	var p *int
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	_ = *p
}

// TestMPIAbort runs only when make test-mpi sets KILN_TEST_MPI_ABORT:
// rank 0 blocks in an Allreduce rank 1 never joins, and Abort from another
// goroutine must end the whole job with its code.
func TestMPIAbort(t *testing.T) {
	c := mpiWorld(t)
	if os.Getenv("KILN_TEST_MPI_ABORT") == "" {
		t.Skip("set KILN_TEST_MPI_ABORT=1: this test ends the job")
	}
	if c.Rank() == 1 {
		time.Sleep(time.Minute)
		t.Fatal("rank 1 outlived the abort")
	}
	req := c.Iallreduce(Float32s(make([]float32, 4)), Sum)
	time.Sleep(200 * time.Millisecond)
	select {
	case <-req.Done():
		t.Fatalf("Allreduce without rank 1 finished: %v", req.Wait())
	default:
	}
	c.Abort(7, "rank 0 gives up while its Allreduce waits")
	t.Fatal("Abort returned")
}
