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

// goldenParams returns fresh parameters holding set's init.p<i> tensors,
// requiring gradients, and the gradients grad.p<i> the steps apply.
func goldenParams(t *testing.T, set golden.Set) (params, grads []*autograd.Tensor) {
	t.Helper()
	for i := 0; ; i++ {
		p0, ok := set[fmt.Sprintf("init.p%d", i)]
		if !ok {
			return params, grads
		}
		params = append(params, p0.Clone().SetRequiresGrad(true))
		grads = append(grads, set.Get(t, fmt.Sprintf("grad.p%d", i)))
	}
}

// stepGolden steps opt once per row of the gradients, as the generator
// scripts do: parameter 1 has no gradient on every third step, parameter 2
// none on the first five.
func stepGolden(opt optim.Optimizer, params, grads []*autograd.Tensor) {
	hasGrad := func(i, step int) bool { return !((i == 1 && step%3 == 2) || (i == 2 && step < 5)) }
	for step := range grads[0].Dim(0) {
		for i, p := range params {
			p.SetGrad(nil)
			if hasGrad(i, step) {
				n := p.Numel()
				p.SetGrad(autograd.FromFloat32(append([]float32(nil), grads[i].Float32s()[step*n:(step+1)*n]...), p.Shape()...))
			}
		}
		opt.Step()
	}
}
