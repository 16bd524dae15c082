package dist_test

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// Two ranks as goroutines of one process add their values.
func ExampleLocal() {
	comms, err := dist.Local(2)
	if err != nil {
		panic(err)
	}
	out := make([][]float32, 2)
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			v := []float32{float32(c.Rank()), 10}
			if err := c.Allreduce(dist.Float32s(v), dist.Mean); err != nil {
				panic(err)
			}
			out[c.Rank()] = v
		}()
	}
	wg.Wait()
	fmt.Println(out)
	// Output: [[0.5 10] [0.5 10]]
}

// Each rank trains its replica on its half of every batch; Sync between
// Backward and Step averages the gradients, so the replicas, started from
// different weights, take rank 0's and stay equal.
func ExampleNewDataParallel() {
	comms, err := dist.Local(2)
	if err != nil {
		panic(err)
	}
	x := autograd.Randn(autograd.NewGenerator(1), 4, 3)
	final := make([]float32, 2)
	var wg sync.WaitGroup
	for _, comm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comm.Close()
			model := nn.NewLinear(autograd.NewGenerator(uint64(comm.Rank())), 3, 1, nn.LinearOptions{})
			dp, err := dist.NewDataParallel(comm, model, dist.Options{})
			if err != nil {
				panic(err)
			}
			opt, _ := optim.NewSGD(nn.Parameters(model), optim.SGDOptions{LR: 0.1})
			// This rank's half of the batch: rows 2r and 2r+1.
			r := comm.Rank()
			half := autograd.FromFloat32(x.Float32s()[6*r:6*r+6], 2, 3)
			for range 5 {
				opt.ZeroGrad()
				autograd.Mean(model.Forward(half), nil, false).Backward()
				if err := dp.Sync(); err != nil {
					panic(err)
				}
				opt.Step()
			}
			final[r] = model.Weight().Float32s()[0]
		}()
	}
	wg.Wait()
	fmt.Println(final[0] == final[1])
	// Output: true
}

// Rank 0 writes a checkpoint; every rank learns how it went, so none runs
// on past a write that failed. Watch bounds each collective's wait.
func ExampleOnRank0() {
	comms, err := dist.Local(2)
	if err != nil {
		panic(err)
	}
	out := make([]string, 2)
	var wg sync.WaitGroup
	for _, comm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comm.Close()
			c := dist.Watch(comm, time.Minute)
			err := dist.OnRank0(c, func() error { return errors.New("disk full") })
			stop, _ := dist.Any(c, err != nil)
			out[c.Rank()] = fmt.Sprintf("rank %d: %v, stop %v", c.Rank(), err, stop)
		}()
	}
	wg.Wait()
	fmt.Println(out[0])
	fmt.Println(out[1])
	// Output:
	// rank 0: disk full, stop true
	// rank 1: on rank 0: disk full, stop true
}
