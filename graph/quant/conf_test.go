package quant

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// ipexConf is a hand-written conf in IPEX 1.10's layout for conv2d → relu_ →
// max_pool2d → flatten → linear, each input carrying its producer's output
// flow name.
const ipexConf = `[
    {
        "id": 0,
        "name": "conv2d",
        "algorithm": "min_max",
        "weight_granularity": "per_channel",
        "input_scales": [0.0235294122248888],
        "input_zero_points": [128],
        "output_scales": [0.0470588244497776],
        "output_zero_points": [119],
        "weight_scales": [[0.0039370078, 0.0062992126]],
        "input_quantized_dtypes": ["uint8"],
        "output_quantized_dtypes": ["uint8"],
        "inputs_quantized": [true],
        "outputs_quantized": [false],
        "inputs_flow": ["conv2d0.input0"],
        "outputs_flow": ["conv2d0.output0"]
    },
    {
        "id": 1,
        "name": "relu_",
        "algorithm": "min_max",
        "weight_granularity": "per_channel",
        "input_scales": [0.0470588244497776],
        "input_zero_points": [119],
        "output_scales": [0.0470588244497776],
        "output_zero_points": [119],
        "weight_scales": [],
        "input_quantized_dtypes": ["uint8"],
        "output_quantized_dtypes": ["uint8"],
        "inputs_quantized": [false],
        "outputs_quantized": [false],
        "inputs_flow": ["conv2d0.output0"],
        "outputs_flow": ["relu0.output0"]
    },
    {
        "id": 2,
        "name": "max_pool2d",
        "algorithm": "min_max",
        "weight_granularity": "per_channel",
        "input_scales": [0.0470588244497776],
        "input_zero_points": [119],
        "output_scales": [0.0470588244497776],
        "output_zero_points": [119],
        "weight_scales": [],
        "input_quantized_dtypes": ["uint8"],
        "output_quantized_dtypes": ["uint8"],
        "inputs_quantized": [false],
        "outputs_quantized": [false],
        "inputs_flow": ["relu0.output0"],
        "outputs_flow": ["max_pool2d0.output0"]
    },
    {
        "id": 3,
        "name": "flatten",
        "algorithm": "min_max",
        "weight_granularity": "per_channel",
        "input_scales": [0.0470588244497776],
        "input_zero_points": [119],
        "output_scales": [0.0470588244497776],
        "output_zero_points": [119],
        "weight_scales": [],
        "input_quantized_dtypes": ["uint8"],
        "output_quantized_dtypes": ["uint8"],
        "inputs_quantized": [false],
        "outputs_quantized": [false],
        "inputs_flow": ["max_pool2d0.output0"],
        "outputs_flow": ["flatten0.output0"]
    },
    {
        "id": 4,
        "name": "linear",
        "algorithm": "min_max",
        "weight_granularity": "per_channel",
        "input_scales": [0.0470588244497776],
        "input_zero_points": [119],
        "output_scales": [0.1176470592617989],
        "output_zero_points": [131],
        "weight_scales": [[0.0023622048, 0.0031496063, 0.0015748031]],
        "input_quantized_dtypes": ["uint8"],
        "output_quantized_dtypes": ["uint8"],
        "inputs_quantized": [true],
        "outputs_quantized": [false],
        "inputs_flow": ["flatten0.output0"],
        "outputs_flow": ["linear0.output0"]
    }
]
`

// writeIPEXConf puts ipexConf in a file for LoadConf.
func writeIPEXConf(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "int8_conf.json")
	if err := os.WriteFile(p, []byte(ipexConf), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadConfIPEX loads ipexConf: relu_ is read as relu, and the flows
// chain.
func TestLoadConfIPEX(t *testing.T) {
	c, err := LoadConf(writeIPEXConf(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Scheme != PerTensorAffine || c.Algorithm != "min_max" || c.WeightGranularity != "per_channel" {
		t.Errorf("conf %v %q %q, want affine min_max per_channel", c.Scheme, c.Algorithm, c.WeightGranularity)
	}
	var names []string
	for i, op := range c.Ops {
		names = append(names, op.Name)
		if i > 0 && op.InputsFlow[0] != c.Ops[i-1].OutputsFlow[0] {
			t.Errorf("entry %d reads %q, entry %d writes %q", i, op.InputsFlow[0], i-1, c.Ops[i-1].OutputsFlow[0])
		}
	}
	if got := strings.Join(names, " "); got != "conv2d relu max_pool2d flatten linear" {
		t.Errorf("names %q, want relu_ read as relu", got)
	}
	if got := c.Ops[4].WeightScales[0]; len(got) != 3 || got[1] != 0.0031496063 {
		t.Errorf("linear weight scales %v", got)
	}
}

// TestSaveLoadRoundTrip saves a loaded conf, loads it back and saves it
// again: equal confs and identical bytes, relu_ written as it was read, and
// no temporary file left behind.
func TestSaveLoadRoundTrip(t *testing.T) {
	orig, err := LoadConf(writeIPEXConf(t))
	if err != nil {
		t.Fatal(err)
	}
	// Scales that only an exact shortest-decimal encoding gives back.
	orig.Ops[0].OutputScales[0] = 0.1 + 0.2
	orig.Ops[4].WeightScales[0][2] = 5e-324
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := orig.Save(p1); err != nil {
		t.Fatal(err)
	}
	back, err := LoadConf(p1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(orig, back) {
		t.Errorf("round trip changed the conf:\n%+v\n%+v", orig, back)
	}
	if err := back.Save(p2); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Errorf("second save differs:\n%s\n%s", b1, b2)
	}
	if !bytes.Contains(b1, []byte(`"name": "relu_"`)) {
		t.Errorf("relu_ not written back as relu_:\n%s", b1)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d files, want the 2 confs", len(entries))
	}
}

// TestWriteFormat pins the layout IPEX's reader expects: an array, four-space
// indents, fields in IPEX's order and empty lists, never null.
func TestWriteFormat(t *testing.T) {
	c := NewConf(PerTensorSymmetric)
	c.Ops = []OpConf{{Name: "dropout", Algorithm: "min_max", WeightGranularity: "per_tensor"}}
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := `[
    {
        "id": 0,
        "name": "dropout",
        "algorithm": "min_max",
        "weight_granularity": "per_tensor",
        "input_scales": [],
        "input_zero_points": [],
        "output_scales": [],
        "output_zero_points": [],
        "weight_scales": [],
        "input_quantized_dtypes": [],
        "output_quantized_dtypes": [],
        "inputs_quantized": [],
        "outputs_quantized": [],
        "inputs_flow": [],
        "outputs_flow": []
    }
]
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	back, err := ReadConf(&b)
	if err != nil {
		t.Fatal(err)
	}
	if back.WeightGranularity != "per_tensor" || back.Scheme != PerTensorAffine {
		t.Errorf("read back %v %q: a conf without activations is affine, granularity from its entry", back.Scheme, back.WeightGranularity)
	}
}

func TestReadConfSymmetric(t *testing.T) {
	c := NewConf(PerTensorSymmetric)
	c.Ops = []OpConf{{Name: "linear", Algorithm: "histogram", WeightGranularity: "per_channel",
		InputScales: []float64{0.5}, InputZeroPoints: []int32{0}, InputQuantizedDtypes: []string{"int8"},
		InputsQuantized: []bool{true}, InputsFlow: []string{"linear0.input0"},
		OutputScales: []float64{0.25}, OutputZeroPoints: []int32{0}, OutputQuantizedDtypes: []string{"int8"},
		OutputsQuantized: []bool{false}, OutputsFlow: []string{"linear0.output0"}}}
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	back, err := ReadConf(&b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Scheme != PerTensorSymmetric || back.Algorithm != "histogram" {
		t.Errorf("read back %v %q, want symmetric histogram", back.Scheme, back.Algorithm)
	}
}

// TestSaveFailureKeepsTarget saves into a directory that cannot be written:
// the error names the file and the old conf is untouched.
func TestSaveFailureKeepsTarget(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes to read-only directories")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "conf.json")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	c, _ := LoadConf(writeIPEXConf(t))
	err := c.Save(p)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Save into a read-only directory: %v, want an error naming %s", err, p)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("target now holds %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d files, want 1", len(entries))
	}
}

// TestSaveInvalidKeepsTarget refuses to save a conf that breaks the schema,
// before anything is written.
func TestSaveInvalidKeepsTarget(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "conf.json")
	os.WriteFile(p, []byte("old"), 0o644)
	c := NewConf(PerTensorAffine)
	c.Ops = []OpConf{{Name: "softmax", Algorithm: "min_max", WeightGranularity: "per_channel"}}
	err := c.Save(p)
	var ce *ConfError
	if !errors.As(err, &ce) || ce.Path != p || ce.Field != "name" {
		t.Errorf("Save of an unknown op: %v, want a ConfError for %s, field name", err, p)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("target now holds %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d files, want 1", len(entries))
	}
}

// validEntry is one correct entry with id id, as JSON, with field
// replacements applied: a value of "" deletes the field.
func validEntry(id int, repl map[string]string) string {
	fields := [][2]string{
		{"id", fmt.Sprint(id)}, {"name", `"conv2d"`}, {"algorithm", `"min_max"`},
		{"weight_granularity", `"per_channel"`}, {"input_scales", `[0.5]`}, {"input_zero_points", `[3]`},
		{"output_scales", `[0.25]`}, {"output_zero_points", `[0]`}, {"weight_scales", `[[0.1, 0.2]]`},
		{"input_quantized_dtypes", `["uint8"]`}, {"output_quantized_dtypes", `["uint8"]`},
		{"inputs_quantized", `[true]`}, {"outputs_quantized", `[false]`},
		{"inputs_flow", `["conv2d0.input0"]`}, {"outputs_flow", `["conv2d0.output0"]`},
	}
	var parts []string
	for _, f := range fields {
		v, ok := repl[f[0]]
		if !ok {
			v = f[1]
		}
		if v != "" {
			parts = append(parts, fmt.Sprintf("%q: %s", f[0], v))
		}
	}
	for k, v := range repl {
		if !strings.Contains(strings.Join(parts, ","), fmt.Sprintf("%q:", k)) && v != "" {
			parts = append(parts, fmt.Sprintf("%q: %s", k, v))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// TestReadConfErrors breaks the schema one way at a time, always in the
// entry with id 1, and checks that the error is a *ConfError matching
// ErrConf that names the entry and field.
func TestReadConfErrors(t *testing.T) {
	cases := []struct {
		name  string
		repl  map[string]string
		field string
		want  string
	}{
		{"missing field", map[string]string{"weight_scales": ""}, "weight_scales", "missing field"},
		{"unknown field", map[string]string{"per_channel": "true"}, "per_channel", "unknown field"},
		{"null list", map[string]string{"inputs_flow": "null"}, "inputs_flow", "null"},
		{"wrong type", map[string]string{"input_scales": `["0.5"]`}, "input_scales", "string"},
		{"id out of order", map[string]string{"id": "2"}, "id", "out of order"},
		{"unknown name", map[string]string{"name": `"softmax"`}, "name", `"softmax"`},
		{"unknown algorithm", map[string]string{"algorithm": `"kl"`}, "algorithm", `"kl"`},
		{"unknown granularity", map[string]string{"weight_granularity": `"per_group"`}, "weight_granularity", `"per_group"`},
		{"zero point count", map[string]string{"input_zero_points": `[3, 4]`}, "input_zero_points", "2 elements"},
		{"dtype count", map[string]string{"output_quantized_dtypes": `[]`}, "output_quantized_dtypes", "0 elements"},
		{"quantized count", map[string]string{"inputs_quantized": `[true, true]`}, "inputs_quantized", "2 elements"},
		{"flow count", map[string]string{"outputs_flow": `[]`}, "outputs_flow", "0 elements"},
		{"zero scale", map[string]string{"input_scales": `[0]`}, "input_scales", "not positive"},
		{"negative scale", map[string]string{"output_scales": `[-1]`}, "output_scales", "scale -1 is not positive"},
		{"overflowing scale", map[string]string{"input_scales": `[1e400]`}, "input_scales", "number 1e400"},
		{"uint8 zero point", map[string]string{"input_zero_points": `[256]`}, "input_zero_points", "outside uint8's range 0..255"},
		{"negative uint8 zero point", map[string]string{"output_zero_points": `[-1]`}, "output_zero_points", "outside uint8"},
		{"int8 zero point", map[string]string{"input_quantized_dtypes": `["int8"]`, "input_zero_points": `[128]`}, "input_zero_points", "outside int8's range -128..127"},
		{"zero point not int32", map[string]string{"input_zero_points": `[1e10]`}, "input_zero_points", "int32"},
		{"unknown dtype", map[string]string{"output_quantized_dtypes": `["fp16"]`}, "output_quantized_dtypes", `"fp16"`},
		{"zero weight scale", map[string]string{"weight_scales": `[[0.1, 0]]`}, "weight_scales", "channel 1"},
		{"negative weight scale", map[string]string{"weight_scales": `[[-0.1]]`}, "weight_scales", "not positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := "[" + validEntry(0, nil) + ",\n" + validEntry(1, c.repl) + "]"
			_, err := ReadConf(strings.NewReader(doc))
			var ce *ConfError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *ConfError", err, err)
			}
			if !errors.Is(err, ErrConf) {
				t.Errorf("errors.Is(%v, ErrConf) is false", err)
			}
			if ce.ID != 1 || ce.Field != c.field {
				t.Errorf("entry %d field %q, want 1 %q", ce.ID, ce.Field, c.field)
			}
			msg := err.Error()
			for _, part := range []string{"entry 1", c.field + ":", c.want} {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not contain %q", msg, part)
				}
			}
		})
	}
}

// TestReadConfFileErrors covers faults of the document as a whole, which
// name no entry.
func TestReadConfFileErrors(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"syntax", "[\n  {\"id\": 0,,}\n]", "line 2, column 12"},
		{"truncated", "[\n {\"id\": 0", "invalid JSON"},
		{"object", `{"id": 0}`, "want a JSON array"},
		{"not an object", `[[1, 2]]`, "not a JSON object"},
		{"empty", ``, "invalid JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadConf(strings.NewReader(c.doc))
			var ce *ConfError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConf) {
				t.Fatalf("error %v, want a *ConfError matching ErrConf", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("message %q does not contain %q", err.Error(), c.want)
			}
		})
	}
}

// TestLoadConfNamesFile checks the message layout the issue gives, with the
// file's name in front.
func TestLoadConfNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "int8_conf.json")
	doc := "[" + validEntry(0, nil) + "," + validEntry(1, nil) + "," + validEntry(2, nil) + "," +
		validEntry(3, map[string]string{"input_scales": "[-1]"}) + "]"
	os.WriteFile(p, []byte(doc), 0o644)
	_, err := LoadConf(p)
	want := p + ": entry 3 (conv2d): input_scales: scale -1 is not positive"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	if _, err := LoadConf(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrConf) {
		t.Errorf("missing file: %v, want os.ErrNotExist and not ErrConf", err)
	}
}

// TestReadConfAcceptsDropoutAndInPlace keeps unquantized dropout entries and
// reads add_ as add.
func TestReadConfAcceptsDropoutAndInPlace(t *testing.T) {
	doc := "[" + validEntry(0, map[string]string{"name": `"add_"`}) + "," +
		validEntry(1, map[string]string{"name": `"dropout"`, "inputs_quantized": "[false]", "weight_scales": "[]"}) + "]"
	c, err := ReadConf(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if c.Ops[0].Name != "add" || c.Ops[1].Name != "dropout" || c.Ops[1].InputsQuantized[0] {
		t.Errorf("read %+v", c.Ops)
	}
}

func ExampleLoadConf() {
	dir, err := os.MkdirTemp("", "quant")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "int8_conf.json")

	c := NewConf(PerTensorAffine)
	in := ChooseParams(-1, 3, c.Scheme)
	out := ChooseParams(0, 6, c.Scheme)
	c.Ops = append(c.Ops, OpConf{
		ID: 0, Name: "linear", Algorithm: c.Algorithm, WeightGranularity: c.WeightGranularity,
		InputScales: []float64{in.Scale}, InputZeroPoints: []int32{in.ZeroPoint},
		OutputScales: []float64{out.Scale}, OutputZeroPoints: []int32{out.ZeroPoint},
		WeightScales:          [][]float64{WeightScales([]float32{0.5, -1, 0.25, 2}, 2, true)},
		InputQuantizedDtypes:  []string{in.DType},
		OutputQuantizedDtypes: []string{out.DType},
		InputsQuantized:       []bool{true}, OutputsQuantized: []bool{false},
		InputsFlow: []string{"linear0.input0"}, OutputsFlow: []string{"linear0.output0"},
	})
	if err := c.Save(path); err != nil {
		panic(err)
	}

	back, err := LoadConf(path)
	if err != nil {
		panic(err)
	}
	op := back.Ops[0]
	fmt.Printf("%s: input scale %.6f zero point %d, weight scales %.6f\n",
		op.Name, op.InputScales[0], op.InputZeroPoints[0], op.WeightScales[0])
	// Output:
	// linear: input scale 0.015686 zero point 64, weight scales [0.007874 0.015748]
}
