package draw

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/svgtest"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// mixedGraph is a small hand-built graph with a value of each dtype the
// colours tell apart, a fused op, an edge that skips a layer, a scalar
// constant, an optional operand left out, two outputs and an input whose
// name needs escaping in both formats. The ops need not run: drawing
// only reads the structure.
func mixedGraph() *graph.Graph {
	g := &graph.Graph{}
	val := func(name string, dt autograd.DType, shape ...int) int {
		return g.AddValue(graph.Value{Name: name, DType: dt, Shape: shape})
	}
	node := func(op, scope string, ins []int, out int, attrs ...graph.Attr) {
		g.Nodes = append(g.Nodes, graph.Node{Op: op, Scope: scope, Inputs: ins, Outputs: []int{out}, Attrs: attrs})
	}
	x := val(`img "rgb" <0>\1`, autograd.Float32, 1, 3, 8, 8)
	g.Inputs = []int{x}
	w := g.AddConst("conv.weight", autograd.Zeros(8, 3, 3, 3))
	b := g.AddConst("conv.bias", autograd.Zeros(8))
	v1 := val("%1", autograd.Float32, 1, 8, 8, 8)
	node("Conv2d+ReLU", "conv", []int{x, w, b}, v1)
	v2 := val("%2", autograd.BFloat16, 1, 8, 8, 8)
	node("Cast", "block", []int{v1}, v2, graph.StringAttr("dtype", "bfloat16"))
	bw := g.AddConst("block.conv.weight.bfloat16", autograd.FromBFloat16(make([]uint16, 64), 8, 8, 1, 1))
	v3 := val("%3", autograd.BFloat16, 1, 8, 8, 8)
	node("Conv2d", "block.conv", []int{v2, bw, graph.None}, v3)
	v4 := val("%4", autograd.BFloat16, 1, 8, 8, 8)
	node("Add", "block", []int{v3, v2}, v4) // v2 skips a layer
	scale := g.AddConst("q.scale", autograd.FromFloat32([]float32{0.05}))
	v5 := val("%5", autograd.Uint8, 1, 8, 8, 8)
	node("Quantize", "q", []int{v4, scale}, v5)
	qw := g.AddConst("fc.weight", autograd.FromInt8(make([]int8, 32), 4, 8, 1, 1))
	qs := g.AddConst("fc.weight.scale", autograd.FromFloat32(make([]float32, 4), 4))
	v6 := val("%6", autograd.Int8, 1, 4, 8, 8)
	node("Dequantize+Conv2d+ReLU+Quantize", "fc", []int{v5, qw, qs, graph.None}, v6)
	v7 := val("%7", autograd.Float32, 1, 4, 8, 8)
	node("Dequantize", "", []int{v6, v6}, v7) // reads v6 twice: one edge
	v8 := val("%8", autograd.Int64, 1)
	node("ArgMax", "", []int{v7}, v8)
	g.Outputs = []int{v7, v8}
	return g
}

// tinyResNet is a frozen ResNet with one basic block per stage on 32×32
// images: fused convolutions, residual sums that skip a layer and
// downsampling branches beside the main path.
var tinyResNet = sync.OnceValues(func() (*graph.Graph, error) {
	gen := autograd.NewGenerator(1)
	m := models.NewResNet(gen, "basic", [4]int{1, 1, 1, 1}, models.ResNetOptions{NumClasses: 10})
	nn.Eval(m)
	traced, err := graph.Trace(m, autograd.Randn(gen, 1, 3, 32, 32))
	if err != nil {
		return nil, err
	}
	return graph.Freeze(traced)
})

// testGraphs are the graphs the SVG tests draw.
func testGraphs(t *testing.T) []struct {
	name string
	g    *graph.Graph
} {
	t.Helper()
	resnet, err := tinyResNet()
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name string
		g    *graph.Graph
	}{
		{"mixed", mixedGraph()},
		{"resnet", resnet},
		{"empty", &graph.Graph{}},
	}
}

func TestDOTGolden(t *testing.T) {
	cases := []struct {
		golden string
		g      *graph.Graph
		opts   []Option
	}{
		{"mixed.dot", mixedGraph(), []Option{WithTitle(`mixed "graph"`)}},
		{"empty.dot", &graph.Graph{}, nil},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			var b bytes.Buffer
			if err := DOT(&b, c.g, c.opts...); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", c.golden)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (write it with go test -update)", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("DOT differs from %s (go test -update rewrites it):\n%s", path, got)
			}
		})
	}
}

// dotString matches a DOT double-quoted string: no bare quote inside, and
// every backslash escaping the character after it.
var dotString = regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"`)

// TestDOTQuoting checks that every label, however named, is one quoted
// DOT string, so that Graphviz reads each statement as written.
func TestDOTQuoting(t *testing.T) {
	for _, c := range testGraphs(t) {
		var b bytes.Buffer
		if err := DOT(&b, c.g); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			// With the strings taken out, a statement is identifiers,
			// attribute lists and punctuation only.
			rest := dotString.ReplaceAllString(l, "S")
			if strings.ContainsAny(rest, `"\`) {
				t.Errorf("%s: a string is not quoted right: %s", c.name, l)
			}
		}
	}
}

// svgDoc is what the tests read back from an SVG: its size and elements.
type svgDoc struct {
	width, height float64
	rects         []svgRect
	edges         []string // each edge path's d
	texts         []string
}

type svgRect struct {
	class, id, fill string
	x, y, w, h      float64
}

// parseSVG reads an SVG's boxes, edges and text, failing the test on
// any XML error.
func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	var group string // id of the enclosing <g>, which names the box
	for _, tok := range svgtest.Tokens(t, data) {
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := svgtest.Attrs(tok)
			f := func(name string) float64 {
				v, err := strconv.ParseFloat(attr[name], 64)
				if err != nil {
					t.Fatalf("<%s> has %s=%q: %v", tok.Name.Local, name, attr[name], err)
				}
				return v
			}
			switch tok.Name.Local {
			case "svg":
				doc.width, doc.height = f("width"), f("height")
				if want := "0 0 " + attr["width"] + " " + attr["height"]; attr["viewBox"] != want {
					t.Errorf("viewBox %q, want %q", attr["viewBox"], want)
				}
			case "g":
				group = attr["id"]
			case "rect":
				doc.rects = append(doc.rects, svgRect{attr["class"], group, attr["fill"], f("x"), f("y"), f("width"), f("height")})
			case "path":
				if attr["class"] == "edge" {
					doc.edges = append(doc.edges, attr["d"])
				}
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				doc.texts = append(doc.texts, s)
			}
		}
	}
	return doc
}

// wantEdges counts the edges a drawing of g has, worked out apart from
// the package: one per distinct pair of a box making a value and a node
// reading it, constants aside, and one into each output not a constant.
func wantEdges(g *graph.Graph) int {
	producer := g.Producers()
	source := func(v int) int { // a node's index, or below -1 for an input
		if p := producer[v]; p >= 0 {
			return p
		}
		return -2 - v
	}
	pairs := map[[2]int]bool{}
	for i, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != graph.None && !g.IsConst(in) {
				pairs[[2]int{source(in), i}] = true
			}
		}
	}
	n := len(pairs)
	for _, o := range g.Outputs {
		if !g.IsConst(o) {
			n++
		}
	}
	return n
}

var pathNumber = regexp.MustCompile(`-?[0-9.]+`)

func TestSVG(t *testing.T) {
	for _, c := range testGraphs(t) {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := SVG(&b, c.g, WithTitle(c.name)); err != nil {
				t.Fatal(err)
			}
			doc := parseSVG(t, b.Bytes())
			count := map[string]int{}
			var boxes []svgRect
			for _, r := range doc.rects {
				count[r.class]++
				if r.class == "op" || r.class == "input" || r.class == "output" {
					boxes = append(boxes, r)
				}
			}
			for class, want := range map[string]int{"op": len(c.g.Nodes), "input": len(c.g.Inputs), "output": len(c.g.Outputs)} {
				if count[class] != want {
					t.Errorf("%d <rect class=%q>, want %d", count[class], class, want)
				}
			}
			if want := wantEdges(c.g); len(doc.edges) != want {
				t.Errorf("%d edge paths, want %d", len(doc.edges), want)
			}
			for i, r := range boxes {
				if r.x < 0 || r.y < 0 || r.x+r.w > doc.width || r.y+r.h > doc.height {
					t.Errorf("box %s at (%g,%g) %gx%g is clipped by the %gx%g image", r.id, r.x, r.y, r.w, r.h, doc.width, doc.height)
				}
				for _, s := range boxes[:i] {
					if r.x < s.x+s.w && s.x < r.x+r.w && r.y < s.y+s.h && s.y < r.y+r.h {
						t.Errorf("boxes %s and %s overlap", s.id, r.id)
					}
				}
			}
			for _, d := range doc.edges {
				nums := pathNumber.FindAllString(d, -1)
				for i := 0; i+1 < len(nums); i += 2 {
					x, _ := strconv.ParseFloat(nums[i], 64)
					y, _ := strconv.ParseFloat(nums[i+1], 64)
					if x < 0 || y < 0 || x > doc.width || y > doc.height {
						t.Errorf("edge %q leaves the image at (%g,%g)", d, x, y)
					}
				}
			}
			for _, n := range c.g.Nodes {
				if !contains(doc.texts, n.Op) {
					t.Errorf("no label names op %s", n.Op)
				}
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestColours checks each box's fill against the dtype of the value it
// makes, in both formats.
func TestColours(t *testing.T) {
	g := mixedGraph()
	var svg, dot bytes.Buffer
	if err := SVG(&svg, g); err != nil {
		t.Fatal(err)
	}
	if err := DOT(&dot, g); err != nil {
		t.Fatal(err)
	}
	fills := map[string]string{}
	for _, r := range parseSVG(t, svg.Bytes()).rects {
		if r.id != "" {
			fills[r.id] = r.fill
		}
	}
	cases := []struct {
		id, what, fill string
	}{
		{"in0", "float32 input", "#dbeafe"},
		{"n0", "float32 Conv2d+ReLU", "#dbeafe"},
		{"n1", "Cast to bfloat16", "#fde68a"},
		{"n2", "bfloat16 Conv2d", "#fde68a"},
		{"n4", "uint8 Quantize", "#e9d5ff"},
		{"n5", "int8 layer", "#bbf7d0"},
		{"n7", "int64 ArgMax", "#e5e7eb"},
		{"out1", "int64 output", "#e5e7eb"},
	}
	for _, c := range cases {
		if fills[c.id] != c.fill {
			t.Errorf("SVG: %s (%s) is filled %q, want %q", c.id, c.what, fills[c.id], c.fill)
		}
		if !regexp.MustCompile(`(?m)^  ` + c.id + ` \[.*fillcolor="` + c.fill + `"`).MatchString(dot.String()) {
			t.Errorf("DOT: %s (%s) is not filled %q", c.id, c.what, c.fill)
		}
	}
	for _, name := range []string{"float32", "bfloat16", "int8", "uint8", "integer"} {
		if !strings.Contains(svg.String(), ">"+name+"</text>") {
			t.Errorf("the SVG legend lacks %s", name)
		}
		if !strings.Contains(dot.String(), `[label="`+name+`"`) {
			t.Errorf("the DOT legend lacks %s", name)
		}
	}
}

// TestLayoutSpacing checks that in every layer, edges passing it
// included, each place keeps its gap from the next.
func TestLayoutSpacing(t *testing.T) {
	for _, c := range testGraphs(t) {
		d, err := newDrawing(c.g, nil)
		if err != nil {
			t.Fatal(err)
		}
		lay := newLayout(d, 0)
		for l, nodes := range lay.layers {
			for i := 1; i < len(nodes); i++ {
				a, b := &lay.nodes[nodes[i-1]], &lay.nodes[nodes[i]]
				if need := a.w/2 + lay.gap(nodes[i-1], nodes[i]) + b.w/2; b.x-a.x < need-1e-6 {
					t.Errorf("%s: layer %d: places %d and %d are %g apart, want at least %g", c.name, l, i-1, i, b.x-a.x, need)
				}
			}
		}
		for e, r := range lay.routes {
			for i := 1; i < len(r); i++ {
				if lay.nodes[r[i]].layer != lay.nodes[r[i-1]].layer+1 {
					t.Errorf("%s: edge %d jumps from layer %d to %d", c.name, e, lay.nodes[r[i-1]].layer, lay.nodes[r[i]].layer)
				}
			}
		}
	}
}

// TestSkipEdgeVisible checks that the residual sum that skips a layer
// passes beside the box on that layer, not through it.
func TestSkipEdgeVisible(t *testing.T) {
	d, err := newDrawing(mixedGraph(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lay := newLayout(d, 0)
	skips := 0
	for _, r := range lay.routes {
		for _, n := range r[1 : len(r)-1] {
			skips++
			dummy := &lay.nodes[n]
			for _, m := range lay.layers[dummy.layer] {
				if b := &lay.nodes[m]; b.box >= 0 && dummy.x > b.x-b.w/2 && dummy.x < b.x+b.w/2 {
					t.Errorf("an edge passing layer %d crosses box %d", dummy.layer, b.box)
				}
			}
		}
	}
	if skips == 0 {
		t.Error("no edge passes a layer")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestErrors(t *testing.T) {
	bad := mixedGraph()
	bad.Nodes[1].Inputs[0] = len(bad.Values) + 3
	undefined := mixedGraph()
	undefined.Nodes[0], undefined.Nodes[1] = undefined.Nodes[1], undefined.Nodes[0]
	cases := []struct {
		name string
		g    *graph.Graph
		w    io.Writer
		want string
	}{
		{"nil graph", nil, io.Discard, "nil graph"},
		{"value out of range", bad, io.Discard, "reads value"},
		{"read before defined", undefined, io.Discard, "before it is defined"},
		{"writer fails", mixedGraph(), failWriter{}, "disk full"},
	}
	for _, c := range cases {
		for name, f := range map[string]func(io.Writer, *graph.Graph, ...Option) error{"DOT": DOT, "SVG": SVG} {
			err := f(c.w, c.g)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %s: error %v, want one saying %q", c.name, name, err, c.want)
			}
		}
	}
}

func TestConstText(t *testing.T) {
	g := mixedGraph()
	cases := []struct {
		name, scope, want string
	}{
		{"conv.weight", "conv", "weight 8×3×3×3 f32"},
		{"block.conv.weight.bfloat16", "block.conv", "weight 8×8×1×1 bf16"},
		{"block.conv.weight.bfloat16", "", "weight 8×8×1×1 bf16"},
		{"fc.weight.scale", "fc", "weight.scale 4 f32"},
		{"q.scale", "q", "scale = 0.05 f32"},
	}
	for _, c := range cases {
		v := -1
		for i, val := range g.Values {
			if val.Name == c.name {
				v = i
			}
		}
		if got := constText(g, v, c.scope); got != c.want {
			t.Errorf("constText(%s in scope %q) = %q, want %q", c.name, c.scope, got, c.want)
		}
	}
}
