package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
)

func infer(o *options, stdout, _ io.Writer) error {
	switch {
	case o.Graph != "":
		g, err := graph.Load(o.Graph)
		if err != nil {
			return err
		}
		return inferGraph(o, g, "graph "+o.Graph, stdout)
	case o.DType == "int8":
		t, err := freezeModel(o)
		if err != nil {
			return err
		}
		return inferGraph(o, t.frozen, fmt.Sprintf("%s (%s) in int8 by %s", o.Arch, weightsSource(o), o.Conf), stdout)
	}
	model, err := loadModel(o)
	if err != nil {
		return err
	}
	nn.Eval(model)
	// Batch norms folded into the convolutions; in float32 the weights
	// are packed once for the GEMM, in BF16 they (and the classifier's)
	// become bfloat16 once rather than at every call.
	dtype := autograd.Float32
	if o.DType == "bf16" {
		dtype = autograd.BFloat16
	}
	if _, err := kiln.Optimize(model, kiln.DType(dtype), kiln.ChannelsLast(o.ChannelsLast)); err != nil {
		return err
	}
	x := exampleInput(o)
	fmt.Fprintf(stdout, "%s (%s), batch %d of 3×%d×%d, %s, %s, %d warm-up and %d timed passes\n",
		o.Arch, weightsSource(o), o.BatchSize, o.ImageSize, o.ImageSize, layout(o), o.DType, o.Warmup, o.Iters)
	var times []time.Duration
	err = autograd.Try(func() {
		x, arena := o.autocast(autograd.NoGrad(x)), autograd.NewArena(0)
		times = timePasses(o, func() error { model.Forward(arena.In(x)); arena.Reset(); return nil })
	})
	if err != nil {
		return err
	}
	report(o, times, stdout)
	return nil
}

// inferGraph times a frozen graph, written by export or converted to
// int8 here, described in the report by name.
func inferGraph(o *options, g *graph.Graph, name string, stdout io.Writer) error {
	p, err := graph.Compile(g)
	if err != nil {
		return err
	}
	x := exampleInput(o)
	fmt.Fprintf(stdout, "%s (%d nodes), batch %d of 3×%d×%d, %s, %d warm-up and %d timed passes\n",
		name, len(g.Nodes), o.BatchSize, o.ImageSize, o.ImageSize, layout(o), o.Warmup, o.Iters)
	var runErr error
	times := timePasses(o, func() error { _, runErr = p.Run(x); return runErr })
	if runErr != nil {
		return runErr
	}
	report(o, times, stdout)
	return nil
}

// timePasses runs pass --warmup times untimed, then --iters times timed,
// stopping at the first error.
func timePasses(o *options, pass func() error) []time.Duration {
	times := make([]time.Duration, 0, o.Iters)
	for i := range o.Warmup + o.Iters {
		start := time.Now()
		if pass() != nil {
			return times
		}
		if i >= o.Warmup {
			times = append(times, time.Since(start))
		}
	}
	return times
}

// report prints the throughput and the latency percentiles of times.
func report(o *options, times []time.Duration, stdout io.Writer) {
	var total time.Duration
	for _, d := range times {
		total += d
	}
	slices.Sort(times)
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 }
	fmt.Fprintf(stdout, "throughput %.1f images/s, latency per batch median %.1f ms, p90 %.1f ms\n",
		float64(o.BatchSize*len(times))/total.Seconds(), ms(percentile(times, 50)), ms(percentile(times, 90)))
}

// percentile returns the q-th percentile of sorted durations by the
// nearest-rank method.
func percentile(sorted []time.Duration, q int) time.Duration {
	r := (q*len(sorted) + 99) / 100 // ceil(q/100 · n)
	return sorted[max(r, 1)-1]
}
