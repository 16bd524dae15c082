package draw_test

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/graph/draw"
	"github.com/kilnml/kiln/nn"
)

// frozenBlock traces and freezes a convolution followed by a ReLU, which
// Freeze fuses into one Conv2d+ReLU node.
func frozenBlock() *graph.Graph {
	gen := autograd.NewGenerator(1)
	model := nn.NewSequential(nn.NewConv2d(gen, 3, 8, 3, nn.ConvOptions{Padding: 1}), nn.NewReLU())
	traced, err := graph.Trace(model, autograd.Randn(gen, 1, 3, 8, 8))
	if err != nil {
		panic(err)
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		panic(err)
	}
	return frozen
}

var box = regexp.MustCompile(`^  (in|n|out)[0-9]+ \[`)

// DOT writes the graph for Graphviz: here the input, the fused
// convolution with its weights summarised, and the output.
func ExampleDOT() {
	var b bytes.Buffer
	if err := draw.DOT(&b, frozenBlock()); err != nil {
		panic(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if box.MatchString(l) {
			fmt.Println(strings.TrimSpace(l))
		}
	}
	// Output:
	// in0 [label="input0\n1×3×8×8 f32", fillcolor="#dbeafe", shape=invhouse, style=filled, penwidth=1.5];
	// n0 [label="Conv2d+ReLU\n0\nweight 8×3×3×3 f32\nbias 8 f32\n→ 1×8×8×8 f32", fillcolor="#dbeafe", penwidth=2.5];
	// out0 [label="output\n1×8×8×8 f32", fillcolor="#dbeafe", shape=house, style=filled, penwidth=1.5];
}

// SVG lays the graph out itself; the image goes to a file, a web page or
// an HTTP response as it is.
func ExampleSVG() {
	if err := draw.SVG(os.Stdout, frozenBlock(), draw.WithTitle("block")); err != nil {
		panic(err)
	}
}
