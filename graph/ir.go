package graph

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kilnml/kiln/autograd"
)

// Value is one tensor of a graph: an input, a constant, or an op's result.
type Value struct {
	// Name is unique in the graph: an input's or constant's given name
	// ("input0", "layer1.0.conv1.weight"), or "%N" for an op's result.
	Name   string
	Shape  []int
	DType  autograd.DType
	Format autograd.MemoryFormat
}

// None marks an absent optional operand (a convolution without bias) in
// Node.Inputs.
const None = -1

// Node is one op. Inputs and Outputs index Graph.Values.
type Node struct {
	Op      string
	Inputs  []int
	Outputs []int
	Attrs   []Attr
	// Scope is the dotted path of the module the op was traced in ("" for
	// the root module or a graph built by hand).
	Scope string
}

// AttrKind is the type of an attribute's value.
type AttrKind int

// Attribute kinds.
const (
	AttrInt AttrKind = iota
	AttrInts
	AttrFloat
	AttrBool
	AttrString
)

// Attr is a typed attribute of a node. Exactly the field its Kind names is
// meaningful. Dtypes and memory formats are strings ("bfloat16",
// "channels_last"), so saved graphs stay readable.
type Attr struct {
	Name  string
	Kind  AttrKind
	Int   int
	Ints  []int
	Float float64
	Bool  bool
	Str   string
}

// IntAttr, IntsAttr, FloatAttr, BoolAttr and StringAttr build attributes.
func IntAttr(name string, v int) Attr { return Attr{Name: name, Kind: AttrInt, Int: v} }
func IntsAttr(name string, v []int) Attr {
	return Attr{Name: name, Kind: AttrInts, Ints: slices.Clone(v)}
}
func FloatAttr(name string, v float64) Attr { return Attr{Name: name, Kind: AttrFloat, Float: v} }
func BoolAttr(name string, v bool) Attr     { return Attr{Name: name, Kind: AttrBool, Bool: v} }
func StringAttr(name string, v string) Attr { return Attr{Name: name, Kind: AttrString, Str: v} }

func (a Attr) String() string {
	switch a.Kind {
	case AttrInt:
		return fmt.Sprintf("%s=%d", a.Name, a.Int)
	case AttrInts:
		parts := make([]string, len(a.Ints))
		for i, v := range a.Ints {
			parts[i] = fmt.Sprint(v)
		}
		return a.Name + "=[" + strings.Join(parts, ",") + "]"
	case AttrFloat:
		return fmt.Sprintf("%s=%g", a.Name, a.Float)
	case AttrBool:
		return fmt.Sprintf("%s=%t", a.Name, a.Bool)
	case AttrString:
		return fmt.Sprintf("%s=%q", a.Name, a.Str)
	}
	return a.Name + "=?"
}

// value returns the attribute's value as a Go value of its kind.
func (a Attr) value() any {
	switch a.Kind {
	case AttrInt:
		return a.Int
	case AttrInts:
		return slices.Clone(a.Ints)
	case AttrFloat:
		return a.Float
	case AttrBool:
		return a.Bool
	}
	return a.Str
}

// Attr returns the attribute called name and whether n has it.
func (n *Node) Attr(name string) (Attr, bool) {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a, true
		}
	}
	return Attr{}, false
}

// attr returns the attribute name of kind k, panicking with a clear error
// when it is missing or of another kind: the executor checks every node
// when it plans, so a bad saved graph fails there, not mid-run.
func (n *Node) attr(name string, k AttrKind) Attr {
	a, ok := n.Attr(name)
	if !ok {
		fail(autograd.ErrArgument, n.Op, "node has no attribute %q", name)
	}
	if a.Kind != k {
		fail(autograd.ErrArgument, n.Op, "attribute %q has the wrong kind", name)
	}
	return a
}

// Int, Ints, Float, Bool and Str return an attribute's value; a missing
// attribute or one of another kind panics with an *opError.
func (n *Node) Int(name string) int       { return n.attr(name, AttrInt).Int }
func (n *Node) Ints(name string) []int    { return n.attr(name, AttrInts).Ints }
func (n *Node) Float(name string) float64 { return n.attr(name, AttrFloat).Float }
func (n *Node) Bool(name string) bool     { return n.attr(name, AttrBool).Bool }
func (n *Node) Str(name string) string    { return n.attr(name, AttrString).Str }

// SetAttr sets or replaces an attribute.
func (n *Node) SetAttr(a Attr) {
	for i := range n.Attrs {
		if n.Attrs[i].Name == a.Name {
			n.Attrs[i] = a
			return
		}
	}
	n.Attrs = append(n.Attrs, a)
}

// Graph is a traced or loaded model: values, nodes in execution order, the
// graph's inputs and outputs, and the data of its constant values.
type Graph struct {
	Values  []Value
	Nodes   []Node
	Inputs  []int
	Outputs []int
	// Consts holds the data of constant values, by value index. A traced
	// graph's parameter constants share the model's tensors; Freeze gives
	// the frozen graph copies of its own.
	Consts map[int]*autograd.Tensor
}

// IsConst reports whether value v is a constant.
func (g *Graph) IsConst(v int) bool { _, ok := g.Consts[v]; return ok }

// AddValue appends a value and returns its index.
func (g *Graph) AddValue(v Value) int {
	g.Values = append(g.Values, v)
	return len(g.Values) - 1
}

// AddConst appends a constant value named name holding t.
func (g *Graph) AddConst(name string, t *autograd.Tensor) int {
	id := g.AddValue(Value{Name: name, Shape: t.Shape(), DType: t.DType(), Format: t.Format()})
	if g.Consts == nil {
		g.Consts = map[int]*autograd.Tensor{}
	}
	g.Consts[id] = t
	return id
}

// Clone returns a deep copy of g's structure; constant tensors are shared.
func (g *Graph) Clone() *Graph {
	c := &Graph{
		Values:  make([]Value, len(g.Values)),
		Nodes:   make([]Node, len(g.Nodes)),
		Inputs:  slices.Clone(g.Inputs),
		Outputs: slices.Clone(g.Outputs),
		Consts:  make(map[int]*autograd.Tensor, len(g.Consts)),
	}
	for i, v := range g.Values {
		v.Shape = slices.Clone(v.Shape)
		c.Values[i] = v
	}
	for i, n := range g.Nodes {
		n.Inputs, n.Outputs = slices.Clone(n.Inputs), slices.Clone(n.Outputs)
		n.Attrs = slices.Clone(n.Attrs)
		for j := range n.Attrs {
			n.Attrs[j].Ints = slices.Clone(n.Attrs[j].Ints)
		}
		c.Nodes[i] = n
	}
	for k, t := range g.Consts {
		c.Consts[k] = t
	}
	return c
}

// Producers returns, for each value, the index of the node that computes
// it, or -1 for inputs and constants.
func (g *Graph) Producers() []int {
	p := make([]int, len(g.Values))
	for i := range p {
		p[i] = -1
	}
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			p[o] = i
		}
	}
	return p
}

// Uses returns, for each value, the indices of the nodes that read it (a
// node reading a value twice is listed twice).
func (g *Graph) Uses() [][]int {
	u := make([][]int, len(g.Values))
	for i, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != None {
				u[in] = append(u[in], i)
			}
		}
	}
	return u
}

// Validate checks that g is well formed: indices in range, every value
// defined once (as an input, a constant or one node's output) before it
// is read, unique names, constants whose data match their value's shape
// and dtype. Errors name the node or value at fault.
func (g *Graph) Validate() error {
	defined := make([]bool, len(g.Values))
	names := make(map[string]int, len(g.Values))
	for i, v := range g.Values {
		if v.Name == "" {
			return fmt.Errorf("graph: value %d has no name", i)
		}
		if j, dup := names[v.Name]; dup {
			return fmt.Errorf("graph: values %d and %d are both named %q", j, i, v.Name)
		}
		names[v.Name] = i
		for _, d := range v.Shape {
			if d < 0 {
				return fmt.Errorf("graph: value %s has negative dimension in shape %v", v.Name, v.Shape)
			}
		}
	}
	inRange := func(v int) bool { return v >= 0 && v < len(g.Values) }
	define := func(v int, what string) error {
		if !inRange(v) {
			return fmt.Errorf("graph: %s refers to value %d of %d", what, v, len(g.Values))
		}
		if defined[v] {
			return fmt.Errorf("graph: value %s is defined twice (again by %s)", g.Values[v].Name, what)
		}
		defined[v] = true
		return nil
	}
	for _, v := range g.Inputs {
		if err := define(v, "graph input"); err != nil {
			return err
		}
	}
	for v, t := range g.Consts {
		if err := define(v, "constant"); err != nil {
			return err
		}
		val := g.Values[v]
		if t == nil {
			return fmt.Errorf("graph: constant %s has no data", val.Name)
		}
		if !slices.Equal(t.Shape(), val.Shape) || t.DType() != val.DType {
			return fmt.Errorf("graph: constant %s holds %v %v, its value says %v %v", val.Name, t.DType(), t.Shape(), val.DType, val.Shape)
		}
	}
	for i, n := range g.Nodes {
		what := fmt.Sprintf("node %d (%s)", i, n.Op)
		if n.Op == "" {
			return fmt.Errorf("graph: node %d has no op", i)
		}
		for _, in := range n.Inputs {
			if in == None {
				continue
			}
			if !inRange(in) {
				return fmt.Errorf("graph: %s reads value %d of %d", what, in, len(g.Values))
			}
			if !defined[in] {
				return fmt.Errorf("graph: %s reads %s before it is defined", what, g.Values[in].Name)
			}
		}
		for _, o := range n.Outputs {
			if err := define(o, what); err != nil {
				return err
			}
		}
	}
	for _, o := range g.Outputs {
		if !inRange(o) {
			return fmt.Errorf("graph: output refers to value %d of %d", o, len(g.Values))
		}
		if !defined[o] {
			return fmt.Errorf("graph: output %s is never defined", g.Values[o].Name)
		}
	}
	return nil
}

// NumParams counts the elements of g's floating-point constants: weights
// and biases, and the statistics of any batch norm not folded away.
func (g *Graph) NumParams() int {
	n := 0
	for _, t := range g.Consts {
		if t.DType().IsFloat() {
			n += t.Numel()
		}
	}
	return n
}

// typeString writes a value's type as f32[1,3,224,224] with its memory
// format when it is not contiguous.
func (v *Value) typeString() string {
	short := map[autograd.DType]string{autograd.Float32: "f32", autograd.BFloat16: "bf16", autograd.Int8: "i8",
		autograd.Uint8: "u8", autograd.Int32: "i32", autograd.Int64: "i64"}[v.DType]
	dims := make([]string, len(v.Shape))
	for i, d := range v.Shape {
		dims[i] = fmt.Sprint(d)
	}
	s := short + "[" + strings.Join(dims, ",") + "]"
	if v.Format != autograd.Contiguous {
		s += " " + v.Format.String()
	}
	return s
}

// String prints g one node per line, fused nodes by their fused names:
//
//	graph(%input0: f32[1,3,32,32]) {
//	  %3: f32[1,8,32,32] = Conv2dReLU(%input0, conv.weight, conv.bias) {stride=[1 1], …}  # conv
//	  return %3
//	}
func (g *Graph) String() string {
	var b strings.Builder
	ref := func(v int) string {
		if v == None {
			return "none"
		}
		if g.IsConst(v) {
			return g.Values[v].Name
		}
		return "%" + strings.TrimPrefix(g.Values[v].Name, "%")
	}
	b.WriteString("graph(")
	for i, in := range g.Inputs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", ref(in), g.Values[in].typeString())
	}
	b.WriteString(") {\n")
	for _, n := range g.Nodes {
		outs := make([]string, len(n.Outputs))
		for i, o := range n.Outputs {
			outs[i] = ref(o) + ": " + g.Values[o].typeString()
		}
		ins := make([]string, len(n.Inputs))
		for i, in := range n.Inputs {
			ins[i] = ref(in)
		}
		fmt.Fprintf(&b, "  %s = %s(%s)", strings.Join(outs, ", "), n.Op, strings.Join(ins, ", "))
		if len(n.Attrs) > 0 {
			as := make([]string, len(n.Attrs))
			for i, a := range n.Attrs {
				as[i] = a.String()
			}
			fmt.Fprintf(&b, " {%s}", strings.Join(as, ", "))
		}
		if n.Scope != "" {
			fmt.Fprintf(&b, "  # %s", n.Scope)
		}
		b.WriteByte('\n')
	}
	outs := make([]string, len(g.Outputs))
	for i, o := range g.Outputs {
		outs[i] = ref(o)
	}
	fmt.Fprintf(&b, "  return %s\n}\n", strings.Join(outs, ", "))
	return b.String()
}
