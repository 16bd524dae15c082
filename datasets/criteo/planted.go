package criteo

import (
	"bufio"
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"

	"github.com/kilnml/kiln/internal/evalmetrics"
)

// PlantedConfig describes a synthetic click data set in Kaggle's shape
// whose labels follow a known logistic model, so that a training test can
// tell a model that learns from one that does not: the oracle AUC (that of
// the true probabilities) is the most a model can reach.
//
// Sample i has, for each of the first Tables categorical features, a row
// id drawn from a Zipf law over that table's rows (row 0 the most common),
// thirteen integer features, and a label drawn as Bernoulli(σ(z)) with
//
//	z = Bias + Σ_j DenseScale·w_j·(x_j − 1.5) + Σ_t EffectScale·e_t[id_t]
//	      + InteractionScale·u[id_a]·v[id_b]
//
// where x_j is the dense input dlrm computes from integer feature j
// (log(n+1), 0 for an empty or negative field), and w_j, e_t[r], u[r] and
// v[r] are fixed standard normal draws; (a, b) are the Interaction tables.
// The product term is what DLRM's dot interaction of two embeddings can
// represent and a model without feature interactions cannot.
type PlantedConfig struct {
	// Samples is the number of samples.
	Samples int
	// Seed fixes everything: parameters and every sample.
	Seed uint64
	// Tables is how many categorical features (C1..C{Tables}) carry ids,
	// 1 to 26. The others are written empty, which dlrm reads as value 0.
	Tables int
	// Rows gives each table's row count (len Tables); when nil, every
	// table has RowsPerTable rows.
	Rows         []int
	RowsPerTable int
	// Zipf is the exponent s of the id distribution, P(row r) ∝ (r+1)^-s;
	// 0 draws ids uniformly. Criteo's categoricals are close to s ≈ 1.
	Zipf float64
	// Bias is the logit's intercept; it sets the click rate.
	Bias float64
	// DenseScale, EffectScale and InteractionScale weigh the three parts
	// of the logit; 0 switches a part off.
	DenseScale, EffectScale, InteractionScale float64
	// Interaction names the two tables of the product term; the zero
	// value means tables 0 and 1.
	Interaction [2]int
	// MissingRate and NegativeRate are the fractions of integer fields
	// written empty and written negative; dlrm reads both as 0, and so do
	// the in-memory batches.
	MissingRate, NegativeRate float64
}

// DefaultPlanted returns a configuration with a clear signal (oracle AUC
// near 0.88): 8 tables of 1000 rows with Zipf exponent 1.05, about a third
// of samples clicked, the logit split between dense features, per-row
// effects and one interaction, and a few missing and negative integer
// fields.
func DefaultPlanted(samples int, seed uint64) PlantedConfig {
	return PlantedConfig{
		Samples: samples, Seed: seed,
		Tables: 8, RowsPerTable: 1000, Zipf: 1.05,
		Bias: -1, DenseScale: 0.3, EffectScale: 0.6, InteractionScale: 1,
		Interaction:  [2]int{0, 1},
		MissingRate:  0.1,
		NegativeRate: 0.02,
	}
}

// Planted generates the samples of a PlantedConfig. Each sample is a
// function of the seed and its number alone, so samples can be produced
// in any order, in batches of any size, as TSV or in memory, and always
// agree. A Planted is safe for concurrent use.
type Planted struct {
	cfg    PlantedConfig
	rows   []int
	cdf    [][]float64 // per table: cumulative Zipf probabilities; nil when uniform
	guide  [][]int32   // per table: guide[k] is the first row with cdf > k/rows
	effect [][]float32 // per table per row: e_t[r]
	u, v   []float32   // interaction factors of tables a and b
	w      [NumDense]float64
	salt   [NumSparse]uint32 // makes each table's hex values look unrelated
}

// denseCentre is subtracted from every dense input in the logit: about
// the mean of log(n+1) for the counts drawn, so DenseScale moves the
// spread of the logit more than its level.
const denseCentre = 1.5

// NewPlanted checks cfg and draws the model's parameters, in
// O(tables·rows) time and memory.
func NewPlanted(cfg PlantedConfig) (*Planted, error) {
	bad := func(format string, args ...any) (*Planted, error) {
		return nil, fmt.Errorf("criteo: planted: "+format, args...)
	}
	switch {
	case cfg.Samples < 0:
		return bad("Samples is %d, want >= 0", cfg.Samples)
	case cfg.Tables < 1 || cfg.Tables > NumSparse:
		return bad("Tables is %d, want 1 to %d", cfg.Tables, NumSparse)
	case cfg.Rows != nil && len(cfg.Rows) != cfg.Tables:
		return bad("Rows has %d entries for %d tables", len(cfg.Rows), cfg.Tables)
	case !(cfg.Zipf >= 0) || math.IsInf(cfg.Zipf, 0):
		return bad("Zipf exponent is %v, want a finite value >= 0", cfg.Zipf)
	case !(cfg.MissingRate >= 0 && cfg.NegativeRate >= 0 && cfg.MissingRate+cfg.NegativeRate <= 1):
		return bad("MissingRate %v and NegativeRate %v must be >= 0 and sum to at most 1", cfg.MissingRate, cfg.NegativeRate)
	}
	for _, f := range []struct {
		name string
		x    float64
	}{{"Bias", cfg.Bias}, {"DenseScale", cfg.DenseScale}, {"EffectScale", cfg.EffectScale},
		{"InteractionScale", cfg.InteractionScale}} {
		if math.IsNaN(f.x) || math.IsInf(f.x, 0) {
			return bad("%s is %v, want a finite value", f.name, f.x)
		}
	}
	if cfg.Interaction == [2]int{} {
		cfg.Interaction = [2]int{0, 1}
	}
	if a, b := cfg.Interaction[0], cfg.Interaction[1]; cfg.InteractionScale != 0 &&
		(a < 0 || b < 0 || a >= cfg.Tables || b >= cfg.Tables || a == b) {
		return bad("Interaction tables %d and %d: want two different tables below Tables = %d", a, b, cfg.Tables)
	}
	p := &Planted{cfg: cfg, rows: make([]int, cfg.Tables)}
	for t := range p.rows {
		n := cfg.RowsPerTable
		if cfg.Rows != nil {
			n = cfg.Rows[t]
		}
		if n < 1 || n > math.MaxInt32 {
			return bad("table %d has %d rows, want 1 to %d", t, n, math.MaxInt32)
		}
		p.rows[t] = n
	}
	p.cfg.Rows = append([]int(nil), p.rows...)

	r := rand.New(rand.NewPCG(cfg.Seed, 0x706c616e746564)) // a stream apart from the samples'
	for j := range p.w {
		p.w[j] = cfg.DenseScale * r.NormFloat64()
	}
	normals := func(n int, scale float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(scale * r.NormFloat64())
		}
		return x
	}
	p.effect = make([][]float32, cfg.Tables)
	for t, n := range p.rows {
		p.effect[t] = normals(n, cfg.EffectScale)
		p.salt[t] = r.Uint32()
	}
	if cfg.InteractionScale != 0 {
		p.u = normals(p.rows[cfg.Interaction[0]], 1)
		p.v = normals(p.rows[cfg.Interaction[1]], cfg.InteractionScale)
	}
	if cfg.Zipf > 0 {
		p.cdf = make([][]float64, cfg.Tables)
		p.guide = make([][]int32, cfg.Tables)
		for t, n := range p.rows {
			// Tables of equal size share their (read-only) tables.
			if u := slices.Index(p.rows[:t], n); u >= 0 {
				p.cdf[t], p.guide[t] = p.cdf[u], p.guide[u]
				continue
			}
			p.cdf[t], p.guide[t] = zipfTables(n, cfg.Zipf)
		}
	}
	return p, nil
}

// zipfTables returns the cumulative probabilities of a Zipf law over n
// rows and the guide table that starts each search at most a step or two
// from its answer (the cutpoint method), where a binary search over a
// large table would miss the cache some log(n) times per draw.
func zipfTables(n int, s float64) (cdf []float64, guide []int32) {
	cdf = make([]float64, n)
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(float64(k+1), -s)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	cdf[n-1] = 1 // no draw may fall past the last row to rounding
	guide = make([]int32, n)
	r := 0
	for k := range guide {
		for cdf[r] <= float64(k)/float64(n) {
			r++
		}
		guide[k] = int32(r)
	}
	return cdf, guide
}

// Config returns the configuration with its defaults filled in (Rows set).
func (p *Planted) Config() PlantedConfig {
	c := p.cfg
	c.Rows = append([]int(nil), p.rows...)
	return c
}

// Len is the number of samples.
func (p *Planted) Len() int { return p.cfg.Samples }

// Rows returns each table's row count, the embedding table sizes a model
// of the in-memory batches needs.
func (p *Planted) Rows() []int { return append([]int(nil), p.rows...) }

// Integer-field kinds as written to TSV.
const (
	fieldCount    = iota // a non-negative count
	fieldMissing         // empty
	fieldNegative        // a negative integer
)

// plantedSample is one generated sample.
type plantedSample struct {
	ids   [NumSparse]int32
	ints  [NumDense]int64 // the written value, negative for fieldNegative
	kind  [NumDense]uint8
	dense [NumDense]float32
	prob  float64
	label float32
}

// sampler regenerates samples; it owns its RNG, so each goroutine uses its
// own.
type sampler struct {
	p   *Planted
	pcg rand.PCG
	r   *rand.Rand
}

func (p *Planted) sampler() *sampler {
	s := &sampler{p: p}
	s.r = rand.New(&s.pcg)
	return s
}

// sample fills s with sample i. The draws happen in a fixed order (ids,
// then integer fields, then the label) from a generator seeded by the
// seed and a hash of i, so neighbouring samples are unrelated.
func (g *sampler) sample(i int, s *plantedSample) {
	p := g.p
	g.pcg.Seed(p.cfg.Seed, mix64(uint64(i)))
	z := p.cfg.Bias
	for t, n := range p.rows {
		u := g.r.Float64()
		id := min(int(u*float64(n)), n-1) // u·n may round up to n
		if p.cdf != nil {
			// The first row with c[id] > u; c[n-1] = 1 > u ends the walk.
			c := p.cdf[t]
			for id = int(p.guide[t][id]); c[id] <= u; id++ {
			}
		}
		s.ids[t] = int32(id)
		z += float64(p.effect[t][id])
	}
	for j := range NumDense {
		// log(n+1) roughly normal(1.5, 1.5) and floored at 0: counts
		// from 0 to tens of thousands, most of them small, as in Kaggle.
		n := int64(math.Exp(denseCentre+1.5*g.r.NormFloat64())) - 1
		n = min(max(n, 0), math.MaxInt32-1)
		switch u := g.r.Float64(); {
		case u < p.cfg.MissingRate:
			s.kind[j], s.ints[j] = fieldMissing, 0
		case u < p.cfg.MissingRate+p.cfg.NegativeRate:
			s.kind[j], s.ints[j] = fieldNegative, -(n + 1)
		default:
			s.kind[j], s.ints[j] = fieldCount, n
		}
		s.dense[j] = denseInput(s.ints[j])
		z += p.w[j] * (float64(s.dense[j]) - denseCentre)
	}
	if p.u != nil {
		a, b := p.cfg.Interaction[0], p.cfg.Interaction[1]
		z += float64(p.u[s.ids[a]]) * float64(p.v[s.ids[b]])
	}
	s.prob = 1 / (1 + math.Exp(-z))
	s.label = 0
	if g.r.Float64() < s.prob {
		s.label = 1
	}
}

// mix64 is SplitMix64's finaliser, a bijection that scatters nearby
// sample numbers across PCG's stream space.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// hexValue is the raw categorical written for row r of table t: a
// bijection of r (murmur3's finaliser), so distinct rows stay distinct
// values and look like Kaggle's 32-bit hashes.
func (p *Planted) hexValue(t int, r int32) uint32 {
	h := uint32(r) ^ p.salt[t]
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	return h ^ h>>16
}

// Prob returns sample i's true click probability σ(z).
func (p *Planted) Prob(i int) float64 {
	var s plantedSample
	p.sampler().sample(i, &s)
	return s.prob
}

// WriteTSV writes the samples as Kaggle lines: label, I1..I13 (empty,
// negative or a count, as drawn), C1..C26 as 8-digit hex, those beyond
// Tables empty. Scan reads them back; its dictionary numbers rows in
// order of first appearance, so its ids are a per-table relabelling of the
// in-memory batches' ids, with the same counts (see PlantedStats.Counts).
func (p *Planted) WriteTSV(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	g := p.sampler()
	var (
		s    plantedSample
		line []byte
	)
	const hexDigits = "0123456789abcdef"
	for i := range p.cfg.Samples {
		g.sample(i, &s)
		line = append(line[:0], '0'+byte(s.label))
		for j := range NumDense {
			line = append(line, '\t')
			if s.kind[j] != fieldMissing {
				line = strconv.AppendInt(line, s.ints[j], 10)
			}
		}
		for t := range NumSparse {
			line = append(line, '\t')
			if t < p.cfg.Tables {
				v := p.hexValue(t, s.ids[t])
				for k := 28; k >= 0; k -= 4 {
					line = append(line, hexDigits[v>>k&0xf])
				}
			}
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("criteo: planted: writing sample %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("criteo: planted: %w", err)
	}
	return nil
}

// Batch returns the given samples in Scan's Batch layout: Dense [B, 13]
// as dlrm's log(x+1), Indices[t] the row id of table t for t < Tables
// (nil beyond: the TSV leaves those columns empty, a single row carrying
// no signal), Offsets 0..B, Labels, and Lines the sample numbers.
func (p *Planted) Batch(samples []int) (*Batch, error) {
	for _, i := range samples {
		if i < 0 || i >= p.cfg.Samples {
			return nil, fmt.Errorf("criteo: planted: sample %d out of range [0, %d)", i, p.cfg.Samples)
		}
	}
	n := len(samples)
	b := &Batch{
		Dense:   make([]float32, n*NumDense),
		Offsets: make([]int64, n+1),
		Labels:  make([]float32, n),
		Lines:   append([]int(nil), samples...),
	}
	for t := range p.cfg.Tables {
		b.Indices[t] = make([]int64, n)
	}
	for k := range b.Offsets {
		b.Offsets[k] = int64(k)
	}
	g := p.sampler()
	var s plantedSample
	for k, i := range samples {
		g.sample(i, &s)
		copy(b.Dense[k*NumDense:], s.dense[:])
		for t := range p.cfg.Tables {
			b.Indices[t][k] = int64(s.ids[t])
		}
		b.Labels[k] = s.label
	}
	return b, nil
}

// Batches yields the given samples (say a KaggleSplit range, shuffled) in
// batches of batchSize, the last possibly smaller, as Index.Batches does
// for a file, in O(batchSize) memory.
func (p *Planted) Batches(samples []int, batchSize int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		if batchSize <= 0 {
			yield(nil, fmt.Errorf("criteo: planted: batch size %d, want > 0", batchSize))
			return
		}
		for start := 0; start < len(samples); start += batchSize {
			b, err := p.Batch(samples[start:min(start+batchSize, len(samples))])
			if !yield(b, err) || err != nil {
				return
			}
		}
	}
}

// PlantedStats summarises a planted data set: what Scan of its TSV will
// report, and how well the true probabilities themselves score.
type PlantedStats struct {
	Samples, Positives int
	// Counts is each categorical column's number of distinct values, as
	// Index.Counts of the TSV reports it: the rows drawn at least once,
	// and 1 for the empty columns beyond Tables.
	Counts [NumSparse]int
	// Missing and Negative count the integer fields written empty and
	// negative.
	Missing, Negative int
	// OracleAUC and OracleLogLoss are the AUC and log loss of the true
	// probabilities (rounded to float32, as a model's outputs are)
	// against the drawn labels: the ceiling and floor a trained model
	// approaches. OracleAUC is 0 when the labels hold one class.
	OracleAUC, OracleLogLoss float64
}

// Stats makes one pass over the samples. It keeps every probability and
// label for the AUC: 16 bytes per sample at most, besides a bit per row.
func (p *Planted) Stats() (PlantedStats, error) {
	st := PlantedStats{Samples: p.cfg.Samples}
	if p.cfg.Samples == 0 {
		return st, nil
	}
	seen := make([][]uint64, p.cfg.Tables)
	for t, n := range p.rows {
		seen[t] = make([]uint64, (n+63)/64)
	}
	probs := make([]float32, p.cfg.Samples)
	labels := make([]float32, p.cfg.Samples)
	g := p.sampler()
	var s plantedSample
	for i := range p.cfg.Samples {
		g.sample(i, &s)
		probs[i], labels[i] = float32(s.prob), s.label
		st.Positives += int(s.label)
		for t := range p.cfg.Tables {
			id := s.ids[t]
			if seen[t][id/64]&(1<<(id%64)) == 0 {
				seen[t][id/64] |= 1 << (id % 64)
				st.Counts[t]++
			}
		}
		for _, k := range s.kind {
			switch k {
			case fieldMissing:
				st.Missing++
			case fieldNegative:
				st.Negative++
			}
		}
	}
	for t := p.cfg.Tables; t < NumSparse; t++ {
		st.Counts[t] = 1
	}
	var err error
	if st.OracleLogLoss, err = evalmetrics.LogLoss(probs, labels); err != nil {
		return st, fmt.Errorf("criteo: planted: %w", err)
	}
	if st.Positives > 0 && st.Positives < st.Samples {
		if st.OracleAUC, err = evalmetrics.AUC(probs, labels); err != nil {
			return st, fmt.Errorf("criteo: planted: %w", err)
		}
	}
	return st, nil
}

// WriteDays writes the samples as WriteTSV does, cut into day files as
// the Terabyte set is: samples 0..sizes[0]-1 to prefix_0, the next
// sizes[1] to prefix_1, and so on (OpenTerabyte reads 24 of them). The
// sizes must add up to Len.
func (p *Planted) WriteDays(prefix string, sizes []int) error {
	total := 0
	for _, n := range sizes {
		total += max(n, 0)
	}
	if total != p.cfg.Samples || len(sizes) == 0 {
		return fmt.Errorf("criteo: planted: day sizes %v add up to %d, not the %d samples", sizes, total, p.cfg.Samples)
	}
	w := &dayWriter{prefix: prefix, sizes: sizes, day: -1}
	err := p.WriteTSV(w)
	for err == nil && w.day < len(w.sizes) { // close the last day, create any empty ones after it
		err = w.next()
	}
	if w.f != nil {
		w.f.Close()
	}
	return err
}

// dayWriter writes lines to prefix_0, prefix_1, …, sizes[d] lines to day
// d.
type dayWriter struct {
	prefix string
	sizes  []int
	day    int
	left   int // lines still due to the open day
	f      *os.File
}

// next closes the open day file and creates the next, if any.
func (w *dayWriter) next() error {
	if w.f != nil {
		if err := w.f.Close(); err != nil {
			return err
		}
		w.f = nil
	}
	w.day++
	if w.day >= len(w.sizes) {
		return nil
	}
	f, err := os.Create(w.prefix + "_" + strconv.Itoa(w.day))
	w.f, w.left = f, w.sizes[w.day]
	return err
}

func (w *dayWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		for w.day < 0 || w.left == 0 && w.day < len(w.sizes) {
			if err := w.next(); err != nil {
				return n, err
			}
		}
		if w.f == nil {
			return n, fmt.Errorf("criteo: planted: more lines than the days hold")
		}
		k := len(b)
		for i, c := range b {
			if c == '\n' {
				if w.left--; w.left == 0 {
					k = i + 1
					break
				}
			}
		}
		m, err := w.f.Write(b[:k])
		n += m
		if err != nil {
			return n, err
		}
		b = b[k:]
	}
	return n, nil
}
