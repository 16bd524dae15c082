package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mllogEvent is one ":::MLLOG" line as a reader decodes it.
type mllogEvent struct {
	Namespace *string        `json:"namespace"`
	TimeMS    *int64         `json:"time_ms"`
	EventType string         `json:"event_type"`
	Key       string         `json:"key"`
	Value     any            `json:"value"`
	Metadata  map[string]any `json:"metadata"`
}

// mllogEvents parses out's ":::MLLOG" lines, failing the test on one that
// is not mllog's JSON object.
func mllogEvents(t *testing.T, out string) []mllogEvent {
	t.Helper()
	var evs []mllogEvent
	for _, line := range strings.Split(out, "\n") {
		js, ok := strings.CutPrefix(line, ":::MLLOG ")
		if !ok {
			if strings.Contains(line, ":::MLLOG") {
				t.Errorf("line with :::MLLOG not at its start: %q", line)
			}
			continue
		}
		dec := json.NewDecoder(strings.NewReader(js))
		dec.DisallowUnknownFields()
		var e mllogEvent
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if e.Namespace == nil || *e.Namespace != "" || e.TimeMS == nil || e.Metadata == nil {
			t.Errorf("%q: want namespace \"\", time_ms and metadata", line)
		}
		if !slices.Contains([]string{"POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"}, e.EventType) {
			t.Errorf("%q: event_type %q", line, e.EventType)
		}
		if e.Metadata["file"] != "train.go" || e.Metadata["lineno"] == nil {
			t.Errorf("%q: metadata names no line of train.go", line)
		}
		evs = append(evs, e)
	}
	return evs
}

// testedAt is one "Testing at" line: iterations done in the epoch, the
// epoch's length, the epoch and the AUC as printed.
type testedAt struct {
	it, perEpoch, epoch int
	auc                 string
}

func testsIn(t *testing.T, out string) []testedAt {
	t.Helper()
	var ts []testedAt
	for _, m := range regexp.MustCompile(`Testing at - (\d+)/(\d+) of epoch (\d+), auc ([0-9.]+)`).FindAllStringSubmatch(out, -1) {
		n := make([]int, 3)
		for i := range n {
			n[i], _ = strconv.Atoi(m[i+1])
		}
		ts = append(ts, testedAt{n[0], n[1], n[2], m[4]})
	}
	if len(ts) == 0 {
		t.Fatalf("no Testing at lines in\n%s", out)
	}
	return ts
}

// TestMLPerfLogging runs a tiny planted training with --mlperf-logging,
// stopped at --mlperf-auc-threshold and not, and checks its :::MLLOG
// lines: dlrm's keys in dlrm's order (the run's set-up, then each epoch a
// block and an epoch around its tests, then run_stop with the status),
// dlrm's values and epoch numbers, eval_accuracy equal to the AUC of each
// "Testing at" line and time_ms not decreasing; and that the flag changes
// nothing else of the run, whose output without it has no such line.
func TestMLPerfLogging(t *testing.T) {
	for _, c := range []struct {
		threshold, status string
	}{{"1e-9", "success"}, {"1.1", "aborted"}} {
		t.Run(c.status, func(t *testing.T) {
			args := append([]string{"train"}, resumeArgs...)
			args = append(args, "--mlperf-auc-threshold", c.threshold)
			before := time.Now().UnixMilli()
			out := runOK(t, append(args, "--mlperf-logging")...)
			after := time.Now().UnixMilli()
			evs := mllogEvents(t, out)
			tests := testsIn(t, out)

			plain := runOK(t, args...)
			if strings.Contains(plain, ":::MLLOG") {
				t.Errorf("without --mlperf-logging:\n%s", plain)
			}
			if got := testsIn(t, plain); !slices.Equal(got, tests) {
				t.Errorf("tests without --mlperf-logging %v, with %v", got, tests)
			}

			want := []string{"cache_clear", "init_start", "init_stop", "run_start", "train_samples", "eval_samples",
				"submission_benchmark", "submission_org", "submission_division", "submission_status",
				"submission_platform", "submission_entry", "submission_poc_name", "submission_poc_email",
				"seed", "global_batch_size", "opt_base_learning_rate", "opt_learning_rate_warmup_steps",
				"sgd_opt_base_learning_rate", "lr_decay_start_steps", "sgd_opt_learning_rate_decay_steps",
				"sgd_opt_learning_rate_decay_poly_power"}
			for i, ts := range tests {
				if i == 0 || ts.epoch != tests[i-1].epoch {
					want = append(want, "block_start", "epoch_start")
				}
				want = append(want, "eval_start", "eval_accuracy", "eval_stop")
				if i == len(tests)-1 || ts.epoch != tests[i+1].epoch {
					want = append(want, "epoch_stop", "block_stop")
				}
			}
			want = append(want, "run_stop")
			var keys []string
			for _, e := range evs {
				keys = append(keys, e.Key)
			}
			if !slices.Equal(keys, want) {
				t.Fatalf("keys\n%v\nwant\n%v", keys, want)
			}

			values := map[string]any{"cache_clear": true, "train_samples": 512.0, "eval_samples": 64.0,
				"submission_benchmark": "dlrm", "submission_division": "closed", "seed": 123.0,
				"global_batch_size": 32.0, "opt_base_learning_rate": 0.1, "opt_learning_rate_warmup_steps": 3.0,
				"lr_decay_start_steps": 9.0, "sgd_opt_learning_rate_decay_steps": 12.0,
				"sgd_opt_learning_rate_decay_poly_power": 2.0, "init_start": nil, "run_start": nil}
			prev := before
			test := -1
			for _, e := range evs {
				if *e.TimeMS < prev || *e.TimeMS > after {
					t.Errorf("%s: time_ms %d, previous %d, run ended by %d", e.Key, *e.TimeMS, prev, after)
				}
				prev = *e.TimeMS
				if v, ok := values[e.Key]; ok && e.Value != v {
					t.Errorf("%s: value %#v, want %#v", e.Key, e.Value, v)
				}
				if e.Key == "eval_start" {
					test++
				}
				var meta map[string]any
				switch e.Key {
				case "block_start":
					meta = map[string]any{"first_epoch_num": float64(tests[test+1].epoch + 1), "epoch_count": 1.0}
				case "epoch_start":
					meta = map[string]any{"epoch_num": float64(tests[test+1].epoch + 1)}
				case "epoch_stop":
					meta = map[string]any{"epoch_num": float64(tests[test].epoch + 1)}
				case "block_stop":
					meta = map[string]any{"first_epoch_num": float64(tests[test].epoch + 1)}
				case "eval_start", "eval_accuracy", "eval_stop":
					ts := tests[test]
					meta = map[string]any{"epoch_num": float64(ts.it)/float64(ts.perEpoch) + float64(ts.epoch) + 1}
					if e.Key == "eval_accuracy" {
						if auc, ok := e.Value.(float64); !ok || fmt.Sprintf("%.5f", auc) != ts.auc {
							t.Errorf("eval_accuracy %v at %d/%d of epoch %d, printed auc %s", e.Value, ts.it, ts.perEpoch, ts.epoch, ts.auc)
						}
					}
				case "run_stop":
					meta = map[string]any{"status": c.status}
				}
				for k, v := range meta {
					if e.Metadata[k] != v {
						t.Errorf("%s: metadata %s = %#v, want %#v", e.Key, k, e.Metadata[k], v)
					}
				}
			}
			if c.status == "success" && len(tests) != 1 {
				t.Errorf("stopped after %d tests, want the first", len(tests))
			}
		})
	}
}
