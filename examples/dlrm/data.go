package main

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets/criteo"
	"github.com/kilnml/kiln/nn/metrics"
)

// batch is one mini-batch in the layout DLRM.Forward takes: dense [B, D0],
// per table a 1-D Int64 index tensor and its bag starts (B of them), and
// the targets [B, 1].
type batch struct {
	dense   *autograd.Tensor
	indices []*autograd.Tensor
	offsets []*autograd.Tensor
	target  *autograd.Tensor
	size    int
}

// source is where a run's samples come from: the Kaggle file or the
// Terabyte day files, dlrm's random or synthetic (trace-driven) data, or
// Kiln's planted data.
type source interface {
	shapes
	// trainBatches yields epoch e's training batches from batch skip on
	// (a resumed epoch's first undone one), without reading the earlier
	// ones; trainLen says how many there are in all.
	trainBatches(e, skip int) iter.Seq2[*batch, error]
	trainLen() int
	// samples is how many training and held-out samples there are.
	samples() (train, test int)
	// testBatches yields the held-out batches.
	testBatches() iter.Seq2[*batch, error]
	// describe says in one line what the data is.
	describe() string
}

// shapes are what the model needs to know of its data.
type shapes interface {
	// tableRows is each table's row count: the data's counts for a file,
	// --arch-embedding-size for generated data.
	tableRows() []int
	// denseFeatures is the width of the dense input.
	denseFeatures() int
}

// openSource builds the source --data-generation names.
func openSource(o *options) (source, error) {
	switch o.DataGeneration {
	case "planted":
		return newPlantedSource(o)
	case "random", "synthetic":
		return newRandomSource(o)
	case "dataset":
		return newFileSource(o)
	}
	return nil, usagef("--data-generation %q: want dataset, random, synthetic or planted", o.DataGeneration)
}

// fromCriteo converts a Scan-layout batch with the first tables tables
// into a batch: every bag holds one index, so one offsets tensor 0..B−1
// serves all tables.
func fromCriteo(b *criteo.Batch, tables int) *batch {
	n := b.Size()
	out := &batch{size: n,
		dense:  autograd.FromFloat32(b.Dense, n, criteo.NumDense),
		target: autograd.FromFloat32(b.Labels, n, 1)}
	offs := autograd.FromInt64(b.Offsets[:n], n)
	for t := range tables {
		out.indices = append(out.indices, autograd.FromInt64(b.Indices[t], n))
		out.offsets = append(out.offsets, offs)
	}
	return out
}

// plantedSource is criteo.Planted's data: --data-size training samples
// followed by --test-size held-out ones, the training order reshuffled
// every epoch.
type plantedSource struct {
	p                  *criteo.Planted
	train, test, batch int
	testBatch          int
	seed               uint64
}

func newPlantedSource(o *options) (*plantedSource, error) {
	rows := o.embeddingSizes
	if len(rows) > criteo.NumSparse {
		return nil, usagef("--arch-embedding-size has %d tables; planted data has at most %d", len(rows), criteo.NumSparse)
	}
	cfg := criteo.DefaultPlanted(o.DataSize+o.TestSize, o.Seed)
	cfg.Tables, cfg.Rows, cfg.RowsPerTable = len(rows), rows, 0
	if len(rows) < 2 {
		cfg.InteractionScale = 0
	}
	p, err := criteo.NewPlanted(cfg)
	if err != nil {
		return nil, err
	}
	return &plantedSource{p: p, train: o.DataSize, test: o.TestSize, batch: o.MiniBatchSize,
		testBatch: o.testBatchSize(), seed: o.Seed}, nil
}

func (s *plantedSource) tableRows() []int   { return s.p.Rows() }
func (s *plantedSource) denseFeatures() int { return criteo.NumDense }
func (s *plantedSource) trainLen() int      { return ceilDiv(s.train, s.batch) }
func (s *plantedSource) describe() string {
	return fmt.Sprintf("planted data: %d training and %d held-out samples, %d tables", s.train, s.test, len(s.p.Rows()))
}

func (s *plantedSource) samples() (int, int) { return s.train, s.test }

func (s *plantedSource) trainBatches(e, skip int) iter.Seq2[*batch, error] {
	order := make([]int, s.train)
	for i := range order {
		order[i] = i
	}
	rand.New(rand.NewPCG(s.seed, uint64(e))).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return convert(s.p.Batches(order[min(skip*s.batch, len(order)):], s.batch), len(s.p.Rows()))
}

func (s *plantedSource) testBatches() iter.Seq2[*batch, error] {
	ids := make([]int, s.test)
	for i := range ids {
		ids[i] = s.train + i
	}
	return convert(s.p.Batches(ids, s.testBatch), len(s.p.Rows()))
}

// convert maps a sequence of Scan-layout batches to batches.
func convert(seq iter.Seq2[*criteo.Batch, error], tables int) iter.Seq2[*batch, error] {
	return func(yield func(*batch, error) bool) {
		for b, err := range seq {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(fromCriteo(b, tables), nil) {
				return
			}
		}
	}
}

// randomSource is dlrm's --data-generation random or synthetic: multi-hot
// bags per --num-indices-per-lookup, a training set of --data-size
// samples and a held-out one of --test-size drawn from another seed. For
// synthetic data each table's bags are traces drawn from its
// --data-trace-file (dist_emb_j.log with j the table's number).
type randomSource struct {
	train, test *criteo.Random
	rows        []int
	dense       int
	kind        string
}

func newRandomSource(o *options) (*randomSource, error) {
	cfg := criteo.RandomConfig{DenseFeatures: o.mlpBot[0], TableSizes: o.embeddingSizes, DataSize: o.DataSize,
		MiniBatchSize: o.MiniBatchSize, NumBatches: o.NumBatches, IndicesPerLookup: o.NumIndicesPerLookup,
		IndicesPerLookupFixed: o.NumIndicesPerLookupFixed, RoundTargets: o.RoundTargets, Seed: o.Seed}
	kind := "random"
	if o.DataGeneration == "synthetic" {
		traces, err := criteo.ReadTraceFiles(o.DataTraceFile, len(o.embeddingSizes))
		if err != nil {
			return nil, err
		}
		cfg.Traces, cfg.TracePadding = traces, o.DataTraceEnablePadding
		kind = "synthetic"
		for t, tr := range traces {
			if !tr.Fits(o.embeddingSizes[t]) {
				kind = "synthetic (trace rows folded modulo the table sizes)"
				break
			}
		}
	}
	train, err := criteo.NewRandom(cfg)
	if err != nil {
		return nil, err
	}
	cfg.DataSize, cfg.MiniBatchSize, cfg.NumBatches, cfg.Seed = o.TestSize, o.testBatchSize(), 0, o.Seed+1
	test, err := criteo.NewRandom(cfg)
	if err != nil {
		return nil, err
	}
	return &randomSource{train: train, test: test, rows: o.embeddingSizes, dense: o.mlpBot[0], kind: kind}, nil
}

func (s *randomSource) tableRows() []int   { return s.rows }
func (s *randomSource) denseFeatures() int { return s.dense }
func (s *randomSource) trainLen() int      { return s.train.NumBatches() }
func (s *randomSource) describe() string {
	return fmt.Sprintf("%s data: %d training and %d held-out batches, %d tables", s.kind, s.train.NumBatches(), s.test.NumBatches(), len(s.rows))
}

func (s *randomSource) samples() (int, int) {
	return s.train.Config().DataSize, s.test.Config().DataSize
}

func (s *randomSource) trainBatches(_, skip int) iter.Seq2[*batch, error] {
	return s.fromRandom(s.train, skip)
}
func (s *randomSource) testBatches() iter.Seq2[*batch, error] { return s.fromRandom(s.test, 0) }

// fromRandom yields r's batches from batch j0 on: each is drawn from its
// own number, so none before it is made.
func (s *randomSource) fromRandom(r *criteo.Random, j0 int) iter.Seq2[*batch, error] {
	return func(yield func(*batch, error) bool) {
		for j := j0; j < r.NumBatches(); j++ {
			rb, err := r.Batch(j)
			if err != nil {
				yield(nil, err)
				return
			}
			n := rb.Size()
			b := &batch{size: n, dense: autograd.FromFloat32(rb.Dense, n, s.dense), target: autograd.FromFloat32(rb.Targets, n, 1)}
			for t := range rb.Indices {
				b.indices = append(b.indices, autograd.FromInt64(rb.Indices[t], len(rb.Indices[t])))
				b.offsets = append(b.offsets, autograd.FromInt64(rb.Offsets[t], len(rb.Offsets[t])))
			}
			if !yield(b, nil) {
				return
			}
		}
	}
}

// fileSource reads the Kaggle train.txt or the Terabyte day files
// (--raw-data-file, per --data-set): one scan per file for the
// dictionaries and the per-line records (offset, length, label), kept in
// a sidecar beside it and read from there on demand, dlrm's split into
// days (Kaggle's seven cut by line count, Terabyte's 24 files), negatives
// sub-sampled in training and the training lines ordered by
// --data-randomize, lazily (criteo.Order), batches read back with ReadAt.
// Its memory is the dictionaries and a batch, whatever the number of
// lines.
type fileSource struct {
	set              *criteo.DaySet
	train, test      *criteo.Order
	batch, testBatch int
	path             string
}

func newFileSource(o *options) (*fileSource, error) {
	open, what := criteo.OpenKaggle, "the Kaggle train.txt"
	if o.DataSet == "terabyte" {
		open, what = criteo.OpenTerabyte, "the prefix of the Terabyte day files (PREFIX_0 … PREFIX_23) or their directory"
	}
	if o.RawDataFile == "" {
		return nil, usagef("--data-generation dataset needs --raw-data-file, %s", what)
	}
	set, err := open(o.RawDataFile, criteo.ScanOptions{MaxIndRange: o.MaxIndRange, SkipBadLines: o.SkipBadLines})
	if err != nil {
		return nil, err
	}
	split := set.Split()
	s := &fileSource{set: set, batch: o.MiniBatchSize, testBatch: o.testBatchSize(), path: o.RawDataFile}
	// The options checked --data-randomize: an error here is reading the
	// sidecars.
	if s.train, err = set.Order(split.Days[:len(split.Days)-1], o.DataSubSampleRate, o.Seed, o.DataRandomize); err == nil {
		s.test, err = set.Order([]criteo.Range{split.Test}, 0, o.Seed, criteo.RandomizeNone)
	}
	if err != nil {
		set.Close()
		return nil, err
	}
	if s.train.Len() == 0 || s.test.Len() == 0 {
		set.Close()
		return nil, fmt.Errorf("%s: %d good lines leave %d training and %d test samples; the %d-day split needs more", o.RawDataFile, set.Len(), s.train.Len(), s.test.Len(), len(split.Days))
	}
	return s, nil
}

func (s *fileSource) tableRows() []int {
	c := s.set.Counts()
	return c[:]
}
func (s *fileSource) denseFeatures() int { return criteo.NumDense }
func (s *fileSource) trainLen() int      { return ceilDiv(s.train.Len(), s.batch) }
func (s *fileSource) describe() string {
	n, first := s.set.BadLines()
	bad := ""
	if files := s.set.Files(); n > 0 && len(files) == 1 {
		_, lines := files[0].BadLines()
		bad = fmt.Sprintf(", %d bad lines skipped (first at lines %v)", n, lines)
	} else if n > 0 {
		bad = fmt.Sprintf(", %d bad lines skipped (first at %s)", n, strings.Join(first, ", "))
	}
	return fmt.Sprintf("%s: %d training and %d test samples%s, training order %s", s.path, s.train.Len(), s.test.Len(), bad, s.train.Mode())
}

func (s *fileSource) samples() (int, int) { return s.train.Len(), s.test.Len() }

// trainBatches is the same order every epoch, as dlrm shuffles once.
func (s *fileSource) trainBatches(_, skip int) iter.Seq2[*batch, error] {
	return convert(s.train.Batches(s.batch, min(skip*s.batch, s.train.Len())), criteo.NumSparse)
}

func (s *fileSource) testBatches() iter.Seq2[*batch, error] {
	return convert(s.test.Batches(s.testBatch, 0), criteo.NumSparse)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// oracleAUC is the held-out AUC of the planted model's true
// probabilities: what a perfect learner would score on this sample.
func (s *plantedSource) oracleAUC() (float64, error) {
	var probs, labels []float32
	for b, err := range s.testBatches() {
		if err != nil {
			return 0, err
		}
		labels = append(labels, b.target.Float32s()...)
	}
	for i := range s.test {
		probs = append(probs, float32(s.p.Prob(s.train+i)))
	}
	return metrics.AUC(probs, labels)
}
