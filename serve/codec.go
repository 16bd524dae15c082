package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/feed"
	"github.com/kilnml/kiln/internal/npy"
	"github.com/kilnml/kiln/internal/shape"
)

// number is a JSON array element: a number, or one of the strings NaN,
// Infinity and -Infinity.
type number float64

func (n *number) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "NaN":
			*n = number(math.NaN())
		case "Infinity":
			*n = number(math.Inf(1))
		case "-Infinity":
			*n = number(math.Inf(-1))
		default:
			return fmt.Errorf("%q is not a number (strings allowed: NaN, Infinity, -Infinity)", s)
		}
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("%s is not a number", b)
	}
	*n = number(v)
	return nil
}

type requestBody struct {
	Inputs []struct {
		DType string   `json:"dtype"`
		Shape []int    `json:"shape"`
		Data  []number `json:"data"`
	} `json:"inputs"`
}

// decodeJSON reads a JSON request body into tensors fitted to g's inputs.
func decodeJSON(r io.Reader, g *graph.Graph) ([]*autograd.Tensor, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var body requestBody
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("malformed JSON body: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("malformed JSON body: more than one value")
	}
	if len(body.Inputs) != len(g.Inputs) {
		return nil, fmt.Errorf("the graph takes %d input(s), the body has %d", len(g.Inputs), len(body.Inputs))
	}
	xs := make([]*autograd.Tensor, len(body.Inputs))
	for i, in := range body.Inputs {
		v := g.Values[g.Inputs[i]]
		n, err := shape.Numel(in.Shape)
		if err != nil || in.Shape == nil {
			return nil, fmt.Errorf("input %d (%s): bad shape %v", i, v.Name, in.Shape)
		}
		if n != len(in.Data) {
			return nil, fmt.Errorf("input %d (%s): shape %v needs %d numbers, data has %d", i, v.Name, in.Shape, n, len(in.Data))
		}
		var x *autograd.Tensor
		switch {
		case v.DType == autograd.Float32 || v.DType == autograd.BFloat16:
			if in.DType != "" && in.DType != "float32" && in.DType != v.DType.String() {
				return nil, fmt.Errorf("input %d (%s): dtype %q, the graph's input is %v", i, v.Name, in.DType, v.DType)
			}
			d := make([]float32, n)
			for j, e := range in.Data {
				d[j] = float32(e)
			}
			x = autograd.FromFloat32(d, in.Shape...)
		case v.DType == autograd.Int64 || v.DType == autograd.Int32:
			if in.DType != "" && in.DType != "int64" && in.DType != "int32" {
				return nil, fmt.Errorf("input %d (%s): dtype %q, the graph's input is %v", i, v.Name, in.DType, v.DType)
			}
			d := make([]int64, n)
			for j, e := range in.Data {
				f := float64(e)
				if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
					return nil, fmt.Errorf("input %d (%s): element %d (%v) is not an integer", i, v.Name, j, f)
				}
				d[j] = int64(f)
			}
			x = autograd.FromInt64(d, in.Shape...)
			if v.DType == autograd.Int32 {
				x = autograd.Cast(x, autograd.Int32)
			}
		default:
			return nil, fmt.Errorf("input %d (%s): the graph's input is %v, which JSON bodies cannot feed; send .npy", i, v.Name, v.DType)
		}
		if xs[i], err = feed.Conform(x, v); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	return xs, nil
}

// decodeNPY reads a .npy body into the one input of g.
func decodeNPY(b []byte, g *graph.Graph) ([]*autograd.Tensor, error) {
	if len(g.Inputs) != 1 {
		return nil, fmt.Errorf("the graph takes %d inputs; a .npy body holds one: send JSON", len(g.Inputs))
	}
	x, err := npy.Decode(b)
	if err != nil {
		return nil, err
	}
	if x, err = feed.Conform(x, g.Values[g.Inputs[0]]); err != nil {
		return nil, err
	}
	return []*autograd.Tensor{x}, nil
}

// encodeJSON writes outputs as the JSON response body.
func encodeJSON(w io.Writer, g *graph.Graph, outs []*autograd.Tensor) error {
	var b bytes.Buffer
	b.WriteString(`{"outputs":[`)
	for i, t := range outs {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(g.Values[g.Outputs[i]].Name)
		dtype := t.DType()
		vals := t.Contiguous().Values()
		if dtype == autograd.BFloat16 {
			dtype = autograd.Float32 // exact: every bfloat16 is a float32
		}
		shp, _ := json.Marshal(t.Shape())
		fmt.Fprintf(&b, `{"name":%s,"dtype":%q,"shape":%s,"data":[`, name, dtype.String(), shp)
		bits := 64
		if dtype == autograd.Float32 {
			bits = 32
		}
		for j, v := range vals {
			if j > 0 {
				b.WriteByte(',')
			}
			switch {
			case math.IsNaN(v):
				b.WriteString(`"NaN"`)
			case math.IsInf(v, 1):
				b.WriteString(`"Infinity"`)
			case math.IsInf(v, -1):
				b.WriteString(`"-Infinity"`)
			default:
				b.Write(strconv.AppendFloat(nil, v, 'g', -1, bits))
			}
		}
		b.WriteString(`]}`)
	}
	b.WriteString("]}\n")
	_, err := w.Write(b.Bytes())
	return err
}
