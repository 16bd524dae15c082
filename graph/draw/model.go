package draw

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
)

// An Option sets a knob of one drawing.
type Option func(*config)

type config struct{ title string }

// WithTitle puts a title above the drawing (the file name, say).
func WithTitle(title string) Option { return func(c *config) { c.title = title } }

// kind is what a box stands for.
type kind int

const (
	opBox     kind = iota // a node of the graph
	inputBox              // a graph input
	outputBox             // a graph output
)

// class is the box's class attribute in the SVG and its role in the DOT.
func (k kind) class() string {
	return [...]string{"op", "input", "output"}[k]
}

// lineStyle is how one line of a label is written.
type lineStyle int

const (
	titleLine lineStyle = iota // the op or the input's name: bold
	scopeLine                  // the module scope: grey
	plainLine                  // constants and result types
)

type line struct {
	text  string
	style lineStyle
}

// box is one box of the drawing: a node, a graph input or a graph output.
type box struct {
	kind  kind
	id    string // the DOT node id: in0, n3, out0
	lines []line
	dtype autograd.DType
	fused bool
}

// edge runs from box from to box to.
type edge struct{ from, to int }

// drawing is what both formats draw: boxes (inputs, then nodes in
// execution order, then outputs), the edges between them, and the dtypes
// the boxes are filled by, in legend order.
type drawing struct {
	title  string
	boxes  []box
	edges  []edge
	dtypes []autograd.DType
}

// newDrawing checks g and turns it into boxes and edges.
func newDrawing(g *graph.Graph, opts []Option) (*drawing, error) {
	if g == nil {
		return nil, errors.New("draw: nil graph")
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("draw: %w", err)
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	d := &drawing{title: c.title}
	// source[v] is the box that makes value v; -1 for constants.
	source := make([]int, len(g.Values))
	for i := range source {
		source[i] = -1
	}
	for _, v := range g.Inputs {
		source[v] = len(d.boxes)
		val := &g.Values[v]
		d.boxes = append(d.boxes, box{kind: inputBox, id: fmt.Sprintf("in%d", len(d.boxes)), dtype: val.DType,
			lines: []line{{val.Name, titleLine}, {typeText(val), plainLine}}})
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		b := box{kind: opBox, id: fmt.Sprintf("n%d", i), fused: strings.Contains(n.Op, graph.FusedSep),
			lines: []line{{n.Op, titleLine}}}
		if n.Scope != "" {
			b.lines = append(b.lines, line{n.Scope, scopeLine})
		}
		to := len(d.boxes)
		seenConst := map[int]bool{}
		for _, in := range n.Inputs {
			switch {
			case in == graph.None:
			case g.IsConst(in):
				if !seenConst[in] {
					seenConst[in] = true
					b.lines = append(b.lines, line{constText(g, in, n.Scope), plainLine})
				}
			default:
				d.addEdge(source[in], to)
			}
		}
		for _, o := range n.Outputs {
			source[o] = to
			b.lines = append(b.lines, line{"→ " + typeText(&g.Values[o]), plainLine})
		}
		if len(n.Outputs) > 0 {
			b.dtype = g.Values[n.Outputs[0]].DType
		}
		d.boxes = append(d.boxes, b)
	}
	for i, v := range g.Outputs {
		name := "output"
		if len(g.Outputs) > 1 {
			name = fmt.Sprintf("output %d", i)
		}
		val := &g.Values[v]
		b := box{kind: outputBox, id: fmt.Sprintf("out%d", i), dtype: val.DType, lines: []line{{name, titleLine}}}
		if g.IsConst(v) {
			b.lines = append(b.lines, line{constText(g, v, ""), plainLine})
		} else {
			b.lines = append(b.lines, line{typeText(val), plainLine})
			d.addEdge(source[v], len(d.boxes))
		}
		d.boxes = append(d.boxes, b)
	}
	for _, dt := range legendOrder {
		for _, b := range d.boxes {
			if colourKey(b.dtype) == dt {
				d.dtypes = append(d.dtypes, dt)
				break
			}
		}
	}
	return d, nil
}

// addEdge adds an edge from box from to box to unless it is there: a node
// that reads a value twice (Add(x, x)) gets one edge.
func (d *drawing) addEdge(from, to int) {
	for _, e := range d.edges {
		if e.from == from && e.to == to {
			return
		}
	}
	d.edges = append(d.edges, edge{from, to})
}

// shortDType names dtypes as g.String() does.
var shortDType = map[autograd.DType]string{autograd.Float32: "f32", autograd.BFloat16: "bf16", autograd.Int8: "i8",
	autograd.Uint8: "u8", autograd.Int32: "i32", autograd.Int64: "i64"}

func dtypeText(dt autograd.DType) string {
	if s, ok := shortDType[dt]; ok {
		return s
	}
	return dt.String()
}

// shapeText writes a shape as 64×3×7×7, and a scalar's as "scalar".
func shapeText(shape []int) string {
	if len(shape) == 0 {
		return "scalar"
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	return strings.Join(dims, "×")
}

// typeText writes a value's type: 1×64×16×16 f32, with its memory format
// when it is not contiguous.
func typeText(v *graph.Value) string {
	s := shapeText(v.Shape) + " " + dtypeText(v.DType)
	if v.Format != autograd.Contiguous {
		s += " " + v.Format.String()
	}
	return s
}

// constText summarises a constant read by a node of scope by its name
// within the scope, its shape and dtype ("weight 64×3×7×7 f32"), or for a
// single number by its value ("scale = 0.125 f32").
func constText(g *graph.Graph, v int, scope string) string {
	val := &g.Values[v]
	name := constName(val, scope)
	if t := g.Consts[v]; t != nil && t.Numel() == 1 {
		return fmt.Sprintf("%s = %.4g %s", name, t.Item(), dtypeText(val.DType))
	}
	return name + " " + shapeText(val.Shape) + " " + dtypeText(val.DType)
}

// constName shortens a constant's name: the node's scope goes
// ("layer1.0.conv1.weight" in scope layer1.0.conv1 is "weight"), or, out
// of its scope, all but the last part of the name; so does a last part
// that only names the dtype the constant was cast to ("conv1.weight.bfloat16").
func constName(val *graph.Value, scope string) string {
	name := strings.TrimSuffix(val.Name, "."+val.DType.String())
	if scope != "" && strings.HasPrefix(name, scope+".") {
		return name[len(scope)+1:]
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 && i < len(name)-1 {
		return name[i+1:]
	}
	return name
}

// legendOrder is the order of the dtype colours in a legend; Int64 stands
// for every dtype drawn grey.
var legendOrder = []autograd.DType{autograd.Float32, autograd.BFloat16, autograd.Int8, autograd.Uint8, autograd.Int64}

// colourKey is the dtype whose colour a box of dtype dt gets.
func colourKey(dt autograd.DType) autograd.DType {
	switch dt {
	case autograd.Float32, autograd.BFloat16, autograd.Int8, autograd.Uint8:
		return dt
	}
	return autograd.Int64
}

// fill is the colour of a box holding dtype dt (see the package doc).
func fill(dt autograd.DType) string {
	switch colourKey(dt) {
	case autograd.Float32:
		return "#dbeafe"
	case autograd.BFloat16:
		return "#fde68a"
	case autograd.Int8:
		return "#bbf7d0"
	case autograd.Uint8:
		return "#e9d5ff"
	}
	return "#e5e7eb"
}

// legendText names the dtypes drawn in dt's colour.
func legendText(dt autograd.DType) string {
	if colourKey(dt) == autograd.Int64 {
		return "integer"
	}
	return dt.String()
}
