package cli

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/kernels"
)

func TestServeUsage(t *testing.T) {
	one, _ := saveGraphs(t, t.TempDir())
	for _, args := range [][]string{
		{"serve"},
		{"serve", one.path, "--instances", "0"},
		{"serve", one.path, "--max-batch", "-1"},
		{"serve", one.path, "--max-body", "0"},
	} {
		if code, stdout, stderr := call(args...); code != 2 {
			t.Errorf("kiln %v: exit %d, output %q", args, code, stdout+stderr)
		}
	}
	if code, _, stderr := call("serve", one.path+".missing"); code != 1 || !strings.Contains(stderr, "missing") {
		t.Errorf("missing file: exit %d, %q", code, stderr)
	}
}

// TestBenchInstances times two instances pinned to a core each.
func TestBenchInstances(t *testing.T) {
	one, _ := saveGraphs(t, t.TempDir())
	if cores, err := kernels.AvailableCores(); err != nil || len(cores) < 2 {
		t.Skipf("needs 2 cores: %v %v", cores, err)
	}
	code, stdout, stderr := call("bench", one.path, "--instances", "2", "--cores-per-instance", "1", "--iters", "3", "--warmup", "1")
	if code != 0 || !strings.Contains(stdout, "2 instances × 1 cores") || !strings.Contains(stdout, "throughput:") {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"bench", one.path, "--instances", "2"},
		{"bench", one.path, "--instances", "1000", "--cores-per-instance", "1"},
		{"bench", one.path, "--cores-per-instance", "1", "--profile"},
	} {
		if code, stdout, stderr := call(args...); code != 2 {
			t.Errorf("kiln %v: exit %d, output %q", args, code, stdout+stderr)
		}
	}
}
