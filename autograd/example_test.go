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
