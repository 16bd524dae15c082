package optim_test

import (
	"fmt"
	"math"
	"slices"
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
