package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kilnml/kiln/bench"
	"github.com/kilnml/kiln/internal/charts"
	"github.com/kilnml/kiln/internal/charts/chartstest"
)

// plotRun is a saved run of five rows in three groups at 1 and 2
// threads: gemm b failed on PyTorch's side at 2 threads, the peak-memory
// row and the Kiln-only row have no speed ratio.
func plotRun() raw {
	ws := []bench.Workload{
		{Name: "gemm a", Group: "GEMM DL shapes (m×n×k)", Bound: bench.Compute},
		{Name: "gemm b", Group: "GEMM DL shapes (m×n×k)", Bound: bench.Compute},
		{Name: "resnet50 infer", Group: "ResNet-50", Bound: bench.Compute},
		{Name: "resnet50 peak RSS", Group: "ResNet-50", Bound: bench.Footprint},
		{Name: "two instances", Group: "Runtime (Kiln only)", Bound: bench.Compute, KilnOnly: true},
	}
	timed := func(name string, s float64) bench.Result {
		return bench.Result{Name: name, Median: s, Samples: []float64{s}}
	}
	mem := bench.Result{Name: "resnet50 peak RSS", PeakRSS: 1 << 30, StartRSS: 1 << 20}
	return raw{Threads: []int{1, 2}, Workloads: ws, Reports: []bench.Report{
		{Side: "kiln", Threads: 1, Results: []bench.Result{timed("gemm a", 1), timed("gemm b", 2), timed("resnet50 infer", 4), mem, timed("two instances", 1)}},
		{Side: "pytorch", Threads: 1, Results: []bench.Result{timed("gemm a", 1.5), timed("gemm b", 1), timed("resnet50 infer", 5), mem}},
		{Side: "kiln", Threads: 2, Results: []bench.Result{timed("gemm a", 1), timed("gemm b", 1), timed("resnet50 infer", 2), mem, timed("two instances", 1)}},
		{Side: "pytorch", Threads: 2, Results: []bench.Result{timed("gemm a", 3), {Name: "gemm b", Error: "boom"}, timed("resnet50 infer", 2), mem}},
	}}
}

func TestPlot(t *testing.T) {
	// From a saved run, as -merge run.json -plot DIR does.
	saved := filepath.Join(t.TempDir(), "run.json")
	b, err := json.Marshal(plotRun())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saved, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "plots") // made by -plot
	if err := mergeMain([]string{saved}, "", dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"gemm-dl-shapes-m-n-k.svg", "resnet-50.svg"}; !slices.Equal(names, want) {
		t.Fatalf("wrote %v, want %v (no chart for a group without a speed ratio)", names, want)
	}
	for _, tc := range []struct {
		file    string
		bars    []int // of each thread count
		texts   []string
		notText string
	}{
		{"gemm-dl-shapes-m-n-k.svg", []int{2, 1},
			[]string{"GEMM DL shapes (m×n×k)", "gemm a", "gemm b", "1 thread", "2 threads", "1.50×", "3.00×", "0.50×", "1×"}, ""},
		{"resnet-50.svg", []int{1, 1}, []string{"resnet50 infer", "1.25×", "1.00×"}, "resnet50 peak RSS"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			doc := chartstest.Parse(t, b)
			for i, want := range tc.bars {
				// Each colour fills its bars and its legend swatch.
				if got := doc.Fills(charts.Color(i)) - 1; got != want {
					t.Errorf("%d bars at thread count %d, want %d", got, i, want)
				}
			}
			for _, s := range tc.texts {
				if !doc.HasText(s) {
					t.Errorf("no text %q in %q", s, doc.Texts)
				}
			}
			if tc.notText != "" && doc.HasText(tc.notText) {
				t.Errorf("%q is drawn, a row without a speed ratio", tc.notText)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"GEMM DL shapes (m×n×k)":         "gemm-dl-shapes-m-n-k",
		"ResNet-50":                      "resnet-50",
		"ResNet-50 conv backward-weight": "resnet-50-conv-backward-weight",
		"Runtime (Kiln only)":            "runtime-kiln-only",
		"  Élan ":                        "lan",
		"×××":                            "group",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
