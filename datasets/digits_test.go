package datasets_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/datasets"
)

func TestDigits(t *testing.T) {
	set := datasets.Digits()
	if set.Len() != 1797 || set.Classes != 10 {
		t.Fatalf("%d examples in %d classes, want 1797 in 10", set.Len(), set.Classes)
	}
	counts := make([]int, 10)
	for _, l := range set.Labels {
		counts[l]++
	}
	// The UCI test part has 174 to 183 examples of each digit.
	for d, c := range counts {
		if c < 174 || c > 183 {
			t.Errorf("%d examples of digit %d", c, d)
		}
	}
	ex, err := set.Get(0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ex.Input.Shape(), []int{1, 8, 8}) || ex.Label != 0 {
		t.Fatalf("example 0: shape %v label %d", ex.Input.Shape(), ex.Label)
	}
	// The first row of the file starts 0,0,5,13,9,1.
	if got := ex.Input.Values()[:6]; !slices.Equal(got, []float64{0, 0, 5.0 / 16, 13.0 / 16, 9.0 / 16, 1.0 / 16}) {
		t.Errorf("first pixels %v", got)
	}
	if lo, hi := slices.Min(set.Pixels), slices.Max(set.Pixels); lo != 0 || hi != 16 {
		t.Errorf("pixels in [%d, %d], want [0, 16]", lo, hi)
	}
}

// nearestCentroid fits one mean image per class on train and returns its
// accuracy on test: a check that a data set carries its labels' signal.
func nearestCentroid(t *testing.T, train, test datasets.Dataset, classes int) float64 {
	t.Helper()
	var means [][]float64
	counts := make([]int, classes)
	for i := range train.Len() {
		ex, err := train.Get(i)
		if err != nil {
			t.Fatal(err)
		}
		v := ex.Input.Values()
		if means == nil {
			means = make([][]float64, classes)
			for c := range means {
				means[c] = make([]float64, len(v))
			}
		}
		for k := range v {
			means[ex.Label][k] += v[k]
		}
		counts[ex.Label]++
	}
	for c := range means {
		for k := range means[c] {
			means[c][k] /= float64(max(counts[c], 1))
		}
	}
	correct := 0
	for i := range test.Len() {
		ex, err := test.Get(i)
		if err != nil {
			t.Fatal(err)
		}
		v := ex.Input.Values()
		best, bestD := -1, math.Inf(1)
		for c, m := range means {
			d := 0.0
			for k := range v {
				d += (v[k] - m[k]) * (v[k] - m[k])
			}
			if d < bestD {
				best, bestD = c, d
			}
		}
		if int64(best) == ex.Label {
			correct++
		}
	}
	return float64(correct) / float64(test.Len())
}

func TestDigitsLearnable(t *testing.T) {
	train, test := datasets.Split(datasets.Digits(), 0.25, 1)
	if train.Len() != 1348 || test.Len() != 449 {
		t.Fatalf("split %d/%d, want 1348/449", train.Len(), test.Len())
	}
	if acc := nearestCentroid(t, train, test, 10); acc < 0.85 {
		t.Errorf("nearest-centroid accuracy %.3f, want at least 0.85", acc)
	}
}

func TestSynthetic(t *testing.T) {
	cfg := datasets.SyntheticConfig{N: 400, Classes: 5, Channels: 3, Height: 8, Width: 8, Seed: 3, Noise: 0.5}
	ds, err := datasets.Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	train, test := datasets.Split(ds, 0.5, 2)
	if acc := nearestCentroid(t, train, test, cfg.Classes); acc < 0.95 {
		t.Errorf("nearest-centroid accuracy %.3f, want at least 0.95", acc)
	}

	// Deterministic per seed and index, whatever else was asked for.
	again, _ := datasets.Synthetic(cfg)
	a, _ := ds.Get(17)
	b, _ := again.Get(17)
	if a.Label != 2 || !slices.Equal(a.Input.Values(), b.Input.Values()) {
		t.Errorf("example 17 differs between equal data sets (label %d)", a.Label)
	}
	cfg.Seed = 4
	other, _ := datasets.Synthetic(cfg)
	c, _ := other.Get(17)
	if slices.Equal(a.Input.Values(), c.Input.Values()) {
		t.Error("seeds 3 and 4 give the same example")
	}
	if _, err := ds.Get(400); err == nil {
		t.Error("Get(N): no error")
	}
}

func TestSyntheticShift(t *testing.T) {
	cfg := datasets.SyntheticConfig{N: 50, Classes: 1, Channels: 1, Height: 16, Width: 16, Seed: 1, Shift: 3}
	ds, _ := datasets.Synthetic(cfg)
	distinct := map[string]bool{}
	for i := range ds.Len() {
		ex, _ := ds.Get(i)
		distinct[fmt.Sprint(ex.Input.Values())] = true
	}
	// Without noise only the shift tells examples apart: 7×7 possibilities.
	if len(distinct) < 10 {
		t.Errorf("%d distinct images among 50 shifted ones", len(distinct))
	}
}

func TestSyntheticLarge(t *testing.T) {
	// Examples are made on demand, so a huge N costs nothing up front.
	ds, err := datasets.Synthetic(datasets.SyntheticConfig{N: 1 << 40, Classes: 1000, Channels: 3, Height: 224, Width: 224, Noise: 1, Shift: 8})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := ds.Get(1<<40 - 1)
	if err != nil {
		t.Fatal(err)
	}
	v := ex.Input.Values()
	mean, sq := 0.0, 0.0
	for _, x := range v {
		mean += x
		sq += x * x
	}
	mean /= float64(len(v))
	// Unit-variance template plus unit-variance noise.
	if std := math.Sqrt(sq/float64(len(v)) - mean*mean); std < 0.8 || std > 2 {
		t.Errorf("pixel standard deviation %.3f, want about 1.4", std)
	}
	if ex.Label != (1<<40-1)%1000 {
		t.Errorf("label %d", ex.Label)
	}
}

func TestSyntheticConfigErrors(t *testing.T) {
	ok := datasets.SyntheticConfig{N: 1, Classes: 2, Channels: 1, Height: 2, Width: 2}
	tests := []struct {
		edit func(*datasets.SyntheticConfig)
		want string
	}{
		{func(c *datasets.SyntheticConfig) { c.N = -1 }, "-1 examples"},
		{func(c *datasets.SyntheticConfig) { c.Classes = 0 }, "0 classes"},
		{func(c *datasets.SyntheticConfig) { c.Width = 0 }, "image shape [1 2 0]"},
		{func(c *datasets.SyntheticConfig) { c.Noise = math.NaN() }, "noise NaN"},
		{func(c *datasets.SyntheticConfig) { c.Noise = -1 }, "noise -1"},
		{func(c *datasets.SyntheticConfig) { c.Shift = -2 }, "shift -2"},
	}
	for _, tc := range tests {
		cfg := ok
		tc.edit(&cfg)
		if _, err := datasets.Synthetic(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Synthetic(%+v): error %v, want %q", cfg, err, tc.want)
		}
	}
}
