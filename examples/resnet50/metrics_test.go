package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// record is a line of the metrics log, as a reader takes it.
type record struct {
	Run          string
	Split        string
	Step         int64
	Epoch        int
	WallTime     float64 `json:"wall_time"`
	Loss         float64
	Accuracy     float64
	Top5Accuracy *float64 `json:"top5_accuracy"`
	LR           *float64
	SamplesPerS  *float64 `json:"samples_per_s"`
}

// readMetrics reads a metrics log; every line must parse.
func readMetrics(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []record
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestMetrics trains 3 steps with a checkpoint, whose metrics log sits
// beside it, and resumes to 6: the resumed run appends to the log, its
// steps going on, and writes an event file of its own.
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	ckpt, tb := filepath.Join(dir, "r18.safetensors"), filepath.Join(dir, "tb")
	args := cmdline("train", tiny, "--checkpoint", ckpt, "--metrics-every", "2", "--tensorboard", tb)
	runOK(t, append(args, "--steps", "3")...)
	runOK(t, append(args, "--steps", "6", "--resume", ckpt)...)

	// Four steps an epoch: train records every 2 steps and at the ends
	// (step 3, where the first run stopped), eval records after each run
	// and epoch.
	type at struct {
		split       string
		step, epoch int
	}
	want := []at{{"train", 2, 0}, {"train", 3, 0}, {"eval", 3, 0}, {"train", 4, 0}, {"eval", 4, 0}, {"train", 6, 1}, {"eval", 6, 1}}
	recs := readMetrics(t, filepath.Join(dir, "r18.metrics.jsonl"))
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, r := range recs {
		if got := (at{r.Split, int(r.Step), r.Epoch}); got != want[i] || r.Run != "resnet18" {
			t.Errorf("record %d: %s %+v, want run resnet18, %+v", i, r.Run, got, want[i])
		}
		ok := r.Loss > 0 && !math.IsInf(r.Loss, 0) && r.Accuracy >= 0 && r.Accuracy <= 1 && r.WallTime > 1.7e9
		if r.Split == "train" {
			ok = ok && r.LR != nil && *r.LR > 0 && r.SamplesPerS != nil && *r.SamplesPerS > 0 && r.Top5Accuracy == nil
		} else {
			ok = ok && r.LR == nil && r.SamplesPerS == nil && r.Top5Accuracy != nil && *r.Top5Accuracy >= r.Accuracy
		}
		if !ok {
			t.Errorf("record %d: values %+v", i, r)
		}
	}
	if events, _ := filepath.Glob(filepath.Join(tb, "events.out.tfevents.*")); len(events) != 2 {
		t.Errorf("event files %q, want one per run", events)
	}

	// --metrics names the log and --run the run; --metrics '' writes none.
	log := filepath.Join(dir, "named.jsonl")
	runOK(t, cmdline("train", tiny, "--steps", "1", "--metrics", log, "--run", "trial-7")...)
	if recs := readMetrics(t, log); len(recs) != 2 || recs[0].Run != "trial-7" || recs[1].Split != "eval" {
		t.Errorf("--metrics %s --run trial-7: %+v", log, recs)
	}
	other := filepath.Join(dir, "other.safetensors")
	runOK(t, cmdline("train", tiny, "--steps", "1", "--checkpoint", other, "--metrics", "")...)
	if _, err := os.Stat(filepath.Join(dir, "other.metrics.jsonl")); !os.IsNotExist(err) {
		t.Errorf("--metrics '' wrote a log beside the checkpoint (%v)", err)
	}
}

func TestMetricsErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{cmdline("train", tiny, "--metrics-every", "0"), 2, "--metrics-every 0: must be at least 1"},
		{cmdline("train", tiny, "--metrics", dir), 1, "metrics: open " + dir + ": is a directory"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit status %d, stderr:\n%s\nwant status %d and %q", strings.Join(c.args, " "), code, &stderr, c.code, c.want)
		}
	}
}
