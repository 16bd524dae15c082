//go:build cgo && (mpi || mpich)

package dist

import (
	"fmt"
	"os"
	"testing"
)

// mpiInStep returns a function that fails t unless every rank holds the
// same parameters, bit for bit: called after each step.
func mpiInStep(t *testing.T, c Communicator) func([]float32) {
	step := 0
	return func(p []float32) {
		step++
		all := make([]float32, c.Size()*len(p))
		if err := c.Allgather(Float32s(p), Float32s(all)); err != nil {
			t.Fatal(err)
		}
		for r := 1; r < c.Size(); r++ {
			if !bitwiseEqual(all[r*len(p):(r+1)*len(p)], p) {
				t.Fatalf("after step %d rank %d's parameters differ from rank %d's", step, r, c.Rank())
			}
		}
	}
}

// The MLP run on two MPI processes equals one process, ranks bitwise
// equal after every step, ⌈gradient bytes / bucket bytes⌉ allreduces a
// step.
func TestMPIDataParallelMLP(t *testing.T) {
	c := mpiWorld(t)
	run := newMLPRun()
	want := run.reference(t)
	for _, bucketBytes := range []int{0, 1000} {
		t.Run(fmt.Sprintf("%d-byte buckets", bucketBytes), func(t *testing.T) {
			var last []float32
			check := mpiInStep(t, c)
			calls, buckets := run.rank(t, c, bucketBytes, func(p []float32) { check(p); last = p })
			checkCalls(t, calls, buckets, mlpSteps, 4*len(want), bucketBytes)
			if d := relDiff(last, want); d > 1e-5 {
				t.Errorf("after %d steps the parameters differ from one process's by %.3g relative", mlpSteps, d)
			}
		})
	}
}

// The ResNet-18 run on two MPI processes.
func TestMPIDataParallelResNet18(t *testing.T) {
	c := mpiWorld(t)
	run := newResNetRun()
	want := run.reference()
	var last []float32
	check := mpiInStep(t, c)
	run.rank(t, c, func(p []float32) { check(p); last = p })
	if d := relDiff(last, want); d > 1e-5 {
		t.Errorf("after %d steps the parameters differ from one process's by %.3g relative", run.steps, d)
	}
}

// Float32 Allreduce through the shared window: one slice or parts, one
// chunk or several, Sum and Mean, bit for bit the rank-order sum.
func TestMPIAllreduceShared(t *testing.T) {
	c := mpiWorld(t)
	value := func(r, i int) float32 { return float32(mpiValue(r, i)) }
	for _, n := range []int{shmMinFloats, 300001, shmFloats + 12345} {
		for _, split := range []bool{false, true} {
			for _, op := range []Op{Sum, Mean} {
				buf := make([]float32, n)
				for i := range buf {
					buf[i] = value(c.Rank(), i)
				}
				b := Float32s(buf)
				if split { // uneven parts, one of them empty
					b = Float32Parts(buf[:7], buf[7:7], buf[7:n/3], buf[n/3:])
				}
				if err := c.Allreduce(b, op); err != nil {
					t.Fatal(err)
				}
				for i, got := range buf {
					want := value(0, i)
					for r := 1; r < c.Size(); r++ {
						want += value(r, i)
					}
					if op == Mean {
						want /= float32(c.Size())
					}
					if got != want {
						t.Fatalf("n %d parts %v %v: element %d = %g, want %g", n, split, op, i, got, want)
					}
				}
			}
		}
	}
	if c.(*mpiComm).shm == nil && os.Getenv("KILN_MPI_SHM") != "0" {
		t.Error("the shared window was not used")
	}
}
