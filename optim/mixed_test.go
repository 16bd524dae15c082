package optim_test

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// TestMixedSplitGroups: a group holding split Tops and float32 parameters
// side by side, as after amp.SplitModuleFunc keeps BatchNorm weights FP32,
// steps each kind of parameter bit for bit as the all-FP32 optimizer does,
// for every optimizer, and its state dict loads into the FP32 optimizer.
func TestMixedSplitGroups(t *testing.T) {
	sgd := optim.SGDOptions{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-3}
	adam := optim.DefaultAdamOptions()
	adam.AMSGrad = true
	adamw := optim.DefaultAdamWOptions()
	ada := optim.DefaultAdagradOptions()
	lamb := optim.DefaultLambOptions()
	lamb.WeightDecay = 1e-2
	lars := optim.LARSOptions{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4, Eeta: 0.02, Eps: 1e-8}
	type mk func(sm *amp.SplitModel, ps []*autograd.Tensor) (optim.Optimizer, error)
	cases := []struct {
		name string
		mk   mk // over FP32 parameters when sm is nil
	}{
		{"SGD", func(sm *amp.SplitModel, ps []*autograd.Tensor) (optim.Optimizer, error) {
			g := optim.SGDGroup{Params: ps, SGDOptions: sgd}
			if sm == nil {
				return optim.NewSGDGroups(g)
			}
			return optim.NewSGDSplitGroups(sm, g)
		}},
		{"Adam", func(sm *amp.SplitModel, ps []*autograd.Tensor) (optim.Optimizer, error) {
			g := optim.AdamGroup{Params: ps, AdamOptions: adam}
			if sm == nil {
				return optim.NewAdamGroups(g)
			}
			return optim.NewAdamSplitGroups(sm, g)
		}},
		{"AdamW", func(sm *amp.SplitModel, ps []*autograd.Tensor) (optim.Optimizer, error) {
			g := optim.AdamGroup{Params: ps, AdamOptions: adamw}
			if sm == nil {
				return optim.NewAdamWGroups(g)
			}
			return optim.NewAdamWSplitGroups(sm, g)
		}},
		{"Adagrad", func(sm *amp.SplitModel, ps []*autograd.Tensor) (optim.Optimizer, error) {
			g := optim.AdagradGroup{Params: ps, AdagradOptions: ada}
			if sm == nil {
				return optim.NewAdagradGroups(g)
			}
			return optim.NewAdagradSplitGroups(sm, g)
		}},
		{"Lamb", func(sm *amp.SplitModel, ps []*autograd.Tensor) (optim.Optimizer, error) {
			g := optim.LambGroup{Params: ps, LambOptions: lamb}
			if sm == nil {
				return optim.NewLambGroups(g)
			}
			return optim.NewLambSplitGroups(sm, g)
		}},
		{"LARS", func(sm *amp.SplitModel, ps []*autograd.Tensor) (optim.Optimizer, error) {
			g := optim.LARSGroup{Params: ps, LARSOptions: lars}
			if sm == nil {
				return optim.NewLARSGroups(g)
			}
			return optim.NewLARSSplitGroups(sm, g)
		}},
	}
	// Split the odd-numbered parameters, keep the others FP32.
	odd := func(_ nn.NamedModule, param string) bool { return param[len(param)-1]%2 == 1 }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := nn.Parameters(newSplitNet(1))
			m := newSplitNet(1)
			sm, err := amp.SplitModuleFunc(m, odd)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(sm.Params()); n != 2 {
				t.Fatalf("%d parameters split, want p1 and p3", n)
			}
			mixed := nn.Parameters(m)
			refOpt, err := c.mk(nil, ref)
			if err != nil {
				t.Fatal(err)
			}
			opt, err := c.mk(sm, mixed)
			if err != nil {
				t.Fatal(err)
			}
			rng := autograd.NewGenerator(7)
			for step := range 4 {
				for i, p := range mixed {
					// Gradients representable in bfloat16, so both sides
					// see the same values.
					g := autograd.Cast(autograd.Cast(autograd.Randn(rng, p.Shape()...), autograd.BFloat16), p.DType())
					p.SetGrad(g)
					ref[i].SetGrad(autograd.Cast(g, autograd.Float32))
				}
				refOpt.Step()
				opt.Step()
				for i, p := range mixed {
					got := p
					if sp := sm.Param(fmt.Sprintf("p%d", i)); sp != nil {
						got = sp.Join()
					} else if p.DType() != autograd.Float32 {
						t.Fatalf("p%d is %v but not split", i, p.DType())
					}
					if err := sameBits(got.Float32s(), ref[i].Float32s()); err != "" {
						t.Fatalf("step %d: p%d (%v): %s", step+1, i, p.DType(), err)
					}
				}
			}
			if err := refOpt.LoadStateDict(opt.StateDict()); err != nil {
				t.Errorf("the FP32 optimizer cannot load the mixed one's state: %v", err)
			}
		})
	}
}
