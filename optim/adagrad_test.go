package optim_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/optim"
)

func TestAdagradFollowsPyTorchUpdate(t *testing.T) {
	grads := [][]float32{{0.5, -1, 2}, {0.25, 0.5, -3}, {-1, 1, 0.125}, {2, 0, -0.5}, {0.1, -0.2, 3}}
	cases := map[string]optim.AdagradOptions{
		"default":  optim.DefaultAdagradOptions(),
		"decay":    {LR: 0.1, LRDecay: 0.5, WeightDecay: 0.05, InitialAccumulatorValue: 0.2, Eps: 1e-10},
		"maximize": {LR: 0.05, InitialAccumulatorValue: 1, Eps: 1e-3, Maximize: true},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			p := leaf(1, -2, 0.5)
			opt, err := optim.NewAdagrad([]*autograd.Tensor{p}, o)
			if err != nil {
				t.Fatal(err)
			}
			want := []float64{1, -2, 0.5}
			sum := []float64{o.InitialAccumulatorValue, o.InitialAccumulatorValue, o.InitialAccumulatorValue}
			for step, g := range grads {
				setGrad(p, g...)
				opt.Step()
				clr := o.LR / (1 + float64(step)*o.LRDecay)
				for i := range want {
					d := float64(g[i])
					if o.Maximize {
						d = -d
					}
					d += o.WeightDecay * want[i]
					sum[i] += d * d
					want[i] -= clr * d / (math.Sqrt(sum[i]) + o.Eps)
				}
			}
			for i, v := range p.Values() {
				if math.Abs(v-want[i]) > 1e-5*(1+math.Abs(want[i])) {
					t.Errorf("element %d: got %v, want %v", i, v, want[i])
				}
			}
		})
	}
}

// As in PyTorch, every parameter has state from the start, and one without
// a gradient keeps step 0.
func TestAdagradStateFromTheStart(t *testing.T) {
	a, b := leaf(1, 2), leaf(3, 4)
	o := optim.DefaultAdagradOptions()
	o.InitialAccumulatorValue = 0.5
	opt, err := optim.NewAdagrad([]*autograd.Tensor{a, b}, o)
	if err != nil {
		t.Fatal(err)
	}
	sd := opt.StateDict()
	if len(sd.State) != 2 || sd.State[1]["step"].Item() != 0 || !slices.Equal(sd.State[1]["sum"].Values(), []float64{0.5, 0.5}) {
		t.Fatalf("initial state %v", sd.State)
	}
	setGrad(a, 1, 1)
	opt.Step()
	if got := b.Values(); !slices.Equal(got, []float64{3, 4}) {
		t.Errorf("parameter without gradient changed to %v", got)
	}
	sd = opt.StateDict()
	if sd.State[0]["step"].Item() != 1 || sd.State[1]["step"].Item() != 0 || !slices.Equal(sd.State[0]["sum"].Values(), []float64{1.5, 1.5}) {
		t.Errorf("state after one step: steps %v %v, sum %v", sd.State[0]["step"].Item(), sd.State[1]["step"].Item(), sd.State[0]["sum"].Values())
	}
	opt.ZeroGrad()
	if a.Grad() != nil {
		t.Error("ZeroGrad left a gradient")
	}
}

func TestAdagradChannelsLast(t *testing.T) {
	o := optim.AdagradOptions{LR: 0.1, LRDecay: 0.1, WeightDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-10}
	testChannelsLast(t, func(p *autograd.Tensor) optim.Optimizer {
		opt, err := optim.NewAdagrad([]*autograd.Tensor{p}, o)
		if err != nil {
			t.Fatal(err)
		}
		return opt
	})
}

func TestAdagradStepDoesNotAllocate(t *testing.T) {
	opt, err := optim.NewAdagrad(paramsWithGrads(3, 1000, 1<<16), optim.AdagradOptions{LR: 0.01, LRDecay: 1e-3, WeightDecay: 1e-4, Eps: 1e-10})
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(10, opt.Step); a != 0 {
		t.Fatalf("Step allocates %v times", a)
	}
}

func TestNewAdagradRejectsBadInput(t *testing.T) {
	p := leaf(1)
	ok := []*autograd.Tensor{p}
	with := func(f func(o *optim.AdagradOptions)) optim.AdagradOptions {
		o := optim.DefaultAdagradOptions()
		f(&o)
		return o
	}
	cases := []struct {
		name   string
		groups []optim.AdagradGroup
		want   string
	}{
		{"negative lr", []optim.AdagradGroup{{ok, with(func(o *optim.AdagradOptions) { o.LR = -0.1 })}}, "group 0: invalid learning rate: -0.1"},
		{"NaN lr", []optim.AdagradGroup{{ok, with(func(o *optim.AdagradOptions) { o.LR = math.NaN() })}}, "invalid learning rate: NaN"},
		{"negative lr decay", []optim.AdagradGroup{{ok, with(func(o *optim.AdagradOptions) { o.LRDecay = -1 })}}, "invalid lr_decay value: -1"},
		{"infinite lr decay", []optim.AdagradGroup{{ok, with(func(o *optim.AdagradOptions) { o.LRDecay = math.Inf(1) })}}, "invalid lr_decay value: +Inf"},
		{"negative weight decay", []optim.AdagradGroup{{ok, with(func(o *optim.AdagradOptions) { o.WeightDecay = -1e-4 })}}, "invalid weight_decay value: -0.0001"},
		{"negative accumulator", []optim.AdagradGroup{{ok, with(func(o *optim.AdagradOptions) { o.InitialAccumulatorValue = -0.5 })}}, "invalid initial_accumulator_value value: -0.5"},
		{"NaN accumulator", []optim.AdagradGroup{{ok, with(func(o *optim.AdagradOptions) { o.InitialAccumulatorValue = math.NaN() })}}, "invalid initial_accumulator_value value: NaN"},
		{"zero value", []optim.AdagradGroup{{ok, optim.AdagradOptions{LR: 0.01}}}, "invalid epsilon value: 0"},
		{"negative eps", []optim.AdagradGroup{{ok, with(func(o *optim.AdagradOptions) { o.Eps = -1 })}}, "invalid epsilon value: -1"},
		{"bad second group", []optim.AdagradGroup{{ok, optim.DefaultAdagradOptions()}, {[]*autograd.Tensor{leaf(2)}, with(func(o *optim.AdagradOptions) { o.LR = -1 })}}, "group 1: invalid learning rate"},
		{"no groups", nil, "empty parameter list"},
		{"nil parameter", []optim.AdagradGroup{{[]*autograd.Tensor{p, nil}, optim.DefaultAdagradOptions()}}, "group 0 parameter 1 is nil"},
		{"duplicate", []optim.AdagradGroup{{ok, optim.DefaultAdagradOptions()}, {ok, optim.DefaultAdagradOptions()}}, "more than one parameter group"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt, err := optim.NewAdagradGroups(c.groups...)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "optim: Adagrad: ") {
				t.Fatalf("got %v, %v; want error containing %q", opt, err, c.want)
			}
		})
	}
}

func trainedAdagrad(t *testing.T, steps int) (*optim.Adagrad, []*autograd.Tensor) {
	t.Helper()
	a, b, c := leaf(1, 2, 3), leaf(-1), leaf(0.5, 0.25)
	base := optim.AdagradOptions{LR: 0.1, LRDecay: 0.01, WeightDecay: 1e-3, Eps: 1e-10}
	other := base
	other.LR, other.InitialAccumulatorValue = 0.05, 0.1
	opt, err := optim.NewAdagradGroups(optim.AdagradGroup{Params: []*autograd.Tensor{a, b}, AdagradOptions: base},
		optim.AdagradGroup{Params: []*autograd.Tensor{c}, AdagradOptions: other})
	if err != nil {
		t.Fatal(err)
	}
	params := []*autograd.Tensor{a, b, c}
	trainThree(opt, params, steps)
	return opt, params
}

func TestAdagradStateDictRoundTrip(t *testing.T) {
	src, srcParams := trainedAdagrad(t, 3)
	if _, err := optim.NewStepLR(src, 2, 0.5); err != nil {
		t.Fatal(err)
	}
	sd := src.StateDict()
	if h := sd.Groups[1].Hyper; h["initial_accumulator_value"] != 0.1 || h["lr_decay"] != 0.01 || h["initial_lr"] != 0.05 || len(h) != 7 {
		t.Errorf("group 1 hyper-parameters %v", h)
	}
	dst, dstParams := trainedAdagrad(t, 0)
	for i := range dstParams {
		dstParams[i].CopyFrom(srcParams[i])
	}
	if err := dst.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	resumeAndCompare(t, src, srcParams, dst, dstParams)
	if s, d := src.StateDict().State[0]["step"].Item(), dst.StateDict().State[0]["step"].Item(); s != 5 || d != 5 {
		t.Errorf("steps %v and %v, want 5", s, d)
	}
}

// A parameter without saved state (an empty entry) starts afresh from the
// loaded group's initial accumulator value.
func TestAdagradLoadStateDictEmptyState(t *testing.T) {
	opt, _ := trainedAdagrad(t, 2)
	sd := opt.StateDict()
	sd.State[2] = map[string]*autograd.Tensor{}
	sd.Groups[1].Hyper["initial_accumulator_value"] = 0.25
	fresh, _ := trainedAdagrad(t, 0)
	if err := fresh.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	st := fresh.StateDict().State[2]
	if st["step"].Item() != 0 || !slices.Equal(st["sum"].Values(), []float64{0.25, 0.25}) {
		t.Errorf("parameter 2 state %v %v", st["step"].Item(), st["sum"].Values())
	}
}

func TestAdagradLoadStateDictRejectsMismatches(t *testing.T) {
	cases := []loadCase{
		{"nil", nil, "nil state dict"},
		{"group count", func(sd *optim.StateDict) { sd.Groups = sd.Groups[:1] }, "has 1 parameter groups, the optimizer has 2"},
		{"unknown state", func(sd *optim.StateDict) { sd.State[0]["exp_avg"] = sd.State[0]["sum"] }, "state.0.exp_avg: unknown state"},
		{"missing sum", func(sd *optim.StateDict) { delete(sd.State[0], "sum") }, "state.0.sum: missing state"},
		{"missing step", func(sd *optim.StateDict) { delete(sd.State[1], "step") }, "state.1.step: missing state"},
		{"shape", func(sd *optim.StateDict) { sd.State[2]["sum"] = autograd.Zeros(3) }, "state.2.sum: shape [3] does not match the parameter's shape [2]"},
		{"dtype", func(sd *optim.StateDict) { sd.State[2]["sum"] = autograd.FromInt64([]int64{1, 2}) }, "state.2.sum: dtype int64"},
		{"step too large", func(sd *optim.StateDict) { sd.State[0]["step"] = autograd.Scalar(1 << 25) }, "state.0.step: 3.3554432e+07 is not a step count"},
		{"missing lr_decay", func(sd *optim.StateDict) { delete(sd.Groups[0].Hyper, "lr_decay") }, "param_groups.0.lr_decay: missing hyper-parameter"},
		{"unknown hyper", func(sd *optim.StateDict) { sd.Groups[0].Hyper["betas.0"] = 0.9 }, "param_groups.0.betas.0: unknown hyper-parameter"},
		{"negative accumulator", func(sd *optim.StateDict) { sd.Groups[1].Hyper["initial_accumulator_value"] = -1 }, "invalid initial_accumulator_value value: -1 (in param_groups.1)"},
		{"NaN lr", func(sd *optim.StateDict) { sd.Groups[0].Hyper["lr"] = math.NaN() }, "param_groups.0.lr: value is NaN"},
	}
	testLoadRejects(t, cases, "sum", func(t *testing.T, steps int) optim.Optimizer {
		opt, _ := trainedAdagrad(t, steps)
		return opt
	})
}

// Adagrad's steps shrink as the squared gradients add up: with a constant
// gradient of 1 and no accumulator, step t moves by lr/√t.
func ExampleNewAdagrad() {
	w := autograd.Zeros(1)
	w.SetRequiresGrad(true)
	o := optim.DefaultAdagradOptions()
	o.LR = 1
	opt, err := optim.NewAdagrad([]*autograd.Tensor{w}, o)
	if err != nil {
		panic(err)
	}
	prev := 0.0
	for step := 1; step <= 4; step++ {
		w.SetGrad(autograd.Ones(1))
		opt.Step()
		fmt.Printf("step %d moved %.4f\n", step, prev-w.Item())
		prev = w.Item()
	}
	// Output:
	// step 1 moved 1.0000
	// step 2 moved 0.7071
	// step 3 moved 0.5774
	// step 4 moved 0.5000
}
