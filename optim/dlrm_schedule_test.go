package optim_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/optim"
)

// TestDLRMLRPolicyMatchesDLRM steps DLRMLRPolicy 40 times on gen_dlrm_lr.py's
// two-group SGD optimizer (lr 0.1 and 2e-5) for each configuration and
// compares every learning rate with dlrm's LRPolicyScheduler bit for bit.
func TestDLRMLRPolicyMatchesDLRM(t *testing.T) {
	set := golden.Load(t, "dlrm_lr.safetensors")
	cases := []struct {
		name                       string
		warmup, decayStart, decays int
	}{
		{"warmup", 10, 10, 0},
		{"decay", 0, 5, 30}, // reaches the 1e-7 floor in group 1, then freezes there
		{"both", 8, 8, 20},
		{"none", 0, 0, 0},
		{"gap", 6, 15, 12}, // frozen at the last warm-up rate from step 5 to 14
		{"late_decay", 0, 12, 9},
		{"warmup1", 1, 3, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, want := fmt.Sprint(c.warmup, c.decayStart, c.decays), fmt.Sprint(set.Get(t, "dlrm_lr."+c.name+".config").Int64s()); got != strings.Trim(want, "[]") {
				t.Fatalf("configuration %s, generator's %s", got, want)
			}
			want, shape := loadF64(t, "dlrm_lr.safetensors", "dlrm_lr."+c.name+".lr")
			opt := twoGroupSGDWith(t, 0.1, 2e-5)
			s, err := optim.NewDLRMLRPolicy(opt, c.warmup, c.decayStart, c.decays)
			if err != nil {
				t.Fatal(err)
			}
			for step := range shape[0] {
				if step > 0 {
					opt.Step()
					s.Step()
				}
				last := s.LastLR()
				for g := range 2 {
					if got, w := opt.LR(g), want[2*step+g]; got != w || last[g] != w {
						t.Fatalf("after %d steps, group %d: lr %.17g (LastLR %.17g), dlrm %.17g", step, g, got, last[g], w)
					}
				}
			}
		})
	}
}

func TestDLRMLRPolicyRejects(t *testing.T) {
	cases := []struct {
		name                       string
		warmup, decayStart, decays int
		want                       string
	}{
		{"decay before warm-up ends", 10, 9, 5, "DLRMLRPolicy: learning rate warmup must finish before the decay starts: decay start step 9 is before the end of 10 warm-up steps"},
		{"negative warm-up", -1, 0, 0, "number of warm-up steps must not be negative, got -1"},
		{"negative decay start", 0, -3, 2, "decay start step must not be negative, got -3"},
		{"negative decay steps", 0, 4, -2, "number of decay steps must not be negative, got -2"},
		{"overflow", 0, math.MaxInt - 1, 5, "overflows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt := twoGroupSGD(t)
			_, err := optim.NewDLRMLRPolicy(opt, c.warmup, c.decayStart, c.decays)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if opt.LR(0) != 0.1 || opt.LR(1) != 0.05 {
				t.Errorf("a rejected scheduler changed the learning rates to %v, %v", opt.LR(0), opt.LR(1))
			}
		})
	}
	if _, err := optim.NewDLRMLRPolicy(nil, 0, 0, 0); err == nil || !strings.Contains(err.Error(), "needs an optimizer") {
		t.Errorf("nil optimizer: %v", err)
	}
}

// Stopping inside each phase (warm-up, the frozen gap, the decay, after
// it) and resuming from the saved optimizer and scheduler states gives the
// learning rates of an uninterrupted run: the frozen rate comes back with
// the scheduler's state.
func TestDLRMLRPolicyResumes(t *testing.T) {
	const total = 40
	build := func() (*optim.SGD, *optim.DLRMLRPolicy) {
		opt := twoGroupSGD(t)
		s, err := optim.NewDLRMLRPolicy(opt, 6, 15, 12)
		if err != nil {
			t.Fatal(err)
		}
		return opt, s
	}
	full, fullSched := build()
	var want [][]float64
	for range total {
		full.Step()
		fullSched.Step()
		want = append(want, []float64{full.LR(0), full.LR(1)})
	}
	for _, stop := range []int{0, 3, 9, 20, 30} {
		t.Run(fmt.Sprint("stop", stop), func(t *testing.T) {
			first, firstSched := build()
			for range stop {
				first.Step()
				firstSched.Step()
			}
			resumed, sched := build()
			if err := resumed.LoadStateDict(first.StateDict()); err != nil {
				t.Fatal(err)
			}
			if err := sched.LoadState(firstSched.State()); err != nil {
				t.Fatal(err)
			}
			for i := stop; i < total; i++ {
				resumed.Step()
				sched.Step()
				for g := range 2 {
					if got := resumed.LR(g); got != want[i][g] {
						t.Fatalf("step %d group %d: lr %v after resuming, %v uninterrupted", i+1, g, got, want[i][g])
					}
				}
			}
		})
	}
}

// twoGroupSGDWith is an SGD optimizer with two groups of one parameter
// each, with learning rates lr0 and lr1.
func twoGroupSGDWith(t *testing.T, lr0, lr1 float64) *optim.SGD {
	t.Helper()
	opt, err := optim.NewSGDGroups(
		optim.SGDGroup{Params: []*autograd.Tensor{leaf(0)}, SGDOptions: optim.SGDOptions{LR: lr0}},
		optim.SGDGroup{Params: []*autograd.Tensor{leaf(0)}, SGDOptions: optim.SGDOptions{LR: lr1}})
	if err != nil {
		t.Fatal(err)
	}
	return opt
}
