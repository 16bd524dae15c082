package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestQuickstartLearns trains for three epochs, a quarter of the demo, and
// checks the network has learnt the digits and logged every epoch.
func TestQuickstartLearns(t *testing.T) {
	var log bytes.Buffer
	acc, err := run(&log, config{Epochs: 3, BatchSize: 32, LR: 0.05, Seed: 1, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if acc < 0.9 {
		t.Errorf("held-out accuracy %.3f after 3 epochs, want at least 0.9", acc)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "epoch 3 loss ") {
		t.Errorf("epoch log = %q, want three lines ending with epoch 3's", lines)
	}
}

// TestQuickstartLearnsBF16 trains the same three epochs in BF16 (split
// master weights and the split SGD through kiln.Optimize, forwards under
// autocast) and wants the same bar.
func TestQuickstartLearnsBF16(t *testing.T) {
	var log bytes.Buffer
	acc, err := run(&log, config{Epochs: 3, BatchSize: 32, LR: 0.05, Seed: 1, Quiet: true, DType: "bf16"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BF16 held-out accuracy after 3 epochs: %.3f", acc)
	if acc < 0.9 {
		t.Errorf("held-out accuracy %.3f after 3 epochs in BF16, want at least 0.9", acc)
	}
	if _, err := run(&log, config{Epochs: 1, BatchSize: 32, LR: 0.05, Seed: 1, Quiet: true, DType: "fp8"}); err == nil || !strings.Contains(err.Error(), `unknown dtype "fp8"`) {
		t.Errorf("dtype fp8: error %v", err)
	}
}
