package criteo_test

import (
	"bytes"
	"flag"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln/datasets/criteo"
	"github.com/kilnml/kiln/nn/metrics"
)

func newPlanted(t testing.TB, cfg criteo.PlantedConfig) *criteo.Planted {
	t.Helper()
	p, err := criteo.NewPlanted(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func allSamples(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func tsv(t testing.TB, p *criteo.Planted) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := p.WriteTSV(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The TSV read back by Scan gives the in-memory batches, up to Scan's
// first-appearance renumbering of each table's rows.
func TestPlantedRoundTrip(t *testing.T) {
	cfg := criteo.DefaultPlanted(3000, 7)
	cfg.Tables = 5
	cfg.Rows = []int{1, 10, 300, 5000, 40}
	cfg.Interaction = [2]int{2, 4}
	p := newPlanted(t, cfg)
	data := tsv(t, p)
	ix, err := criteo.Scan(bytes.NewReader(data), criteo.ScanOptions{File: "planted.txt"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if ix.Len() != cfg.Samples || ix.Counts() != st.Counts {
		t.Errorf("Scan: %d lines, counts %v; Stats: %d, %v", ix.Len(), ix.Counts(), cfg.Samples, st.Counts)
	}
	if st.Counts[0] != 1 || st.Counts[25] != 1 || st.Counts[3] < 500 {
		t.Errorf("counts %v: want 1 for the 1-row and empty tables, hundreds for 5000 rows", st.Counts)
	}
	if st.Missing == 0 || st.Negative == 0 || !bytes.Contains(data, []byte("\t\t")) || !bytes.Contains(data, []byte("\t-")) {
		t.Errorf("%d missing and %d negative integer fields; the parser's rules go unexercised", st.Missing, st.Negative)
	}
	lines := allSamples(cfg.Samples)
	slices.Reverse(lines[100:900]) // any order
	want, err := p.Batch(lines)
	if err != nil {
		t.Fatal(err)
	}
	relabel := make([]map[int64]int64, criteo.NumSparse) // file id -> planted id
	for i := range relabel {
		relabel[i] = map[int64]int64{}
	}
	positives, k := 0, 0
	for b, err := range ix.Batches(bytes.NewReader(data), lines, 512) {
		if err != nil {
			t.Fatal(err)
		}
		for j := range b.Size() {
			if b.Labels[j] != want.Labels[k] || !slices.Equal(b.Dense[13*j:13*j+13], want.Dense[13*k:13*k+13]) {
				t.Fatalf("sample %d: file %v %v, memory %v %v", lines[k], b.Labels[j], b.Dense[13*j:13*j+13],
					want.Labels[k], want.Dense[13*k:13*k+13])
			}
			positives += int(b.Labels[j])
			for tb := range criteo.NumSparse {
				got := b.Indices[tb][j]
				if tb >= cfg.Tables {
					if got != 0 || want.Indices[tb] != nil {
						t.Fatalf("table %d beyond Tables: file id %d, memory %v", tb, got, want.Indices[tb])
					}
					continue
				}
				mem := want.Indices[tb][k]
				if prev, ok := relabel[tb][got]; ok && prev != mem || mem < 0 || mem >= int64(cfg.Rows[tb]) {
					t.Fatalf("sample %d table %d: file id %d is planted row %d and %d", lines[k], tb, got, prev, mem)
				}
				relabel[tb][got] = mem
			}
			k++
		}
	}
	if k != cfg.Samples || positives != st.Positives {
		t.Errorf("%d samples, %d positives; Stats %d", k, positives, st.Positives)
	}
	// The relabelling is one to one: distinct file ids are distinct rows.
	for tb := range cfg.Tables {
		rows := map[int64]bool{}
		for _, r := range relabel[tb] {
			rows[r] = true
		}
		if len(rows) != len(relabel[tb]) || len(rows) != st.Counts[tb] {
			t.Errorf("table %d: %d file ids map to %d rows, %d counted", tb, len(relabel[tb]), len(rows), st.Counts[tb])
		}
	}
}

func TestPlantedDeterministic(t *testing.T) {
	cfg := criteo.DefaultPlanted(500, 3)
	a, b := tsv(t, newPlanted(t, cfg)), tsv(t, newPlanted(t, cfg))
	if !bytes.Equal(a, b) {
		t.Fatal("same config, different TSV")
	}
	cfg.Seed = 4
	if bytes.Equal(a, tsv(t, newPlanted(t, cfg))) {
		t.Fatal("seeds 3 and 4 give the same TSV")
	}
	// A sample does not depend on the batch it is asked for in.
	p := newPlanted(t, criteo.DefaultPlanted(500, 3))
	all, _ := p.Batch(allSamples(500))
	var got []float32
	for b, err := range p.Batches([]int{499, 7, 250, 7}, 3) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Dense...)
		for tb := range 8 {
			for j, i := range b.Lines {
				if b.Indices[tb][j] != all.Indices[tb][i] || b.Labels[j] != all.Labels[i] {
					t.Fatalf("sample %d differs between batches", i)
				}
			}
		}
	}
	for j, i := range []int{499, 7, 250, 7} {
		if !slices.Equal(got[13*j:13*j+13], all.Dense[13*i:13*i+13]) {
			t.Errorf("sample %d: dense differs between batches", i)
		}
	}
}

func TestPlantedZipf(t *testing.T) {
	const n, rows = 40000, 50
	for _, s := range []float64{0, 0.8, 1.2} {
		cfg := criteo.PlantedConfig{Samples: n, Seed: 1, Tables: 1, RowsPerTable: rows, Zipf: s}
		p := newPlanted(t, cfg)
		b, _ := p.Batch(allSamples(n))
		freq := make([]int, rows)
		for _, id := range b.Indices[0] {
			freq[id]++
		}
		h := 0.0
		for k := range rows {
			h += math.Pow(float64(k+1), -s)
		}
		for _, r := range []int{0, 1, 9, rows - 1} {
			want := n * math.Pow(float64(r+1), -s) / h
			if sd := math.Sqrt(want); math.Abs(float64(freq[r])-want) > 5*sd {
				t.Errorf("s=%v: row %d drawn %d times, want %.0f±%.0f", s, r, freq[r], want, 5*sd)
			}
		}
	}
}

func TestPlantedSignal(t *testing.T) {
	const n = 20000
	tests := []struct {
		name     string
		cfg      criteo.PlantedConfig
		min, max float64 // oracle AUC bounds
	}{
		{"default", criteo.DefaultPlanted(n, 11), 0.75, 0.95},
		{"no signal", criteo.PlantedConfig{Samples: n, Seed: 11, Tables: 3, RowsPerTable: 100, Bias: 0.3}, 0.48, 0.52},
		{"interaction only", criteo.PlantedConfig{Samples: n, Seed: 11, Tables: 2, RowsPerTable: 30, Zipf: 0.5,
			InteractionScale: 2}, 0.7, 0.95},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanted(t, tc.cfg)
			st, err := p.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if st.OracleAUC < tc.min || st.OracleAUC > tc.max {
				t.Errorf("oracle AUC %.4f outside [%v, %v]", st.OracleAUC, tc.min, tc.max)
			}
			// The labels are Bernoulli(Prob): positives match the sum of
			// probabilities, and Stats agrees with nn/metrics.
			probs := make([]float32, n)
			sum, vr := 0.0, 0.0
			for i := range probs {
				q := p.Prob(i)
				probs[i] = float32(q)
				sum += q
				vr += q * (1 - q)
			}
			if d := float64(st.Positives) - sum; math.Abs(d) > 5*math.Sqrt(vr) {
				t.Errorf("%d positives, expected %.0f±%.0f", st.Positives, sum, 5*math.Sqrt(vr))
			}
			b, _ := p.Batch(allSamples(n))
			auc, err := metrics.AUC(probs, b.Labels)
			if err != nil || auc != st.OracleAUC {
				t.Errorf("metrics.AUC %v %v, Stats %v", auc, err, st.OracleAUC)
			}
			loss, err := metrics.LogLoss(probs, b.Labels)
			if err != nil || loss != st.OracleLogLoss {
				t.Errorf("metrics.LogLoss %v %v, Stats %v", loss, err, st.OracleLogLoss)
			}
			t.Logf("%s: oracle AUC %.4f, log loss %.4f, %.1f%% clicks", tc.name, st.OracleAUC, st.OracleLogLoss,
				100*float64(st.Positives)/n)
		})
	}
}

func TestPlantedConfigErrors(t *testing.T) {
	ok := criteo.DefaultPlanted(10, 1)
	tests := []struct {
		name   string
		modify func(c *criteo.PlantedConfig)
		msg    string
	}{
		{"negative samples", func(c *criteo.PlantedConfig) { c.Samples = -1 }, "Samples is -1, want >= 0"},
		{"no tables", func(c *criteo.PlantedConfig) { c.Tables = 0 }, "Tables is 0, want 1 to 26"},
		{"27 tables", func(c *criteo.PlantedConfig) { c.Tables = 27 }, "Tables is 27, want 1 to 26"},
		{"rows length", func(c *criteo.PlantedConfig) { c.Rows = []int{5, 5} }, "Rows has 2 entries for 8 tables"},
		{"zero rows", func(c *criteo.PlantedConfig) { c.Rows = []int{5, 5, 5, 0, 5, 5, 5, 5} }, "table 3 has 0 rows, want 1 to 2147483647"},
		{"no rows per table", func(c *criteo.PlantedConfig) { c.RowsPerTable = 0 }, "table 0 has 0 rows, want 1 to 2147483647"},
		{"zipf", func(c *criteo.PlantedConfig) { c.Zipf = -1 }, "Zipf exponent is -1, want a finite value >= 0"},
		{"zipf NaN", func(c *criteo.PlantedConfig) { c.Zipf = math.NaN() }, "Zipf exponent is NaN, want a finite value >= 0"},
		{"rates", func(c *criteo.PlantedConfig) { c.MissingRate, c.NegativeRate = 0.6, 0.5 },
			"MissingRate 0.6 and NegativeRate 0.5 must be >= 0 and sum to at most 1"},
		{"bias", func(c *criteo.PlantedConfig) { c.Bias = math.Inf(1) }, "Bias is +Inf, want a finite value"},
		{"interaction same", func(c *criteo.PlantedConfig) { c.Interaction = [2]int{3, 3} },
			"Interaction tables 3 and 3: want two different tables below Tables = 8"},
		{"interaction range", func(c *criteo.PlantedConfig) { c.Interaction = [2]int{0, 8} },
			"Interaction tables 0 and 8: want two different tables below Tables = 8"},
		{"interaction one table", func(c *criteo.PlantedConfig) { c.Tables, c.Interaction = 1, [2]int{} },
			"Interaction tables 0 and 1: want two different tables below Tables = 1"},
	}
	for _, tc := range tests {
		c := ok
		tc.modify(&c)
		_, err := criteo.NewPlanted(c)
		if want := "criteo: planted: " + tc.msg; err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", tc.name, err, want)
		}
	}
	// No interaction, one table: fine.
	c := ok
	c.Tables, c.InteractionScale = 1, 0
	if _, err := criteo.NewPlanted(c); err != nil {
		t.Error(err)
	}
	p := newPlanted(t, ok)
	if _, err := p.Batch([]int{10}); err == nil || !strings.Contains(err.Error(), "sample 10 out of range [0, 10)") {
		t.Errorf("Batch past the end: %v", err)
	}
	for _, err := range p.Batches([]int{0}, 0) {
		if err == nil {
			t.Error("batch size 0: no error")
		}
	}
}

// 50k samples, in memory and as TSV, take well under a second.
func TestPlantedSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	cfg := criteo.DefaultPlanted(50000, 5)
	cfg.Tables, cfg.RowsPerTable = 26, 100000
	start := time.Now()
	p := newPlanted(t, cfg)
	for _, err := range p.Batches(allSamples(cfg.Samples), 2048) {
		if err != nil {
			t.Fatal(err)
		}
	}
	mem := time.Since(start)
	start = time.Now()
	var b bytes.Buffer
	if err := p.WriteTSV(&b); err != nil {
		t.Fatal(err)
	}
	file := time.Since(start)
	t.Logf("26 tables × 100k rows, 50k samples: setup + batches %v, TSV %v (%d bytes)", mem, file, b.Len())
	// Loose bounds: the machine may be shared; the point is no blow-up.
	if mem > 3*time.Second || file > 3*time.Second {
		t.Errorf("too slow: batches %v, TSV %v", mem, file)
	}
}

func BenchmarkPlantedBatches(b *testing.B) {
	cfg := criteo.DefaultPlanted(50000, 5)
	cfg.Tables = 26
	p := newPlanted(b, cfg)
	lines := allSamples(cfg.Samples)
	for b.Loop() {
		for _, err := range p.Batches(lines, 2048) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/planted.txt from the planted generator")

// plantedSampleConfig made testdata/planted.txt: 20 of the 26 categorical
// columns filled, table sizes from 1 to 5000, missing and negative
// integer fields.
func plantedSampleConfig() criteo.PlantedConfig {
	cfg := criteo.DefaultPlanted(200, 19)
	cfg.Tables = 20
	cfg.Rows = []int{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181, 100, 10}
	cfg.Zipf = 1.1
	cfg.MissingRate, cfg.NegativeRate = 0.1, 0.05
	return cfg
}

// testdata/planted.txt is the generator's output, and Scan reads it with
// the counts the generator reports. Regenerate it after a deliberate
// change to the generator with go test -run TestPlantedSampleFile -update.
func TestPlantedSampleFile(t *testing.T) {
	const path = "testdata/planted.txt"
	p := newPlanted(t, plantedSampleConfig())
	want := tsv(t, p)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the generator's output: the generator changed (rerun with -update if meant)", path)
	}
	ix, err := criteo.Scan(bytes.NewReader(got), criteo.ScanOptions{File: "planted.txt"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for i := range ix.Len() {
		pos += mustLabel(t, ix, i)
	}
	if n, _ := ix.BadLines(); ix.Len() != 200 || n != 0 || ix.Counts() != st.Counts || pos != st.Positives {
		t.Errorf("Scan: %d lines, %d bad, %d positives, counts %v;\ngenerator: 200, 0, %d, %v",
			ix.Len(), n, pos, ix.Counts(), st.Positives, st.Counts)
	}
	if st.Missing < 100 || st.Negative < 50 || !bytes.Contains(got, []byte("\t-")) || !bytes.Contains(got, []byte("\t\t")) {
		t.Errorf("%d missing, %d negative integer fields: too few to exercise the parser", st.Missing, st.Negative)
	}
	t.Logf("planted.txt: %d positives, %d missing, %d negative, counts %v, oracle AUC %.3f",
		st.Positives, st.Missing, st.Negative, st.Counts, st.OracleAUC)
}

// A logistic regression on the dense inputs and one weight per row, fitted
// by SGD, learns much of the planted signal, and falls further short of
// the oracle when the logit holds the pairwise term, which no additive
// model can represent: the signal is in the features a model sees, and
// the interaction is needed to reach the ceiling.
func TestPlantedLearnable(t *testing.T) {
	var gap [2]float64
	for k, interaction := range []float64{0, 1} {
		cfg := criteo.DefaultPlanted(30000, 21)
		cfg.InteractionScale = interaction
		auc, best := fitLogistic(t, newPlanted(t, cfg))
		t.Logf("interaction %v: held-out AUC of logistic regression %.4f, oracle %.4f", interaction, auc, best)
		if auc < 0.75 {
			t.Errorf("interaction %v: logistic regression AUC %.4f, want above 0.75", interaction, auc)
		}
		gap[k] = best - auc
	}
	if gap[1] < gap[0]+0.02 {
		t.Errorf("the regression is %.4f short of the oracle with the interaction, %.4f without: want 0.02 more",
			gap[1], gap[0])
	}
}

// fitLogistic trains on the training days and returns the held-out AUC
// of the fit and of the true probabilities.
func fitLogistic(t *testing.T, p *criteo.Planted) (auc, oracleAUC float64) {
	split := criteo.KaggleSplit(p.Len())
	rangeOf := func(r criteo.Range) []int { return allSamples(r.End)[r.Start:] }
	train, _ := p.Batch(rangeOf(split.Train))
	test, _ := p.Batch(append(rangeOf(split.Test), rangeOf(split.Val)...))
	rows := p.Rows()
	emb := make([][]float64, len(rows))
	for tb, n := range rows {
		emb[tb] = make([]float64, n)
	}
	var w [criteo.NumDense]float64
	bias := 0.0
	logit := func(b *criteo.Batch, i int) float64 {
		z := bias
		for j := range w {
			z += w[j] * float64(b.Dense[13*i+j])
		}
		for tb := range rows {
			z += emb[tb][b.Indices[tb][i]]
		}
		return z
	}
	const lr = 0.05
	for range 4 {
		for i := range train.Size() {
			g := 1/(1+math.Exp(-logit(train, i))) - float64(train.Labels[i])
			bias -= lr * g
			for j := range w {
				w[j] -= lr * g * float64(train.Dense[13*i+j])
			}
			for tb := range rows {
				emb[tb][train.Indices[tb][i]] -= lr * g
			}
		}
	}
	scores, oracle := make([]float32, test.Size()), make([]float32, test.Size())
	for i := range scores {
		scores[i] = float32(logit(test, i))
		oracle[i] = float32(p.Prob(test.Lines[i]))
	}
	auc, err := metrics.AUC(scores, test.Labels)
	if err != nil {
		t.Fatal(err)
	}
	oracleAUC, err = metrics.AUC(oracle, test.Labels)
	if err != nil {
		t.Fatal(err)
	}
	return auc, oracleAUC
}
