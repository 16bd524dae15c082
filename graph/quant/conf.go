package quant

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kilnml/kiln/internal/atomicfile"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// Scheme is how activations are quantized.
type Scheme int

const (
	PerTensorAffine    Scheme = iota // uint8 activations, zero point chosen from the range
	PerTensorSymmetric               // int8 activations, zero point 0
)

func (s Scheme) String() string {
	switch s {
	case PerTensorAffine:
		return "per_tensor_affine"
	case PerTensorSymmetric:
		return "per_tensor_symmetric"
	}
	return fmt.Sprintf("Scheme(%d)", int(s))
}

// Conf is a quantization configuration: IPEX 1.10's QuantConf, one OpConf
// per recorded op in execution order. Algorithm and WeightGranularity are
// what new calibrations use; each entry records what its own used.
type Conf struct {
	Scheme            Scheme
	Algorithm         string // observer for new calibrations: "min_max" (default), "moving_averager_min_max", "histogram"
	WeightGranularity string // "per_channel" (default) or "per_tensor"
	Ops               []OpConf
}

// NewConf returns an empty conf with IPEX 1.10's defaults for s.
func NewConf(s Scheme) *Conf {
	return &Conf{Scheme: s, Algorithm: algoMinMax, WeightGranularity: granularityPerChannel}
}

const (
	granularityPerChannel = "per_channel"
	granularityPerTensor  = "per_tensor"
)

// OpConf is one entry of a conf, with exactly IPEX 1.10's fields, in its
// order. An input that another recorded op produces carries that op's
// output flow name, which is how the entries link into a graph.
type OpConf struct {
	ID                    int         `json:"id"`
	Name                  string      `json:"name"`
	Algorithm             string      `json:"algorithm"`
	WeightGranularity     string      `json:"weight_granularity"`
	InputScales           []float64   `json:"input_scales"`
	InputZeroPoints       []int32     `json:"input_zero_points"`
	OutputScales          []float64   `json:"output_scales"`
	OutputZeroPoints      []int32     `json:"output_zero_points"`
	WeightScales          [][]float64 `json:"weight_scales"`
	InputQuantizedDtypes  []string    `json:"input_quantized_dtypes"`
	OutputQuantizedDtypes []string    `json:"output_quantized_dtypes"`
	InputsQuantized       []bool      `json:"inputs_quantized"`
	OutputsQuantized      []bool      `json:"outputs_quantized"`
	InputsFlow            []string    `json:"inputs_flow"`
	OutputsFlow           []string    `json:"outputs_flow"`

	// spelled is IPEX's in-place name ("relu_", "add_") that ReadConf
	// normalised Name from, so that Write gives back the file it read.
	spelled string
}

// jsonFields are OpConf's JSON names in order, for the schema checks.
var jsonFields = strings.Fields(`id name algorithm weight_granularity input_scales input_zero_points
	output_scales output_zero_points weight_scales input_quantized_dtypes output_quantized_dtypes
	inputs_quantized outputs_quantized inputs_flow outputs_flow`)

// knownOps are the op names IPEX 1.10 records, in-place forms mapped to
// the op they compute.
var knownOps = map[string]string{
	"conv2d": "conv2d", "conv3d": "conv3d", "linear": "linear", "matmul": "matmul", "bmm": "bmm",
	"relu": "relu", "relu_": "relu", "sigmoid": "sigmoid", "gelu": "gelu", "add": "add", "add_": "add",
	"max_pool2d": "max_pool2d", "adaptive_avg_pool2d": "adaptive_avg_pool2d", "flatten": "flatten",
	"dropout": "dropout",
}

// ErrConf is what every *ConfError matches with errors.Is.
var ErrConf = errors.New("quant: bad conf")

// ConfError is the error of a conf that breaks the schema. ID is the entry's
// id (its position when the id itself is bad), or -1 for a fault of the
// file as a whole; Field is the JSON field at fault, or "".
type ConfError struct {
	Path  string
	ID    int
	Field string
	Err   error

	op string // the entry's name, when it has been read
}

func (e *ConfError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	if e.ID >= 0 {
		fmt.Fprintf(&b, "entry %d", e.ID)
		if e.op != "" {
			fmt.Fprintf(&b, " (%s)", e.op)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap gives ErrConf and the cause, so errors.Is finds either.
func (e *ConfError) Unwrap() []error { return []error{ErrConf, e.Err} }

func confErr(id int, op, field, format string, args ...any) *ConfError {
	return &ConfError{ID: id, Field: field, Err: fmt.Errorf(format, args...), op: op}
}

// Write writes the conf as IPEX's JSON: an array of entries, indented, each
// with its fields in IPEX's order and empty lists as []. A conf that ReadConf
// would reject is not written.
func (c *Conf) Write(w io.Writer) error {
	b, err := c.marshal()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func (c *Conf) marshal() ([]byte, error) {
	ops := make([]OpConf, len(c.Ops))
	for i, op := range c.Ops {
		if err := checkOp(i, &op); err != nil {
			return nil, err
		}
		if op.spelled != "" && knownOps[op.spelled] == op.Name {
			op.Name = op.spelled
		}
		ops[i] = nonNil(op)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // flow names are not HTML
	enc.SetIndent("", "    ")
	if err := enc.Encode(ops); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// nonNil replaces nil lists with empty ones, which IPEX's reader needs: it
// takes null for a missing list.
func nonNil(op OpConf) OpConf {
	orEmpty(&op.InputScales)
	orEmpty(&op.InputZeroPoints)
	orEmpty(&op.OutputScales)
	orEmpty(&op.OutputZeroPoints)
	orEmpty(&op.InputQuantizedDtypes)
	orEmpty(&op.OutputQuantizedDtypes)
	orEmpty(&op.InputsQuantized)
	orEmpty(&op.OutputsQuantized)
	orEmpty(&op.InputsFlow)
	orEmpty(&op.OutputsFlow)
	ws := make([][]float64, len(op.WeightScales))
	for i, s := range op.WeightScales {
		orEmpty(&s)
		ws[i] = s
	}
	op.WeightScales = ws
	return op
}

func orEmpty[T any](s *[]T) {
	if *s == nil {
		*s = []T{}
	}
}

// Save writes the conf to path atomically: into a temporary file in the same
// directory, synced, then renamed over path, so that a crash or a full disk
// leaves either the old file or the new one, never a truncated conf.
func (c *Conf) Save(path string) error {
	b, err := c.marshal()
	if err != nil {
		var ce *ConfError
		if errors.As(err, &ce) {
			ce.Path = path
		}
		return err
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return fmt.Errorf("quant: saving %s: %w", path, err)
	}
	return nil
}

// LoadConf reads and checks the conf in path; its errors name the file.
func LoadConf(path string) (*Conf, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("quant: %w", err)
	}
	defer f.Close()
	c, err := ReadConf(f)
	if err != nil {
		var ce *ConfError
		if errors.As(err, &ce) {
			ce.Path = path
			return nil, err
		}
		return nil, fmt.Errorf("quant: %s: %w", path, err)
	}
	return c, nil
}

// ReadConf parses an IPEX 1.10 conf and checks it against the schema; a
// conf that breaks it gives a *ConfError. The conf's Scheme is symmetric
// when every activation dtype in it is int8 with zero point 0, affine
// otherwise; its Algorithm and WeightGranularity are the first entry's.
func ReadConf(r io.Reader) (*Conf, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("quant: reading conf: %w", err)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, &ConfError{ID: -1, Err: describeJSONError(data, err)}
	}
	c := NewConf(PerTensorAffine)
	for i, raw := range entries {
		op, err := readOp(i, raw)
		if err != nil {
			return nil, err
		}
		c.Ops = append(c.Ops, op)
	}
	if len(c.Ops) > 0 {
		c.Algorithm, c.WeightGranularity = c.Ops[0].Algorithm, c.Ops[0].WeightGranularity
	}
	if symmetric(c.Ops) {
		c.Scheme = PerTensorSymmetric
	}
	return c, nil
}

// describeJSONError gives a decoding error a line and column, which the
// standard library reports only as a byte offset.
func describeJSONError(data []byte, err error) error {
	var off int64
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset - 1 // Offset counts the offending byte
	case errors.As(err, &typ):
		if typ.Value == "object" || typ.Value == "string" || typ.Value == "number" || typ.Value == "bool" {
			return fmt.Errorf("want a JSON array of entries, got %s", typ.Value)
		}
		off = typ.Offset
	default:
		return fmt.Errorf("invalid JSON: %w", err)
	}
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Errorf("invalid JSON at line %d, column %d (offset %d): %w", line, col, off, err)
}

// readOp decodes entry i field by field, so that an error names the field.
func readOp(i int, raw json.RawMessage) (OpConf, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return OpConf{}, confErr(i, "", "", "entry %d is not a JSON object", i)
	}
	// Errors carry the entry's position: the id it claims may be the fault.
	var op OpConf
	if err := decodeField(fields, "id", &op.ID, i, ""); err != nil {
		return OpConf{}, err
	}
	if err := decodeField(fields, "name", &op.Name, i, ""); err != nil {
		return OpConf{}, err
	}
	for k := range fields {
		if !slices.Contains(jsonFields, k) {
			return OpConf{}, confErr(i, op.Name, k, "unknown field")
		}
	}
	targets := []any{&op.Algorithm, &op.WeightGranularity, &op.InputScales, &op.InputZeroPoints,
		&op.OutputScales, &op.OutputZeroPoints, &op.WeightScales, &op.InputQuantizedDtypes,
		&op.OutputQuantizedDtypes, &op.InputsQuantized, &op.OutputsQuantized, &op.InputsFlow, &op.OutputsFlow}
	for j, name := range jsonFields[2:] {
		if err := decodeField(fields, name, targets[j], i, op.Name); err != nil {
			return OpConf{}, err
		}
	}
	canonical, ok := knownOps[op.Name]
	if ok && canonical != op.Name {
		op.spelled, op.Name = op.Name, canonical
	}
	if err := checkOp(i, &op); err != nil {
		return OpConf{}, err
	}
	return op, nil
}

func decodeField(fields map[string]json.RawMessage, name string, dst any, id int, op string) error {
	raw, ok := fields[name]
	if !ok {
		return confErr(id, op, name, "missing field")
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return confErr(id, op, name, "null, want a value (an empty list is [])")
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return confErr(id, op, name, "%s is not a valid %s", typ.Value, typ.Type)
		}
		return confErr(id, op, name, "%v", err)
	}
	return nil
}

// checkOp is the schema beyond the JSON types; Write applies it too, so
// Kiln never writes a conf it would refuse to read.
func checkOp(i int, op *OpConf) error {
	name := op.Name
	if op.ID != i {
		return confErr(i, name, "id", "id %d out of order: entries must be numbered 0, 1, 2, … in order, want %d", op.ID, i)
	}
	if _, ok := knownOps[name]; !ok {
		return confErr(i, name, "name", "unknown op %q", name)
	}
	switch op.Algorithm {
	case algoMinMax, algoMovingAverage, algoHistogram:
	default:
		return confErr(i, name, "algorithm", "unknown algorithm %q (want %q, %q or %q)", op.Algorithm, algoMinMax, algoMovingAverage, algoHistogram)
	}
	switch op.WeightGranularity {
	case granularityPerChannel, granularityPerTensor:
	default:
		return confErr(i, name, "weight_granularity", "unknown weight granularity %q (want %q or %q)", op.WeightGranularity, granularityPerChannel, granularityPerTensor)
	}
	if err := checkSide(i, name, "input", "inputs", op.InputScales, op.InputZeroPoints, op.InputQuantizedDtypes, op.InputsQuantized, op.InputsFlow); err != nil {
		return err
	}
	if err := checkSide(i, name, "output", "outputs", op.OutputScales, op.OutputZeroPoints, op.OutputQuantizedDtypes, op.OutputsQuantized, op.OutputsFlow); err != nil {
		return err
	}
	for c, scales := range op.WeightScales {
		for k, s := range scales {
			if err := checkScale(s); err != nil {
				return confErr(i, name, "weight_scales", "weight %d, channel %d: %v", c, k, err)
			}
		}
	}
	return nil
}

// checkSide checks one side's (inputs' or outputs') parallel lists: one
// element per tensor in each, positive finite scales, and zero points that
// their dtype can hold.
func checkSide(i int, name, one, many string, scales []float64, zps []int32, dtypes []string, quantized []bool, flows []string) error {
	n := len(scales)
	lens := []struct {
		field string
		n     int
	}{
		{one + "_zero_points", len(zps)}, {one + "_quantized_dtypes", len(dtypes)},
		{many + "_quantized", len(quantized)}, {many + "_flow", len(flows)},
	}
	for _, l := range lens {
		if l.n != n {
			return confErr(i, name, l.field, "%d elements, but %s_scales has %d", l.n, one, n)
		}
	}
	for k, s := range scales {
		if err := checkScale(s); err != nil {
			return confErr(i, name, one+"_scales", "%v", err)
		}
		lo, hi, ok := dtypeRange(dtypes[k])
		if !ok {
			return confErr(i, name, one+"_quantized_dtypes", "unknown dtype %q (want \"uint8\" or \"int8\")", dtypes[k])
		}
		if z := zps[k]; z < lo || z > hi {
			return confErr(i, name, one+"_zero_points", "zero point %d of %s %d is outside %s's range %d..%d", z, one, k, dtypes[k], lo, hi)
		}
	}
	return nil
}

func checkScale(s float64) error {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return fmt.Errorf("scale %v is not finite", s)
	}
	if s <= 0 {
		return fmt.Errorf("scale %v is not positive", s)
	}
	return nil
}

func dtypeRange(dtype string) (lo, hi int32, ok bool) {
	switch dtype {
	case "uint8":
		return uint8Min, uint8Max, true
	case "int8":
		return int8Min, int8Max, true
	}
	return 0, 0, false
}

// symmetric reports whether every activation of ops is int8 with zero
// point 0, the mark of a conf calibrated with PerTensorSymmetric.
func symmetric(ops []OpConf) bool {
	seen := false
	for _, op := range ops {
		for _, side := range []struct {
			dtypes []string
			zps    []int32
		}{{op.InputQuantizedDtypes, op.InputZeroPoints}, {op.OutputQuantizedDtypes, op.OutputZeroPoints}} {
			for k, d := range side.dtypes {
				if d != "int8" || side.zps[k] != 0 {
					return false
				}
				seen = true
			}
		}
	}
	return seen
}
