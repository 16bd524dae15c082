package graph

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// int8Graph is a hand-built int8 graph: an 8-bit input through an int8
// linear layer with ReLU and a quantized result, then another that adds
// a float32 residual and gives float32.
func int8Graph(t testing.TB) (*Graph, *autograd.Tensor) {
	t.Helper()
	gen := autograd.NewGenerator(3)
	g := &Graph{}
	x := g.AddValue(Value{Name: "input0", Shape: []int{3, 6}, DType: autograd.Uint8})
	g.Inputs = []int{x}
	scales := autograd.FromFloat32([]float32{0.01, 0.02, 0.03, 0.04, 0.05}, 5)
	w1 := g.AddConst("l1.weight", autograd.QuantizePerChannel(autograd.Randn(gen, 5, 6), scales, 0, autograd.Int8))
	s1 := g.AddConst("l1.scales", scales)
	b1 := g.AddConst("l1.bias", autograd.Randn(gen, 5))
	w2 := g.AddConst("l2.weight", autograd.QuantizePerChannel(autograd.Randn(gen, 5, 5), scales, 0, autograd.Int8))
	r := g.AddConst("residual", autograd.Randn(gen, 3, 5))
	h := g.AddValue(Value{Name: "%h", Shape: []int{3, 5}, DType: autograd.Uint8})
	y := g.AddValue(Value{Name: "%y", Shape: []int{3, 5}, DType: autograd.Float32})
	g.Nodes = []Node{
		{Op: "Dequantize+Linear+ReLU+Quantize", Inputs: []int{x, w1, s1, b1}, Outputs: []int{h},
			Attrs: []Attr{FloatAttr("scale", 0.02), IntAttr("zero_point", 100),
				FloatAttr("Quantize.scale", 0.04), IntAttr("Quantize.zero_point", 3), StringAttr("Quantize.dtype", "uint8")}},
		{Op: "Dequantize+Linear+Add", Inputs: []int{h, w2, s1, None, r}, Outputs: []int{y},
			Attrs: []Attr{FloatAttr("scale", 0.04), IntAttr("zero_point", 3)}},
	}
	g.Outputs = []int{y}
	in := autograd.Quantize(autograd.Randn(gen, 3, 6), 0.02, 100, autograd.Uint8)
	return g, in
}

// TestInt8LayerNodes runs the int8 graph compiled and eagerly, saved and
// loaded, and against its parts run one by one.
func TestInt8LayerNodes(t *testing.T) {
	g, x := int8Graph(t)
	p, err := Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	eager, err := p.runEager([]*autograd.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(got[0], eager[0]) {
		t.Errorf("compiled int8 graph differs from its eager run")
	}
	for _, i := range p.last.eager {
		t.Errorf("node %d (%s) has no compiled form", i, g.Nodes[i].Op)
	}
	var b bytes.Buffer
	if err := Encode(&b, g); err != nil {
		t.Fatal(err)
	}
	loaded, err := Decode(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	lp, err := Compile(loaded)
	if err != nil {
		t.Fatal(err)
	}
	again, err := lp.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(again[0], got[0]) {
		t.Errorf("loaded int8 graph computes other bits")
	}
	// The same chain spelt out in autograd's ops.
	a := autograd.QuantizedLayerAttrs{Scale: 0.02, ZeroPoint: 100, Act: "ReLU", OutDType: "uint8", OutScale: 0.04, OutZeroPoint: 3}
	h := autograd.QuantizedLinear(x, g.Consts[1], g.Consts[2], g.Consts[3], nil, a)
	a2 := autograd.QuantizedLayerAttrs{Scale: 0.04, ZeroPoint: 3, Residual: "float32", OutDType: "float32"}
	want := autograd.QuantizedLinear(h, g.Consts[4], g.Consts[2], nil, g.Consts[5], a2)
	if !sameBits(got[0], want) {
		t.Errorf("int8 graph differs from its ops run one by one")
	}
}

func TestInt8LayerNodeErrors(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(g *Graph)
		field string
	}{
		{"unknown layer", func(g *Graph) { g.Nodes[0].Op = "Dequantize+Softmax" }, "op"},
		{"part out of order", func(g *Graph) { g.Nodes[0].Op = "Dequantize+Linear+Quantize+ReLU" }, "op"},
		{"missing output dtype", func(g *Graph) { g.Nodes[0].Attrs = g.Nodes[0].Attrs[:4] }, "Quantize.dtype"},
		{"float scale as int", func(g *Graph) { g.Nodes[0].Attrs[0] = IntAttr("scale", 1) }, "scale"},
		{"float input", func(g *Graph) { g.Values[0].DType = autograd.Float32 }, ""},
		{"residual missing", func(g *Graph) { g.Nodes[1].Inputs = g.Nodes[1].Inputs[:4] }, "inputs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, _ := int8Graph(t)
			c.edit(g)
			_, err := Compile(g)
			var ne *NodeError
			if !errors.As(err, &ne) {
				t.Fatalf("Compile: %v, want a *NodeError", err)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("Compile: %v, want it to name %q", err, c.field)
			}
		})
	}
}

// TestInt8DeclaredDTypeChecked rejects a file whose values' dtypes
// disagree with its quantization: an int8 layer quantizing to uint8 whose
// result the IR declares int8.
func TestInt8DeclaredDTypeChecked(t *testing.T) {
	g, _ := int8Graph(t)
	g.Values[g.Nodes[0].Outputs[0]].DType = autograd.Int8
	var b bytes.Buffer
	err := Encode(&b, g)
	if err == nil {
		_, err = Decode(b.Bytes())
	}
	var ne *NodeError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), "dtype") {
		t.Errorf("a uint8 result declared int8: %v, want a *NodeError naming the dtype", err)
	}
}

// TestInt8ProductNode runs a hand-built int8 product with a division and a
// quantized result, compiled and eagerly, and against autograd's op.
func TestInt8ProductNode(t *testing.T) {
	gen := autograd.NewGenerator(4)
	g := &Graph{}
	a := g.AddValue(Value{Name: "a", Shape: []int{2, 3, 5}, DType: autograd.Uint8})
	b := g.AddValue(Value{Name: "b", Shape: []int{2, 5, 4}, DType: autograd.Int8})
	y := g.AddValue(Value{Name: "%y", Shape: []int{2, 3, 4}, DType: autograd.Uint8})
	g.Inputs, g.Outputs = []int{a, b}, []int{y}
	g.Nodes = []Node{{Op: "Dequantize+BMM+Div+Quantize", Inputs: []int{a, b}, Outputs: []int{y},
		Attrs: []Attr{FloatAttr("scale", 0.03), IntAttr("zero_point", 100), FloatAttr("BMM.scale", 0.02), IntAttr("BMM.zero_point", -3),
			FloatAttr("Div.divisor", 2), FloatAttr("Quantize.scale", 0.01), IntAttr("Quantize.zero_point", 128), StringAttr("Quantize.dtype", "uint8")}}}
	aq := autograd.Quantize(autograd.Randn(gen, 2, 3, 5), 0.03, 100, autograd.Uint8)
	bq := autograd.Quantize(autograd.Randn(gen, 2, 5, 4), 0.02, -3, autograd.Int8)
	p, err := Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(aq, bq)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range p.last.eager {
		t.Errorf("node %d (%s) has no compiled form", i, g.Nodes[i].Op)
	}
	want := autograd.QuantizedMatmul(aq, bq, autograd.QuantizedMatmulAttrs{Scale: 0.03, ZeroPoint: 100, OtherScale: 0.02, OtherZeroPoint: -3,
		Divisor: 2, OutDType: "uint8", OutScale: 0.01, OutZeroPoint: 128})
	if !sameBits(got[0], want) {
		t.Errorf("int8 product node differs from autograd.QuantizedMatmul")
	}
	g.Nodes[0].Op = "Dequantize+BMM+ReLU"
	var ne *NodeError
	if _, err := Compile(g); !errors.As(err, &ne) || !strings.Contains(err.Error(), "ReLU") {
		t.Errorf("an int8 product with a ReLU: %v, want a NodeError naming it", err)
	}
}
