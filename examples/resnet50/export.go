package main

import (
	"fmt"
	"io"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
)

// export traces the model on a batch of the requested shape, freezes the
// trace (batch norms folded, ops fused; with --dtype int8 quantized as
// --conf says) and saves the frozen graph, which `infer --graph` and
// `kiln run` execute without this program's model code.
func export(o *options, stdout, _ io.Writer) error {
	t, err := freezeModel(o)
	if err != nil {
		return err
	}
	frozen := t.frozen
	if err := graph.Save(o.Out, frozen); err != nil {
		return err
	}
	// NumParams counts float constants only; an int8 graph's weights are
	// int8 ones, counted here so that both dtypes report the same model.
	params, int8s := frozen.NumParams(), 0
	for _, t := range frozen.Consts {
		if t.DType() == autograd.Int8 {
			int8s += t.Numel()
		}
	}
	count := fmt.Sprintf("%d parameters", params)
	if int8s > 0 {
		count = fmt.Sprintf("%d parameters (%d of them int8)", params+int8s, int8s)
	}
	fmt.Fprintf(stdout, "%s: %d nodes (%d traced), %s, input %v %s → %s\n",
		o.Arch, len(frozen.Nodes), len(t.trace.Nodes), count, t.x.Shape(), o.DType, o.Out)
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
