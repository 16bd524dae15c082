package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMetrics stops a run at its first test, whose metrics log sits beside
// its --save-model file, and resumes it to the end: the resumed run
// appends to the log, its steps going on from the checkpoint's, and writes
// an event file of its own.
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	model, tb := filepath.Join(dir, "m.safetensors"), filepath.Join(dir, "tb")
	// Two epochs of 16 iterations, a test every 7 iterations and at each
	// epoch's end, a progress line every 5 and at each epoch's end.
	args := append([]string{"train"}, resumeArgs...)
	args = append(args, "--print-freq", "5", "--save-model", model, "--tensorboard", tb, "--run", "tiny")
	runOK(t, append(slices.Clone(args), "--mlperf-auc-threshold", "1e-9")...)
	runOK(t, append(slices.Clone(args), "--load-model", model)...)

	var got []string
	f, err := os.Open(filepath.Join(dir, "m.metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var r struct {
			Run, Split  string
			Step, Epoch int
			Loss, LR    *float64
			Accuracy    float64
			AUC         *float64
			LogLoss     *float64 `json:"log_loss"`
			SamplesPerS *float64 `json:"samples_per_s"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		ok := r.Run == "tiny" && r.Accuracy >= 0 && r.Accuracy <= 1
		if r.Split == "train" {
			ok = ok && r.Loss != nil && *r.Loss > 0 && r.LR != nil && *r.LR > 0 && r.SamplesPerS != nil && *r.SamplesPerS > 0 && r.AUC == nil
		} else {
			// Under bce a test's log loss is its loss too.
			ok = ok && r.AUC != nil && *r.AUC > 0 && r.LogLoss != nil && *r.LogLoss > 0 && r.Loss != nil && *r.Loss == *r.LogLoss
		}
		if !ok {
			t.Errorf("bad record %s", sc.Text())
		}
		got = append(got, fmt.Sprintf("%s %d/%d", r.Split, r.Step, r.Epoch))
	}
	want := []string{"train 5/0", "eval 7/0", // stopped at the first test
		"train 10/0", "eval 14/0", "train 15/0", "train 16/0", "eval 16/0", // resumed
		"train 21/1", "eval 21/1", "train 26/1", "eval 28/1", "train 31/1", "train 32/1", "eval 32/1"}
	if !slices.Equal(got, want) {
		t.Errorf("records (split step/epoch)\n%q\nwant\n%q", got, want)
	}
	if events, _ := filepath.Glob(filepath.Join(tb, "events.out.tfevents.*")); len(events) != 2 {
		t.Errorf("event files %q, want one per run", events)
	}

	// --metrics="" writes no log beside --save-model.
	other := filepath.Join(dir, "other.safetensors")
	runOK(t, append(append([]string{"train"}, resumeArgs...), "--nepochs", "1", "--save-model", other, "--metrics=")...)
	if _, err := os.Stat(filepath.Join(dir, "other.metrics.jsonl")); !os.IsNotExist(err) {
		t.Errorf("--metrics=\"\" wrote a log beside --save-model (%v)", err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(append(append([]string{"train"}, resumeArgs...), "--metrics", dir), &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "metrics: open "+dir+": is a directory") {
		t.Errorf("--metrics %s: exit status %d, stderr:\n%s", dir, code, &stderr)
	}
}
