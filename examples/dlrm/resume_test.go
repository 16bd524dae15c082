package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/internal/checkpoint"
	"github.com/kilnml/kiln/nn"
)

// resumeArgs is a tiny planted run: 16 batches an epoch, two epochs, a
// test every 7 iterations (7, 14, 16 at the epoch's end, 21, 28, 32) and
// dlrm's warm-up and decay, so that the schedule moves across the stops.
var resumeArgs = []string{"--data-generation", "planted", "--arch-embedding-size", "20-30-40",
	"--arch-sparse-feature-size", "4", "--arch-mlp-bot", "13-8-4", "--arch-mlp-top", "8-1",
	"--loss-function", "bce", "--mini-batch-size", "32", "--data-size", "512", "--test-size", "64",
	"--nepochs", "2", "--learning-rate", "0.1", "--test-freq", "7", "--print-freq", "1000",
	"--lr-num-warmup-steps", "3", "--lr-decay-start-step", "9", "--lr-num-decay-steps", "12", "--quiet"}

// trainTo runs train with args and writes the state it ended in, as
// --save-model writes a checkpoint, to path.
func trainTo(t *testing.T, path string, args ...string) trainResult {
	t.Helper()
	o, err := parse(commands[0], args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := trainRun(o, &out, io.Discard)
	if err != nil {
		t.Fatalf("train %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	if err := res.checkpoint(path); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestResumeMatchesUninterrupted is issue 19's resume check: a run
// stopped at each test (mid-epoch, at an epoch's end, in the second
// epoch) and resumed with --load-model from its checkpoint each time ends
// with the model, optimizer state, schedule, position and best score of
// the uninterrupted run, bit for bit, for each optimizer in FP32 and split
// BF16, with and without --fused-emb, on planted data (reshuffled each
// epoch), on random data and on Terabyte day files. The first stop's --save-model file is the
// state it stopped in.
func TestResumeMatchesUninterrupted(t *testing.T) {
	for _, opt := range []string{"sgd", "adagrad", "rwsadagrad"} {
		for _, dtype := range []string{"fp32", "bf16"} {
			for _, fused := range []bool{false, true} {
				data := "planted"
				switch {
				case opt == "sgd" && !fused:
					data = "random"
				case opt == "rwsadagrad" && !fused && dtype == "fp32":
					data = "dataset"
				}
				name := fmt.Sprintf("%s-%s-fused=%v-%s", opt, dtype, fused, data)
				t.Run(name, func(t *testing.T) {
					dir := t.TempDir()
					args := append(slices.Clone(resumeArgs), "--optimizer", opt, "--dtype", dtype, "--data-generation", data)
					if data == "dataset" {
						// 23 training days of 22 lines: 16 batches of 32
						// an epoch, as the planted runs have; a resumed
						// epoch starts at its batch without reading the
						// ones before.
						args = append(args, "--data-set", "terabyte", "--raw-data-file", writeTerabyteDays(t, 22))
					}
					if fused {
						args = append(args, "--fused-emb")
					}
					whole := filepath.Join(dir, "whole.ckpt")
					a := trainTo(t, whole, args...)
					// --mlperf-auc-threshold 1e-9 stops a run at its
					// first test, where --save-model writes (any AUC
					// improves on none).
					stop := append(slices.Clone(args), "--mlperf-auc-threshold", "1e-9")
					saved := filepath.Join(dir, "saved.ckpt")
					prev := filepath.Join(dir, "stop0.ckpt")
					res := trainTo(t, prev, append(slices.Clone(stop), "--save-model", saved)...)
					if !res.stopped || res.iterations != 7 {
						t.Fatalf("first run: stopped %v after %d iterations, want a stop after 7", res.stopped, res.iterations)
					}
					sameFiles(t, saved, prev)
					for i, want := range []int{14, 16, 21} {
						next := filepath.Join(dir, fmt.Sprintf("stop%d.ckpt", i+1))
						res := trainTo(t, next, append(slices.Clone(stop), "--load-model", prev)...)
						if !res.stopped || res.iterations != want {
							t.Fatalf("resumed run %d: stopped %v after %d iterations, want a stop after %d", i+1, res.stopped, res.iterations, want)
						}
						prev = next
					}
					last := filepath.Join(dir, "resumed.ckpt")
					c := trainTo(t, last, append(slices.Clone(args), "--load-model", prev)...)
					if c.iterations != a.iterations || c.best != a.best || c.last != a.last {
						t.Errorf("resumed run ended after %d iterations, best %v, last %v; the uninterrupted one after %d, best %v, last %v",
							c.iterations, c.best, c.last, a.iterations, a.best, a.last)
					}
					sameFiles(t, whole, last)
				})
			}
		}
	}
}

// sameFiles fails unless the checkpoints a and b are the same bytes,
// naming the tensors that differ.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	ba, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ba, bb) {
		var ra, rb progress
		_, _, _ = checkpoint.Read(a, &ra)
		_, _, _ = checkpoint.Read(b, &rb)
		t.Errorf("%s and %s differ in tensors %v\nrecords:\n%+v\n%+v", filepath.Base(a), filepath.Base(b), differing(t, ba, bb), ra, rb)
	}
}

// TestResumeErrors checks that a damaged checkpoint and one of another
// configuration fail with errors naming the problem, and that a plain
// state dict still starts a run at epoch 0 and evaluates.
func TestResumeErrors(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "sgd.ckpt")
	args := append(slices.Clone(resumeArgs), "--nepochs", "1", "--mlperf-auc-threshold", "1e-9")
	trainTo(t, filepath.Join(dir, "end.ckpt"), append(slices.Clone(args), "--save-model", ckpt)...)
	resume := func(path string, extra ...string) error {
		o, err := parse(commands[0], append(append(slices.Clone(args), "--load-model", path), extra...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		_, err = trainRun(o, io.Discard, io.Discard)
		return err
	}

	b, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-200] ^= 1 // in the last tensors' data, before the checksum's text
	damaged := filepath.Join(dir, "damaged.ckpt")
	if err := os.WriteFile(damaged, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := resume(damaged); !errors.Is(err, checkpoint.ErrChecksum) {
		t.Errorf("resuming from a damaged checkpoint: %v, want an error wrapping checkpoint.ErrChecksum", err)
	}
	for _, c := range []struct {
		flags []string
		field string
	}{
		{[]string{"--optimizer", "adagrad"}, "config.optimizer"},
		{[]string{"--dtype", "bf16"}, "config.dtype"},
		{[]string{"--mini-batch-size", "16"}, "config.mini-batch-size"},
		{[]string{"--numpy-rand-seed", "7"}, "config.numpy-rand-seed"},
		{[]string{"--arch-embedding-size", "20-30-41"}, "config.arch-embedding-size"},
		{[]string{"--arch-mlp-top", "16-1"}, "config.arch-mlp-top"},
	} {
		err := resume(ckpt, c.flags...)
		e, ok := errors.AsType[*checkpoint.Error](err)
		if !ok || e.Field != c.field || !strings.Contains(err.Error(), "--"+strings.TrimPrefix(c.field, "config.")) {
			t.Errorf("resuming with %v: %v, want a *checkpoint.Error for %s naming the flag", c.flags, err, c.field)
		}
	}
	if err := resume(filepath.Join(dir, "model.pt")); err == nil || !strings.Contains(err.Error(), "safetensors.torch") {
		t.Errorf("resuming from a .pt file: %v, want the conversion command", err)
	}

	// A state dict (as PyTorch's DLRM_Net.state_dict() saved with
	// safetensors) starts training at epoch 0 from its weights, and
	// evaluate reads it.
	w, err := checkpoint.ReadWeights(ckpt, "", &progress{})
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.safetensors")
	if err := nn.SaveTensors(plain, w.Model); err != nil {
		t.Fatal(err)
	}
	o, err := parse(commands[0], append(slices.Clone(args), "--load-model", plain), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := trainRun(o, &out, io.Discard)
	if err != nil || res.iterations != 7 || strings.Contains(out.String(), "resuming") {
		t.Errorf("training from a state dict: %v after %d iterations, want a fresh start stopping after 7:\n%s", err, res.iterations, out.String())
	}
	for _, file := range []string{plain, ckpt} {
		ev := runOK(t, append([]string{"evaluate", "--load-model", file}, resumeArgs...)...)
		if !strings.Contains(ev, "held-out auc") {
			t.Errorf("evaluate %s printed no held-out line:\n%s", file, ev)
		}
	}
}
