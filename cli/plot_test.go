package cli

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/internal/charts"
	"github.com/kilnml/kiln/internal/charts/chartstest"
)

func plotFixture(name string) string { return filepath.Join("testdata", "plot", name) }

// TestPlot draws the fixtures and counts the data lines of each run in
// the SVG by the run's colour: a series is one path through its points
// (the legend's sample of it has two).
func TestPlot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		lines []int    // data lines of each run, in order, over both panels
		texts []string // legend entries and axis labels
	}{
		{"two runs", []string{"two.jsonl", "b.jsonl"}, []int{4, 4},
			[]string{"a train", "a eval", "b train", "b eval", "loss", "accuracy", "step"}},
		{"auc", []string{"auc.jsonl"}, []int{3}, []string{"dlrm train", "dlrm eval", "loss", "AUC"}},
		{"auc beside accuracy", []string{"two.jsonl", "auc.jsonl"}, []int{4, 3},
			[]string{"a train", "dlrm eval", "accuracy; AUC for dlrm"}},
		{"a file given twice", []string{"two.jsonl", "b.jsonl", "b.jsonl"}, []int{4, 4},
			[]string{"a train", "b eval"}},
		{"one run label in two files", []string{"two.jsonl", "a-again.jsonl"}, []int{4, 2},
			[]string{"a (testdata/plot/two.jsonl) train", "a (testdata/plot/a-again.jsonl) train"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "curves.svg")
			args := []string{"plot", "-o", out}
			for _, f := range tc.files {
				args = append(args, plotFixture(f))
			}
			var stdout, stderr bytes.Buffer
			if code := Main(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			doc := chartstest.Parse(t, b)
			for run, want := range tc.lines {
				if got := doc.Lines(charts.Color(run), 3); got != want {
					t.Errorf("run %d: %d data lines, want %d", run, got, want)
				}
			}
			if got := doc.Lines(charts.Color(len(tc.lines)), 1); got != 0 {
				t.Errorf("%d lines in the colour of run %d, of %d runs", got, len(tc.lines), len(tc.lines))
			}
			for _, s := range tc.texts {
				if !doc.HasText(s) {
					t.Errorf("no text %q in %q", s, doc.Texts)
				}
			}
		})
	}
}

// TestPlotLeavesOut checks that non-finite values and splits without a
// metric draw no point: in two.jsonl a's train loss has 3 finite points
// and its eval accuracy 3 (one is "+Inf").
func TestPlotLeavesOut(t *testing.T) {
	runs, err := readMetrics(plotFixture("two.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].label != "a" {
		t.Fatalf("runs %v, want one named a", runs)
	}
	for k, want := range map[curveKey]int{
		{"train", "loss"}: 3, {"train", "accuracy"}: 4, {"eval", "loss"}: 4, {"eval", "accuracy"}: 3, {"eval", "auc"}: 0,
	} {
		if got := len(runs[0].points[k]); got != want {
			t.Errorf("%v: %d points, want %d", k, got, want)
		}
	}
	runs, err = readMetrics(plotFixture("b.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].label != "b" {
		t.Errorf("a run without a run field is named %q, want the file's name b", runs[0].label)
	}
}

// A run resumed from a checkpoint at step 10 logs steps 20 and 30 again:
// those points replace the interrupted run's, as in TensorBoard, and a
// split the resumed part has not reached yet keeps its points.
func TestPlotResumed(t *testing.T) {
	runs, err := readMetrics(plotFixture("resumed.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[curveKey][]curvePoint{
		{"train", "loss"}: {{10, 2.4}, {20, 2.0}, {30, 1.7}, {40, 1.5}},
		{"eval", "loss"}:  {{30, 2.0}},
	}
	for k, w := range want {
		if got := runs[0].points[k]; !slices.Equal(got, w) {
			t.Errorf("%v: %v, want %v", k, got, w)
		}
	}
}

func TestPlotPNG(t *testing.T) {
	out := filepath.Join(t.TempDir(), "curves.png")
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"plot", plotFixture("two.jsonl"), plotFixture("auc.jsonl"), "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 400 {
		t.Errorf("PNG is %v, want two panels at print resolution", b)
	}
}

func TestPlotErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string // fixture names, or other arguments
		content string   // a file written for the case, passed last, when set
		code    int
		want    string
	}{
		{"no file", nil, "", 2, "missing METRICS.jsonl"},
		{"missing file", []string{"nope.jsonl"}, "", 1, "nope.jsonl: no such file"},
		{"bad JSON", []string{"bad.jsonl"}, "", 1, "bad.jsonl:7: bad JSON: unexpected end of JSON input"},
		{"empty", []string{"empty.jsonl"}, "", 1, "empty.jsonl: no records to plot"},
		{"no metrics", []string{"nometrics.jsonl"}, "", 1, "nometrics.jsonl: no records to plot: none of its 2 records has a finite loss, accuracy or auc"},
		{"a good file then a bad one", []string{"two.jsonl", "bad.jsonl"}, "", 1, "bad.jsonl:7:"},
		{"not an object", nil, "\n[1, 2]\n", 1, "m.jsonl:2: not a JSON object"},
		{"no split", nil, `{"step":1,"loss":1}`, 1, `m.jsonl:1: no "split"`},
		{"no step", nil, `{"split":"train","loss":1}`, 1, `m.jsonl:1: no "step"`},
		{"fractional step", nil, `{"split":"train","step":1.5,"loss":1}`, 1, "m.jsonl:1: step: want an integer, got 1.5"},
		{"string metric", nil, `{"split":"train","step":1,"loss":"high"}`, 1, `m.jsonl:1: loss: want a number or "NaN", "+Inf", "-Inf", got "high"`},
		{"run not a string", nil, `{"run":7,"split":"train","step":1,"loss":1}`, 1, "m.jsonl:1: run: want a string, got 7"},
		{"long line", nil, `{"split":"train","step":1,"pad":"` + strings.Repeat("x", maxLine) + `"}`, 1, "m.jsonl:1: line longer than"},
		{"other format", []string{"two.jsonl", "-o", "curves.jpg"}, "", 2, "want a file ending in .svg or .png"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"plot", "-o", filepath.Join(dir, "curves.svg")}
			for _, a := range tc.args {
				if strings.HasSuffix(a, ".jsonl") {
					a = plotFixture(a)
				}
				args = append(args, a)
			}
			if tc.content != "" {
				f := filepath.Join(t.TempDir(), "m.jsonl")
				if err := os.WriteFile(f, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, f)
			}
			var stdout, stderr bytes.Buffer
			code := Main(args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr.String(), tc.code, tc.want)
			}
			if strings.Contains(stderr.String(), "panic") {
				t.Errorf("panicked: %s", stderr.String())
			}
			// A failed run leaves nothing behind: no picture, no
			// temporary file.
			if left, _ := os.ReadDir(dir); len(left) > 0 {
				t.Errorf("left %v in the output directory", left)
			}
		})
	}
}

// TestPlotKeepsOldPicture checks that a failed run does not touch a
// picture already at -o.
func TestPlotKeepsOldPicture(t *testing.T) {
	out := filepath.Join(t.TempDir(), "curves.svg")
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"plot", plotFixture("two.jsonl"), "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	before, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if code := Main([]string{"plot", plotFixture("bad.jsonl"), "-o", out}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d on a bad file", code)
	}
	after, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the picture changed on a failed run (err %v)", err)
	}
}
