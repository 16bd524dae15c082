package criteo_test

import (
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/datasets/criteo"
)

var traceFiles = filepath.Join("testdata", "dist_emb_j.log")

func readTestTraces(t *testing.T) []*criteo.Trace {
	t.Helper()
	trs, err := criteo.ReadTraceFiles(traceFiles, 2)
	if err != nil {
		t.Fatal(err)
	}
	return trs
}

func TestReadTrace(t *testing.T) {
	trs := readTestTraces(t)
	want := &criteo.Trace{Unique: []int64{7, 3, 9, 0, 4, 8, 1, 6, 2, 5}, Distances: []int{0, 1, 2, 3, 5},
		CDF: []float64{0.2, 0.5, 0.7, 0.85, 1}}
	if !reflect.DeepEqual(trs[0], want) {
		t.Errorf("dist_emb_0.log: %+v, want %+v", trs[0], want)
	}
	if got := criteo.TraceFile("in/put_j/dist_emb_j.log", 12); got != "in/put_j/dist_emb_12.log" {
		t.Errorf("TraceFile = %q", got)
	}
	if _, err := criteo.ReadTraceFiles(traceFiles, 3); err == nil || !strings.Contains(err.Error(), "dist_emb_2.log") {
		t.Errorf("a third table's missing file: %v", err)
	}
	for _, c := range []struct{ in, want string }{
		{"1, 2\n0, 1\n", "2 lines"},
		{"1, x\n0, 1\n0.5, 1\n", "line 1, number 2: unique access \"x\""},
		{"1, 2\n0, 1, 1\n0.5, 0.7, 1\n", "line 2, number 3: stack distance 1 does not follow 1"},
		{"1, 2\n0, -1\n0.5, 1\n", "line 2, number 2: stack distance -1 is negative"},
		{"1, 2\n0, 3\n0.5, 1\n", "line 2, number 2: stack distance 3 is deeper than the 2 unique accesses"},
		{"1, 2\n0, 1\n0.5\n", "line 3: 1 cumulative probabilities for 2 stack distances"},
		{"1, 2\n0, 1\n0.5, 0.4\n", "line 3, number 2: cumulative probability 0.4 is below"},
		{"1, 2\n0, 1\n0.5, 0.9\n", "line 3, number 2: the distribution ends at 0.9"},
		{"1, 2\n0, 1\n1.5, 1\n", "line 3, number 1: cumulative probability 1.5 is outside"},
		{"1, 2\n0, , 1\n0.5, 1\n", "line 2, number 2: empty"},
		{"1, 2\n0, 1\n0.5, 1\n4\n", "line 4: a trace has three lines"},
	} {
		if _, err := criteo.ReadTrace(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadTrace(%q): %v, want an error with %q", c.in, err, c.want)
		}
	}
	if _, err := criteo.ReadTrace(strings.NewReader("1,2\n0,1\n0.5,0.9999999999\n\n")); err != nil {
		t.Errorf("commas without spaces, a sum short of 1 by rounding, a blank last line: %v", err)
	}
}

// TestTraceDistances draws a long trace from dist_emb_0.log and checks
// that its profiled stack distances follow the file's distribution (a χ²
// test). Once all 10 rows have been seen a first access takes the least
// recent row, at depth 10 in the profile, deeper than any distance the
// file has, so depths 0 and 10 together are the first accesses.
func TestTraceDistances(t *testing.T) {
	tr := readTestTraces(t)[0]
	const n = 200_000
	acc := tr.Generate(rand.New(rand.NewPCG(1, 2)), n, false, nil)
	counts := map[int]int{}
	for _, d := range criteo.StackDistances(acc) {
		if d == len(tr.Unique) {
			d = 0
		}
		counts[d]++
	}
	chi2, prev := 0.0, 0.0
	for k, d := range tr.Distances {
		want := (tr.CDF[k] - prev) * n
		prev = tr.CDF[k]
		chi2 += (float64(counts[d]) - want) * (float64(counts[d]) - want) / want
		delete(counts, d)
	}
	if len(counts) > 0 {
		t.Errorf("distances outside the file's: %v", counts)
	}
	t.Logf("χ² = %.2f", chi2)
	if chi2 > 18.5 { // χ²(4) at p = 0.001
		t.Errorf("χ² = %.1f over %d distances: the profile does not follow the file's distribution", chi2, len(tr.Distances))
	}
	if !slices.Equal(acc[:1], tr.Unique[:1]) {
		t.Errorf("first access %d, want the first unique access %d", acc[0], tr.Unique[0])
	}
	if again := tr.Generate(rand.New(rand.NewPCG(1, 2)), n, false, nil); !slices.Equal(acc, again) {
		t.Error("the same seed gives another trace")
	}
}

// TestTracePadding checks --data-trace-enable-padding: once as many rows
// have been seen as the largest distance, no first access is drawn again,
// so a long trace touches exactly that many rows, the first ones of the
// unique accesses; without padding it touches them all.
func TestTracePadding(t *testing.T) {
	tr := readTestTraces(t)[0]
	distinct := func(padding bool) []int64 {
		acc := tr.Generate(rand.New(rand.NewPCG(3, 4)), 5000, padding, nil)
		slices.Sort(acc)
		return slices.Compact(acc)
	}
	want := slices.Sorted(slices.Values(tr.Unique[:5]))
	if got := distinct(true); !slices.Equal(got, want) {
		t.Errorf("with padding the trace touches %v, want %v", got, want)
	}
	if got := distinct(false); len(got) != len(tr.Unique) {
		t.Errorf("without padding the trace touches %v, want all %d rows", got, len(tr.Unique))
	}
}

// TestSyntheticBatches checks Random with traces: bags sorted, distinct,
// in range (table 1's 20 trace rows folded into 7), every bag holding the
// first unique access (each bag's trace starts afresh), bag sizes per
// --num-indices-per-lookup[-fixed], and determinism.
func TestSyntheticBatches(t *testing.T) {
	trs := readTestTraces(t)
	cfg := criteo.RandomConfig{DenseFeatures: 3, TableSizes: []int{10, 7}, DataSize: 50, MiniBatchSize: 16,
		IndicesPerLookup: 4, Seed: 9, Traces: trs}
	var total [2]int // indices drawn without and with fixed bag sizes
	for f, fixed := range []bool{false, true} {
		cfg.IndicesPerLookupFixed = fixed
		r, err := criteo.NewRandom(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for j := range r.NumBatches() {
			b, err := r.Batch(j)
			if err != nil {
				t.Fatal(err)
			}
			for tab, rows := range cfg.TableSizes {
				ind, off := b.Indices[tab], append(slices.Clone(b.Offsets[tab]), int64(len(b.Indices[tab])))
				for k := range b.Size() {
					bag := ind[off[k]:off[k+1]]
					first := (trs[tab].Unique[0]%int64(rows) + int64(rows)) % int64(rows)
					if len(bag) == 0 || len(bag) > 4 || !slices.IsSorted(bag) || len(slices.Compact(slices.Clone(bag))) != len(bag) ||
						bag[0] < 0 || bag[len(bag)-1] >= int64(rows) || !slices.Contains(bag, first) {
						t.Fatalf("fixed=%v batch %d table %d bag %d = %v: want 1..4 sorted distinct rows < %d holding %d", fixed, j, tab, k, bag, rows, first)
					}
					total[f] += len(bag)
				}
			}
			again, _ := r.Batch(j)
			if !reflect.DeepEqual(b, again) {
				t.Fatalf("batch %d differs when drawn again", j)
			}
		}
	}
	// Four accesses per bag merge to fewer (a trace repeats rows), but
	// more than bags of 1 to 4 accesses do.
	if total[1] <= total[0] {
		t.Errorf("%d indices with --num-indices-per-lookup-fixed, %d without: want more", total[1], total[0])
	}
	cfg.Traces = trs[:1]
	if _, err := criteo.NewRandom(cfg); err == nil || !strings.Contains(err.Error(), "1 traces for 2 tables") {
		t.Errorf("one trace for two tables: %v", err)
	}
	if !trs[0].Fits(10) || trs[1].Fits(7) {
		t.Error("Fits")
	}
}
