package quant_test

import (
	"fmt"
	"log"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/graph/quant"
	"github.com/kilnml/kiln/nn"
)

// Calibrate a small float32 model on a few batches and convert it to an
// int8 graph.
func ExampleConvert() {
	gen := autograd.NewGenerator(1)
	model := nn.NewSequential(nn.NewLinear(gen, 8, 16, nn.LinearOptions{}), nn.NewReLU(), nn.NewLinear(gen, 16, 4, nn.LinearOptions{}))
	nn.Eval(model)
	x := autograd.Randn(gen, 32, 8)
	traced, err := graph.Trace(model, x)
	if err != nil {
		log.Fatal(err)
	}
	conf := quant.NewConf(quant.PerTensorAffine)
	cal, err := quant.Prepare(traced, conf)
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if err := cal.Observe(autograd.Randn(gen, 32, 8)); err != nil {
			log.Fatal(err)
		}
	}
	if err := cal.Finish(); err != nil {
		log.Fatal(err)
	}
	for _, op := range conf.Ops {
		fmt.Println("recorded", op.ID, op.Name, op.InputsFlow)
	}
	q, err := quant.Convert(traced, conf)
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range q.Nodes {
		fmt.Println("node", n.Op)
	}
	// Output:
	// recorded 0 linear [linear0.input0]
	// recorded 1 relu [linear0.output0]
	// recorded 2 linear [relu1.output0]
	// node Quantize
	// node Dequantize+Linear+ReLU+Quantize
	// node Dequantize+Linear
}
