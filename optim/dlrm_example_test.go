package optim_test

import (
	"fmt"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/optim"
)

// dlrm's learning-rate policy, stepped after every optimizer step: 4
// warm-up steps, the rate frozen until step 6, a quadratic decay over 4
// steps, and frozen again after it.
func ExampleDLRMLRPolicy() {
	w := autograd.Zeros(1)
	opt, err := optim.NewSGD([]*autograd.Tensor{w}, optim.SGDOptions{LR: 1})
	if err != nil {
		panic(err)
	}
	sched, err := optim.NewDLRMLRPolicy(opt, 4, 6, 4)
	if err != nil {
		panic(err)
	}
	for it := range 12 {
		fmt.Printf("iteration %2d: lr %.4f\n", it, opt.LR(0))
		// … forward, Backward …
		opt.Step()
		sched.Step()
	}
	_, err = optim.NewDLRMLRPolicy(opt, 4, 2, 4)
	fmt.Println(err)
	// Output:
	// iteration  0: lr 0.2500
	// iteration  1: lr 0.5000
	// iteration  2: lr 0.7500
	// iteration  3: lr 0.7500
	// iteration  4: lr 0.7500
	// iteration  5: lr 1.0000
	// iteration  6: lr 0.5625
	// iteration  7: lr 0.2500
	// iteration  8: lr 0.0625
	// iteration  9: lr 0.0625
	// iteration 10: lr 0.0625
	// iteration 11: lr 0.0625
	// optim: DLRMLRPolicy: learning rate warmup must finish before the decay starts: decay start step 2 is before the end of 4 warm-up steps
}
