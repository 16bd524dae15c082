package main

import (
	"fmt"
	"io"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
)

// export traces the model on a batch of the requested shape, freezes the
// trace (batch norms folded, ops fused) and saves the frozen graph, which
// `infer --graph` and `kiln run` execute without this program's model code.
func export(o *options, stdout, _ io.Writer) error {
	model, err := loadModel(o)
	if err != nil {
		return err
	}
	nn.Eval(model)
	if o.ChannelsLast {
		nn.To(model, autograd.ChannelsLast)
	}
	x := exampleInput(o)
	g, err := graph.Trace(model, o.autocast(x))
	if err != nil {
		return err
	}
	frozen, err := graph.Freeze(g)
	if err != nil {
		return err
	}
	if err := graph.Save(o.Out, frozen); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d nodes (%d traced), %d parameters, input %v %s → %s\n",
		o.Arch, len(frozen.Nodes), len(g.Nodes), frozen.NumParams(), x.Shape(), o.DType, o.Out)
	return nil
}

// exampleInput is the random batch infer and export use.
func exampleInput(o *options) *autograd.Tensor {
	x := autograd.Randn(autograd.NewGenerator(o.Seed+1), o.BatchSize, 3, o.ImageSize, o.ImageSize)
	if o.ChannelsLast {
		x = x.To(autograd.ChannelsLast)
	}
	return x
}
