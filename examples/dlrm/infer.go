package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// The exported graph's inputs are dense f32[B, D0] and indices i64[B, T],
// one row per table per sample, as Criteo's data has: what a server
// receives. Inside, the indices are the fixed-size bags [B, T, 1] of
// MergedEmbeddingBagFixed.

// servingForward is the function export traces and infer times: the model
// on dense features (marked for autocast under --dtype bf16) and one index
// per table per sample, returning float32 probabilities.
func servingForward(m *models.DLRM, dense, indices *autograd.Tensor) *autograd.Tensor {
	s := indices.Shape()
	p := m.ForwardFixed(dense, autograd.Reshape(indices, -1, s[1], 1)) // -1: the graph takes any batch size
	if p.DType() != autograd.Float32 {
		// Exact, and what a caller reading .npy files can take: NumPy has
		// no bfloat16.
		p = autograd.Cast(p, autograd.Float32)
	}
	return p
}

// servingInputs is a batch of b samples: dense features uniform in [0, 3)
// (about the range of log(x+1) of Criteo's counts) and indices uniform in
// each table's rows.
func servingInputs(rows []int, dense, b int, seed uint64) (*autograd.Tensor, *autograd.Tensor) {
	r := rand.New(rand.NewPCG(seed, 19))
	x := make([]float32, b*dense)
	for i := range x {
		x[i] = 3 * r.Float32()
	}
	idx := make([]int64, b*len(rows))
	for i := range idx {
		idx[i] = r.Int64N(int64(rows[i%len(rows)]))
	}
	return autograd.FromFloat32(x, b, dense), autograd.FromInt64(idx, b, len(rows))
}

// modelForServing builds the flags' model (tables from --arch-embedding-size),
// loads --load-model when given, and puts it in eval mode; under --dtype
// bf16 it casts the Linear weights and biases and the tables to bfloat16
// (rounded to nearest, IPEX's inference form), to be run on o.autocast
// inputs.
func modelForServing(o *options) (*models.DLRM, error) {
	m, err := newModel(o, flagTables{o})
	if err != nil {
		return nil, err
	}
	nn.Eval(m)
	if o.DType == "bf16" {
		// O0: the cast only; DLRM has nothing for the other rewrites.
		if _, err := kiln.Optimize(m, kiln.Level(kiln.O0), kiln.DType(autograd.BFloat16)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// flagTables is a source with only the flags' shapes, for the commands
// that need no samples.
type flagTables struct{ o *options }

func (f flagTables) tableRows() []int   { return f.o.embeddingSizes }
func (f flagTables) denseFeatures() int { return f.o.mlpBot[0] }

// export traces the model on a batch of --test-mini-batch-size samples,
// freezes the trace (tables and weights become constants, Linear+ReLU and
// Linear+Sigmoid fuse) and saves it to --out; `infer --graph` and `kiln
// run` execute it without this program.
func export(o *options, stdout, _ io.Writer) error {
	if o.Out == "" {
		return usagef("export needs --out, the file to write the graph to")
	}
	m, err := modelForServing(o)
	if err != nil {
		return err
	}
	dense, idx := servingInputs(o.embeddingSizes, o.mlpBot[0], o.testBatchSize(), o.Seed)
	traced, err := graph.TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{servingForward(m, o.autocast(in[0]), in[1])}
	}, dense, idx)
	if err != nil {
		return err
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		return err
	}
	if err := graph.Save(o.Out, frozen); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "DLRM: %d nodes (%d traced), %d %s parameters, inputs dense f32%v and indices i64%v → %s\n",
		len(frozen.Nodes), len(traced.Nodes), frozen.NumParams(), o.DType, dense.Shape(), idx.Shape(), o.Out)
	return nil
}

// infer times forward passes over one random batch of --mini-batch-size
// samples, of the model or, with --graph, of an exported graph, and prints
// the throughput and the median and 90th-percentile batch latency.
func infer(o *options, stdout, _ io.Writer) error {
	dense, idx := servingInputs(o.embeddingSizes, o.mlpBot[0], o.MiniBatchSize, o.Seed)
	var pass func() error
	name := "eager model"
	if o.Graph != "" {
		g, err := graph.Load(o.Graph)
		if err != nil {
			return err
		}
		p, err := graph.Compile(g)
		if err != nil {
			return err
		}
		name = fmt.Sprintf("graph %s (%d nodes)", o.Graph, len(g.Nodes))
		pass = func() error { _, err := p.Run(dense, idx); return err }
	} else {
		m, err := modelForServing(o)
		if err != nil {
			return err
		}
		d, x := o.autocast(autograd.NoGrad(dense)), autograd.NoGrad(idx)
		pass = func() error { return autograd.Try(func() { servingForward(m, d, x) }) }
	}
	fmt.Fprintf(stdout, "%s, batch %d, %d tables, %d warm-up and %d timed passes\n", name, o.MiniBatchSize, len(o.embeddingSizes), o.Warmup, o.Iters)
	times := make([]time.Duration, 0, o.Iters)
	for i := range o.Warmup + o.Iters {
		start := time.Now()
		if err := pass(); err != nil {
			return err
		}
		if i >= o.Warmup {
			times = append(times, time.Since(start))
		}
	}
	var total time.Duration
	for _, d := range times {
		total += d
	}
	slices.Sort(times)
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 }
	fmt.Fprintf(stdout, "throughput %.0f samples/s, latency per batch median %.3f ms, p90 %.3f ms\n",
		float64(o.MiniBatchSize*len(times))/total.Seconds(), ms(percentile(times, 50)), ms(percentile(times, 90)))
	return nil
}

// percentile returns the q-th percentile of sorted durations by the
// nearest-rank method.
func percentile(sorted []time.Duration, q int) time.Duration {
	r := (q*len(sorted) + 99) / 100 // ceil(q/100 · n)
	return sorted[max(r, 1)-1]
}
