package graph

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/internal/shape"
	"github.com/kilnml/kiln/nn"
)

// tinyNet is conv → ReLU, conv + residual → ReLU, max pool, reshape,
// linear: after Freeze, the fused Conv2d+ReLU and Conv2d+Add+ReLU, a
// pool, a Reshape and a Linear.
type tinyNet struct {
	nn.Base
	conv1, conv2 *nn.Conv2d
	pool         *nn.MaxPool2d
	fc           *nn.Linear
}

// tinyGraph traces tinyNet on a [1, 2, 4, 4] input and freezes it (fused
// when fused is set) and returns it with the input.
func tinyGraph(t testing.TB, fused bool) (*Graph, *autograd.Tensor) {
	t.Helper()
	gen := autograd.NewGenerator(5)
	m := &tinyNet{
		conv1: nn.NewConv2d(gen, 2, 2, 3, nn.ConvOptions{Padding: 1}),
		conv2: nn.NewConv2d(gen, 2, 2, 3, nn.ConvOptions{Padding: 1}),
		pool:  nn.NewMaxPool2d(2, nn.MaxPoolOptions{}),
		fc:    nn.NewLinear(gen, 8, 3, nn.LinearOptions{}),
	}
	m.RegisterModule("conv1", m.conv1)
	m.RegisterModule("conv2", m.conv2)
	m.RegisterModule("pool", m.pool)
	m.RegisterModule("fc", m.fc)
	x := autograd.Randn(gen, 1, 2, 4, 4)
	g, err := TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		h := autograd.ReLU(m.conv1.Forward(in[0]))
		h = autograd.ReLU(autograd.Add(m.conv2.Forward(h), h))
		y := autograd.Reshape(m.pool.Forward(h), -1, 8)
		return []*autograd.Tensor{m.fc.Forward(y)}
	}, x)
	if err != nil {
		t.Fatal(err)
	}
	if g, err = Freeze(g, WithFusion(fused)); err != nil {
		t.Fatal(err)
	}
	return g, x
}

// nodeOf returns the IR's first node of op, as a generic map.
func nodeOf(t testing.TB, ir map[string]any, op string) map[string]any {
	for _, n := range ir["nodes"].([]any) {
		if n := n.(map[string]any); n["op"] == op {
			return n
		}
	}
	t.Fatalf("the graph has no %s node", op)
	return nil
}

// setAttr sets the value of node n's attribute name.
func setAttr(t testing.TB, n map[string]any, name string, v any) {
	for _, a := range n["attrs"].([]any) {
		if a := a.(map[string]any); a["name"] == name {
			a["value"] = v
			return
		}
	}
	t.Fatalf("node %s has no attribute %s", n["op"], name)
}

// TestDecodeChecksNodes decodes files whose IR was edited into graphs that
// crashed the process before Decode checked nodes against their ops
// (index out of range, a makeslice panic, a fatal 25 GB allocation), and
// others with out-of-range attributes. Each file carries the checksum of
// its edited contents, so the node checks, not the checksum, must catch
// it, and name the node, its scope and the field.
func TestDecodeChecksNodes(t *testing.T) {
	g, _ := tinyGraph(t, true)
	good := encodeBytes(t, g)
	cases := []struct {
		name  string
		edit  func(ir map[string]any)
		op    string
		field string
		want  string
	}{
		{"fused conv with one input", func(ir map[string]any) {
			n := nodeOf(t, ir, "Conv2d+ReLU")
			n["inputs"] = n["inputs"].([]any)[:1]
		}, "Conv2d+ReLU", "inputs", "got 1, want 3"},
		{"linear with no inputs", func(ir map[string]any) { nodeOf(t, ir, "Linear")["inputs"] = []any{} },
			"Linear", "inputs", "got 0, want 3"},
		{"fused op renamed to another arity", func(ir map[string]any) { nodeOf(t, ir, "Conv2d+ReLU")["op"] = "Conv2d+Add+ReLU" },
			"Conv2d+Add+ReLU", "inputs", "got 3, want 4"},
		{"reshape to a huge dimension", func(ir map[string]any) {
			setAttr(t, nodeOf(t, ir, "Reshape"), "shape", []any{1<<58 + 1, 256})
		}, "Reshape", "attrs.shape", "out of range"},
		{"reshape to an overflowing shape", func(ir map[string]any) {
			setAttr(t, nodeOf(t, ir, "Reshape"), "shape", []any{1 << 30, 1 << 30, -1})
		}, "Reshape", "", "overflows"},
		{"conv padded by 20000", func(ir map[string]any) {
			setAttr(t, nodeOf(t, ir, "Conv2d+ReLU"), "padding", []any{20000, 20000})
		}, "Conv2d+ReLU", "outputs[0].shape", "the op gives [1 2 40002 40002]"},
		{"required operand absent", func(ir map[string]any) {
			n := nodeOf(t, ir, "Linear")
			n["inputs"].([]any)[1] = -1
		}, "Linear", "inputs[1]", "is none"},
		{"two results of a fused op", func(ir map[string]any) {
			n := nodeOf(t, ir, "Conv2d+ReLU")
			n["outputs"] = append(n["outputs"].([]any), len(ir["values"].([]any)))
			ir["values"] = append(ir["values"].([]any), map[string]any{"name": "%extra", "shape": []any{1}, "dtype": "float32", "format": "contiguous"})
		}, "Conv2d+ReLU", "outputs", "got 2, want 1"},
		{"declared shape edited", func(ir map[string]any) {
			out := int(nodeOf(t, ir, "MaxPool2d")["outputs"].([]any)[0].(float64))
			ir["values"].([]any)[out].(map[string]any)["shape"] = []any{1, 2, 3, 3}
		}, "MaxPool2d", "outputs[0].shape", "declared [1 2 3 3], the op gives [1 2 2 2]"},
		{"negative padding", func(ir map[string]any) { setAttr(t, nodeOf(t, ir, "Conv2d+ReLU"), "padding", []any{-1, 1}) },
			"Conv2d+ReLU", "", "padding must be non-negative"},
		{"huge padding", func(ir map[string]any) { setAttr(t, nodeOf(t, ir, "Conv2d+ReLU"), "padding", []any{1 << 50}) },
			"Conv2d+ReLU", "attrs.padding", "out of range"},
		{"zero stride", func(ir map[string]any) { setAttr(t, nodeOf(t, ir, "Conv2d+Add+ReLU"), "stride", []any{0, 1}) },
			"Conv2d+Add+ReLU", "", "stride must be positive"},
		{"zero dilation", func(ir map[string]any) { setAttr(t, nodeOf(t, ir, "Conv2d+ReLU"), "dilation", []any{1, 0}) },
			"Conv2d+ReLU", "", "dilation must be positive"},
		{"huge dilation", func(ir map[string]any) { setAttr(t, nodeOf(t, ir, "Conv2d+ReLU"), "dilation", []any{1 << 47}) },
			"Conv2d+ReLU", "", "does not fit input"},
		{"three strides for two dimensions", func(ir map[string]any) { setAttr(t, nodeOf(t, ir, "Conv2d+ReLU"), "stride", []any{1, 1, 1}) },
			"Conv2d+ReLU", "", "must have 1 or 2 elements"},
		{"zero kernel", func(ir map[string]any) { setAttr(t, nodeOf(t, ir, "MaxPool2d"), "kernel", []any{0, 2}) },
			"MaxPool2d", "", "kernel size must be positive"},
		{"kernel larger than the input", func(ir map[string]any) { setAttr(t, nodeOf(t, ir, "MaxPool2d"), "kernel", []any{1 << 40}) },
			"MaxPool2d", "", "too small for input"},
		{"pool padding over half the kernel", func(ir map[string]any) { setAttr(t, nodeOf(t, ir, "MaxPool2d"), "padding", []any{2, 2}) },
			"MaxPool2d", "", "at most half of kernel size"},
		{"attribute of another kind", func(ir map[string]any) {
			for _, a := range nodeOf(t, ir, "Conv2d+ReLU")["attrs"].([]any) {
				if a := a.(map[string]any); a["name"] == "groups" {
					a["kind"], a["value"] = "float", 1.5
				}
			}
		}, "Conv2d+ReLU", "attrs.groups", "is float, want int"},
		{"attribute missing", func(ir map[string]any) { delete(nodeOf(t, ir, "MaxPool2d"), "attrs") },
			"MaxPool2d", "attrs.kernel", "missing"},
		{"unknown op", func(ir map[string]any) { nodeOf(t, ir, "Linear")["op"] = "Conv2d+Frobnicate" },
			"Conv2d+Frobnicate", "op", "cannot follow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(editIR(t, good, c.edit))
			var ne *NodeError
			if !errors.As(err, &ne) {
				t.Fatalf("Decode = %v, want a *NodeError", err)
			}
			if ne.Op != c.op || ne.Field != c.field || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Decode = %v (op %q, field %q), want op %q, field %q and %q", err, ne.Op, ne.Field, c.op, c.field, c.want)
			}
			// Traced in a module (not the root), the node has a scope.
			if (ne.Scope == "") != (c.op == "Reshape") || !strings.HasSuffix(err.Error(), strings.TrimPrefix(ne.Error(), "graph: ")) {
				t.Errorf("error %q does not name the node's scope (%q) and the field", err, ne.Scope)
			}
		})
	}
}

func TestNodeErrorMessage(t *testing.T) {
	err := error(&NodeError{Node: 12, Op: "Conv2d+ReLU", Scope: "layer1.0.conv1", Field: "inputs", Err: errors.New("got 1, want 3")})
	if want := `graph: node 12 "Conv2d+ReLU" (scope layer1.0.conv1): inputs: got 1, want 3`; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	err = &NodeError{Node: 0, Op: "ReLU", Err: errors.New("boom")}
	if want := `graph: node 0 "ReLU": boom`; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
}

// TestCompileChecksNodes: a graph built in code, not decoded, is checked
// by Compile as a decoded one is, bar the shapes it declares for results.
func TestCompileChecksNodes(t *testing.T) {
	g, x := tinyGraph(t, true)
	if _, err := Compile(g); err != nil {
		t.Fatal(err)
	}
	short := g.Clone()
	short.Nodes[0].Inputs = short.Nodes[0].Inputs[:1]
	_, err := Compile(short)
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Node != 0 || ne.Field != "inputs" {
		t.Fatalf("Compile = %v, want a *NodeError for node 0's inputs", err)
	}
	undeclared := g.Clone()
	for _, n := range undeclared.Nodes {
		undeclared.Values[n.Outputs[0]].Shape = nil
	}
	runGraph(t, undeclared, []*autograd.Tensor{x})
}

// TestFusedOptionalOperands: a later part's optional operands (a
// LayerNorm's weight and bias) may be absent in the fused node too, its
// other operands not.
func TestFusedOptionalOperands(t *testing.T) {
	gen := autograd.NewGenerator(2)
	x, y := autograd.Randn(gen, 2, 4), autograd.Randn(gen, 2, 4)
	build := func(b int) *Graph {
		g := &Graph{}
		in0 := g.AddValue(Value{Name: "input0", Shape: x.Shape()})
		in1 := g.AddValue(Value{Name: "input1", Shape: y.Shape()})
		out := g.AddValue(Value{Name: "%2", Shape: x.Shape()})
		ins := []int{in0, in1, None, None}
		ins[1] = []int{in1, None}[b]
		g.Inputs, g.Outputs = []int{in0, in1}, []int{out}
		g.Nodes = []Node{{Op: "Add+LayerNorm", Inputs: ins, Outputs: []int{out},
			Attrs: []Attr{IntsAttr("LayerNorm.normalized_shape", []int{4}), FloatAttr("LayerNorm.eps", 1e-5)}}}
		return g
	}
	got := runGraph(t, build(0), []*autograd.Tensor{x, y})
	if want := autograd.LayerNorm(autograd.Add(x, y), []int{4}, nil, nil, 1e-5); !sameTensor(got[0], want) {
		t.Errorf("Add+LayerNorm without weight and bias differs from its parts")
	}
	var ne *NodeError
	if _, err := Compile(build(1)); !errors.As(err, &ne) || ne.Field != "inputs[1]" {
		t.Errorf("Compile with the Add's operand absent = %v, want a *NodeError for inputs[1]", err)
	}
}

// TestRunRecoversPanics: a kernel bug the checks cannot foresee (an op
// indexing out of range) fails the Run that meets it with an error naming
// the node, not the process.
func TestRunRecoversPanics(t *testing.T) {
	const op = "PanicsForTest"
	registerOp(&opImpl{name: op, ins: exactly(1), outs: exactly(1),
		infer: func(_ any, ins []*sig) ([]sig, error) { return []sig{*ins[0]}, nil },
		eager: func(_ any, in []*autograd.Tensor) []*autograd.Tensor {
			var s []int
			_ = s[in[0].NDim()]
			return in
		}})
	t.Cleanup(func() { delete(opImpls, op) })
	g := &Graph{}
	in := g.AddValue(Value{Name: "input0", Shape: []int{2}})
	out := g.AddValue(Value{Name: "%1", Shape: []int{2}})
	g.Inputs, g.Outputs = []int{in}, []int{out}
	g.Nodes = []Node{{Op: op, Inputs: []int{in}, Outputs: []int{out}, Scope: "m"}}
	p, err := Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(autograd.Zeros(2))
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Node != 0 || !strings.Contains(err.Error(), "index out of range") {
		t.Errorf("Run = %v, want a *NodeError for node 0 saying index out of range", err)
	}
}

func TestMemoryBudget(t *testing.T) {
	g, x := tinyGraph(t, true)
	// The tiny graph's values take a few hundred bytes.
	if _, err := Compile(g, WithMemoryBudget(256)); !errors.Is(err, ErrMemoryBudget) {
		t.Errorf("Compile with a 256-byte budget = %v, want ErrMemoryBudget", err)
	}
	p, err := Compile(g, WithMemoryBudget(4096))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(x); err != nil {
		t.Fatal(err)
	}
	// A larger batch is planned when Run meets it, and must fit too.
	big := autograd.Randn(autograd.NewGenerator(1), 64, 2, 4, 4)
	if _, err := p.Run(big); !errors.Is(err, ErrMemoryBudget) {
		t.Errorf("Run of a batch of 64 with a 4 KB budget = %v, want ErrMemoryBudget", err)
	}
	if _, err := p.Run(x); err != nil {
		t.Errorf("the first batch size no longer runs: %v", err)
	}
	if machineMemory() <= 0 {
		t.Errorf("default budget %d", machineMemory())
	}
}

// TestChecksumCoversIR: an edited IR with the checksum left as it was
// fails, and a version 1 file, whose checksum covers constants only,
// still loads.
func TestChecksumCoversIR(t *testing.T) {
	g, x := tinyGraph(t, true)
	good := encodeBytes(t, g)
	edited := rewrite(t, good, func(f *safetensors.File) {
		f.Metadata[MetaIR] = strings.Replace(f.Metadata[MetaIR], `"scope":"fc"`, `"scope":"fd"`, 1)
	})
	if _, err := Decode(edited); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("Decode of an edited IR = %v, want a checksum mismatch", err)
	}
	v1 := rewrite(t, good, func(f *safetensors.File) {
		f.Metadata[MetaVersion] = "1"
		resign(f)
	})
	old, err := Decode(v1)
	if err != nil {
		t.Fatalf("a version 1 file does not load: %v", err)
	}
	want := runGraph(t, g, []*autograd.Tensor{x})
	if got := runGraph(t, old, []*autograd.Tensor{x}); !sameTensor(got[0], want[0]) {
		t.Errorf("the version 1 file runs to another result")
	}
}

// fuzzOps are the op names FuzzDecodeCompileRun swaps in: every
// registered op and fused ones of each arity.
func fuzzOps() []string {
	ops := []string{"Conv2d+ReLU", "Conv2d+Add+ReLU", "Conv2d+Add", "Linear+ReLU", "Linear+GELU", "Add+LayerNorm",
		"Div+Add+Softmax", "Conv2d+Sigmoid+Mul", "Conv2d+SigmoidMul", "Matmul+Add", "Split+ReLU", "Cat+ReLU"}
	for op := range opImpls {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}

// fuzzInts are the numbers mutations write into the IR.
var fuzzInts = []int{0, 1, 2, 3, -1, -2, 7, 1 << 20, 1<<48 + 1, 1 << 62, -1 << 62}

// mutateIR applies the mutations data encodes to ir, each three bytes:
// what to change, where, and to what.
func mutateIR(ir map[string]any, data []byte, ops []string) {
	values := ir["values"].([]any)
	nodes := ir["nodes"].([]any)
	pick := func(b byte, n int) int { return int(b) % max(n, 1) }
	num := func(b byte) any { return fuzzInts[pick(b, len(fuzzInts))] }
	for ; len(data) >= 3; data = data[3:] {
		what, at, to := data[0], data[1], data[2]
		if len(nodes) == 0 {
			return
		}
		n := nodes[pick(at, len(nodes))].(map[string]any)
		list := func(key string) []any {
			l, _ := n[key].([]any)
			return l
		}
		switch what % 12 {
		case 0: // drop an operand or result
			key := []string{"inputs", "outputs"}[to%2]
			if l := list(key); len(l) > 0 {
				i := pick(to/2, len(l))
				n[key] = append(l[:i:i], l[i+1:]...)
			}
		case 1: // read an operand twice, or write a result twice
			key := []string{"inputs", "outputs"}[to%2]
			if l := list(key); len(l) > 0 {
				n[key] = append(l, l[pick(to/2, len(l))])
			}
		case 2: // point an operand or result at another value
			key := []string{"inputs", "outputs"}[to%2]
			if l := list(key); len(l) > 0 {
				l[pick(at/8, len(l))] = pick(to/2, len(values)+2) - 1
			}
		case 3:
			n["op"] = ops[pick(to, len(ops))]
		case 4, 5: // an attribute's value: a number, or a list of them
			if attrs := list("attrs"); len(attrs) > 0 {
				a := attrs[pick(at/8, len(attrs))].(map[string]any)
				if what%12 == 4 {
					a["value"] = num(to)
				} else {
					a["value"] = slices.Repeat([]any{num(to)}, int(to%4))
				}
			}
		case 6: // an attribute's kind
			if attrs := list("attrs"); len(attrs) > 0 {
				a := attrs[pick(at/8, len(attrs))].(map[string]any)
				a["kind"] = []string{"int", "ints", "float", "bool", "string"}[to%5]
				a["value"] = []any{num(to / 5), []any{num(to / 5)}, 0.5, true, "tanh"}[to%5]
			}
		case 7: // drop an attribute
			if attrs := list("attrs"); len(attrs) > 0 {
				i := pick(to, len(attrs))
				n["attrs"] = append(attrs[:i:i], attrs[i+1:]...)
			}
		case 8, 9: // a value's shape: one dimension, or its rank
			v := values[pick(to, len(values))].(map[string]any)
			shape := v["shape"].([]any)
			switch {
			case what%12 == 8 && len(shape) > 0:
				shape[pick(at, len(shape))] = num(at / 16)
			case at%2 == 0 && len(shape) > 0:
				v["shape"] = shape[:len(shape)-1]
			default:
				v["shape"] = append(shape, num(at/2))
			}
		case 10:
			v := values[pick(to, len(values))].(map[string]any)
			v["dtype"] = []string{"float32", "bfloat16", "int8", "uint8", "int32", "int64"}[pick(at, 6)]
		case 11:
			v := values[pick(to, len(values))].(map[string]any)
			v["format"] = []string{"contiguous", "channels_last", "channels_last_3d"}[pick(at, 3)]
		}
	}
}

// FuzzDecodeCompileRun mutates the IR of a small valid graph (tinyGraph,
// fused or not) as data says, re-signs the file, and decodes, compiles
// (with a 64 MB budget) and runs what is accepted on inputs of its
// declared types: whatever the IR, each step gives an error or a result,
// never a panic. An IR Decode rejects is compiled and run too, as a graph
// built in code with the base graph's constants, since Compile trusts no
// shape it declares for a node's result and most mutations change one.
func FuzzDecodeCompileRun(f *testing.F) {
	var bases []*Graph
	var files [][]byte
	for _, fused := range []bool{true, false} {
		g, _ := tinyGraph(f, fused)
		bases = append(bases, g)
		files = append(files, encodeBytes(f, g))
	}
	ops := fuzzOps()
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 3, 1, 3, 2})
	f.Add([]byte{0, 3, 0, 3})
	f.Add([]byte{0, 4, 1, 10, 1, 3, 1, 5})
	f.Add([]byte{1, 6, 5, 12, 1, 9, 2, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		var irText string
		file := editIR(t, files[data[0]%2], func(ir map[string]any) {
			mutateIR(ir, data[1:], ops)
			b, _ := json.Marshal(ir)
			irText = string(b)
		})
		g, err := Decode(file)
		if err != nil {
			if g = withConsts(irText, bases[data[0]%2]); g == nil {
				return
			}
		}
		p, err := Compile(g, WithMemoryBudget(64<<20))
		if err != nil {
			return
		}
		inputs := make([]*autograd.Tensor, len(g.Inputs))
		for i, v := range g.Inputs {
			val := g.Values[v]
			if _, err := shape.Numel(val.Shape); err != nil {
				t.Fatalf("Compile accepted input %s of shape %v: %v", val.Name, val.Shape, err)
			}
			inputs[i] = autograd.Empty(val.DType, val.Shape...)
			if val.Format != autograd.Contiguous && formatRank(val.Format) == len(val.Shape) {
				inputs[i] = inputs[i].To(val.Format)
			}
		}
		if outs, err := p.Run(inputs...); err == nil && len(outs) != len(g.Outputs) {
			t.Fatalf("Run gave %d results for %d outputs", len(outs), len(g.Outputs))
		}
	})
}

// withConsts builds the graph an IR describes with base's constants of
// the same names, or returns nil where the IR cannot be read or a
// constant has none to take.
func withConsts(irText string, base *Graph) *Graph {
	g, consts, err := parseIR(irText)
	if err != nil {
		return nil
	}
	byName := map[string]*autograd.Tensor{}
	for v, t := range base.Consts {
		byName[base.Values[v].Name] = t
	}
	for _, v := range consts {
		t, ok := byName[g.Values[v].Name]
		if !ok {
			return nil
		}
		g.Consts[v] = t
	}
	if g.Validate() != nil {
		return nil
	}
	return g
}

// TestCompileChecksAttributeValues: attribute values an op rejects fail
// Compile with the op's message for the node, before anything runs, as
// the eager op would fail.
func TestCompileChecksAttributeValues(t *testing.T) {
	for _, c := range []struct {
		op    string
		attrs []Attr
		want  string
	}{
		{"GELU", []Attr{StringAttr("approximate", "fast")}, `approximate must be "none" or "tanh"`},
		{"HardTanh", []Attr{FloatAttr("min_val", 1), FloatAttr("max_val", -1)}, "min 1 is greater than max -1"},
		{"Cast", []Attr{StringAttr("dtype", "float16")}, `unknown dtype "float16"`},
		{"To", []Attr{StringAttr("format", "nhwc")}, `unknown memory format "nhwc"`},
		{"Softmax", []Attr{IntAttr("dim", 5)}, "dim"},
		{"HardTanh", []Attr{FloatAttr("min_val", 1)}, "attrs.max_val: missing"},
	} {
		t.Run(c.op, func(t *testing.T) {
			g := &Graph{}
			in := g.AddValue(Value{Name: "input0", Shape: []int{2, 3}})
			out := g.AddValue(Value{Name: "%1", Shape: []int{2, 3}})
			g.Inputs, g.Outputs = []int{in}, []int{out}
			g.Nodes = []Node{{Op: c.op, Inputs: []int{in}, Outputs: []int{out}, Attrs: c.attrs}}
			_, err := Compile(g)
			var ne *NodeError
			if !errors.As(err, &ne) || ne.Node != 0 || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Compile = %v, want a *NodeError for node 0 containing %q", err, c.want)
			}
		})
	}
	// EmbeddingBag's mode, on operands that fit.
	g := &Graph{}
	idx := g.AddConst("idx", autograd.Cast(autograd.Zeros(4), autograd.Int64))
	off := g.AddConst("off", autograd.Cast(autograd.Zeros(2), autograd.Int64))
	w := g.AddConst("w", autograd.Zeros(5, 3))
	out := g.AddValue(Value{Name: "%1", Shape: []int{2, 3}})
	g.Outputs = []int{out}
	g.Nodes = []Node{{Op: "EmbeddingBag", Inputs: []int{idx, off, w, None}, Outputs: []int{out}, Attrs: []Attr{StringAttr("mode", "median")}}}
	if _, err := Compile(g); err == nil || !strings.Contains(err.Error(), `mode "median" is not one of sum, mean, max`) {
		t.Errorf("Compile of an EmbeddingBag with mode median = %v", err)
	}
}
