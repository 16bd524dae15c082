package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/datasets/criteo"
)

// tinyArgs is a small model for the data tests.
var tinyArgs = []string{"--arch-sparse-feature-size", "4", "--arch-mlp-bot", "13-8-4", "--arch-mlp-top", "8-1",
	"--loss-function", "bce", "--mini-batch-size", "16", "--quiet"}

// writeTerabyteDays writes 24 day files day_0 … day_23 of perDay planted
// lines each into a new directory and returns it.
func writeTerabyteDays(t *testing.T, perDay int) string {
	t.Helper()
	cfg := criteo.DefaultPlanted(perDay*criteo.TerabyteDays, 5)
	cfg.RowsPerTable = 30
	p, err := criteo.NewPlanted(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := p.WriteDays(filepath.Join(dir, "day"), slices.Repeat([]int{perDay}, criteo.TerabyteDays)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTrainTerabyte trains on 24 tiny day files, named as dlrm names them
// (--raw-data-file PREFIX for PREFIX_0 … PREFIX_23) and by their
// directory: days 0–22 train, the first half of day 23 tests. A missing
// day stops the run with an error naming its file.
func TestTrainTerabyte(t *testing.T) {
	dir := writeTerabyteDays(t, 20)
	for _, path := range []string{filepath.Join(dir, "day"), dir} {
		for _, order := range []string{"total", "day", "none"} {
			args := append([]string{"train", "--data-generation", "dataset", "--data-set", "terabyte",
				"--raw-data-file", path, "--data-randomize", order}, tinyArgs...)
			out := runOK(t, args...)
			if !strings.Contains(out, path+": 460 training and 10 test samples") || !strings.Contains(out, "best held-out auc") {
				t.Errorf("--raw-data-file %s --data-randomize %s: want 23·20 training and 20/2 test samples and a result:\n%s", path, order, out)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "day_23"+criteo.SidecarSuffix)); err != nil {
		t.Errorf("no index beside day_23: %v", err)
	}

	if err := os.Remove(filepath.Join(dir, "day_17")); err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	status := run(append([]string{"train", "--data-generation", "dataset", "--data-set", "terabyte", "--raw-data-file", dir}, tinyArgs...), &o, &e)
	if status != 1 || !strings.Contains(e.String(), filepath.Join(dir, "day_17")) {
		t.Errorf("missing day_17: exit %d, stderr %q; want 1 and an error naming it", status, e.String())
	}
}

// TestTrainSynthetic trains on dlrm's synthetic data from the hand-written
// traces of datasets/criteo/testdata, with and without padding; table 1's
// trace has 20 rows for a table of 7, which the data line reports.
func TestTrainSynthetic(t *testing.T) {
	traces := filepath.Join("..", "..", "datasets", "criteo", "testdata", "dist_emb_j.log")
	common := []string{"train", "--data-generation", "synthetic", "--data-trace-file", traces,
		"--arch-embedding-size", "10-7", "--arch-sparse-feature-size", "2", "--arch-mlp-bot", "3-2",
		"--arch-mlp-top", "3-1", "--data-size", "64", "--mini-batch-size", "16", "--num-indices-per-lookup", "4", "--quiet"}
	for _, extra := range [][]string{nil, {"--data-trace-enable-padding", "True"}} {
		out := runOK(t, append(common, extra...)...)
		if !strings.Contains(out, "synthetic (trace rows folded modulo the table sizes) data: 4 training and 1 held-out batches, 2 tables") {
			t.Errorf("%v: no synthetic data line:\n%s", extra, out)
		}
	}
	out := runOK(t, append(common[:len(common):len(common)], "--arch-embedding-size", "10-20")...)
	if !strings.Contains(out, "synthetic data: 4 training") {
		t.Errorf("traces that fit their tables:\n%s", out)
	}

	var o, e bytes.Buffer
	if status := run(append(common[:len(common):len(common)], "--arch-embedding-size", "10-7-5"), &o, &e); status != 1 || !strings.Contains(e.String(), "dist_emb_2.log") {
		t.Errorf("a third table without a trace: exit %d, stderr %q; want 1 and an error naming dist_emb_2.log", status, e.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--data-set", "avazu"}, `--data-set "avazu": want kaggle or terabyte`},
		{[]string{"train", "--data-generation", "dataset", "--data-set", "terabyte"}, "needs --raw-data-file, the prefix of the Terabyte day files"},
		{[]string{"train", "--data-generation", "trace"}, `--data-generation "trace": want dataset, random, synthetic or planted`},
	} {
		o.Reset()
		e.Reset()
		if status := run(c.args, &o, &e); status != 2 || !strings.Contains(e.String(), c.want) {
			t.Errorf("dlrm %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), status, e.String(), c.want)
		}
	}
}
