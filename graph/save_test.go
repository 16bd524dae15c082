package graph

import (
	"bytes"
	binenc "encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// twoHeads is a test model with a bfloat16 and a channels-last buffer.
type twoHeads struct {
	nn.Base
	seq      *nn.Sequential
	wbf, wcl *autograd.Tensor
}

// smallGraph traces a two-input, two-output graph that exercises every
// attribute kind (ints, bool, float, string), a bfloat16 constant and a
// channels-last constant, and returns it with inputs to run it on.
func smallGraph(t testing.TB) (*Graph, []*autograd.Tensor) {
	t.Helper()
	gen := autograd.NewGenerator(7)
	m := &twoHeads{}
	m.seq = nn.NewSequential(
		nn.NewConv2d(gen, 3, 4, 3, nn.ConvOptions{Padding: 1}),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, nn.MaxPoolOptions{}),
		nn.NewFlatten(1, -1),
		nn.NewLinear(gen, 4*4*4, 5, nn.LinearOptions{}),
		nn.NewHardTanh(-0.5, 0.5),
		nn.NewGELU("tanh"),
	)
	m.RegisterModule("seq", m.seq)
	m.wbf = m.RegisterBuffer("wbf", autograd.Cast(autograd.Randn(gen, 1, 2, 2, 2), autograd.BFloat16))
	m.wcl = m.RegisterBuffer("wcl", autograd.Randn(gen, 1, 2, 2, 2).To(autograd.ChannelsLast))
	x := autograd.Randn(gen, 1, 3, 8, 8)
	u := autograd.Randn(gen, 1, 2, 2, 2)
	g, err := TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		y := m.seq.Forward(in[0])
		v := autograd.Add(autograd.Cast(in[1], autograd.BFloat16), m.wbf)
		v = autograd.Add(autograd.Cast(v, autograd.Float32), m.wcl)
		return []*autograd.Tensor{y, v}
	}, x, u)
	if err != nil {
		t.Fatal(err)
	}
	return g, []*autograd.Tensor{x, u}
}

func encodeBytes(t testing.TB, g *Graph) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Encode(&b, g); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func runGraph(t *testing.T, g *Graph, inputs []*autograd.Tensor) []*autograd.Tensor {
	t.Helper()
	p, err := Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := p.Run(inputs...)
	if err != nil {
		t.Fatal(err)
	}
	// Outputs may belong to the program; keep copies.
	for i, o := range outs {
		outs[i] = o.Detach().Clone()
	}
	return outs
}

func sameTensor(a, b *autograd.Tensor) bool {
	if a.DType() != b.DType() || !slices.Equal(a.Shape(), b.Shape()) {
		return false
	}
	av, bv := a.Detach().Contiguous().Values(), b.Detach().Contiguous().Values()
	for i := range av {
		if math.Float64bits(av[i]) != math.Float64bits(bv[i]) {
			return false
		}
	}
	return true
}

func TestSaveLoadRoundTrip(t *testing.T) {
	gen := autograd.NewGenerator(3)
	resnet := nn.Eval(models.ResNet18(gen, models.ResNetOptions{NumClasses: 10}))
	rx := autograd.Randn(gen, 1, 3, 32, 32)
	rg, err := Trace(resnet, rx)
	if err != nil {
		t.Fatal(err)
	}
	sg, sin := smallGraph(t)
	cases := []struct {
		name   string
		g      *Graph
		inputs []*autograd.Tensor
	}{
		{"resnet18", rg, []*autograd.Tensor{rx}},
		{"small", sg, sin},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.name+".kiln")
			if err := Save(path, c.g); err != nil {
				t.Fatal(err)
			}
			got, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != c.g.String() {
				t.Errorf("String() differs after a round trip:\n got %s\nwant %s", got.String(), c.g.String())
			}
			// Saving is deterministic, so the loaded graph saves to the
			// same bytes: nothing was lost or reordered.
			if !bytes.Equal(encodeBytes(t, got), encodeBytes(t, c.g)) {
				t.Errorf("the loaded graph encodes to other bytes than the original")
			}
			if got.NumParams() != c.g.NumParams() {
				t.Errorf("NumParams = %d, want %d", got.NumParams(), c.g.NumParams())
			}
			for v, want := range c.g.Consts {
				lt := got.Consts[v]
				if lt == nil || lt.Format() != want.Format() || !sameTensor(lt, want) {
					t.Errorf("constant %s not restored exactly", c.g.Values[v].Name)
				}
			}
			want := runGraph(t, c.g, c.inputs)
			outs := runGraph(t, got, c.inputs)
			for i := range want {
				if !sameTensor(outs[i], want[i]) {
					t.Errorf("output %d differs after a round trip", i)
				}
			}
		})
	}
}

// TestSaveStoresBF16 checks the container itself: a bfloat16 constant is
// a BF16 tensor, a channels-last one is stored in logical order, and the
// metadata holds the three keys.
func TestSaveStoresBF16(t *testing.T) {
	g, _ := smallGraph(t)
	f, err := safetensors.Decode(encodeBytes(t, g))
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata[MetaVersion] != FormatVersion || !strings.HasPrefix(f.Metadata[MetaChecksum], "sha256:") || !json.Valid([]byte(f.Metadata[MetaIR])) {
		t.Errorf("metadata = %v", f.Metadata)
	}
	var sawBF16, sawCL bool
	for v, c := range g.Consts {
		e, ok := f.Get(g.Values[v].Name)
		if !ok {
			t.Fatalf("constant %s not stored", g.Values[v].Name)
		}
		switch c.DType() {
		case autograd.BFloat16:
			sawBF16 = true
			if e.DType != "BF16" {
				t.Errorf("bfloat16 constant stored as %s", e.DType)
			}
		case autograd.Float32:
			if c.Format() != autograd.ChannelsLast {
				continue
			}
			sawCL = true
			want := c.Detach().Contiguous().Float32s()
			for i, x := range want {
				if got := math.Float32frombits(binenc.LittleEndian.Uint32(e.Data[4*i:])); got != x {
					t.Fatalf("channels-last constant element %d stored as %g, want %g (logical order)", i, got, x)
				}
			}
		}
	}
	if !sawBF16 || !sawCL {
		t.Fatalf("test graph lacks a bf16 (%t) or channels-last (%t) constant", sawBF16, sawCL)
	}
}

// rewrite decodes a saved file, lets edit change it and encodes it again,
// keeping the checksum unless edit replaces it.
func rewrite(t testing.TB, data []byte, edit func(f *safetensors.File)) []byte {
	t.Helper()
	f, err := safetensors.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	edit(f)
	var b bytes.Buffer
	if err := safetensors.Encode(&b, f); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// editIR applies edit to the IR JSON as generic maps and gives the file
// the checksum of its new contents, so what Decode must catch is the edit.
func editIR(t testing.TB, data []byte, edit func(ir map[string]any)) []byte {
	t.Helper()
	return rewrite(t, data, func(f *safetensors.File) {
		var ir map[string]any
		if err := json.Unmarshal([]byte(f.Metadata[MetaIR]), &ir); err != nil {
			t.Fatal(err)
		}
		edit(ir)
		b, err := json.Marshal(ir)
		if err != nil {
			t.Fatal(err)
		}
		f.Metadata[MetaIR] = string(b)
		resign(f)
	})
}

// resign gives f the checksum of its IR and tensors, the tensors taken in
// the order of the IR's constants (where the IR still names them).
func resign(f *safetensors.File) {
	var ir struct {
		Values []struct {
			Name string `json:"name"`
		} `json:"values"`
		Constants []int `json:"constants"`
	}
	json.Unmarshal([]byte(f.Metadata[MetaIR]), &ir)
	var consts []safetensors.Tensor
	for _, v := range ir.Constants {
		if v >= 0 && v < len(ir.Values) {
			if e, ok := f.Get(ir.Values[v].Name); ok {
				consts = append(consts, e)
			}
		}
	}
	f.Metadata[MetaChecksum] = checksum(f.Metadata[MetaVersion], f.Metadata[MetaIR], consts)
}

func TestDecodeErrors(t *testing.T) {
	g, _ := smallGraph(t)
	// The last byte of a file is inside the last tensor stored.
	good := encodeBytes(t, g)
	values := func(ir map[string]any) []any { return ir["values"].([]any) }
	firstConst := func(ir map[string]any) map[string]any {
		return values(ir)[int(ir["constants"].([]any)[0].(float64))].(map[string]any)
	}
	cases := []struct {
		name string
		data []byte
		want []string // every one must appear in the error
	}{
		{"flipped data byte", func() []byte {
			b := slices.Clone(good)
			b[len(b)-1] ^= 0x40
			return b
		}(), []string{"checksum mismatch"}},
		{"truncated", good[:len(good)-7], []string{"truncated"}},
		{"truncated header", good[:20], []string{"header length"}},
		{"empty", nil, []string{"too short"}},
		{"unknown version", rewrite(t, good, func(f *safetensors.File) { f.Metadata[MetaVersion] = "99" }),
			[]string{`version "99"`, "not supported"}},
		{"no version", rewrite(t, good, func(f *safetensors.File) { delete(f.Metadata, MetaVersion) }),
			[]string{MetaVersion}},
		{"no checksum", rewrite(t, good, func(f *safetensors.File) { delete(f.Metadata, MetaChecksum) }),
			[]string{MetaChecksum}},
		{"bad JSON", rewrite(t, good, func(f *safetensors.File) { f.Metadata[MetaIR] = `{"values": [` }),
			[]string{MetaIR, "bad JSON"}},
		{"unknown field", editIR(t, good, func(ir map[string]any) { ir["colour"] = "blue" }),
			[]string{"colour"}},
		{"missing nodes", editIR(t, good, func(ir map[string]any) { delete(ir, "nodes") }),
			[]string{`missing field "nodes"`}},
		{"value missing dtype", editIR(t, good, func(ir map[string]any) { delete(values(ir)[0].(map[string]any), "dtype") }),
			[]string{"value 0", "input0", `missing field "dtype"`}},
		{"node missing op", editIR(t, good, func(ir map[string]any) { delete(ir["nodes"].([]any)[2].(map[string]any), "op") }),
			[]string{"node 2", `missing field "op"`}},
		{"attr of the wrong kind", editIR(t, good, func(ir map[string]any) {
			a := ir["nodes"].([]any)[0].(map[string]any)["attrs"].([]any)[0].(map[string]any)
			a["value"] = "three"
		}), []string{"node 0", "not of kind ints"}},
		{"unknown dtype", editIR(t, good, func(ir map[string]any) { values(ir)[1].(map[string]any)["dtype"] = "float8" }),
			[]string{`"float8"`}},
		{"negative dimension", editIR(t, good, func(ir map[string]any) { values(ir)[0].(map[string]any)["shape"] = []int{1, -3, 8, 8} }),
			[]string{"input0", "negative dimension"}},
		{"huge shape", editIR(t, good, func(ir map[string]any) {
			values(ir)[0].(map[string]any)["shape"] = []int{1 << 40, 1 << 40, 1 << 40}
		}), []string{"input0", "overflows"}},
		{"shape mismatch", editIR(t, good, func(ir map[string]any) {
			c := firstConst(ir)
			shape := c["shape"].([]any)
			shape[0] = shape[0].(float64) + 1
		}), []string{"tensor has shape", "the IR says"}},
		{"dtype mismatch", editIR(t, good, func(ir map[string]any) { firstConst(ir)["dtype"] = "int32" }),
			[]string{"tensor has dtype F32", "int32"}},
		{"constant without tensor", editIR(t, good, func(ir map[string]any) { firstConst(ir)["name"] = "ghost" }),
			[]string{"constant ghost has no tensor"}},
		{"tensor not a constant", rewrite(t, good, func(f *safetensors.File) {
			f.Tensors = append(f.Tensors, safetensors.Tensor{Name: "stray", DType: "U8", Shape: []int{1}, Data: []byte{0}})
		}), []string{`"stray"`, "not constants"}},
		{"unknown op", editIR(t, good, func(ir map[string]any) { ir["nodes"].([]any)[1].(map[string]any)["op"] = "Frobnicate" }),
			[]string{"node 1", `"Frobnicate"`}},
		{"dangling output", editIR(t, good, func(ir map[string]any) { ir["outputs"] = []int{9999} }),
			[]string{"output refers to value 9999"}},
		{"constant out of range", editIR(t, good, func(ir map[string]any) { ir["constants"] = []int{-1} }),
			[]string{"value -1"}},
		{"checksum swapped", rewrite(t, good, func(f *safetensors.File) {
			f.Metadata[MetaChecksum] = "sha256:" + strings.Repeat("0", 64)
		}), []string{"checksum mismatch"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.data)
			if err == nil {
				t.Fatal("Decode succeeded")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadNamesThePath(t *testing.T) {
	dir := t.TempDir()
	g, _ := smallGraph(t)
	data := encodeBytes(t, g)
	corrupt := filepath.Join(dir, "corrupt.kiln")
	data[len(data)-1] ^= 1
	if err := os.WriteFile(corrupt, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{corrupt, filepath.Join(dir, "missing.kiln")} {
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Load(%s) = %v, want an error naming the file", path, err)
		}
	}
}

func TestSaveRejectsBadGraphs(t *testing.T) {
	g, _ := smallGraph(t)
	unknown := g.Clone()
	unknown.Nodes[0].Op = "Frobnicate"
	dangling := g.Clone()
	dangling.Outputs = append(dangling.Outputs, len(dangling.Values))
	badKind := g.Clone()
	badKind.Nodes[0].Attrs[0].Kind = 42
	twice := g.Clone()
	twice.Nodes[0].Attrs = append(twice.Nodes[0].Attrs, twice.Nodes[0].Attrs[0])
	dir := t.TempDir()
	cases := []struct {
		name string
		g    *Graph
		want string
	}{
		{"nil", nil, "nil"},
		{"unknown op", unknown, "Frobnicate"},
		{"invalid", dangling, "output refers to value"},
		{"unknown attribute kind", badKind, "unknown kind 42"},
		{"attribute twice", twice, "appears twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "out.kiln")
			err := Save(path, c.g)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Save = %v, want an error naming %s and %q", err, path, c.want)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("a failed Save left %s behind", path)
			}
		})
	}
}

// TestFloatAttrs checks that floats JSON cannot hold and ints that look
// like floats survive a round trip with their kinds.
func TestFloatAttrs(t *testing.T) {
	g, _ := smallGraph(t)
	n := &g.Nodes[0]
	for _, a := range []Attr{FloatAttr("nan", math.NaN()), FloatAttr("inf", math.Inf(1)), FloatAttr("ninf", math.Inf(-1)),
		FloatAttr("negzero", math.Copysign(0, -1)), FloatAttr("one", 1), IntAttr("ione", 1), FloatAttr("tiny", 5e-324)} {
		n.SetAttr(a)
	}
	got, err := Decode(encodeBytes(t, g))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Attrs {
		b, ok := got.Nodes[0].Attr(a.Name)
		if !ok || b.Kind != a.Kind {
			t.Fatalf("attribute %s: got %+v, want %+v", a.Name, b, a)
		}
		if a.Kind == AttrFloat && math.Float64bits(a.Float) != math.Float64bits(b.Float) && !(math.IsNaN(a.Float) && math.IsNaN(b.Float)) {
			t.Errorf("attribute %s = %v, want %v", a.Name, b.Float, a.Float)
		}
	}
}

// FuzzDecode feeds Decode arbitrary bytes, starting from a valid file and
// corruptions of it. Decode must never panic, and whatever it accepts must
// encode again and decode to the same graph.
func FuzzDecode(f *testing.F) {
	g, _ := smallGraph(f)
	var b bytes.Buffer
	if err := Encode(&b, g); err != nil {
		f.Fatal(err)
	}
	good := slices.Clone(b.Bytes())
	f.Add(good)
	// A one-layer graph: short inputs mutate and run faster.
	gen := autograd.NewGenerator(1)
	tiny, err := Trace(nn.NewLinear(gen, 2, 1, nn.LinearOptions{}), autograd.Randn(gen, 1, 2))
	if err != nil {
		f.Fatal(err)
	}
	b.Reset()
	if err := Encode(&b, tiny); err != nil {
		f.Fatal(err)
	}
	f.Add(slices.Clone(b.Bytes()))
	// An int8 graph: 8-bit values and constants, int8 layer nodes.
	i8, _ := int8Graph(f)
	b.Reset()
	if err := Encode(&b, i8); err != nil {
		f.Fatal(err)
	}
	f.Add(slices.Clone(b.Bytes()))
	f.Add(good[:len(good)/2])
	flipped := slices.Clone(good)
	flipped[len(flipped)-3] ^= 0xff
	f.Add(flipped)
	sf, err := safetensors.Decode(good)
	if err != nil {
		f.Fatal(err)
	}
	// Valid containers with damaged IRs, so mutations explore the JSON.
	for _, ir := range []string{
		`{"values":[{"name":"x","shape":[-1],"dtype":"float32","format":"contiguous"}],"nodes":[],"inputs":[0],"outputs":[0],"constants":[]}`,
		`{"values":[{"name":"x","shape":[4611686018427387904,4],"dtype":"int64","format":"channels_last"}],"nodes":[],"inputs":[],"outputs":[0],"constants":[0]}`,
		`{"values":[],"nodes":[{"op":"ReLU","inputs":[5],"outputs":[-1],"attrs":[{"name":"a","kind":"float","value":"NaN"}]}],"inputs":[],"outputs":[],"constants":[]}`,
		`{"values":null}`,
	} {
		sf.Metadata[MetaIR] = ir
		var b bytes.Buffer
		if err := safetensors.Encode(&b, sf); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Decode(data)
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := Encode(&b, g); err != nil {
			t.Fatalf("a decoded graph does not encode: %v", err)
		}
		again, err := Decode(b.Bytes())
		if err != nil {
			t.Fatalf("a re-encoded graph does not decode: %v", err)
		}
		if again.String() != g.String() {
			t.Fatalf("graph changed on re-encoding:\n%s\nvs\n%s", again, g)
		}
	})
}

// TestDecodeAdaptivePoolKernel: files written before AdaptiveAvgPool2d's
// output size had its own name kept it under "kernel"; they still load.
func TestDecodeAdaptivePoolKernel(t *testing.T) {
	x := autograd.Randn(autograd.NewGenerator(1), 1, 2, 4, 4)
	g, err := TraceFunc(nil, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{autograd.AdaptiveAvgPool2d(in[0], 2, 1)}
	}, x)
	if err != nil {
		t.Fatal(err)
	}
	if s := g.String(); !strings.Contains(s, "output_size=[2,1]") {
		t.Fatalf("trace:\n%s", s)
	}
	old := editIR(t, encodeBytes(t, g), func(ir map[string]any) {
		attrs := nodeOf(t, ir, "AdaptiveAvgPool2d")["attrs"].([]any)
		attrs[0].(map[string]any)["name"] = "kernel"
	})
	loaded, err := Decode(old)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := loaded.Nodes[0].Attr("output_size"); !ok || !slices.Equal(got.Ints, []int{2, 1}) {
		t.Errorf("a legacy file's node has attributes %v", loaded.Nodes[0].Attrs)
	}
}
