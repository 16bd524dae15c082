package optim_test

import (
	"errors"
	"fmt"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/optim"
)

// Minimise (w − 3)² with momentum SGD.
func ExampleSGD() {
	w := autograd.Zeros(1)
	w.SetRequiresGrad(true)
	opt, err := optim.NewSGD([]*autograd.Tensor{w}, optim.SGDOptions{LR: 0.1, Momentum: 0.5})
	if err != nil {
		panic(err)
	}
	target := autograd.Full(3, 1)
	for range 50 {
		opt.ZeroGrad()
		d := autograd.Sub(w, target)
		autograd.Mul(d, d).Backward()
		opt.Step()
	}
	fmt.Printf("w = %.4f\n", w.Item())
	// Output: w = 3.0000
}

// Parameter groups with their own learning rates, and a state dict that
// resumes training where it stopped.
func ExampleNewSGDGroups() {
	body := autograd.Zeros(4)
	head := autograd.Zeros(2)
	base := optim.SGDOptions{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4}
	slow := base
	slow.LR = 0.01
	opt, err := optim.NewSGDGroups(
		optim.SGDGroup{Params: []*autograd.Tensor{body}, SGDOptions: slow},
		optim.SGDGroup{Params: []*autograd.Tensor{head}, SGDOptions: base})
	if err != nil {
		panic(err)
	}
	body.SetGrad(autograd.Ones(4))
	opt.Step()

	sd := opt.StateDict()
	fmt.Println("groups:", len(sd.Groups), "lr:", sd.Groups[0].Hyper["lr"], sd.Groups[1].Hyper["lr"])
	fmt.Println("momentum buffers for parameters:", len(sd.State), "(head had no gradient)")
	// Output:
	// groups: 2 lr: 0.01 0.1
	// momentum buffers for parameters: 1 (head had no gradient)
}

// A linear warm-up over the first 4 epochs followed by cosine annealing,
// both stepped once per epoch as PyTorch chains them.
func ExampleNewCosineAnnealingLR() {
	w := autograd.Zeros(1)
	opt, err := optim.NewSGD([]*autograd.Tensor{w}, optim.SGDOptions{LR: 0.1, Momentum: 0.9})
	if err != nil {
		panic(err)
	}
	warm, err := optim.NewLinearLR(opt, 0.2, 1, 4)
	if err != nil {
		panic(err)
	}
	cos, err := optim.NewCosineAnnealingLR(opt, 10, 0)
	if err != nil {
		panic(err)
	}
	for epoch := range 10 {
		fmt.Printf("epoch %d: lr %.4f\n", epoch, opt.LR(0))
		// … train one epoch: forward, Backward, opt.Step() …
		opt.Step()
		warm.Step()
		cos.Step()
	}
	// Output:
	// epoch 0: lr 0.0200
	// epoch 1: lr 0.0390
	// epoch 2: lr 0.0543
	// epoch 3: lr 0.0635
	// epoch 4: lr 0.0655
	// epoch 5: lr 0.0500
	// epoch 6: lr 0.0345
	// epoch 7: lr 0.0206
	// epoch 8: lr 0.0095
	// epoch 9: lr 0.0024
}

// Bad options are reported as an *optim.Error naming the optimizer.
func ExampleError() {
	w := autograd.Zeros(2)
	w.SetRequiresGrad(true)
	_, err := optim.NewAdam([]*autograd.Tensor{w}, optim.AdamOptions{LR: 1e-3})
	var oe *optim.Error
	if errors.As(err, &oe) {
		fmt.Println(oe.Op, "-", oe.Msg)
	}
	// Output: Adam - group 0: invalid epsilon value: 0 (want > 0; DefaultAdamOptions has 1e-8)
}
