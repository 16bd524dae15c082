package main

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// batchValues is what a batch holds, for comparisons.
func batchValues(b *batch) []any {
	v := []any{b.size, b.dense.Float32s(), b.target.Float32s()}
	for t := range b.indices {
		v = append(v, b.indices[t].Int64s(), b.offsets[t].Int64s())
	}
	return v
}

// TestFileSourceResume checks the file source's lazy training order on
// Terabyte day files with negatives sub-sampled: an epoch's batches from
// batch skip are those of the whole epoch without its first skip, for
// every --data-randomize order, the sample counts add up, and each kept
// line comes once per epoch.
func TestFileSourceResume(t *testing.T) {
	dir := writeTerabyteDays(t, 20)
	for _, order := range []string{"total", "day", "none"} {
		for _, rate := range []string{"0", "0.5"} {
			name := fmt.Sprintf("%s-rate-%s", order, rate)
			o, err := parse(commands[0], []string{"--data-generation", "dataset", "--data-set", "terabyte", "--raw-data-file", dir,
				"--data-randomize", order, "--data-sub-sample-rate", rate, "--mini-batch-size", "16", "--test-mini-batch-size", "7"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			src, err := newFileSource(o)
			if err != nil {
				t.Fatal(err)
			}
			train, test := src.samples()
			if rate == "0" && (train != 460 || test != 10) || rate != "0" && (train >= 460 || train < 230) {
				t.Errorf("%s: %d training and %d test samples", name, train, test)
			}
			if d := src.describe(); !strings.Contains(d, fmt.Sprintf("%d training and %d test samples", train, test)) || !strings.Contains(d, order) {
				t.Errorf("%s: describe %q", name, d)
			}
			var all [][]any
			n := 0
			for b, err := range src.trainBatches(0, 0) {
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, batchValues(b))
				n += b.size
			}
			if n != train || len(all) != src.trainLen() {
				t.Fatalf("%s: %d samples in %d batches, want %d in %d", name, n, len(all), train, src.trainLen())
			}
			for _, skip := range []int{1, 3, len(all) - 1, len(all)} {
				var got [][]any
				for b, err := range src.trainBatches(0, skip) {
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, batchValues(b))
				}
				if len(got) != len(all)-skip || len(got) > 0 && !reflect.DeepEqual(got, all[skip:]) {
					t.Errorf("%s: from batch %d, %d batches, not the epoch's last %d", name, skip, len(got), len(all)-skip)
				}
			}
			n = 0
			for b, err := range src.testBatches() {
				if err != nil {
					t.Fatal(err)
				}
				n += b.size
			}
			if n != test {
				t.Errorf("%s: %d test samples read, want %d", name, n, test)
			}
			src.set.Close()
		}
	}
}
