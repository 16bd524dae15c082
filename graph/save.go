package graph

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/internal/shape"
	"github.com/kilnml/kiln/internal/tensorcodec"
)

// A saved graph is one safetensors file. Its tensors are the graph's
// constants, each under its value's name, in logical row-major order
// whatever the value's memory format (so any safetensors reader sees the
// weights as PyTorch would), bfloat16 constants as BF16. Its metadata holds
// three strings:
//
//	kiln.graph.version   the format version, "2"
//	kiln.graph.ir        the IR as JSON (see irFile)
//	kiln.graph.checksum  "sha256:" and the hex SHA-256 of the IR and constants
//
// The checksum hashes a sequence of named byte strings, each as the length
// of its name as a little-endian uint64, the name, the length of its data
// as a little-endian uint64 and the data: first the IR's text under the
// name "kiln.graph.ir", then each constant's data under its name in the
// order of the IR's "constants" list. So an edited IR is caught, and data
// swapped between two constants of one shape, as well as flipped bits.
// Version 1 files, whose checksum covers the constants only, still load:
// what their IR may hold is checked node by node as any IR is.
const (
	MetaVersion  = "kiln.graph.version"
	MetaIR       = "kiln.graph.ir"
	MetaChecksum = "kiln.graph.checksum"

	// FormatVersion is the version Save writes. Load reads it and
	// version 1.
	FormatVersion = "2"

	checksumPrefix = "sha256:"
)

// formatVersion1 is the version whose checksum leaves the IR out.
const formatVersion1 = "1"

// irFile is the JSON form of a Graph. Value, input, output and constant
// references are indices into Values; a node input of -1 is an absent
// optional operand (None). Every field but a node's attrs and scope is
// required. For example:
//
//	{"values": [{"name": "input0", "shape": [1,3,32,32], "dtype": "float32", "format": "contiguous"},
//	            {"name": "conv.weight", "shape": [8,3,3,3], "dtype": "float32", "format": "contiguous"},
//	            {"name": "%2", "shape": [1,8,30,30], "dtype": "float32", "format": "contiguous"}],
//	 "nodes": [{"op": "Conv2d", "inputs": [0,1,-1], "outputs": [2], "scope": "conv",
//	            "attrs": [{"name": "stride", "kind": "ints", "value": [1,1]}, …]}],
//	 "inputs": [0], "outputs": [2], "constants": [1]}
type irFile struct {
	Values    *[]irValue `json:"values"`
	Nodes     *[]irNode  `json:"nodes"`
	Inputs    *[]int     `json:"inputs"`
	Outputs   *[]int     `json:"outputs"`
	Constants *[]int     `json:"constants"`
}

type irValue struct {
	Name   *string `json:"name"`
	Shape  *[]int  `json:"shape"`
	DType  *string `json:"dtype"`
	Format *string `json:"format"`
}

type irNode struct {
	Op      *string  `json:"op"`
	Inputs  *[]int   `json:"inputs"`
	Outputs *[]int   `json:"outputs"`
	Attrs   []irAttr `json:"attrs,omitempty"`
	Scope   string   `json:"scope,omitempty"`
}

// irAttr is an attribute with its kind spelled out, so an int 1 and a
// float 1.0 stay distinct after a round trip. A float that JSON cannot
// hold is the string "NaN", "+Inf" or "-Inf".
type irAttr struct {
	Name  *string         `json:"name"`
	Kind  *string         `json:"kind"`
	Value json.RawMessage `json:"value"`
}

var attrKindNames = map[AttrKind]string{AttrInt: "int", AttrInts: "ints", AttrFloat: "float", AttrBool: "bool", AttrString: "string"}

// stDTypes is the safetensors dtype each Kiln dtype is stored as.
var stDTypes = map[autograd.DType]string{
	autograd.Float32: "F32", autograd.BFloat16: "BF16", autograd.Int8: "I8",
	autograd.Uint8: "U8", autograd.Int32: "I32", autograd.Int64: "I64",
}

// Save writes g to path as one safetensors file (see Encode), atomically:
// a reader never sees a half-written file, and on error path is untouched.
func Save(path string, g *Graph) error {
	f, err := encodeFile(g)
	if err != nil {
		return fmt.Errorf("graph: saving %s: %w", path, err)
	}
	if err := safetensors.WriteFile(path, f); err != nil {
		return fmt.Errorf("graph: saving %s: %w", path, err)
	}
	return nil
}

// Load reads a graph written by Save. It checks everything Decode checks;
// errors name path and what is wrong.
func Load(path string) (*Graph, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("graph: loading: %w", err)
	}
	g, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("graph: loading %s: %w", path, err)
	}
	return g, nil
}

// Encode writes g to w in the format Save uses. g must pass the checks
// Decode makes, declared shapes included, so that what is written can be
// loaded.
func Encode(w io.Writer, g *Graph) error {
	f, err := encodeFile(g)
	if err == nil {
		err = safetensors.Encode(w, f)
	}
	if err != nil {
		return fmt.Errorf("graph: encoding: %w", err)
	}
	return nil
}

// Decode reads a graph from the bytes of a saved file. It checks, in
// order, the format version, the IR's JSON and its fields, that every
// constant has a tensor of its dtype and shape and every tensor is a
// constant, the checksum, the graph's structure (Validate), and that every
// node fits its op as Compile checks it, with the shapes the IR declares
// for the nodes' results the ones their ops give (a *NodeError names the
// node); the error names the first problem found. No input makes it
// panic, and Compile and Run fail with an error, never a panic, on any
// graph it returns. The graph's constants are copies: they do not alias
// data.
func Decode(data []byte) (*Graph, error) {
	g, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("graph: decoding: %w", err)
	}
	return g, nil
}

// validateErr presents an error of Validate, which starts "graph: ",
// without repeating the prefix the caller's own message already carries.
type validateErr struct{ err error }

func (e validateErr) Error() string { return strings.TrimPrefix(e.err.Error(), "graph: ") }
func (e validateErr) Unwrap() error { return e.err }

func encodeFile(g *Graph) (*safetensors.File, error) {
	if g == nil {
		return nil, errors.New("graph is nil")
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	return fileOf(g)
}

// fileOf is the file of g, checked or not: tests write files that Decode
// must reject with it.
func fileOf(g *Graph) (*safetensors.File, error) {
	consts := make([]int, 0, len(g.Consts))
	for v := range g.Consts {
		consts = append(consts, v)
	}
	slices.Sort(consts)
	irf, err := toIR(g, consts)
	if err != nil {
		return nil, err
	}
	ir, err := json.Marshal(irf)
	if err != nil {
		return nil, err
	}
	f := &safetensors.File{Metadata: map[string]string{MetaVersion: FormatVersion, MetaIR: string(ir)}}
	for _, v := range consts {
		e, err := encodeConst(g.Values[v].Name, g.Consts[v])
		if err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, e)
	}
	f.Metadata[MetaChecksum] = checksum(FormatVersion, f.Metadata[MetaIR], f.Tensors)
	return f, nil
}

// check is what Encode and Decode demand of a graph: Validate, and every
// node fitting its op with the shapes its values declare.
func (g *Graph) check() error {
	if err := g.Validate(); err != nil {
		return validateErr{err}
	}
	if _, _, err := g.checkNodes(true); err != nil {
		return validateErr{err}
	}
	return nil
}

// checksum is the checksum a file of version holds for its IR text and
// its constants' tensors, in the IR's order.
func checksum(version, ir string, consts []safetensors.Tensor) string {
	h := sha256.New()
	if version != formatVersion1 {
		hashNamed(h, MetaIR, []byte(ir))
	}
	for _, e := range consts {
		hashNamed(h, e.Name, e.Data)
	}
	return checksumPrefix + hex.EncodeToString(h.Sum(nil))
}

func hashNamed(h io.Writer, name string, data []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	io.WriteString(h, name)
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	h.Write(n[:])
	h.Write(data)
}

// nonNil keeps an empty list from being written as JSON null, which
// decoding reads as a missing field.
func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// toIR converts g to its JSON form, refusing attributes that would not
// load back: an unknown kind or a name used twice in one node.
func toIR(g *Graph, consts []int) (irFile, error) {
	values := make([]irValue, len(g.Values))
	for i, v := range g.Values {
		name, dtype, format, shape := v.Name, v.DType.String(), v.Format.String(), nonNil(v.Shape)
		values[i] = irValue{Name: &name, Shape: &shape, DType: &dtype, Format: &format}
	}
	nodes := make([]irNode, len(g.Nodes))
	for i, n := range g.Nodes {
		op, ins, outs := n.Op, nonNil(n.Inputs), nonNil(n.Outputs)
		nodes[i] = irNode{Op: &op, Inputs: &ins, Outputs: &outs, Scope: n.Scope}
		for j, a := range n.Attrs {
			if _, ok := attrKindNames[a.Kind]; !ok {
				return irFile{}, fmt.Errorf("node %d (%s): attribute %s has unknown kind %d", i, n.Op, a.Name, int(a.Kind))
			}
			if slices.ContainsFunc(n.Attrs[:j], func(b Attr) bool { return b.Name == a.Name }) {
				return irFile{}, fmt.Errorf("node %d (%s): attribute %q appears twice", i, n.Op, a.Name)
			}
			nodes[i].Attrs = append(nodes[i].Attrs, encodeAttr(a))
		}
	}
	inputs, outputs := nonNil(g.Inputs), nonNil(g.Outputs)
	return irFile{Values: &values, Nodes: &nodes, Inputs: &inputs, Outputs: &outputs, Constants: &consts}, nil
}

func encodeAttr(a Attr) irAttr {
	var v any
	switch a.Kind {
	case AttrInt:
		v = a.Int
	case AttrInts:
		v = nonNil(a.Ints)
	case AttrFloat:
		switch {
		case math.IsNaN(a.Float):
			v = "NaN"
		case math.IsInf(a.Float, 1):
			v = "+Inf"
		case math.IsInf(a.Float, -1):
			v = "-Inf"
		default:
			v = a.Float
		}
	case AttrBool:
		v = a.Bool
	case AttrString:
		v = a.Str
	}
	// Marshalling ints, floats, bools and strings cannot fail.
	raw, _ := json.Marshal(v)
	name, kind := a.Name, attrKindNames[a.Kind]
	return irAttr{Name: &name, Kind: &kind, Value: raw}
}

// encodeConst returns t's elements in logical row-major order as
// little-endian bytes under its safetensors dtype.
func encodeConst(name string, t *autograd.Tensor) (safetensors.Tensor, error) {
	if t.Data() == nil {
		return safetensors.Tensor{}, fmt.Errorf("constant %s has no data", name)
	}
	dtype, ok := stDTypes[t.DType()]
	if !ok {
		return safetensors.Tensor{}, fmt.Errorf("constant %s has unsupported dtype %v", name, t.DType())
	}
	if t.Format() != autograd.Contiguous {
		t = t.Detach().Contiguous()
	}
	le := binary.LittleEndian
	var b []byte
	switch d := t.Data().(type) {
	case []float32:
		b = make([]byte, 0, 4*len(d))
		for _, x := range d {
			b = le.AppendUint32(b, math.Float32bits(x))
		}
	case []uint16:
		b = make([]byte, 0, 2*len(d))
		for _, x := range d {
			b = le.AppendUint16(b, x)
		}
	case []int8:
		b = make([]byte, len(d))
		for i, x := range d {
			b[i] = byte(x)
		}
	case []uint8:
		b = slices.Clone(d)
	case []int32:
		b = make([]byte, 0, 4*len(d))
		for _, x := range d {
			b = le.AppendUint32(b, uint32(x))
		}
	case []int64:
		b = make([]byte, 0, 8*len(d))
		for _, x := range d {
			b = le.AppendUint64(b, uint64(x))
		}
	}
	return safetensors.Tensor{Name: name, DType: dtype, Shape: t.Shape(), Data: b}, nil
}

func decode(data []byte) (*Graph, error) {
	f, err := safetensors.Decode(data)
	if err != nil {
		return nil, err
	}
	version, ok := f.Metadata[MetaVersion]
	if !ok {
		return nil, fmt.Errorf("metadata has no %q (not a saved Kiln graph?)", MetaVersion)
	}
	if version != FormatVersion && version != formatVersion1 {
		return nil, fmt.Errorf("format version %q is not supported (this Kiln reads versions %s and %s)", version, formatVersion1, FormatVersion)
	}
	irText, ok := f.Metadata[MetaIR]
	if !ok {
		return nil, fmt.Errorf("metadata has no %q", MetaIR)
	}
	g, consts, err := parseIR(irText)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MetaIR, err)
	}

	// Match constants and tensors both ways before decoding any data.
	tensors := make(map[string]safetensors.Tensor, len(f.Tensors))
	for _, t := range f.Tensors {
		tensors[t.Name] = t
	}
	entries := make([]safetensors.Tensor, len(consts))
	used := make(map[string]bool, len(consts))
	for i, v := range consts {
		val := &g.Values[v]
		if used[val.Name] {
			return nil, fmt.Errorf("two constants are named %q", val.Name)
		}
		used[val.Name] = true
		e, ok := tensors[val.Name]
		if !ok {
			return nil, fmt.Errorf("constant %s has no tensor in the file", val.Name)
		}
		delete(tensors, val.Name)
		if want := stDTypes[val.DType]; e.DType != want {
			return nil, fmt.Errorf("constant %s: tensor has dtype %s, the IR says %v (%s)", val.Name, e.DType, val.DType, want)
		}
		if !slices.Equal(e.Shape, val.Shape) {
			return nil, fmt.Errorf("constant %s: tensor has shape %v, the IR says %v", val.Name, e.Shape, val.Shape)
		}
		if r := formatRank(val.Format); r != 0 && len(val.Shape) != r {
			return nil, fmt.Errorf("constant %s: format %v needs %d dimensions, shape is %v", val.Name, val.Format, r, val.Shape)
		}
		entries[i] = e
	}
	if len(tensors) > 0 {
		extra := make([]string, 0, len(tensors))
		for name := range tensors {
			extra = append(extra, name)
		}
		slices.Sort(extra)
		return nil, fmt.Errorf("tensor(s) %s are not constants of the graph", strings.Join(quote(extra), ", "))
	}

	want, ok := f.Metadata[MetaChecksum]
	if !ok {
		return nil, fmt.Errorf("metadata has no %q", MetaChecksum)
	}
	if !strings.HasPrefix(want, checksumPrefix) {
		return nil, fmt.Errorf("%s %q is not of the form %s<hex>", MetaChecksum, want, checksumPrefix)
	}
	if got := checksum(version, irText, entries); got != want {
		return nil, fmt.Errorf("checksum mismatch: the file records %s, its IR and tensor data hash to %s (corrupted or edited file?)", want, got)
	}

	for i, v := range consts {
		t, err := tensorcodec.Decode(entries[i])
		if err != nil {
			return nil, fmt.Errorf("constant %s: %w", g.Values[v].Name, err)
		}
		if f := g.Values[v].Format; f != autograd.Contiguous {
			t = t.To(f) // t requires no gradient: nothing is recorded
		}
		g.Consts[v] = t
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	return g, nil
}

func quote(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return q
}

// formatRank is the number of dimensions a memory format needs, or 0 for
// any.
func formatRank(f autograd.MemoryFormat) int {
	switch f {
	case autograd.ChannelsLast:
		return 4
	case autograd.ChannelsLast3d:
		return 5
	}
	return 0
}

// parseIR reads the IR JSON into a graph whose Consts map is empty, and
// returns the constants' value indices in the file's order. Index ranges
// are left to Validate, except the constants', which are needed first.
func parseIR(text string) (*Graph, []int, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var ir irFile
	if err := dec.Decode(&ir); err != nil {
		return nil, nil, fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("bad JSON: data after the top-level object")
	}
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"values", ir.Values == nil}, {"nodes", ir.Nodes == nil}, {"inputs", ir.Inputs == nil},
		{"outputs", ir.Outputs == nil}, {"constants", ir.Constants == nil},
	} {
		if f.missing {
			return nil, nil, fmt.Errorf("missing field %q", f.name)
		}
	}
	g := &Graph{
		Values:  make([]Value, len(*ir.Values)),
		Nodes:   make([]Node, len(*ir.Nodes)),
		Inputs:  *ir.Inputs,
		Outputs: *ir.Outputs,
		Consts:  make(map[int]*autograd.Tensor, len(*ir.Constants)),
	}
	for i, v := range *ir.Values {
		if err := parseValue(&g.Values[i], v); err != nil {
			return nil, nil, fmt.Errorf("value %d: %w", i, err)
		}
	}
	for i, n := range *ir.Nodes {
		if err := parseNode(&g.Nodes[i], n); err != nil {
			return nil, nil, fmt.Errorf("node %d: %w", i, err)
		}
	}
	seen := make(map[int]bool, len(*ir.Constants))
	for _, v := range *ir.Constants {
		if v < 0 || v >= len(g.Values) {
			return nil, nil, fmt.Errorf("constant refers to value %d of %d", v, len(g.Values))
		}
		if seen[v] {
			return nil, nil, fmt.Errorf("constant %s is listed twice", g.Values[v].Name)
		}
		seen[v] = true
	}
	return g, *ir.Constants, nil
}

func parseValue(out *Value, v irValue) error {
	switch {
	case v.Name == nil:
		return errors.New(`missing field "name"`)
	case v.Shape == nil:
		return fmt.Errorf(`%s: missing field "shape"`, *v.Name)
	case v.DType == nil:
		return fmt.Errorf(`%s: missing field "dtype"`, *v.Name)
	case v.Format == nil:
		return fmt.Errorf(`%s: missing field "format"`, *v.Name)
	}
	dtype, err := autograd.ParseDType(*v.DType)
	if err != nil {
		return fmt.Errorf("%s: %w", *v.Name, err)
	}
	format, err := autograd.ParseFormat(*v.Format)
	if err != nil {
		return fmt.Errorf("%s: %w", *v.Name, err)
	}
	// Bound the size now: shapes are multiplied out from here on, and a
	// product that overflows would wrap around to a small one.
	if _, err := shape.Numel(*v.Shape); err != nil {
		return fmt.Errorf("%s: %w", *v.Name, err)
	}
	*out = Value{Name: *v.Name, Shape: *v.Shape, DType: dtype, Format: format}
	return nil
}

func parseNode(out *Node, n irNode) error {
	switch {
	case n.Op == nil:
		return errors.New(`missing field "op"`)
	case n.Inputs == nil:
		return fmt.Errorf(`%s: missing field "inputs"`, *n.Op)
	case n.Outputs == nil:
		return fmt.Errorf(`%s: missing field "outputs"`, *n.Op)
	}
	*out = Node{Op: *n.Op, Inputs: *n.Inputs, Outputs: *n.Outputs, Scope: n.Scope}
	for j, a := range n.Attrs {
		at, err := parseAttr(a)
		if err != nil {
			return fmt.Errorf("%s: attribute %d: %w", *n.Op, j, err)
		}
		if _, dup := out.Attr(at.Name); dup {
			return fmt.Errorf("%s: attribute %q appears twice", *n.Op, at.Name)
		}
		out.Attrs = append(out.Attrs, at)
	}
	if out.Op == "AdaptiveAvgPool2d" {
		// Files written before the attribute had its own name kept the
		// output size under "kernel".
		if _, ok := out.Attr("output_size"); !ok {
			for j := range out.Attrs {
				if out.Attrs[j].Name == "kernel" {
					out.Attrs[j].Name = "output_size"
				}
			}
		}
	}
	return nil
}

func parseAttr(a irAttr) (Attr, error) {
	switch {
	case a.Name == nil:
		return Attr{}, errors.New(`missing field "name"`)
	case a.Kind == nil:
		return Attr{}, fmt.Errorf(`%s: missing field "kind"`, *a.Name)
	case a.Value == nil || string(bytes.TrimSpace(a.Value)) == "null":
		// A null would decode as the kind's zero value without complaint.
		return Attr{}, fmt.Errorf(`%s: missing field "value"`, *a.Name)
	}
	at := Attr{Name: *a.Name}
	var dst any
	switch *a.Kind {
	case "int":
		at.Kind, dst = AttrInt, &at.Int
	case "ints":
		at.Kind, dst = AttrInts, &at.Ints
	case "float":
		at.Kind = AttrFloat
		var s string
		if json.Unmarshal(a.Value, &s) == nil {
			switch s {
			case "NaN":
				at.Float = math.NaN()
			case "+Inf":
				at.Float = math.Inf(1)
			case "-Inf":
				at.Float = math.Inf(-1)
			default:
				return Attr{}, fmt.Errorf("%s: float value %q is not a number, \"NaN\", \"+Inf\" or \"-Inf\"", at.Name, s)
			}
			return at, nil
		}
		dst = &at.Float
	case "bool":
		at.Kind, dst = AttrBool, &at.Bool
	case "string":
		at.Kind, dst = AttrString, &at.Str
	default:
		return Attr{}, fmt.Errorf("%s: unknown kind %q (want int, ints, float, bool or string)", at.Name, *a.Kind)
	}
	if err := json.Unmarshal(a.Value, dst); err != nil {
		return Attr{}, fmt.Errorf("%s: value %s is not of kind %s: %w", at.Name, bytes.TrimSpace(a.Value), *a.Kind, err)
	}
	return at, nil
}
