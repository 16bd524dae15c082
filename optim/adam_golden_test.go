package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/optim"
)

// adamGoldenCases are gen_adam.py's CASES.
var adamGoldenCases = map[string]func(params []*autograd.Tensor) (optim.Optimizer, error){
	"adam_default": func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		return optim.NewAdam(ps, optim.DefaultAdamOptions())
	},
	"adam_wd_amsgrad": func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		return optim.NewAdam(ps, optim.AdamOptions{LR: 1e-2, Betas: [2]float64{0.8, 0.99}, Eps: 1e-6, WeightDecay: 1e-2, AMSGrad: true})
	},
	"adam_maximize": func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		o := optim.DefaultAdamOptions()
		o.LR, o.WeightDecay, o.Maximize = 1e-2, 1e-3, true
		return optim.NewAdam(ps, o)
	},
	"adamw": func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		o := optim.DefaultAdamWOptions()
		o.LR, o.WeightDecay = 1e-2, 1e-1
		return optim.NewAdamW(ps, o)
	},
	"adamw_amsgrad_maximize": func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		o := optim.DefaultAdamWOptions()
		o.LR, o.Betas, o.AMSGrad, o.Maximize = 5e-3, [2]float64{0.5, 0.9}, true, true
		return optim.NewAdamW(ps, o)
	},
	"adagrad": func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		return optim.NewAdagrad(ps, optim.AdagradOptions{LR: 5e-2, LRDecay: 1e-2, WeightDecay: 1e-2, InitialAccumulatorValue: 0.1, Eps: 1e-10})
	},
	"adagrad_maximize": func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		o := optim.DefaultAdagradOptions()
		o.Eps, o.Maximize = 1e-6, true
		return optim.NewAdagrad(ps, o)
	},
}

// TestAdamAdagradMatchPyTorch drives Adam, AdamW and Adagrad with
// gen_adam.py's gradients for 50 steps, no model in between (one parameter
// lacks a gradient on every third step, another on the first five), and
// compares the final parameters and every state tensor with PyTorch 1.13's
// single-tensor torch.optim: within 1e-6 relative (the target), and in
// fact bit for bit, since the kernels round as PyTorch's do.
func TestAdamAdagradMatchPyTorch(t *testing.T) {
	const rtol = 1e-6
	set := golden.Load(t, "adam.safetensors")
	for name, mk := range adamGoldenCases {
		t.Run(name, func(t *testing.T) {
			params, grads := goldenParams(t, set)
			opt, err := mk(params)
			if err != nil {
				t.Fatal(err)
			}
			stepGolden(opt, params, grads)
			differ, total := 0, 0
			compare := func(what string, got, want *autograd.Tensor) {
				t.Helper()
				golden.AssertClose(t, what, got, want, rtol)
				gv, wv := got.Values(), want.Values()
				for i := range wv {
					if i < len(gv) && gv[i] != wv[i] {
						differ++
					}
				}
				total += len(wv)
			}
			for i, p := range params {
				compare(fmt.Sprintf("p%d", i), p, set.Get(t, fmt.Sprintf("%s.p%d", name, i)))
			}
			compareGoldenState(t, set, name, "PyTorch", opt.StateDict(), compare)
			if differ > 0 {
				t.Errorf("%d of %d values differ from PyTorch's (within tolerance, but not bit for bit)", differ, total)
				worst := 0.0
				for i, p := range params {
					want := set.Get(t, fmt.Sprintf("%s.p%d", name, i)).Values()
					for j, v := range p.Values() {
						worst = math.Max(worst, math.Abs(v-want[j])/math.Max(math.Abs(want[j]), 1e-30))
					}
				}
				t.Logf("worst relative parameter difference %.3g", worst)
			}
		})
	}
}
