package optim_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// goldenNet is gen_optim.py's Sequential(Conv2d(1,4,3,padding=1),
// BatchNorm2d(4), ReLU(), MaxPool2d(2), Flatten(), Linear(36,3)); its
// weights are loaded from the golden file.
func goldenNet() *nn.Sequential {
	g := autograd.NewGenerator(0)
	return nn.NewSequential(
		nn.NewConv2d(g, 1, 4, 3, nn.ConvOptions{Padding: 1}),
		nn.NewBatchNorm2d(4, nn.BatchNormOptions{}),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, nn.MaxPoolOptions{}),
		nn.NewFlatten(1, -1),
		nn.NewLinear(g, 36, 3, nn.LinearOptions{}))
}

// TestSGDMatchesPyTorchTraining trains gen_optim.py's small conv net for 20
// steps with each SGD configuration and compares every step's loss and the
// final parameters, running statistics and momentum buffers with PyTorch.
func TestSGDMatchesPyTorchTraining(t *testing.T) {
	const convBiasParam = 1 // "0.bias", the bias of the Conv2d that BatchNorm2d follows
	set := golden.Load(t, "optim.safetensors")
	x, target := set.Get(t, "sgd.x"), set.Get(t, "sgd.target")
	var initial []nn.NamedTensor
	for name, v := range set {
		if s, ok := strings.CutPrefix(name, "sgd.init."); ok {
			initial = append(initial, nn.NamedTensor{Name: s, Tensor: v})
		}
	}
	cases := map[string]optim.SGDOptions{
		"momentum":  {LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4},
		"nesterov":  {LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4, Nesterov: true},
		"dampening": {LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4, Dampening: 0.1},
		"plain":     {LR: 0.1, WeightDecay: 1e-4},
	}
	const rtol = 1e-5
	for name, o := range cases {
		for _, format := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
			t.Run(fmt.Sprintf("%s/%v", name, format), func(t *testing.T) {
				net := goldenNet()
				if err := nn.LoadTensors(net, initial); err != nil {
					t.Fatal(err)
				}
				input := x
				if format != autograd.Contiguous {
					nn.To(net, format)
					input = x.To(format)
				}
				opt, err := optim.NewSGD(nn.Parameters(net), o)
				if err != nil {
					t.Fatal(err)
				}
				wantLoss := set.Get(t, "sgd."+name+".loss").Values()
				for step := range wantLoss {
					opt.ZeroGrad()
					loss := autograd.CrossEntropy(net.Forward(input), target, autograd.CrossEntropyOptions{})
					loss.Backward()
					opt.Step()
					if got, want := loss.Item(), wantLoss[step]; math.Abs(got-want) > rtol*math.Abs(want) {
						t.Errorf("step %d: loss %.8g, PyTorch %.8g (relative error %.2g)", step, got, want, math.Abs(got-want)/math.Abs(want))
					}
				}
				for _, nt := range nn.StateDict(net) {
					want := set.Get(t, "sgd."+name+".final."+nt.Name)
					if nt.Tensor.DType() == autograd.Int64 {
						if nt.Tensor.Item() != want.Item() {
							t.Errorf("%s: %v, PyTorch %v", nt.Name, nt.Tensor.Item(), want.Item())
						}
						continue
					}
					golden.AssertClose(t, nt.Name, nt.Tensor, want, rtol)
				}
				sd := opt.StateDict()
				for id, st := range sd.State {
					what, want := fmt.Sprintf("momentum buffer %d", id), set.Get(t, fmt.Sprintf("sgd.%s.momentum.%d", name, id))
					if id == convBiasParam {
						// BatchNorm subtracts the batch mean, so the conv bias's
						// loss gradient is zero in exact arithmetic: its buffer
						// is weight decay plus rounding noise (~1e-8 a step),
						// rounded differently here and in PyTorch.
						golden.AssertWithin(t, what, st["momentum_buffer"], want, 1e-6)
						continue
					}
					// Buffers sum gradients of a convolution: 1e-4 relative.
					golden.AssertClose(t, what, st["momentum_buffer"], want, 1e-4)
				}
				if o.Momentum != 0 && len(sd.State) != len(nn.Parameters(net)) {
					t.Errorf("%d momentum buffers for %d parameters", len(sd.State), len(nn.Parameters(net)))
				}
			})
		}
	}
}
