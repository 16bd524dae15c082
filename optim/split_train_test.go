package optim_test

import (
	"math"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// TestSplitBF16TrainingTracksFP32 trains the same small conv net on the
// bundled digits for 200 steps twice: in FP32, and in BF16 with split
// master weights (amp.SplitModule, optim.NewSGDSplit) under amp.Autocast.
// The target: the BF16 run's final loss within 2% of the FP32 one.
// The loss compared is the mean over the last 20 steps' batches, so one
// batch's noise does not decide it, at a learning rate where the loss is
// still falling (0.22 after 200 steps): near convergence (lr 0.05, loss
// 0.08) the two runs' relative gap grows to a few percent, the same small
// absolute difference divided by a small loss.
func TestSplitBF16TrainingTracksFP32(t *testing.T) {
	digits := datasets.Digits()
	loader, err := datasets.NewDataLoader(digits, datasets.LoaderOptions{BatchSize: 32, Shuffle: true, Seed: 3, DropLast: true, ChannelsLast: true})
	if err != nil {
		t.Fatal(err)
	}
	var batches []datasets.Batch
	for b, err := range loader.Epoch(0) {
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	net := func() *nn.Sequential {
		g := autograd.NewGenerator(5)
		return nn.To(nn.NewSequential(
			nn.NewConv2d(g, 1, 32, 3, nn.ConvOptions{Padding: 1}), nn.NewReLU(),
			nn.NewMaxPool2d(2, nn.MaxPoolOptions{}),
			nn.NewConv2d(g, 32, 32, 3, nn.ConvOptions{Padding: 1}), nn.NewReLU(),
			nn.NewFlatten(1, -1), nn.NewLinear(g, 32*4*4, 10, nn.LinearOptions{})), autograd.ChannelsLast)
	}
	opts := optim.SGDOptions{LR: 0.01, Momentum: 0.9, WeightDecay: 1e-4}
	train := func(split bool) float64 {
		m := net()
		var opt *optim.SGD
		var err error
		if split {
			sm, e := amp.SplitModule(m)
			if e != nil {
				t.Fatal(e)
			}
			opt, err = optim.NewSGDSplit(sm, opts)
		} else {
			opt, err = optim.NewSGD(nn.Parameters(m), opts)
		}
		if err != nil {
			t.Fatal(err)
		}
		var tail float64
		for step := range 200 {
			b := batches[step%len(batches)]
			x := b.Inputs
			if split {
				x = amp.Autocast(x)
			}
			loss := autograd.CrossEntropy(m.Forward(x), b.Labels, autograd.CrossEntropyOptions{})
			opt.ZeroGrad()
			loss.Backward()
			opt.Step()
			if step >= 180 {
				tail += loss.Item() / 20
			}
		}
		return tail
	}
	fp32, bf16 := train(false), train(true)
	t.Logf("mean loss over steps 181-200: FP32 %.4f, split BF16 %.4f", fp32, bf16)
	if math.Abs(bf16-fp32) > 0.02*fp32 {
		t.Errorf("split-BF16 training ends at loss %.4f, FP32 at %.4f: more than 2%% apart", bf16, fp32)
	}
}
