package criteo

import (
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
)

// RandomConfig mirrors the flags of dlrm_s_pytorch.py's
// --data-generation=random (with the default --rand-data-dist=uniform):
// inputs with no signal at all, for timing and smoke tests of models of
// any shape.
type RandomConfig struct {
	// DenseFeatures is the dense input width, m_den (the first entry of
	// --arch-mlp-bot).
	DenseFeatures int
	// TableSizes holds each embedding table's row count
	// (--arch-embedding-size).
	TableSizes []int
	// DataSize is the number of samples (--data-size), cut into batches of
	// MiniBatchSize (--mini-batch-size), the last one short. NumBatches
	// (--num-batches), when positive, overrides it: DataSize becomes
	// NumBatches·MiniBatchSize.
	DataSize, MiniBatchSize, NumBatches int
	// IndicesPerLookup (--num-indices-per-lookup) bounds each bag's size;
	// with IndicesPerLookupFixed (--num-indices-per-lookup-fixed) every
	// bag draws exactly that many indices before duplicates are merged.
	IndicesPerLookup      int
	IndicesPerLookupFixed bool
	// RoundTargets (--round-targets) rounds the targets to 0 or 1.
	RoundTargets bool
	// Seed fixes every batch (dlrm's --numpy-rand-seed).
	Seed uint64
	// Traces, when set, holds one access trace per table and makes the
	// data dlrm's --data-generation=synthetic: each bag's indices are a
	// short trace drawn by Trace.Generate (a fresh LRU stack per bag, as
	// dlrm's generator re-reads the file for every bag), taken modulo
	// the table's rows where the trace's rows do not fit, sorted and
	// merged. TracePadding is --data-trace-enable-padding.
	Traces       []*Trace
	TracePadding bool
}

// A RandomBatch is one batch in the layout dlrm's random loader yields
// (X, lS_o, lS_i, T): every table's bags as one index list split at bag
// starts, which is what an embedding bag takes.
type RandomBatch struct {
	// Dense is [n, DenseFeatures] row-major, uniform in [0, 1).
	Dense []float32
	// Indices[t] holds table t's n bags one after another, each bag's
	// indices sorted and distinct.
	Indices [][]int64
	// Offsets[t] holds the n bag starts into Indices[t] (dlrm's lS_o
	// row, include_last_offset=False); bag k ends where bag k+1 starts,
	// the last at len(Indices[t]).
	Offsets [][]int64
	// Targets holds n click probabilities, uniform in [0, 1), or 0 and 1
	// with RoundTargets.
	Targets []float32
}

// Size is the number of samples, n.
func (b *RandomBatch) Size() int { return len(b.Targets) }

// Random generates dlrm's random data. Batch j is a function of the seed
// and j alone: dlrm reseeds NumPy when its loader starts an epoch, so its
// epochs repeat, and so do these (dlrm's test loader, seeded alike, even
// repeats the training data). The draws differ from NumPy's; their laws
// are the same. A Random is safe for concurrent use.
type Random struct {
	cfg      RandomConfig
	nbatches int
}

// NewRandom checks cfg and fills in DataSize from NumBatches as dlrm
// does.
func NewRandom(cfg RandomConfig) (*Random, error) {
	bad := func(format string, args ...any) (*Random, error) {
		return nil, fmt.Errorf("criteo: random: "+format, args...)
	}
	switch {
	case cfg.DenseFeatures < 0:
		return bad("DenseFeatures is %d, want >= 0", cfg.DenseFeatures)
	case cfg.MiniBatchSize < 1:
		return bad("MiniBatchSize is %d, want >= 1", cfg.MiniBatchSize)
	case cfg.DataSize < 0:
		return bad("DataSize is %d, want >= 0", cfg.DataSize)
	case cfg.NumBatches < 0:
		return bad("NumBatches is %d, want >= 0", cfg.NumBatches)
	case cfg.IndicesPerLookup < 1:
		return bad("IndicesPerLookup is %d, want >= 1", cfg.IndicesPerLookup)
	}
	for t, n := range cfg.TableSizes {
		if n < 1 {
			return bad("table %d has %d rows, want >= 1", t, n)
		}
	}
	if cfg.Traces != nil && len(cfg.Traces) != len(cfg.TableSizes) {
		return bad("%d traces for %d tables", len(cfg.Traces), len(cfg.TableSizes))
	}
	for t, tr := range cfg.Traces {
		if tr == nil || len(tr.Unique) == 0 || len(tr.Distances) == 0 || len(tr.CDF) != len(tr.Distances) {
			return bad("table %d's trace is empty or malformed (read it with ReadTrace)", t)
		}
	}
	cfg.TableSizes = slices.Clone(cfg.TableSizes)
	cfg.Traces = slices.Clone(cfg.Traces)
	r := &Random{cfg: cfg}
	if cfg.NumBatches > 0 {
		r.nbatches = cfg.NumBatches
		r.cfg.DataSize = cfg.NumBatches * cfg.MiniBatchSize
	} else {
		r.nbatches = (cfg.DataSize + cfg.MiniBatchSize - 1) / cfg.MiniBatchSize
	}
	return r, nil
}

// Config returns the configuration, DataSize filled in from NumBatches.
func (r *Random) Config() RandomConfig {
	c := r.cfg
	c.TableSizes = slices.Clone(c.TableSizes)
	c.Traces = slices.Clone(c.Traces)
	return c
}

// NumBatches is the number of batches in an epoch.
func (r *Random) NumBatches() int { return r.nbatches }

// Batch returns batch j of n = min(MiniBatchSize, DataSize −
// j·MiniBatchSize) samples. For each table and sample, in order, it draws
// the bag: its size is IndicesPerLookup when fixed, else
// round(max(1, u·min(rows, IndicesPerLookup))) for a uniform u; each of
// its indices is round(u·(rows−1)), or with Traces the next access of a
// trace drawn for the bag; duplicates are merged and the bag sorted
// (np.unique), so a bag may come out smaller than drawn. Rounding is half
// to even, as np.round. Without Traces, indices are therefore uniform over
// the table except the first and last rows, which are half as likely.
func (r *Random) Batch(j int) (*RandomBatch, error) {
	if j < 0 || j >= r.nbatches {
		return nil, fmt.Errorf("criteo: random: batch %d out of range [0, %d)", j, r.nbatches)
	}
	c := &r.cfg
	n := min(c.MiniBatchSize, c.DataSize-j*c.MiniBatchSize)
	rng := rand.New(rand.NewPCG(c.Seed, mix64(uint64(j))))
	b := &RandomBatch{
		Dense:   make([]float32, n*c.DenseFeatures),
		Indices: make([][]int64, len(c.TableSizes)),
		Offsets: make([][]int64, len(c.TableSizes)),
		Targets: make([]float32, n),
	}
	// In dlrm's order: dense block, bags table by table, targets.
	// Float32 draws stay below 1, where NumPy's float64 draws cast to
	// float32 can round up to 1.
	for i := range b.Dense {
		b.Dense[i] = rng.Float32()
	}
	for t, rows := range c.TableSizes {
		offsets := make([]int64, n)
		indices := make([]int64, 0, n*bagMean(rows, c))
		for k := range n {
			size := c.IndicesPerLookup
			if !c.IndicesPerLookupFixed {
				size = int(math.RoundToEven(max(1, rng.Float64()*float64(min(rows, c.IndicesPerLookup)))))
			}
			offsets[k] = int64(len(indices))
			start := len(indices)
			if c.Traces != nil {
				indices = bagFromTrace(c.Traces[t], rng, size, rows, c.TracePadding, indices)
			} else {
				for range size {
					indices = append(indices, int64(math.RoundToEven(rng.Float64()*float64(rows-1))))
				}
			}
			bag := indices[start:]
			slices.Sort(bag)
			indices = indices[:start+len(slices.Compact(bag))]
		}
		b.Indices[t], b.Offsets[t] = indices, offsets
	}
	for i := range b.Targets {
		p := rng.Float32()
		if c.RoundTargets {
			p = float32(math.RoundToEven(float64(p)))
		}
		b.Targets[i] = p
	}
	return b, nil
}

// bagMean is a capacity hint: about the mean bag size.
func bagMean(rows int, c *RandomConfig) int {
	if c.IndicesPerLookupFixed {
		return c.IndicesPerLookup
	}
	return max(1, (min(rows, c.IndicesPerLookup)+1)/2)
}

// Batches yields the epoch's batches in order.
func (r *Random) Batches() iter.Seq2[*RandomBatch, error] {
	return func(yield func(*RandomBatch, error) bool) {
		for j := range r.nbatches {
			if !yield(r.Batch(j)) {
				return
			}
		}
	}
}
