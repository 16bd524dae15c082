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
