package autograd_test

import (
	"fmt"

	"github.com/kilnml/kiln/autograd"
)

// A gradient flows back from a scalar to the leaves that require it.
func ExampleTensor_Backward() {
	x := autograd.FromFloat32([]float32{1, 2, 3}).SetRequiresGrad(true)
	y := autograd.Mul(x, x) // y = x²
	autograd.Add(y, y).Backward(autograd.Ones(3))
	fmt.Println(x.Grad().Values())
	// Output: [4 8 12]
}

// Channels-last changes the memory layout, not the logical shape.
func ExampleTensor_To() {
	x := autograd.Zeros(1, 3, 2, 2).To(autograd.ChannelsLast)
	fmt.Println(x.Shape(), x.Format(), x.Strides())
	// Output: [1 3 2 2] channels_last [12 1 6 3]
}

// Try turns a misuse panic into an error that names the op and shapes.
func ExampleTry() {
	err := autograd.Try(func() {
		autograd.Add(autograd.Zeros(2, 3), autograd.Zeros(4))
	})
	fmt.Println(err)
	// Output: autograd: Add: shapes [2 3] and [4] cannot be broadcast together (dimension 1: 3 vs 4)
}

// NoGrad starts a computation that records nothing, as torch.no_grad
// does: everything computed from the marked input skips the tape, while
// the same parameters, used from an unmarked input, still record.
func ExampleNoGrad() {
	w := autograd.Ones(2).SetRequiresGrad(true)
	x := autograd.Ones(2)
	y := autograd.Mul(autograd.NoGrad(x), w)
	z := autograd.Mul(x, w)
	fmt.Println(y.RequiresGrad(), z.RequiresGrad())
	// Output: false true
}

// A training loop takes each step's activations and gradients from an
// arena and hands them back at the step's end, so every step reuses the
// memory of the one before instead of asking the garbage collector for
// more. The parameters and their gradients stay outside it.
func ExampleArena() {
	w := autograd.FromFloat32([]float32{0.5, -1}).SetRequiresGrad(true)
	arena := autograd.NewArena(0)
	for step := range 3 {
		x := autograd.FromFloat32([]float32{1, 2})
		loss := autograd.Sum(autograd.Mul(arena.In(x), w), nil, false) // w·x
		loss.Backward()
		fmt.Printf("step %d: loss %.2f\n", step, loss.Item())
		wd, gd := w.Float32s(), w.Grad().Float32s()
		for i := range wd {
			wd[i] -= 0.1 * gd[i]
		}
		w.ZeroGrad()
		arena.Reset() // loss is dead from here on; w is not
	}
	fmt.Println(arena.Stats().Reused > 0)
	// Output:
	// step 0: loss -1.50
	// step 1: loss -2.00
	// step 2: loss -2.50
	// true
}

// Grad returns gradients without adding them to any leaf, here that of
// an intermediate result.
func ExampleGrad() {
	x := autograd.FromFloat32([]float32{1, 2, 3}).SetRequiresGrad(true)
	h := autograd.Mul(x, autograd.Scalar(2))
	y := autograd.Sum(autograd.Mul(h, h), nil, false) // y = Σ h²
	g := autograd.Grad([]*autograd.Tensor{y}, []*autograd.Tensor{h, x}, nil)
	fmt.Println(g[0].Values(), g[1].Values(), x.Grad() == nil)
	// Output: [4 8 12] [8 16 24] true
}
