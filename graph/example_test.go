package graph_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
)

// A small convolutional block: convolution, batch norm, ReLU.
type block struct {
	nn.Base
	conv *nn.Conv2d
	bn   *nn.BatchNorm
}

func newBlock(g *autograd.Generator) *block {
	b := &block{}
	b.conv = b.RegisterModule("conv", nn.NewConv2d(g, 3, 8, 3, nn.ConvOptions{Padding: 1})).(*nn.Conv2d)
	b.bn = b.RegisterModule("bn", nn.NewBatchNorm2d(8, nn.BatchNormOptions{})).(*nn.BatchNorm)
	return b
}

func (b *block) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(b, x)()
	return autograd.ReLU(b.bn.Forward(b.conv.Forward(x)))
}

// Trace records the ops of a forward pass; Freeze folds the batch norm
// into the convolution and fuses the ReLU into it; the compiled program
// runs the graph with no model code.
func Example() {
	g := autograd.NewGenerator(1)
	model := newBlock(g)
	x := autograd.Randn(g, 1, 3, 8, 8)

	traced, err := graph.Trace(model, x)
	if err != nil {
		panic(err)
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		panic(err)
	}
	for _, n := range frozen.Nodes {
		fmt.Println(n.Op)
	}
	p, err := graph.Compile(frozen)
	if err != nil {
		panic(err)
	}
	out, err := p.Run(x)
	if err != nil {
		panic(err)
	}
	fmt.Println(out[0].Shape())
	// Output:
	// Conv2d+ReLU
	// [1 8 8 8]
}

// Save writes a frozen graph to one file; Load reads it back, checking
// its format version, IR and data checksum.
func ExampleSave() {
	g := autograd.NewGenerator(1)
	traced, err := graph.Trace(newBlock(g), autograd.Randn(g, 1, 3, 8, 8))
	if err != nil {
		panic(err)
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "kiln-graph")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "block.kiln")
	if err := graph.Save(path, frozen); err != nil {
		panic(err)
	}
	loaded, err := graph.Load(path)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(loaded.Nodes), "node,", loaded.NumParams(), "parameters")
	// Output:
	// 1 node, 224 parameters
}

// Profile times every node of the compiled graph over several runs. The
// times vary from machine to machine; what each node is and does does not.
func ExampleProgram_Profile() {
	g := autograd.NewGenerator(1)
	x := autograd.Randn(g, 1, 3, 8, 8)
	traced, err := graph.Trace(newBlock(g), x)
	if err != nil {
		panic(err)
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		panic(err)
	}
	p, err := graph.Compile(frozen)
	if err != nil {
		panic(err)
	}
	prof, err := p.Profile(10, x)
	if err != nil {
		panic(err)
	}
	// prof.WriteTable(os.Stdout, 25) prints the nodes sorted by time.
	// The convolution's FLOPs are 2 × 512 outputs × 27 (3 channels, 3×3).
	for _, n := range prof.Nodes {
		fmt.Println(n.Op, n.Scope, n.Mode, n.FLOPs, n.Median > 0)
	}
	// Output:
	// Conv2d+ReLU conv compiled 27648 true
}
