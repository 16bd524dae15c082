package criteo_test

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/kilnml/kiln/datasets/criteo"
)

func newRandom(t *testing.T, cfg criteo.RandomConfig) *criteo.Random {
	t.Helper()
	r, err := criteo.NewRandom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkBags checks one table's bags: n starts from 0, non-decreasing,
// each bag sorted, distinct and within the table; it returns the sizes.
func checkBags(t *testing.T, idx, off []int64, n, rows int) []int {
	t.Helper()
	if len(off) != n || (n > 0 && off[0] != 0) {
		t.Fatalf("%d offsets starting %v, want %d starting 0", len(off), off[:min(1, len(off))], n)
	}
	sizes := make([]int, n)
	for k := range n {
		end := int64(len(idx))
		if k+1 < n {
			end = off[k+1]
		}
		if end < off[k] {
			t.Fatalf("offsets %v decrease", off)
		}
		bag := idx[off[k]:end]
		for i, x := range bag {
			if x < 0 || x >= int64(rows) || (i > 0 && x <= bag[i-1]) {
				t.Fatalf("bag %d = %v: want sorted distinct ids in [0, %d)", k, bag, rows)
			}
		}
		sizes[k] = len(bag)
	}
	return sizes
}

func TestRandomShapes(t *testing.T) {
	tests := []struct {
		name     string
		cfg      criteo.RandomConfig
		nbatches int
		sizes    []int // batch sizes, first and last
	}{
		{"data size", criteo.RandomConfig{DenseFeatures: 4, TableSizes: []int{10, 1, 1000}, DataSize: 10,
			MiniBatchSize: 4, IndicesPerLookup: 3}, 3, []int{4, 2}},
		{"exact", criteo.RandomConfig{DenseFeatures: 13, TableSizes: []int{5}, DataSize: 8,
			MiniBatchSize: 4, IndicesPerLookup: 1, IndicesPerLookupFixed: true}, 2, []int{4, 4}},
		{"num batches overrides", criteo.RandomConfig{DenseFeatures: 2, TableSizes: []int{7, 7}, DataSize: 1,
			NumBatches: 3, MiniBatchSize: 5, IndicesPerLookup: 10, IndicesPerLookupFixed: true}, 3, []int{5, 5}},
		{"dlrm defaults", criteo.RandomConfig{DenseFeatures: 4, TableSizes: []int{4, 3, 2}, DataSize: 1,
			MiniBatchSize: 1, IndicesPerLookup: 10}, 1, []int{1, 1}},
		{"empty", criteo.RandomConfig{DenseFeatures: 3, TableSizes: []int{3}, MiniBatchSize: 2, IndicesPerLookup: 2}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRandom(t, tc.cfg)
			if r.NumBatches() != tc.nbatches {
				t.Fatalf("%d batches, want %d", r.NumBatches(), tc.nbatches)
			}
			j := 0
			for b, err := range r.Batches() {
				if err != nil {
					t.Fatal(err)
				}
				n := b.Size()
				if (j == 0 && n != tc.sizes[0]) || (j == tc.nbatches-1 && n != tc.sizes[1]) {
					t.Errorf("batch %d has %d samples, want first/last %v", j, n, tc.sizes)
				}
				if len(b.Dense) != n*tc.cfg.DenseFeatures || len(b.Indices) != len(tc.cfg.TableSizes) || len(b.Offsets) != len(b.Indices) {
					t.Fatalf("batch %d: dense %d, %d index and %d offset lists", j, len(b.Dense), len(b.Indices), len(b.Offsets))
				}
				for tb, rows := range tc.cfg.TableSizes {
					for _, s := range checkBags(t, b.Indices[tb], b.Offsets[tb], n, rows) {
						if s < 1 || s > tc.cfg.IndicesPerLookup || (tc.cfg.IndicesPerLookupFixed && s != min(rows, tc.cfg.IndicesPerLookup) && rows > 1000) {
							t.Errorf("table %d: bag of %d", tb, s)
						}
					}
				}
				again, _ := r.Batch(j)
				if !reflect.DeepEqual(again, b) {
					t.Errorf("batch %d differs when asked again", j)
				}
				j++
			}
			if j != tc.nbatches {
				t.Errorf("%d batches yielded", j)
			}
		})
	}
	r := newRandom(t, tests[2].cfg)
	if c := r.Config(); c.DataSize != 15 {
		t.Errorf("DataSize %d with NumBatches 3 of 5, want 15", c.DataSize)
	}
	other := tests[0].cfg
	other.Seed = 1
	a, _ := newRandom(t, tests[0].cfg).Batch(0)
	b, _ := newRandom(t, other).Batch(0)
	if reflect.DeepEqual(a, b) {
		t.Error("seeds 0 and 1 give the same batch")
	}
}

// within fails unless count is within 5 standard deviations of n·p.
func within(t *testing.T, what string, count, n int, p float64) {
	t.Helper()
	want, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
	if math.Abs(float64(count)-want) > 5*sd+1e-9 {
		t.Errorf("%s: %d of %d, want %.1f±%.1f", what, count, n, want, 5*sd)
	}
}

func TestRandomDistributions(t *testing.T) {
	// Bag sizes: round(max(1, u·m)) with m = min(rows, K) = 10 is 1 with
	// probability 1.5/m, 2..m−1 with 1/m each, m with 0.5/m. Rows are
	// many, so duplicates almost never merge.
	const K, n = 10, 20000
	r := newRandom(t, criteo.RandomConfig{DenseFeatures: 13, TableSizes: []int{1 << 30, 5},
		DataSize: n, MiniBatchSize: n, IndicesPerLookup: K, Seed: 3})
	b, err := r.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	hist := make([]int, K+1)
	for _, s := range checkBags(t, b.Indices[0], b.Offsets[0], n, 1<<30) {
		hist[s]++
	}
	for s := 1; s <= K; s++ {
		p := 1.0 / K
		switch s {
		case 1:
			p = 1.5 / K
		case K:
			p = 0.5 / K
		}
		within(t, "bags of size "+strconv.Itoa(s), hist[s], n, p)
	}
	sizes := checkBags(t, b.Indices[1], b.Offsets[1], n, 5)
	if slices.Max(sizes) > 5 {
		t.Errorf("a bag of %d from 5 rows", slices.Max(sizes))
	}
	// Dense and targets: uniform in [0, 1).
	for name, v := range map[string][]float32{"dense": b.Dense, "targets": b.Targets} {
		sum := 0.0
		for _, x := range v {
			if x < 0 || x >= 1 {
				t.Fatalf("%s value %v outside [0, 1)", name, x)
			}
			sum += float64(x)
		}
		if m, sd := sum/float64(len(v)), math.Sqrt(1/12.0/float64(len(v))); math.Abs(m-0.5) > 5*sd {
			t.Errorf("%s mean %.4f, want 0.5±%.4f", name, m, 5*sd)
		}
	}

	// One index per bag (fixed, K = 1) leaves the id law unmerged.
	r = newRandom(t, criteo.RandomConfig{TableSizes: []int{5}, DataSize: n, MiniBatchSize: 1000,
		IndicesPerLookup: 1, IndicesPerLookupFixed: true, RoundTargets: true, Seed: 4})
	// round(u·4): rows 0 and 4 half as likely as the others.
	ids := make([]int, 5)
	ones := 0
	for b, err := range r.Batches() {
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range b.Indices[0] {
			ids[x]++
		}
		for _, y := range b.Targets {
			if y != 0 && y != 1 {
				t.Fatalf("rounded target %v", y)
			}
			ones += int(y)
		}
		if len(b.Dense) != 0 {
			t.Fatalf("dense %d values with DenseFeatures 0", len(b.Dense))
		}
	}
	for x, p := range []float64{0.125, 0.25, 0.25, 0.25, 0.125} {
		within(t, "id "+strconv.Itoa(x), ids[x], n, p)
	}
	within(t, "rounded targets of 1", ones, n, 0.5)
}

func TestRandomErrors(t *testing.T) {
	ok := criteo.RandomConfig{DenseFeatures: 1, TableSizes: []int{3}, DataSize: 4, MiniBatchSize: 2, IndicesPerLookup: 1}
	tests := []struct {
		modify func(c *criteo.RandomConfig)
		msg    string
	}{
		{func(c *criteo.RandomConfig) { c.DenseFeatures = -1 }, "DenseFeatures is -1, want >= 0"},
		{func(c *criteo.RandomConfig) { c.MiniBatchSize = 0 }, "MiniBatchSize is 0, want >= 1"},
		{func(c *criteo.RandomConfig) { c.DataSize = -2 }, "DataSize is -2, want >= 0"},
		{func(c *criteo.RandomConfig) { c.NumBatches = -1 }, "NumBatches is -1, want >= 0"},
		{func(c *criteo.RandomConfig) { c.IndicesPerLookup = 0 }, "IndicesPerLookup is 0, want >= 1"},
		{func(c *criteo.RandomConfig) { c.TableSizes = []int{3, 0} }, "table 1 has 0 rows, want >= 1"},
	}
	for _, tc := range tests {
		c := ok
		tc.modify(&c)
		if _, err := criteo.NewRandom(c); err == nil || err.Error() != "criteo: random: "+tc.msg {
			t.Errorf("%v, want %q", err, tc.msg)
		}
	}
	r := newRandom(t, ok)
	for _, j := range []int{-1, 2} {
		if _, err := r.Batch(j); err == nil {
			t.Errorf("batch %d of 2: no error", j)
		}
	}
}
