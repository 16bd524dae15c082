package criteo_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/datasets/criteo"
)

// writeDays writes planted samples as day files dir/day_0 … with sizes[d]
// lines each (Planted.WriteDays), and all of them as one file dir/all.txt
// (WriteTSV), and returns the lines.
func writeDays(t *testing.T, dir string, sizes []int) []string {
	t.Helper()
	total := 0
	for _, n := range sizes {
		total += n
	}
	cfg := criteo.DefaultPlanted(total, 11)
	cfg.RowsPerTable = 40
	p, err := criteo.NewPlanted(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.WriteTSV(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "all.txt"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteDays(filepath.Join(dir, "day"), sizes); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(buf.String(), "\n")
	return lines[:total]
}

// TestTerabyteDays opens 24 day files of a few lines each, by directory
// and by dlrm's prefix, and checks the split sizes, the sidecars, and
// that batches read across the files equal those of the same lines in
// one file: one dictionary numbered in order of first appearance over the
// days.
func TestTerabyteDays(t *testing.T) {
	dir := t.TempDir()
	sizes := make([]int, criteo.TerabyteDays)
	for d := range sizes {
		sizes[d] = 2 + d%3
	}
	sizes[23] = 5
	writeDays(t, dir, sizes)

	for _, path := range []string{dir, filepath.Join(dir, "day")} {
		s, err := criteo.OpenTerabyte(path, criteo.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		train := 0
		for _, n := range sizes[:23] {
			train += n
		}
		sp := s.Split()
		if len(sp.Days) != 24 || sp.Train != (criteo.Range{0, train}) || sp.Test != (criteo.Range{train, train + 3}) ||
			sp.Val != (criteo.Range{train + 3, train + 5}) || s.Len() != train+5 {
			t.Fatalf("%s: %d lines, split %+v; want %d training lines, 3 test and 2 validation", path, s.Len(), sp, train)
		}
		for d, r := range sp.Days {
			if r.Len() != sizes[d] {
				t.Errorf("day %d has %d lines, want %d", d, r.Len(), sizes[d])
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "day_23"+criteo.SidecarSuffix)); err != nil {
			t.Errorf("no sidecar beside day_23: %v", err)
		}

		all, err := criteo.ScanFile(filepath.Join(dir, "all.txt"), criteo.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Counts() != all.Counts() {
			t.Fatalf("counts %v, one file's %v", s.Counts(), all.Counts())
		}
		f, err := os.Open(filepath.Join(dir, "all.txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		order := mustSelect(t, s, criteo.Range{0, s.Len()}, 0, 1)
		if err := criteo.Shuffle(order, sp.Days[:23], criteo.RandomizeTotal, 5); err != nil {
			t.Fatal(err)
		}
		var got, want []*criteo.Batch
		for b, err := range s.Batches(order, 7) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b)
		}
		for b, err := range all.Batches(f, order, 7) {
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: batches across the day files differ from those of the same lines in one file", path)
		}
		for i := range s.Len() {
			if mustLabel(t, s, i) != mustLabel(t, all, i) {
				t.Fatalf("line %d: label %d, one file's %d", i, mustLabel(t, s, i), mustLabel(t, all, i))
			}
		}
	}
}

// TestTerabyteDaysErrors checks that a missing day file is named, and
// that skipped bad lines are reported by file and line.
func TestTerabyteDaysErrors(t *testing.T) {
	dir := t.TempDir()
	sizes := slices.Repeat([]int{3}, criteo.TerabyteDays)
	lines := writeDays(t, dir, sizes)

	day5 := filepath.Join(dir, "day_5")
	bad := lines[15] + "1\tx" + lines[16][1:] + lines[17]
	if err := os.WriteFile(day5, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := criteo.OpenTerabyte(dir, criteo.ScanOptions{})
	if !errors.Is(err, criteo.ErrBadLine) || !strings.Contains(err.Error(), day5+":2") {
		t.Errorf("bad line 2 of day_5: %v; want an error naming %s:2", err, day5)
	}
	s, err := criteo.OpenTerabyte(dir, criteo.ScanOptions{SkipBadLines: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, first := s.BadLines(); n != 1 || !slices.Equal(first, []string{day5 + ":2"}) || s.Len() != 71 {
		t.Errorf("bad lines %d %v, %d lines; want 1 [%s:2] and 71", n, first, s.Len(), day5)
	}
	s.Close()

	if err := os.Remove(filepath.Join(dir, "day_17")); err != nil {
		t.Fatal(err)
	}
	_, err = criteo.OpenTerabyte(dir, criteo.ScanOptions{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "day_17")) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing day_17: %v; want an error naming it", err)
	}
}

// TestDaySplit checks the Kaggle split through DaySplit and the halves of
// the last day.
func TestDaySplit(t *testing.T) {
	s := criteo.DaySplit([]int{4, 0, 7})
	want := criteo.Split{Days: []criteo.Range{{0, 4}, {4, 4}, {4, 11}}, Train: criteo.Range{0, 4},
		Test: criteo.Range{4, 8}, Val: criteo.Range{8, 11}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("DaySplit(4, 0, 7) = %+v, want %+v", s, want)
	}
	if s := criteo.DaySplit(nil); len(s.Days) != 0 || s.Train.Len()+s.Test.Len()+s.Val.Len() != 0 {
		t.Errorf("DaySplit(nil) = %+v", s)
	}
}

// TestPlantedWriteDays checks that WriteDays cuts WriteTSV's lines into
// the day files, empty days included, and rejects sizes that do not add up.
func TestPlantedWriteDays(t *testing.T) {
	dir := t.TempDir()
	p, err := criteo.NewPlanted(criteo.DefaultPlanted(5, 1))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.WriteTSV(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(buf.String(), "\n")
	prefix := filepath.Join(dir, "d")
	if err := p.WriteDays(prefix, []int{2, 0, 3, 0}); err != nil {
		t.Fatal(err)
	}
	for d, want := range []string{lines[0] + lines[1], "", lines[2] + lines[3] + lines[4], ""} {
		got, err := os.ReadFile(prefix + "_" + string(rune('0'+d)))
		if err != nil || string(got) != want {
			t.Errorf("day %d: %q, %v; want %q", d, got, err, want)
		}
	}
	if err := p.WriteDays(prefix, []int{2, 2}); err == nil || !strings.Contains(err.Error(), "add up to 4, not the 5 samples") {
		t.Errorf("sizes adding up to 4: %v", err)
	}
}
