package optim_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/optim"
)

// twoGroupSGD mirrors gen_optim.py's scheduler optimizer: two groups with
// learning rates 0.1 and 0.05.
func twoGroupSGD(t *testing.T) *optim.SGD {
	t.Helper()
	opt, err := optim.NewSGDGroups(
		optim.SGDGroup{Params: []*autograd.Tensor{leaf(0)}, SGDOptions: optim.SGDOptions{LR: 0.1}},
		optim.SGDGroup{Params: []*autograd.Tensor{leaf(0)}, SGDOptions: optim.SGDOptions{LR: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// loadF64 reads a float64 golden tensor without narrowing it to float32,
// as golden.Load would.
func loadF64(t *testing.T, file, name string) (vals []float64, shape []int) {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join(golden.Dir(), file))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Tensors {
		if e.Name != name {
			continue
		}
		if e.DType != "F64" {
			t.Fatalf("%s is %s, want F64", name, e.DType)
		}
		vals = make([]float64, len(e.Data)/8)
		for i := range vals {
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(e.Data[8*i:]))
		}
		return vals, e.Shape
	}
	t.Fatalf("no %s in %s", name, file)
	return nil, nil
}

func TestSchedulersMatchPyTorch(t *testing.T) {
	cases := []struct {
		name string
		make func(opt optim.Optimizer) ([]optim.Scheduler, error)
	}{
		{"step", func(o optim.Optimizer) ([]optim.Scheduler, error) {
			s, err := optim.NewStepLR(o, 7, 0.5)
			return []optim.Scheduler{s}, err
		}},
		{"multistep", func(o optim.Optimizer) ([]optim.Scheduler, error) {
			s, err := optim.NewMultiStepLR(o, []int{10, 3, 25, 10}, 0.3)
			return []optim.Scheduler{s}, err
		}},
		{"cosine", func(o optim.Optimizer) ([]optim.Scheduler, error) {
			s, err := optim.NewCosineAnnealingLR(o, 5, 0.001)
			return []optim.Scheduler{s}, err
		}},
		{"cosine10", func(o optim.Optimizer) ([]optim.Scheduler, error) {
			s, err := optim.NewCosineAnnealingLR(o, 10, 0)
			return []optim.Scheduler{s}, err
		}},
		{"linear", func(o optim.Optimizer) ([]optim.Scheduler, error) {
			s, err := optim.NewLinearLR(o, 0.25, 1, 8)
			return []optim.Scheduler{s}, err
		}},
		{"linear_decay", func(o optim.Optimizer) ([]optim.Scheduler, error) {
			s, err := optim.NewLinearLR(o, 1, 0.1, 20)
			return []optim.Scheduler{s}, err
		}},
		{"warmup_cosine", func(o optim.Optimizer) ([]optim.Scheduler, error) {
			w, err := optim.NewLinearLR(o, 0.1, 1, 5)
			if err != nil {
				return nil, err
			}
			c, err := optim.NewCosineAnnealingLR(o, 12, 1e-3)
			return []optim.Scheduler{w, c}, err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, shape := loadF64(t, "optim.safetensors", "sched."+c.name+".lr")
			opt := twoGroupSGD(t)
			scheds, err := c.make(opt)
			if err != nil {
				t.Fatal(err)
			}
			last := scheds[len(scheds)-1]
			for step := range shape[0] {
				if step > 0 {
					for _, s := range scheds {
						s.Step()
					}
				}
				got := last.LastLR()
				for g := range 2 {
					w := want[2*step+g]
					if math.Abs(got[g]-w) > 1e-12*math.Abs(w)+1e-18 {
						t.Fatalf("step %d group %d: lr %.17g, PyTorch %.17g", step, g, got[g], w)
					}
					if opt.LR(g) != got[g] {
						t.Fatalf("step %d group %d: optimizer LR %v, scheduler's last %v", step, g, opt.LR(g), got[g])
					}
				}
			}
		})
	}
}

func TestSchedulersRejectBadInput(t *testing.T) {
	cases := []struct {
		name string
		make func(opt optim.Optimizer) error
		want string
	}{
		{"StepLR size 0", func(o optim.Optimizer) error { _, err := optim.NewStepLR(o, 0, 0.1); return err }, "step size must be positive, got 0"},
		{"StepLR nil", func(optim.Optimizer) error { _, err := optim.NewStepLR(nil, 1, 0.1); return err }, "needs an optimizer"},
		{"MultiStepLR nil", func(optim.Optimizer) error { _, err := optim.NewMultiStepLR(nil, nil, 0.1); return err }, "needs an optimizer"},
		{"cosine T_max", func(o optim.Optimizer) error { _, err := optim.NewCosineAnnealingLR(o, -3, 0); return err }, "T_max must be positive, got -3"},
		{"linear start 0", func(o optim.Optimizer) error { _, err := optim.NewLinearLR(o, 0, 1, 5); return err }, "start factor must be in (0, 1], got 0"},
		{"linear start 2", func(o optim.Optimizer) error { _, err := optim.NewLinearLR(o, 2, 1, 5); return err }, "start factor"},
		{"linear end", func(o optim.Optimizer) error { _, err := optim.NewLinearLR(o, 0.5, 1.5, 5); return err }, "end factor must be in [0, 1], got 1.5"},
		{"linear iters", func(o optim.Optimizer) error { _, err := optim.NewLinearLR(o, 0.5, 1, -1); return err }, "total iterations must not be negative"},
		{"linear NaN start", func(o optim.Optimizer) error { _, err := optim.NewLinearLR(o, math.NaN(), 1, 5); return err }, "start factor must be in (0, 1], got NaN"},
		{"linear NaN end", func(o optim.Optimizer) error { _, err := optim.NewLinearLR(o, 0.5, math.NaN(), 5); return err }, "end factor must be in [0, 1], got NaN"},
		{"linear nil", func(optim.Optimizer) error { _, err := optim.NewLinearLR(nil, 0.5, 1, 5); return err }, "needs an optimizer"},
		{"cosine nil", func(optim.Optimizer) error { _, err := optim.NewCosineAnnealingLR(nil, 5, 0); return err }, "needs an optimizer"},
		{"StepLR negative size", func(o optim.Optimizer) error { _, err := optim.NewStepLR(o, -2, 0.1); return err }, "step size must be positive, got -2"},
		{"StepLR NaN gamma", func(o optim.Optimizer) error { _, err := optim.NewStepLR(o, 2, math.NaN()); return err }, "StepLR: gamma must be a finite number, got NaN"},
		{"MultiStepLR infinite gamma", func(o optim.Optimizer) error { _, err := optim.NewMultiStepLR(o, []int{2}, math.Inf(1)); return err }, "MultiStepLR: gamma must be a finite number, got +Inf"},
		{"cosine NaN eta_min", func(o optim.Optimizer) error { _, err := optim.NewCosineAnnealingLR(o, 5, math.NaN()); return err }, "CosineAnnealingLR: eta_min must be a finite number, got NaN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt := twoGroupSGD(t)
			err := c.make(opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one containing %q", err, c.want)
			}
			if opt.LR(0) != 0.1 {
				t.Errorf("a rejected scheduler changed the learning rate to %v", opt.LR(0))
			}
		})
	}
}

func TestSchedulerLoadStateRejects(t *testing.T) {
	cases := []struct {
		name string
		st   optim.ScheduleState
		want string
	}{
		{"too few groups", optim.ScheduleState{LastEpoch: 1, BaseLRs: []float64{0.1}, LastLR: []float64{0.1, 0.05}}, "scheduler state has 1 base and 2 last learning rates, the optimizer has 2 groups"},
		{"no last rates", optim.ScheduleState{LastEpoch: 1, BaseLRs: []float64{0.1, 0.05}}, "2 base and 0 last learning rates"},
		{"negative epoch", optim.ScheduleState{LastEpoch: -1, BaseLRs: []float64{0.1, 0.05}, LastLR: []float64{0.1, 0.05}}, "last epoch -1, want at least 0"},
		{"NaN base", optim.ScheduleState{LastEpoch: 1, BaseLRs: []float64{0.1, math.NaN()}, LastLR: []float64{0.1, 0.05}}, "base learning rate of group 1 must be a finite number, got NaN"},
		{"infinite last", optim.ScheduleState{LastEpoch: 1, BaseLRs: []float64{0.1, 0.05}, LastLR: []float64{math.Inf(1), 0.05}}, "last learning rate of group 0 must be a finite number, got +Inf"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := optim.NewStepLR(twoGroupSGD(t), 3, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			before := s.State()
			err = s.LoadState(c.st)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if after := s.State(); after.LastEpoch != before.LastEpoch || fmt.Sprint(after.BaseLRs, after.LastLR) != fmt.Sprint(before.BaseLRs, before.LastLR) {
				t.Errorf("a rejected state changed the scheduler from %+v to %+v", before, after)
			}
		})
	}
}

// Stopping after 7 epochs and resuming from the saved optimizer and
// scheduler states gives the learning rates of an uninterrupted run.
func TestSchedulerResumes(t *testing.T) {
	build := func() (*optim.SGD, []optim.Scheduler) {
		opt := twoGroupSGD(t)
		w, err := optim.NewLinearLR(opt, 0.1, 1, 5)
		if err != nil {
			t.Fatal(err)
		}
		c, err := optim.NewCosineAnnealingLR(opt, 12, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		return opt, []optim.Scheduler{w, c}
	}
	stepAll := func(opt *optim.SGD, scheds []optim.Scheduler, n int) {
		for range n {
			opt.Step()
			for _, s := range scheds {
				s.Step()
			}
		}
	}
	full, fullScheds := build()
	stepAll(full, fullScheds, 20)

	first, firstScheds := build()
	stepAll(first, firstScheds, 7)
	resumed, resumedScheds := build()
	if err := resumed.LoadStateDict(first.StateDict()); err != nil {
		t.Fatal(err)
	}
	for i, s := range resumedScheds {
		if err := s.LoadState(firstScheds[i].State()); err != nil {
			t.Fatal(err)
		}
	}
	stepAll(resumed, resumedScheds, 13)
	for g := range 2 {
		if resumed.LR(g) != full.LR(g) {
			t.Errorf("group %d: lr %v after resuming, %v uninterrupted", g, resumed.LR(g), full.LR(g))
		}
	}

	err := resumedScheds[0].LoadState(optim.ScheduleState{LastEpoch: 3, BaseLRs: []float64{0.1}, LastLR: []float64{0.1}})
	if err == nil || !strings.Contains(err.Error(), "the optimizer has 2 groups") {
		t.Errorf("loading a one-group state: %v", err)
	}
}
