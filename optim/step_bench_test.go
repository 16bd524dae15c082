package optim_test

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// benchSizes are the parameter sizes of the step benchmarks: a bias, a
// small layer's weight and a large one (about 1.1 M elements in all).
var benchSizes = []int{64, 4096, 1 << 20}

// smallSizes are 256 parameters of 256 elements, where the cost of a step
// outside the kernels shows.
var smallSizes = func() []int {
	s := make([]int, 256)
	for i := range s {
		s[i] = 256
	}
	return s
}()

type benchNet struct{ nn.Base }

func newBenchNet(sizes []int) *benchNet {
	m := &benchNet{}
	g := autograd.NewGenerator(7)
	for i, n := range sizes {
		p := autograd.Randn(g, n)
		p.SetRequiresGrad(true)
		m.RegisterParameter(fmt.Sprintf("p%d", i), p)
	}
	return m
}

// BenchmarkStep times one Step of each optimizer over benchSizes, over
// FP32 parameters and over a split-BF16 model (bfloat16 gradients).
func BenchmarkStep(b *testing.B) { benchStep(b, benchSizes) }

// BenchmarkStepSmall is BenchmarkStep over smallSizes.
func BenchmarkStepSmall(b *testing.B) { benchStep(b, smallSizes) }

func benchStep(b *testing.B, sizes []int) {
	adam := optim.DefaultAdamOptions()
	adam.WeightDecay = 1e-2
	lamb := optim.DefaultLambOptions()
	lamb.WeightDecay = 1e-2
	sgd := optim.SGDOptions{LR: 0.01, Momentum: 0.9, WeightDecay: 1e-4}
	lars := optim.LARSOptions{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4, Eeta: 1e-3}
	ada := optim.DefaultAdagradOptions()
	for _, c := range []struct {
		name    string
		mk      func([]*autograd.Tensor) (optim.Optimizer, error)
		mkSplit func(*amp.SplitModel) (optim.Optimizer, error)
	}{
		{"SGD", func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewSGD(p, sgd) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewSGDSplit(sm, sgd) }},
		{"Adam", func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewAdam(p, adam) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewAdamSplit(sm, adam) }},
		{"AdamW", func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewAdamW(p, adam) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewAdamWSplit(sm, adam) }},
		{"Adagrad", func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewAdagrad(p, ada) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewAdagradSplit(sm, ada) }},
		{"Lamb", func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewLamb(p, lamb) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewLambSplit(sm, lamb) }},
		{"LARS", func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewLARS(p, lars) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewLARSSplit(sm, lars) }},
	} {
		b.Run(c.name+"/FP32", func(b *testing.B) {
			ps := nn.Parameters(newBenchNet(sizes))
			g := autograd.NewGenerator(8)
			for _, p := range ps {
				p.SetGrad(autograd.MulScalar(autograd.Randn(g, p.Shape()...), 1e-2))
			}
			opt, err := c.mk(ps)
			if err != nil {
				b.Fatal(err)
			}
			benchSteps(b, opt)
		})
		b.Run(c.name+"/split", func(b *testing.B) {
			sm, err := amp.SplitModule(newBenchNet(sizes))
			if err != nil {
				b.Fatal(err)
			}
			g := autograd.NewGenerator(8)
			for _, ns := range sm.Params() {
				top := ns.Param.Top
				grad := make([]uint16, top.Numel())
				for i, v := range autograd.Randn(g, top.Shape()...).Float32s() {
					grad[i] = kernels.BF16FromF32(v * 1e-2)
				}
				top.SetGrad(autograd.FromBFloat16(grad, top.Shape()...))
			}
			opt, err := c.mkSplit(sm)
			if err != nil {
				b.Fatal(err)
			}
			benchSteps(b, opt)
		})
	}
}

func benchSteps(b *testing.B, opt optim.Optimizer) {
	opt.Step()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		opt.Step()
	}
}
