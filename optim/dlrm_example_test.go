package optim_test

import (
	"fmt"
	"slices"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
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

// dlrm's row-wise Adagrad (--optimizer rwsadagrad) on a sparse embedding
// bag and a dense head: the table keeps one sum of squares per row, the
// head element-wise Adagrad's, and only the rows a batch looks up move.
func ExampleNewRowWiseAdagrad() {
	g := autograd.NewGenerator(1)
	table := nn.NewEmbeddingBag(g, 1000, 16, nn.EmbeddingBagOptions{Mode: "sum", Sparse: true})
	head := nn.NewLinear(g, 16, 1, nn.LinearOptions{})
	params := append(nn.Parameters(table), nn.Parameters(head)...)
	opt, err := optim.NewRowWiseAdagrad(params, optim.RowWiseAdagradOptions{LR: 0.1, Eps: 1e-10})
	if err != nil {
		panic(err)
	}
	before := slices.Clone(params[0].Float32s())

	// Two bags: rows {3, 7, 3} and {42}.
	indices := autograd.FromInt64([]int64{3, 7, 3, 42}, 4)
	offsets := autograd.FromInt64([]int64{0, 3}, 2)
	out := head.Forward(table.Forward(indices, offsets, nil))
	autograd.Sum(autograd.Mul(out, out), nil, false).Backward()
	opt.Step()

	moved := 0
	for r := range 1000 {
		if !slices.Equal(before[r*16:(r+1)*16], params[0].Float32s()[r*16:(r+1)*16]) {
			moved++
		}
	}
	fmt.Println("table rows moved:", moved)
	for id, st := range opt.StateDict().State {
		fmt.Printf("state.%d.sum: %v\n", id, st["sum"].Shape())
	}
	// Unordered output:
	// table rows moved: 3
	// state.0.sum: [1000]
	// state.1.sum: [1 16]
	// state.2.sum: [1]
}
