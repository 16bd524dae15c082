package optim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/optim"
)

// compareGoldenState checks an optimizer's state dict against the state
// tensors a reference (who) stored in set under name+".state.<id>.<name>":
// the same tensors, each close as compare judges, and equal step counts.
func compareGoldenState(t *testing.T, set golden.Set, name, who string, sd *optim.StateDict, compare func(what string, got, want *autograd.Tensor)) {
	t.Helper()
	prefix := name + ".state."
	wantStates := 0
	for key := range set {
		if strings.HasPrefix(key, prefix) {
			wantStates++
		}
	}
	gotStates := 0
	for id, st := range sd.State {
		for sname, got := range st {
			gotStates++
			want := set.Get(t, fmt.Sprintf("%s%d.%s", prefix, id, sname))
			if sname == "step" {
				if got.Numel() != 1 || got.Item() != want.Item() {
					t.Errorf("state.%d.step: %v, %s %v", id, got.Values(), who, want.Item())
				}
				continue
			}
			compare(fmt.Sprintf("state.%d.%s", id, sname), got, want)
		}
	}
	if gotStates != wantStates {
		t.Errorf("%d state tensors, %s has %d", gotStates, who, wantStates)
	}
}
