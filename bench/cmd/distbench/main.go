// Command distbench measures data-parallel training: each rank trains a
// model on its own batch (weak scaling) under dist.DataParallel, and rank 0
// prints one JSON line with the median step time. Started alone it is the
// one-rank baseline; under mpirun (a binary built with -tags mpi) every
// rank of the world trains. bench/dist.sh (make bench-mpi) runs it alone
// and on two ranks over shared memory and TCP, with and without overlap,
// and prints the scaling efficiency E = throughput(2 ranks) /
// (2 × throughput(1 rank)).
//
//	distbench -model resnet18 -batch 16 -image 32 -steps 20 -warmup 3
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/bench"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
	"github.com/kilnml/kiln/optim"
)

// result is rank 0's report.
type result struct {
	Model       string  `json:"model"`
	Ranks       int     `json:"ranks"`
	Threads     int     `json:"threads"`
	BatchPer    int     `json:"batch_per_rank"`
	Buckets     int     `json:"buckets"`
	Overlap     bool    `json:"overlap"`
	StepMS      float64 `json:"step_ms"`       // median of the timed steps
	SyncMS      float64 `json:"sync_ms"`       // median time in Sync (waiting for the last buckets)
	ComputeMS   float64 `json:"compute_ms"`    // median forward + backward
	OptMS       float64 `json:"opt_ms"`        // median optimizer step
	SamplesPerS float64 `json:"samples_per_s"` // all ranks
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "distbench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		model     = flag.String("model", "resnet18", "resnet18 or resnet50")
		batch     = flag.Int("batch", 16, "images per rank per step")
		image     = flag.Int("image", 32, "image height and width")
		steps     = flag.Int("steps", 20, "timed steps")
		warmup    = flag.Int("warmup", 3, "untimed steps first")
		bucketMB  = flag.Float64("bucket-mb", 25, "MiB of gradients per allreduce")
		noOverlap = flag.Bool("no-overlap", false, "reduce every bucket after Backward")
	)
	flag.Parse()
	comm, err := dist.FromEnvironment()
	if err != nil {
		return err
	}
	defer comm.Close()
	g := autograd.NewGenerator(uint64(2 + comm.Rank()))
	var m nn.Module
	var loss func() *autograd.Tensor
	if *model == "dlrm" {
		m, loss, err = dlrm(g, *batch)
	} else {
		m, loss, err = resnet(g, *model, *batch, *image)
	}
	if err != nil {
		return err
	}
	dp, err := dist.NewDataParallel(comm, m, dist.Options{BucketBytes: int(*bucketMB * (1 << 20)), NoOverlap: *noOverlap})
	if err != nil {
		return err
	}
	sgd := optim.SGDOptions{LR: 0.01, Momentum: 0.9}
	if *model == "dlrm" {
		sgd = optim.SGDOptions{LR: bench.DLRMLR} // dlrm's plain SGD: sparse rows stay sparse
	}
	opt, err := optim.NewSGD(nn.Parameters(m), sgd)
	if err != nil {
		return err
	}
	var stepT, syncT, computeT, optT []float64
	for k := range *warmup + *steps {
		if err := comm.Barrier(); err != nil { // every rank starts the step together
			return err
		}
		t0 := time.Now()
		opt.ZeroGrad()
		loss().Backward()
		t1 := time.Now()
		if err := dp.Sync(); err != nil {
			return err
		}
		t2 := time.Now()
		opt.Step()
		t3 := time.Now()
		if k >= *warmup {
			stepT = append(stepT, ms(t3.Sub(t0)))
			syncT = append(syncT, ms(t2.Sub(t1)))
			computeT = append(computeT, ms(t1.Sub(t0)))
			optT = append(optT, ms(t3.Sub(t2)))
		}
	}
	if comm.Rank() != 0 {
		return nil
	}
	step := median(stepT)
	return json.NewEncoder(os.Stdout).Encode(result{
		Model: *model, Ranks: comm.Size(), Threads: kernels.Threads(), BatchPer: *batch, Buckets: dp.NumBuckets(),
		Overlap: !*noOverlap, StepMS: step, SyncMS: median(syncT), ComputeMS: median(computeT), OptMS: median(optT),
		SamplesPerS: float64(comm.Size()**batch) / (step / 1e3),
	})
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// resnet returns a ResNet and the loss of one random batch of it.
func resnet(g *autograd.Generator, arch string, batch, image int) (nn.Module, func() *autograd.Tensor, error) {
	m, err := models.ResNetByName(autograd.NewGenerator(1), arch, models.ResNetOptions{NumClasses: 10})
	if err != nil {
		return nil, nil, err
	}
	x := autograd.Randn(g, batch, 3, image, image)
	labels := make([]int64, batch)
	for i := range labels {
		labels[i] = int64(g.IntN(10))
	}
	y := autograd.FromInt64(labels, batch)
	return m, func() *autograd.Tensor {
		return autograd.CrossEntropy(m.Forward(x), y, autograd.CrossEntropyOptions{})
	}, nil
}

// dlrm returns bench's DLRM (sparse table gradients, which DataParallel
// gathers) and the BCE loss of one random batch of it: one index a table
// a sample.
func dlrm(g *autograd.Generator, batch int) (nn.Module, func() *autograd.Tensor, error) {
	sizes := make([]int, bench.DLRMTables)
	for t := range sizes {
		sizes[t] = bench.DLRMRows
	}
	m, err := models.NewDLRM(autograd.NewGenerator(1), models.DLRMConfig{
		SparseFeatureSize: bench.DLRMDim, EmbeddingSizes: sizes,
		BottomMLP: append(append([]int{bench.DLRMDense}, bench.DLRMBottomHidden...), bench.DLRMDim),
		TopMLP:    bench.DLRMTop, SparseTables: true,
	})
	if err != nil {
		return nil, nil, err
	}
	dense := autograd.Rand(g, batch, bench.DLRMDense)
	labels := make([]float32, batch)
	for i := range labels {
		labels[i] = float32(g.IntN(2))
	}
	y := autograd.FromFloat32(labels, batch, 1)
	var indices, offsets []*autograd.Tensor
	off := make([]int64, batch)
	for i := range off {
		off[i] = int64(i)
	}
	for range sizes {
		idx := make([]int64, batch)
		for i := range idx {
			idx[i] = int64(g.IntN(bench.DLRMRows))
		}
		indices = append(indices, autograd.FromInt64(idx, batch))
		offsets = append(offsets, autograd.FromInt64(off, batch))
	}
	return m, func() *autograd.Tensor {
		return autograd.BCELoss(m.Forward(dense, indices, offsets), y, autograd.ReductionMean)
	}, nil
}
