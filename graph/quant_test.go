package graph

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// quantGraph builds by hand a graph of every quantization op on a
// [2, 3, 4, 5] float32 input, with 8-bit tensors moved by shape ops in
// between and 8-bit constants (int8 weights with per-channel scales, a
// uint8 table), whose outputs include 8-bit values. eager gives the same
// outputs with autograd's ops.
func quantGraph(attrs ...Attr) (g *Graph, eager func(x *autograd.Tensor) []*autograd.Tensor) {
	scales := autograd.FromFloat32([]float32{0.02, 0.05, 0.1})
	wq := autograd.FromInt8([]int8{-128, -3, 0, 7, 127, 64, -64, 1}, 4, 2)
	ws := autograd.FromFloat32([]float32{0.5, 0.25, 0.125, 1})
	wu := autograd.FromUint8([]uint8{0, 1, 127, 128, 200, 255}, 2, 3)
	g = &Graph{}
	in := g.AddValue(Value{Name: "input0", Shape: []int{2, 3, 4, 5}})
	g.Inputs = []int{in}
	sc, wqv, wsv, wuv := g.AddConst("scales", scales), g.AddConst("wq", wq), g.AddConst("ws", ws), g.AddConst("wu", wu)
	node := func(op string, ins []int, attrs ...Attr) int {
		out := g.AddValue(Value{Name: fmt.Sprintf("%%%d", len(g.Values))})
		g.Nodes = append(g.Nodes, Node{Op: op, Inputs: ins, Outputs: []int{out}, Attrs: attrs})
		return out
	}
	u8 := []Attr{FloatAttr("scale", 0.05), IntAttr("zero_point", 3), StringAttr("dtype", "uint8")}
	if len(attrs) > 0 {
		u8 = attrs
	}
	q := node("Quantize", []int{in}, u8...)
	p := node("Permute", []int{q}, IntsAttr("dims", []int{0, 2, 3, 1}))
	r := node("Reshape", []int{p}, IntsAttr("shape", []int{2, -1}))
	d := node("Dequantize", []int{r}, FloatAttr("scale", 0.05), IntAttr("zero_point", 3))
	cat := node("Cat", []int{q, q}, IntAttr("dim", 1))
	qc := node("QuantizePerChannel", []int{in, sc}, IntAttr("axis", 1), StringAttr("dtype", "int8"))
	dc := node("DequantizePerChannel", []int{qc, sc}, IntAttr("axis", 1))
	fq := node("FakeQuantize", []int{in}, FloatAttr("scale", 0.03), IntAttr("zero_point", -3), StringAttr("dtype", "int8"))
	fpc := node("FakeQuantizePerChannel", []int{in, sc}, IntAttr("axis", -3), StringAttr("dtype", "int8"))
	wd := node("DequantizePerChannel", []int{wqv, wsv}, IntAttr("axis", 0))
	ud := node("Dequantize", []int{wuv}, FloatAttr("scale", 0.5), IntAttr("zero_point", 128))
	g.Outputs = []int{q, d, cat, dc, fq, fpc, wd, ud}
	return g, func(x *autograd.Tensor) []*autograd.Tensor {
		q := autograd.Quantize(x, 0.05, 3, autograd.Uint8)
		qc := autograd.QuantizePerChannel(x, scales, 1, autograd.Int8)
		return []*autograd.Tensor{q,
			autograd.Dequantize(autograd.Reshape(autograd.Permute(q, 0, 2, 3, 1), 2, -1), 0.05, 3),
			autograd.Cat([]*autograd.Tensor{q, q}, 1),
			autograd.DequantizePerChannel(qc, scales, 1),
			autograd.FakeQuantize(x, 0.03, -3, autograd.Int8),
			autograd.FakeQuantizePerChannel(x, scales, -3, autograd.Int8),
			autograd.DequantizePerChannel(wq, ws, 0),
			autograd.Dequantize(wu, 0.5, 128)}
	}
}

// TestQuantGraph compiles the hand-built graph, checks every node runs
// its bound kernels and gives eager mode's bits, in both input layouts,
// and that the graph, its 8-bit constants and values included, survives
// Save and Load.
func TestQuantGraph(t *testing.T) {
	gr, eager := quantGraph()
	x := autograd.MulScalar(autograd.Randn(autograd.NewGenerator(5), 2, 3, 4, 5), 4)
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []*autograd.Tensor{x, x.To(autograd.ChannelsLast)} {
		pl := checkCompiled(t, p, in)
		for _, i := range pl.eager {
			t.Errorf("node %d (%s) runs eagerly", i, gr.Nodes[i].Op)
		}
	}
	got := runGraph(t, gr, []*autograd.Tensor{x})
	want := eager(x)
	for i := range want {
		if !sameBits(got[i], want[i]) {
			t.Errorf("output %d: graph %v %v differs from autograd's %v %v", i, got[i].DType(), got[i].Shape(), want[i].DType(), want[i].Shape())
		}
	}
	// Save writes the shapes a graph declares: those its ops give.
	_, types, err := gr.checkNodes(false)
	if err != nil {
		t.Fatal(err)
	}
	for v := len(gr.Inputs) + len(gr.Consts); v < len(gr.Values); v++ {
		gr.Values[v].Shape, gr.Values[v].DType, gr.Values[v].Format = types[v].shape, types[v].dtype, types[v].format
	}
	path := filepath.Join(t.TempDir(), "quant.kiln")
	if err := Save(path, gr); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.String() != gr.String() {
		t.Errorf("String() differs after a round trip:\n got %s\nwant %s", loaded.String(), gr.String())
	}
	for v, c := range gr.Consts {
		if lc := loaded.Consts[v]; lc == nil || !sameBits(lc, c) {
			t.Errorf("constant %s (%v) not restored exactly", gr.Values[v].Name, c.DType())
		}
	}
	for i, o := range runGraph(t, loaded, []*autograd.Tensor{x}) {
		if !sameBits(o, got[i]) {
			t.Errorf("output %d differs after a round trip", i)
		}
	}
}

// TestTraceQuant traces the ops: their attribute structs become the
// node's attributes, which compile back to the same computation.
func TestTraceQuant(t *testing.T) {
	x := autograd.Randn(autograd.NewGenerator(6), 2, 3, 4, 4)
	s := autograd.FromFloat32([]float32{0.01, 0.02, 0.04})
	gr, err := TraceFunc(&bare{}, func(in []*autograd.Tensor) []*autograd.Tensor {
		q := autograd.Quantize(in[0], 0.02, -7, autograd.Int8)
		qc := autograd.QuantizePerChannel(in[0], s, 1, autograd.Uint8)
		return []*autograd.Tensor{autograd.Dequantize(autograd.Flatten(q, 1, -1), 0.02, -7),
			autograd.DequantizePerChannel(qc, s, 1), autograd.FakeQuantize(in[0], 0.1, 130, autograd.Uint8),
			autograd.FakeQuantizePerChannel(in[0], s, 1, autograd.Int8)}
	}, x)
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]string, len(gr.Nodes))
	for i, n := range gr.Nodes {
		ops[i] = n.Op
	}
	if got := strings.Join(ops, " "); got != "Quantize QuantizePerChannel Flatten Dequantize DequantizePerChannel FakeQuantize FakeQuantizePerChannel" {
		t.Errorf("traced ops %s", got)
	}
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	if pl := checkCompiled(t, p, x); len(pl.eager) > 0 {
		t.Errorf("nodes %v run eagerly", pl.eager)
	}
}

// A node the op would refuse fails Compile, named, before anything runs:
// type inference runs the ops' checks of attributes and operand types.
func TestQuantGraphErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs []Attr
		want  string
	}{
		{"scale", []Attr{FloatAttr("scale", 0), IntAttr("zero_point", 3), StringAttr("dtype", "uint8")}, "scale 0 is not a positive finite number"},
		{"scale past float32", []Attr{FloatAttr("scale", 1e300), IntAttr("zero_point", 3), StringAttr("dtype", "uint8")}, "scale +Inf"},
		{"zero point", []Attr{FloatAttr("scale", 1), IntAttr("zero_point", 300), StringAttr("dtype", "uint8")}, "zero point 300 is outside [0, 255]"},
		{"dtype", []Attr{FloatAttr("scale", 1), IntAttr("zero_point", 0), StringAttr("dtype", "int32")}, "dtype int32 is not a quantized type"},
		{"missing", []Attr{FloatAttr("scale", 1), StringAttr("dtype", "int8")}, "zero_point"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gr, _ := quantGraph(tc.attrs...)
			_, err := Compile(gr)
			var ne *NodeError
			if !errors.As(err, &ne) || ne.Node != 0 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile = %v, want a *NodeError for node 0 saying %q", err, tc.want)
			}
		})
	}
	// The per-channel scales' values are data: a bad one fails the run.
	gr, _ := quantGraph()
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	for v, c := range gr.Consts {
		if gr.Values[v].Name == "scales" {
			c.Float32s()[1] = -1
		}
	}
	if _, err := p.Run(autograd.Zeros(2, 3, 4, 5)); err == nil || !strings.Contains(err.Error(), "scale -1 is not") {
		t.Errorf("Run with a negative scale = %v", err)
	}
}
