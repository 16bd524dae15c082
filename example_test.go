package kiln_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

func exampleNet() *nn.Sequential {
	g := autograd.NewGenerator(1)
	return nn.NewSequential(
		nn.NewConv2d(g, 3, 8, 3, nn.ConvOptions{Padding: 1}),
		nn.NewBatchNorm2d(8, nn.BatchNormOptions{}),
		nn.NewReLU(),
		nn.NewDropout(g, 0.2),
		nn.NewFlatten(1, -1),
		nn.NewLinear(g, 8*4*4, 10, nn.LinearOptions{}),
	)
}

// An evaluation model is folded, loses its dropout, goes channels-last and,
// with the BF16 dtype, computes its convolutions and linear layers in
// BF16 under amp.Autocast.
func ExampleOptimize() {
	model := nn.Eval(exampleNet())
	res, err := kiln.Optimize(model, kiln.DType(autograd.BFloat16))
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range res.Applied {
		fmt.Println(a)
	}
	x := autograd.Randn(autograd.NewGenerator(2), 1, 3, 4, 4).To(autograd.ChannelsLast)
	logits := model.Forward(amp.Autocast(autograd.NoGrad(x)))
	fmt.Println("logits:", logits.Shape(), logits.DType())
	// Output:
	// FoldBatchNorm: 1 pair folded
	// RemoveDropout: 1 dropout layer removed
	// ChannelsLast: 1 tensor reordered
	// DType: 4 convolution, linear or embedding tensors cast to bfloat16
	// Prepack: 1 convolution prepacked
	// logits: [1 10] bfloat16
}

// For BF16 training Optimize splits the convolution and linear weights
// into the BF16 halves the model computes with and the low halves of their
// FP32 masters, and returns the optimizer to step from then on: the same
// SGD, rebuilt over the split parameters. BatchNorm stays FP32.
func ExampleOptimize_training() {
	model := exampleNet()
	sgd, err := optim.NewSGD(nn.Parameters(model), optim.SGDOptions{LR: 0.05, Momentum: 0.9})
	if err != nil {
		log.Fatal(err)
	}
	res, err := kiln.Optimize(model, kiln.DType(autograd.BFloat16), kiln.WithOptimizer(sgd))
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range res.Applied {
		fmt.Println(a)
	}
	for _, p := range nn.NamedParameters(model) {
		fmt.Println(p.Name, p.Tensor.DType())
	}

	x := autograd.Randn(autograd.NewGenerator(2), 4, 3, 4, 4).To(autograd.ChannelsLast)
	labels := autograd.FromInt64([]int64{1, 2, 3, 4})
	opt := res.Optimizer
	loss := autograd.CrossEntropy(model.Forward(amp.Autocast(x)), labels, autograd.CrossEntropyOptions{})
	opt.ZeroGrad()
	loss.Backward()
	opt.Step()
	fmt.Println("momentum buffers:", opt.StateDict().State[0]["momentum_buffer"].DType())
	// Output:
	// ChannelsLast: 1 tensor reordered
	// SplitMasterWeights: 4 parameters split
	// WithOptimizer: *optim.SGD rebuilt over the split parameters, state carried over
	// 0.weight bfloat16
	// 0.bias bfloat16
	// 1.weight float32
	// 1.bias float32
	// 5.weight bfloat16
	// 5.bias bfloat16
	// momentum buffers: float32
}

// A training loop checks the model after every step and stops at the
// step that left a parameter or gradient non-finite: with a learning rate
// far too large, the second. The error names the parameter by its
// state-dict name.
func ExampleCheckFinite() {
	g := autograd.NewGenerator(1)
	model := nn.NewSequential(
		nn.NewLinear(g, 4, 8, nn.LinearOptions{}),
		nn.NewReLU(),
		nn.NewLinear(g, 8, 1, nn.LinearOptions{}),
	)
	sgd, err := optim.NewSGD(nn.Parameters(model), optim.SGDOptions{LR: 1e36})
	if err != nil {
		log.Fatal(err)
	}
	x, y := autograd.Randn(g, 16, 4), autograd.Randn(g, 16, 1)
	for step := 1; step <= 10; step++ {
		loss := autograd.MSELoss(model.Forward(x), y, autograd.ReductionMean)
		sgd.ZeroGrad()
		loss.Backward()
		sgd.Step()
		if err := kiln.CheckFinite(model); err != nil {
			var nf *kiln.NonFiniteError
			if errors.As(err, &nf) {
				fmt.Printf("step %d: %s %s went non-finite\n", step, nf.Kind, nf.Name)
			}
			fmt.Println(err)
			return
		}
	}
	// Output:
	// step 2: parameter 0.weight went non-finite
	// parameter 0.weight holds NaN at index 0
}
