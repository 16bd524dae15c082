package nn_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// Layers are built from a seeded generator and initialised as PyTorch
// initialises them; their parameters carry PyTorch's names.
func ExampleNewConv2d() {
	g := autograd.NewGenerator(1)
	conv := nn.NewConv2d(g, 3, 16, 3, nn.ConvOptions{Stride: 2, Padding: 1})
	y := conv.Forward(autograd.Zeros(1, 3, 32, 32))
	fmt.Println(y.Shape())
	for _, p := range nn.NamedParameters(conv) {
		fmt.Println(p.Name, p.Tensor.Shape())
	}
	// Output:
	// [1 16 16 16]
	// weight [16 3 3 3]
	// bias [16]
}

// A Sequential names its layers by position, as torch.nn.Sequential does.
func ExampleNewSequential() {
	g := autograd.NewGenerator(1)
	model := nn.NewSequential(
		nn.NewLinear(g, 4, 8, nn.LinearOptions{}),
		nn.NewReLU(),
		nn.NewBatchNorm1d(8, nn.BatchNormOptions{}),
		nn.NewLinear(g, 8, 2, nn.LinearOptions{NoBias: true}),
	)
	fmt.Println(model.Forward(autograd.Randn(g, 5, 4)).Shape())
	for _, nt := range nn.StateDict(model) {
		fmt.Println(nt.Name)
	}
	// Output:
	// [5 2]
	// 0.weight
	// 0.bias
	// 2.weight
	// 2.bias
	// 2.running_mean
	// 2.running_var
	// 2.num_batches_tracked
	// 3.weight
}

// State dicts are safetensors files with PyTorch's names, so
// torch's load_state_dict reads them and Kiln reads PyTorch's.
func ExampleSaveStateDict() {
	dir, _ := os.MkdirTemp("", "kiln")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	a := nn.NewLinear(autograd.NewGenerator(1), 3, 2, nn.LinearOptions{})
	if err := nn.SaveStateDict(a, path); err != nil {
		fmt.Println(err)
	}
	b := nn.NewLinear(autograd.NewGenerator(2), 3, 2, nn.LinearOptions{})
	fmt.Println(nn.LoadStateDict(b, path))
	fmt.Println(b.Weight().Values()[0] == a.Weight().Values()[0])

	wrong := nn.NewLinear(autograd.NewGenerator(3), 3, 4, nn.LinearOptions{})
	fmt.Println(nn.LoadStateDict(wrong, path) != nil)
	// Output:
	// <nil>
	// true
	// true
}

// To moves convolution weights to channels-last in place; outputs do not
// change, and the parameters are the same tensors as before.
func ExampleTo() {
	g := autograd.NewGenerator(1)
	conv := nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{})
	w := conv.Weight()
	nn.To(conv, autograd.ChannelsLast)
	fmt.Println(conv.Weight() == w, w.Format(), w.Strides())
	// Output: true channels_last [27 1 9 3]
}

// FoldBatchNorm bakes an eval model's BatchNorms into the convolutions
// before them: outputs stay the same, the BatchNorms' state leaves the
// state dict and each convolution gains a bias, as after PyTorch's fusion.
func ExampleFoldBatchNorm() {
	g := autograd.NewGenerator(1)
	model := nn.NewSequential(
		nn.NewConv2d(g, 3, 8, 3, nn.ConvOptions{Padding: 1, NoBias: true}),
		nn.NewBatchNorm2d(8, nn.BatchNormOptions{}),
		nn.NewReLU(),
	)
	bn := model.At(1).(*nn.BatchNorm)
	nn.Uniform(g, bn.RunningVar(), 0.5, 2)
	nn.Uniform(g, bn.Weight(), 0.5, 2)

	if _, err := nn.FoldBatchNorm(model); err != nil {
		fmt.Println(err)
	}
	nn.Eval(model)
	x := autograd.Randn(g, 1, 3, 16, 16)
	before := model.Forward(x).Values()
	n, err := nn.FoldBatchNorm(model)
	fmt.Println(n, err)
	after := model.Forward(x).Values()
	worst := 0.0
	for i := range before {
		worst = max(worst, math.Abs(after[i]-before[i]))
	}
	fmt.Println(worst < 1e-5)
	for _, nt := range nn.StateDict(model) {
		fmt.Println(nt.Name)
	}
	// Output:
	// nn: FoldBatchNorm: the model is in training mode; folding needs an eval model: call nn.Eval(m) first
	// 1 <nil>
	// true
	// 0.weight
	// 0.bias
}
