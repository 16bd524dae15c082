package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/optim"
)

// adamScalar is the PyTorch Adam/AdamW update for one element in float64,
// close enough to the float32 kernel for the tolerances used here.
type adamScalar struct {
	m, v, vmax float64
	t          int
}

func (s *adamScalar) step(p, g float64, o optim.AdamOptions, decoupled bool) float64 {
	if o.Maximize {
		g = -g
	}
	if decoupled {
		p *= 1 - o.LR*o.WeightDecay
	} else {
		g += o.WeightDecay * p
	}
	s.t++
	s.m = o.Betas[0]*s.m + (1-o.Betas[0])*g
	s.v = o.Betas[1]*s.v + (1-o.Betas[1])*g*g
	v := s.v
	if o.AMSGrad {
		s.vmax = math.Max(s.vmax, s.v)
		v = s.vmax
	}
	bc1 := 1 - math.Pow(o.Betas[0], float64(s.t))
	bc2 := 1 - math.Pow(o.Betas[1], float64(s.t))
	return p - o.LR/bc1*s.m/(math.Sqrt(v)/math.Sqrt(bc2)+o.Eps)
}

// adamWith returns DefaultAdamOptions changed by f.
func adamWith(f func(o *optim.AdamOptions)) optim.AdamOptions {
	o := optim.DefaultAdamOptions()
	f(&o)
	return o
}

func TestAdamFollowsPyTorchUpdate(t *testing.T) {
	grads := [][]float32{{0.5, -1, 2}, {0.25, 0.5, -3}, {-1, 1, 0.125}, {2, 0, -0.5}, {0.1, -0.2, 3}}
	cases := []struct {
		name      string
		o         optim.AdamOptions
		decoupled bool
	}{
		{"default", optim.DefaultAdamOptions(), false},
		{"l2", adamWith(func(o *optim.AdamOptions) { o.LR, o.WeightDecay = 0.1, 0.05 }), false},
		{"amsgrad", adamWith(func(o *optim.AdamOptions) { o.LR, o.AMSGrad, o.Betas = 0.05, true, [2]float64{0.5, 0.6} }), false},
		{"maximize", adamWith(func(o *optim.AdamOptions) { o.LR, o.Maximize, o.Eps = 0.01, true, 1e-3 }), false},
		{"adamw", adamWith(func(o *optim.AdamOptions) { o.LR, o.WeightDecay = 0.1, 0.5 }), true},
		{"adamw amsgrad", adamWith(func(o *optim.AdamOptions) {
			o.LR, o.WeightDecay, o.AMSGrad, o.Betas = 0.1, 0.1, true, [2]float64{0, 0.9}
		}), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := leaf(1, -2, 0.5)
			newOpt := optim.NewAdam
			if c.decoupled {
				newOpt = optim.NewAdamW
			}
			opt, err := newOpt([]*autograd.Tensor{p}, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if opt.Decoupled() != c.decoupled {
				t.Errorf("Decoupled() = %v", opt.Decoupled())
			}
			want := []float64{1, -2, 0.5}
			ref := make([]adamScalar, 3)
			for _, g := range grads {
				setGrad(p, g...)
				opt.Step()
				for i := range want {
					want[i] = ref[i].step(want[i], float64(g[i]), c.o, c.decoupled)
				}
			}
			for i, v := range p.Values() {
				if math.Abs(v-want[i]) > 1e-5*(1+math.Abs(want[i])) {
					t.Errorf("element %d: got %v, want %v", i, v, want[i])
				}
			}
			if got := opt.StateDict().State[0]["step"].Item(); got != float64(len(grads)) {
				t.Errorf("step %v after %d steps", got, len(grads))
			}
		})
	}
}

func trainedAdam(t *testing.T, steps int) (*optim.Adam, []*autograd.Tensor) {
	t.Helper()
	a, b, c := leaf(1, 2, 3), leaf(-1), leaf(0.5, 0.25)
	base := optim.DefaultAdamOptions()
	base.LR, base.WeightDecay = 0.1, 1e-3
	other := base
	other.LR, other.AMSGrad, other.Betas = 0.05, true, [2]float64{0.8, 0.95}
	opt, err := optim.NewAdamGroups(optim.AdamGroup{Params: []*autograd.Tensor{a, b}, AdamOptions: base},
		optim.AdamGroup{Params: []*autograd.Tensor{c}, AdamOptions: other})
	if err != nil {
		t.Fatal(err)
	}
	params := []*autograd.Tensor{a, b, c}
	trainThree(opt, params, steps)
	return opt, params
}

// An empty state entry, as PyTorch writes for a parameter that has not
// been stepped, loads as no state; a group switched to AMSGrad starts its
// maximum from zero.
func TestAdamLoadStateDictEmptyStateAndAMSGradSwitch(t *testing.T) {
	opt, _ := trainedAdam(t, 2)
	sd := opt.StateDict()
	sd.State[0] = map[string]*autograd.Tensor{}
	sd.Groups[0].Hyper["amsgrad"] = 1
	fresh, params := trainedAdam(t, 0)
	if err := fresh.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	if _, ok := fresh.StateDict().State[0]; ok {
		t.Error("an empty state entry loaded as state")
	}
	setGrad(params[0], 1, 2, 3)
	setGrad(params[1], 1)
	fresh.Step()
	st := fresh.StateDict().State
	if st[0]["step"].Item() != 1 || st[0]["max_exp_avg_sq"] == nil {
		t.Errorf("parameter 0 state after a step: %v", st[0])
	}
	if st[1]["max_exp_avg_sq"] == nil {
		t.Error("parameter 1 has no max_exp_avg_sq after its group switched to AMSGrad")
	}
}

// Minimise (w − 3)² with Adam.
func ExampleNewAdam() {
	w := autograd.Zeros(1)
	w.SetRequiresGrad(true)
	o := optim.DefaultAdamOptions()
	o.LR = 0.1
	opt, err := optim.NewAdam([]*autograd.Tensor{w}, o)
	if err != nil {
		panic(err)
	}
	target := autograd.Full(3, 1)
	for range 300 {
		opt.ZeroGrad()
		d := autograd.Sub(w, target)
		autograd.Mul(d, d).Backward()
		opt.Step()
	}
	fmt.Printf("w = %.3f, steps = %v\n", w.Item(), opt.StateDict().State[0]["step"].Item())
	// Output: w = 3.000, steps = 300
}

// AdamW decays the weights apart from the gradient: with no gradient
// signal at all (a zero gradient) each step multiplies w by 1 − lr·wd.
func ExampleNewAdamW() {
	w := autograd.Full(1, 1)
	w.SetRequiresGrad(true)
	o := optim.DefaultAdamWOptions() // lr 1e-3, weight decay 1e-2
	o.LR, o.WeightDecay = 0.1, 0.5
	opt, err := optim.NewAdamW([]*autograd.Tensor{w}, o)
	if err != nil {
		panic(err)
	}
	for range 3 {
		w.SetGrad(autograd.Zeros(1))
		opt.Step()
	}
	fmt.Printf("w = %.6f (0.95³ = %.6f)\n", w.Item(), math.Pow(0.95, 3))
	// Output: w = 0.857375 (0.95³ = 0.857375)
}
