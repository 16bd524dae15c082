package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets/criteo"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/gcheadroom"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// The exported graph's inputs are dense f32[B, D0] and, when the flags ask
// for one index per table per sample (--num-indices-per-lookup 1),
// indices i64[B, T], as Criteo's data has: what a server receives. Inside,
// those are the fixed-size bags [B, T, 1] of MergedEmbeddingBagFixed.
// For multi-hot bags (--num-indices-per-lookup above 1) they are dense,
// indices i64[N] and offsets i64[T, B+1], the packed layout of
// MergedEmbeddingBagPacked: indices holds every table's indices
// concatenated in table order, offsets[t][b] is the position in indices
// where bag b of table t starts and offsets[t][B] where table t's last bag
// ends (so offsets[0][0] = 0, offsets[t][B] = offsets[t+1][0] and
// offsets[T-1][B] = N; a bag may be empty). N is free: batches with other
// numbers of indices run on one compiled plan.

// multiHot reports whether the flags ask for bags of more than one index.
// With --num-indices-per-lookup 1 every bag holds exactly one index, fixed
// or not (dlrm draws max(1, round(u·1)) = 1), the one-hot layout.
func (o *options) multiHot() bool { return o.NumIndicesPerLookup > 1 }

// servingForward is the function export traces and infer times: the model
// on dense features (marked for autocast under --dtype bf16) and the
// tables' bags, one index per table per sample (lookups: indices [B, T])
// or packed multi-hot bags (lookups: indices [N], offsets [T, B+1]),
// returning float32 probabilities.
func servingForward(m *models.DLRM, dense *autograd.Tensor, lookups ...*autograd.Tensor) *autograd.Tensor {
	var p *autograd.Tensor
	if len(lookups) == 2 {
		p = m.ForwardPacked(dense, lookups[0], lookups[1])
	} else {
		s := lookups[0].Shape()
		p = m.ForwardFixed(dense, autograd.Reshape(lookups[0], -1, s[1], 1)) // -1: the graph takes any batch size
	}
	if p.DType() != autograd.Float32 {
		// Exact, and what a caller reading .npy files can take: NumPy has
		// no bfloat16.
		p = autograd.Cast(p, autograd.Float32)
	}
	return p
}

// servingInputs is a batch of b samples as the exported graph takes them:
// dense features uniform in [0, 3) (about the range of log(x+1) of
// Criteo's counts), then indices uniform in each table's rows, one per
// table per sample, or for multi-hot bags the packed indices and offsets
// of bags drawn as dlrm's random data draws them (--num-indices-per-lookup
// and --num-indices-per-lookup-fixed; sorted, distinct).
func servingInputs(o *options, b int, seed uint64) ([]*autograd.Tensor, error) {
	rows, dense := o.embeddingSizes, o.mlpBot[0]
	r := rand.New(rand.NewPCG(seed, 19))
	x := make([]float32, b*dense)
	for i := range x {
		x[i] = 3 * r.Float32()
	}
	in := []*autograd.Tensor{autograd.FromFloat32(x, b, dense)}
	if !o.multiHot() {
		idx := make([]int64, b*len(rows))
		for i := range idx {
			idx[i] = r.Int64N(int64(rows[i%len(rows)]))
		}
		return append(in, autograd.FromInt64(idx, b, len(rows))), nil
	}
	bags, err := criteo.NewRandom(criteo.RandomConfig{TableSizes: rows, DataSize: b, MiniBatchSize: b,
		IndicesPerLookup: o.NumIndicesPerLookup, IndicesPerLookupFixed: o.NumIndicesPerLookupFixed, Seed: seed})
	if err != nil {
		return nil, err
	}
	batch, err := bags.Batch(0)
	if err != nil {
		return nil, err
	}
	idx, off := packBags(batch.Indices, batch.Offsets)
	return append(in, autograd.FromInt64(idx, len(idx)), autograd.FromInt64(off, len(rows), b+1)), nil
}

// packBags packs each table's indices and bag starts (dlrm's lS_i and lS_o)
// into the exported graph's multi-hot inputs: every table's indices
// concatenated, and [T, B+1] offsets into them.
func packBags(indices, starts [][]int64) (idx, off []int64) {
	for t, s := range starts {
		base := int64(len(idx))
		for _, o := range s {
			off = append(off, base+o)
		}
		idx = append(idx, indices[t]...)
		off = append(off, int64(len(idx)))
	}
	return idx, off
}

// servingNames are the exported graph's inputs' names, in order.
var servingNames = []string{"dense", "indices", "offsets"}

// inputNames describes in, the graph's inputs, as "dense float32[8 13], …".
func inputNames(in []*autograd.Tensor) string {
	s := ""
	for i, x := range in {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %v%v", servingNames[i], x.DType(), x.Shape())
	}
	return s
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
	gcheadroom.Set(gcheadroom.DLRM) // as in training: the tables are most of the heap
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
	in, err := servingInputs(o, o.testBatchSize(), o.Seed)
	if err != nil {
		return err
	}
	traced, err := graph.TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{servingForward(m, o.autocast(in[0]), in[1:]...)}
	}, in...)
	if err != nil {
		return err
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		return err
	}
	for i, id := range frozen.Inputs {
		frozen.Values[id].Name = servingNames[i] // what `kiln run` and `kiln inspect` call them
	}
	if err := graph.Save(o.Out, frozen); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "DLRM: %d nodes (%d traced), %d %s parameters, inputs %s → %s\n",
		len(frozen.Nodes), len(traced.Nodes), frozen.NumParams(), o.DType, inputNames(in), o.Out)
	return nil
}

// infer times forward passes over one random batch of --mini-batch-size
// samples, of the model or, with --graph, of an exported graph, and prints
// the throughput and the median and 90th-percentile batch latency.
func infer(o *options, stdout, _ io.Writer) error {
	in, err := servingInputs(o, o.MiniBatchSize, o.Seed)
	if err != nil {
		return err
	}
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
		if len(g.Inputs) != len(in) {
			return fmt.Errorf("%s takes %d inputs, but these flags make %d (%s): infer --graph needs export's --num-indices-per-lookup",
				o.Graph, len(g.Inputs), len(in), inputNames(in))
		}
		pass = func() error { _, err := p.Run(in...); return err }
	} else {
		m, err := modelForServing(o)
		if err != nil {
			return err
		}
		d, lookups, arena := o.autocast(autograd.NoGrad(in[0])), noGrad(in[1:]), autograd.NewArena(0)
		pass = func() error {
			defer arena.Reset()
			return autograd.Try(func() { servingForward(m, arena.In(d), lookups...) })
		}
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

// noGrad returns views of xs that record no gradient.
func noGrad(xs []*autograd.Tensor) []*autograd.Tensor {
	v := make([]*autograd.Tensor, len(xs))
	for i, x := range xs {
		v[i] = autograd.NoGrad(x)
	}
	return v
}

// percentile returns the q-th percentile of sorted durations by the
// nearest-rank method.
func percentile(sorted []time.Duration, q int) time.Duration {
	r := (q*len(sorted) + 99) / 100 // ceil(q/100 · n)
	return sorted[max(r, 1)-1]
}
