package cli

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/kernels"
)

func TestCPU(t *testing.T) {
	code, out, errOut := call("cpu", "--levels")
	if code != 0 {
		t.Fatalf("kiln cpu --levels: exit %d, stderr %q", code, errOut)
	}
	levels := strings.Fields(out)
	if len(levels) != len(kernels.Levels()) || levels[len(levels)-1] != "generic" {
		t.Errorf("kiln cpu --levels printed %q; want %d levels, best first, ending in generic", out, len(kernels.Levels()))
	}
	code, out, _ = call("cpu")
	if code != 0 || !strings.Contains(out, kernels.Features()) || !strings.Contains(out, strings.Join(levels, " ")) {
		t.Errorf("kiln cpu: exit %d, printed %q; want the features line and the levels", code, out)
	}
	if code, _, _ = call("cpu", "extra"); code != 2 {
		t.Errorf("kiln cpu extra: exit %d, want 2", code)
	}
}
