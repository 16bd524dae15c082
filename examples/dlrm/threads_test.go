package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/internal/safetensors"
)

// childEnv makes a test binary run TestTrainChild: a short training run
// that saves its model to the path in childOut.
const (
	childEnv = "KILN_DLRM_TRAIN_CHILD"
	childOut = "KILN_DLRM_TRAIN_OUT"
)

// TestTrainChild is the training run TestTrainThreadCountFree starts in a
// process of its own; it does nothing unless started so.
func TestTrainChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs only as TestTrainThreadCountFree's child")
	}
	args := []string{"train", "--data-generation", "random", "--arch-embedding-size", "50-300-1000-7",
		"--arch-sparse-feature-size", "16", "--arch-mlp-bot", "13-256-16", "--arch-mlp-top", "128-1",
		"--num-indices-per-lookup", "5", "--data-size", "8192", "--mini-batch-size", "1024", "--test-size", "1024",
		"--loss-function", "bce", "--round-targets=true", "--optimizer", os.Getenv(childEnv), "--learning-rate", "0.05",
		"--num-batches", "1", "--test-freq", "1000000", "--quiet", "--save-model", os.Getenv(childOut)}
	runOK(t, args...)
}

// TestTrainThreadCountFree takes the same training step with one kernel
// thread and with two, each in a process of its own (the worker pool is
// sized once per process), and checks that the tables come out the same
// bits: the lookups, the interaction, the gradients flowing back to the
// tables and their sparse updates do not depend on how the work is split.
// The MLP weights may differ in the last bits: the FP32 GEMM cuts a long
// K (the batch, in a weight gradient) into one part per thread.
func TestTrainThreadCountFree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two processes")
	}
	dir := t.TempDir()
	for _, opt := range []string{"sgd", "rwsadagrad"} {
		var models [][]byte
		for _, threads := range []string{"1", "2"} {
			out := filepath.Join(dir, opt+threads+".safetensors")
			cmd := exec.Command(os.Args[0], "-test.run", "^TestTrainChild$", "-test.count", "1")
			cmd.Env = append(os.Environ(), childEnv+"="+opt, childOut+"="+out, "KILN_NUM_THREADS="+threads, "GOMAXPROCS=2")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s, %s threads: %v\n%s", opt, threads, err, b)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			models = append(models, b)
		}
		for _, name := range differing(t, models[0], models[1]) {
			if strings.HasPrefix(name, "emb_l.") {
				t.Errorf("%s: %s after a step on 1 thread differs from the one on 2", opt, name)
			}
		}
	}
}

// differing names the tensors of two safetensors files that differ.
func differing(t *testing.T, a, b []byte) []string {
	fa, err := safetensors.Decode(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := safetensors.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range fa.Tensors {
		y, ok := fb.Get(x.Name)
		if !ok || !bytes.Equal(x.Data, y.Data) {
			names = append(names, x.Name)
		}
	}
	return names
}
