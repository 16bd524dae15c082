package charts

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

func tickLabels(ts []plot.Tick) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.Label)
	}
	return strings.Join(s, " ")
}

func TestRoundTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{10, 1200, "200 400 600 800 1000 1200"},
		{0.02, 0.83, "0.2 0.4 0.6 0.8"},
		{0.55, 2.6, "1.0 1.5 2.0 2.5"},
		{-3, 3, "-3 -2 -1 0 1 2 3"},
		{5, 5, "5"},
	} {
		if got := tickLabels(roundTicks(tc.lo, tc.hi)); got != tc.want {
			t.Errorf("roundTicks(%v, %v) = %s, want %s", tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestRatioTicks(t *testing.T) {
	got := tickLabels(ratioTicks(math.Log10(0.07), math.Log10(6.5)))
	if want := "1× 0.1× 0.2× 0.5× 2× 5×"; got != want {
		t.Errorf("ratioTicks = %s, want %s", got, want)
	}
}

func TestFormat(t *testing.T) {
	for path, want := range map[string]string{"a.svg": ".svg", "dir/A.PNG": ".png", "a.jpg": "", "svg": ""} {
		got, err := Format(path)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("Format(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := Lines(nil); err == nil {
		t.Error("Lines of no panels: no error")
	}
	if _, err := Lines([]Panel{{Series: []Series{{X: []float64{1, 2}, Y: []float64{1}}}}}); err == nil {
		t.Error("Lines of a series with fewer y than x: no error")
	}
	if _, err := Lines([]Panel{{Series: []Series{{X: []float64{1}, Y: []float64{math.NaN()}}}}}); err == nil {
		t.Error("Lines of a NaN: no error")
	}
	nan := math.NaN()
	if _, err := RatioBars(Ratios{Sets: []string{"1 thread"}, Rows: []BarRow{{"a", []float64{nan}}, {"b", []float64{0}}}}); err == nil {
		t.Error("RatioBars with no ratio: no error")
	}
}

// TestSave checks that a figure replaces its file whole and leaves no
// temporary file, and that one line drawn with a single point (an eval
// after the first epoch) draws.
func TestSave(t *testing.T) {
	dir := t.TempDir()
	f, err := Lines([]Panel{{XLabel: "step", YLabel: "loss", Series: []Series{{Label: "r eval", X: []float64{100}, Y: []float64{2}, Dashed: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.svg")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("<?xml")) || !bytes.HasSuffix(bytes.TrimSpace(b), []byte("</svg>")) {
		t.Errorf("c.svg is not a whole SVG (err %v)", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("c.svg: %v, mode %v, want 0644", err, fi.Mode())
	}
	if err := f.Save(filepath.Join(dir, "missing", "c.svg")); err == nil {
		t.Error("saved into a missing directory")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left %v, want c.svg alone", entries)
	}
}
