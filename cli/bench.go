package cli

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/kernels"
)

// bench times a saved graph on random inputs.
func bench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "FILE [--batch N] [--threads T] [--iters K] [--warmup W] [--profile]", stderr)
	batch := fs.Int("batch", 0, "batch size: the first dimension of every input (default: the traced one)")
	threads := fs.Int("threads", 0, "kernel threads (default: KILN_NUM_THREADS, else GOMAXPROCS)")
	iters := fs.Int("iters", 20, "timed runs")
	warmup := fs.Int("warmup", 3, "untimed runs first")
	profile := fs.Bool("profile", false, "after the timed runs, time each node over --iters more and print the slowest "+fmt.Sprint(profileTop)+" and the time by op")
	path, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *batch < 0:
		return usagef("--batch %d: want a positive batch size", *batch)
	case *threads < 0:
		return usagef("--threads %d: want a positive thread count", *threads)
	case *iters < 1:
		return usagef("--iters %d: want at least one timed run", *iters)
	case *warmup < 0:
		return usagef("--warmup %d: want zero or more", *warmup)
	}
	// The kernels' worker pool reads its size once, when it first starts,
	// so the setting must come before anything computes: before Load.
	if *threads > 0 {
		os.Setenv("KILN_NUM_THREADS", strconv.Itoa(*threads))
	}
	nthreads := kernels.Threads()
	if *threads > 0 {
		if nthreads != *threads {
			return fmt.Errorf("--threads %d: the kernel worker pool already runs %d threads in this process", *threads, nthreads)
		}
		// As many Go threads as workers, so T workers really run at once
		// and T=1 really is one thread.
		runtime.GOMAXPROCS(*threads)
	}

	g, err := graph.Load(path)
	if err != nil {
		return err
	}
	if len(g.Inputs) == 0 {
		return fmt.Errorf("%s has no inputs to batch", path)
	}
	n := *batch
	if n == 0 {
		if s := g.Values[g.Inputs[0]].Shape; len(s) > 0 {
			n = s[0]
		}
	}
	inputs, err := randomInputs(g, n)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	p, err := graph.Compile(g)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for range *warmup {
		if _, err := p.Run(inputs...); err != nil {
			return fmt.Errorf("running %s at batch %d: %w", path, n, err)
		}
	}
	times := make([]time.Duration, *iters)
	for i := range times {
		start := time.Now()
		_, err := p.Run(inputs...)
		times[i] = time.Since(start)
		if err != nil {
			return fmt.Errorf("running %s at batch %d: %w", path, n, err)
		}
	}
	slices.Sort(times)
	p50 := percentile(times, 50)
	fmt.Fprintf(stdout, "%s: batch %d, threads %d, %d timed runs after %d warm-up\n", path, n, nthreads, *iters, *warmup)
	fmt.Fprintf(stdout, "latency: p50 %v  p90 %v  p99 %v  (min %v, max %v)\n",
		round(p50), round(percentile(times, 90)), round(percentile(times, 99)), round(times[0]), round(times[len(times)-1]))
	fmt.Fprintf(stdout, "throughput: %.1f items/s (batch / median latency)\n", float64(n)/p50.Seconds())
	if !*profile {
		return nil
	}
	// Profiled runs of their own: the per-node timers would bias the
	// latencies above.
	prof, err := p.Profile(*iters, inputs...)
	if err != nil {
		return fmt.Errorf("profiling %s at batch %d: %w", path, n, err)
	}
	fmt.Fprintln(stdout)
	return prof.WriteTable(stdout, profileTop)
}

// profileTop is how many nodes bench --profile lists.
const profileTop = 25

// percentile returns the nearest-rank p-th percentile of sorted times: the
// smallest measured time that at least p% of the runs do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(k, 1)-1]
}

// round keeps four significant digits or so: 12.35ms, 987.6µs.
func round(d time.Duration) time.Duration {
	for unit := time.Duration(1); unit < time.Second; unit *= 10 {
		if d < 10000*unit {
			return d.Round(unit)
		}
	}
	return d.Round(time.Millisecond)
}

// randomInputs makes one tensor per graph input with the input's shape,
// its first dimension set to batch: standard normal values for floating
// inputs and zeros, a valid index for any table, for integer ones.
func randomInputs(g *graph.Graph, batch int) ([]*autograd.Tensor, error) {
	gen := autograd.NewGenerator(1)
	ins := make([]*autograd.Tensor, len(g.Inputs))
	for i, id := range g.Inputs {
		v := g.Values[id]
		shape := slices.Clone(v.Shape)
		if len(shape) == 0 {
			return nil, fmt.Errorf("input %s is 0-d and has no batch dimension", v.Name)
		}
		shape[0] = batch
		var x *autograd.Tensor
		err := autograd.Try(func() {
			switch v.DType {
			case autograd.Float32:
				x = autograd.Randn(gen, shape...)
			case autograd.BFloat16:
				x = autograd.Cast(autograd.Randn(gen, shape...), autograd.BFloat16)
			default:
				x = autograd.Empty(v.DType, shape...)
			}
			x = x.To(v.Format)
		})
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", v.Name, err)
		}
		ins[i] = x
	}
	return ins, nil
}
