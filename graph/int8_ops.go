package graph

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/opbind"
)

// The int8 layers of a converted graph are nodes named by the chain they
// replace, "Dequantize+Conv2d+Add+ReLU+Quantize": a Dequantize of the
// 8-bit input, the layer (Conv2d, Conv3d or Linear) on an int8 weight
// dequantized per output channel, then optionally an Add of a residual
// (float32, or 8-bit with its Dequantize's parameters as the Add's
// attributes), one of ReLU, GELU and Sigmoid, and a Quantize of the
// result. Its operands are the 8-bit input, the int8 weight, its float32
// scales, the bias (or none) and the residual; its attributes are the
// parts', a later part's under its name and a dot. It runs autograd's
// QuantizedConv2d, QuantizedConv3d or QuantizedLinear.

// int8Layers maps a chain's layer to the autograd op that runs it.
var int8Layers = map[string]string{"Conv2d": "QuantizedConv2d", "Conv3d": "QuantizedConv3d", "Linear": "QuantizedLinear"}

// int8Acts are the activations an int8 layer applies.
var int8Acts = []string{"ReLU", "GELU", "Sigmoid"}

// int8LayerImpl is the definition of the int8 layer op named name.
func int8LayerImpl(name string) (*opImpl, error) {
	parts := strings.Split(name, FusedSep)
	if parts[1] == "Matmul" || parts[1] == "BMM" {
		return int8MatmulImpl(name, parts)
	}
	qop, ok := int8Layers[parts[1]]
	if len(parts) < 2 || !ok {
		return nil, fmt.Errorf("int8 op %q: a Dequantize must be followed by Conv2d, Conv3d or Linear", name)
	}
	rest := parts[2:]
	residual := len(rest) > 0 && rest[0] == "Add"
	if residual {
		rest = rest[1:]
	}
	if len(rest) > 0 && slices.Contains(int8Acts, rest[0]) {
		rest = rest[1:]
	}
	if len(rest) > 0 && rest[0] == "Quantize" {
		rest = rest[1:]
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("int8 op %q: %q cannot follow (want [Add][ReLU|GELU|Sigmoid][Quantize] after the layer)", name, rest[0])
	}
	d, ok := opbind.Lookup[*autograd.Tensor, autograd.TensorType](qop)
	if !ok {
		return nil, fmt.Errorf("int8 op %q: autograd does not describe %s", name, qop)
	}
	n := 4
	if residual {
		n = 5
	}
	return &opImpl{name: name, ins: exactly(n), outs: exactly(1), optional: []int{3},
		decode: func(nd *Node) (any, string, error) { return decodeInt8Layer(nd, parts) },
		infer: func(attrs any, ins []*sig) ([]sig, error) {
			return inferWith(d.Infer, attrs, layerOperands(ins))
		},
		eager: func(attrs any, ins []*autograd.Tensor) []*autograd.Tensor { return d.Eager(attrs, layerOperands(ins)) },
		compile: func(c *compileCtx, op nodeOp, ins, outs []*autograd.Tensor) func() {
			return d.Bind(op.attrs, layerOperands(ins), outs, layerOperands(c.consts))
		},
	}, nil
}

// layerOperands are a node's operands as the quantized layer ops take
// them: input, weight, scales, bias, residual (zero when absent).
func layerOperands[T any](ins []T) []T {
	out := make([]T, 5)
	copy(out, ins)
	return out
}

// decodeInt8Layer decodes an int8 layer node's attributes into an
// autograd.QuantizedLayerAttrs.
func decodeInt8Layer(n *Node, parts []string) (any, string, error) {
	var a autograd.QuantizedLayerAttrs
	a.OutDType = "float32"
	part := func(k int, t reflect.Type) (reflect.Value, string, error) {
		prefix := "attrs."
		if k > 0 {
			prefix += parts[k] + "."
		}
		v, field, err := decodeStruct(t, partAttrs(n, parts, k), prefix)
		if err != nil {
			return reflect.Value{}, field, err
		}
		return reflect.ValueOf(v), "", nil
	}
	dq, field, err := part(0, reflect.TypeFor[autograd.DequantizeAttrs]())
	if err != nil {
		return nil, field, err
	}
	a.Scale, a.ZeroPoint = dq.Interface().(autograd.DequantizeAttrs).Scale, dq.Interface().(autograd.DequantizeAttrs).ZeroPoint
	if parts[1] != "Linear" {
		v, field, err := part(1, opImpls[parts[1]].attrs)
		if err != nil {
			return nil, field, err
		}
		o := v.Interface().(autograd.ConvOptions)
		a.Stride, a.Padding, a.Dilation, a.Groups = o.Stride, o.Padding, o.Dilation, o.Groups
	}
	for k := 2; k < len(parts); k++ {
		switch p := parts[k]; p {
		case "Add":
			a.Residual = "float32"
			if len(partAttrs(n, parts, k)) > 0 {
				v, field, err := part(k, reflect.TypeFor[autograd.DequantizeAttrs]())
				if err != nil {
					return nil, field, err
				}
				r := v.Interface().(autograd.DequantizeAttrs)
				a.Residual, a.ResidualScale, a.ResidualZeroPoint = "quantized", r.Scale, r.ZeroPoint
			}
		case "Quantize":
			v, field, err := part(k, reflect.TypeFor[autograd.QuantizeAttrs]())
			if err != nil {
				return nil, field, err
			}
			q := v.Interface().(autograd.QuantizeAttrs)
			a.OutDType, a.OutScale, a.OutZeroPoint = q.DType, q.Scale, q.ZeroPoint
		default:
			a.Act = p
			if t := opImpls[p].attrs; t != nil {
				v, field, err := part(k, t)
				if err != nil {
					return nil, field, err
				}
				// GELU's only attribute.
				a.Approximate = v.FieldByName("Approximate").String()
			}
		}
	}
	return a, "", nil
}

// The int8 products of two activations are nodes named
// "Dequantize+Matmul+Div+Quantize" (or BMM, Div and Quantize optional):
// the operands are the two 8-bit values; the attributes are the first
// one's Dequantize's, the second one's under the product's name
// ("Matmul.scale", "Matmul.zero_point"), "Div.divisor" and the
// Quantize's. They run autograd's QuantizedMatmul.

// int8MatmulImpl is the definition of the int8 product op named name.
func int8MatmulImpl(name string, parts []string) (*opImpl, error) {
	rest := parts[2:]
	if len(rest) > 0 && rest[0] == "Div" {
		rest = rest[1:]
	}
	if len(rest) > 0 && rest[0] == "Quantize" {
		rest = rest[1:]
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("int8 op %q: %q cannot follow (want [Div][Quantize] after the product)", name, rest[0])
	}
	d, ok := opbind.Lookup[*autograd.Tensor, autograd.TensorType]("QuantizedMatmul")
	if !ok {
		return nil, fmt.Errorf("int8 op %q: autograd does not describe QuantizedMatmul", name)
	}
	return &opImpl{name: name, ins: exactly(2), outs: exactly(1),
		decode: func(nd *Node) (any, string, error) { return decodeInt8Matmul(nd, parts) },
		infer:  func(attrs any, ins []*sig) ([]sig, error) { return inferWith(d.Infer, attrs, ins) },
		eager:  d.Eager,
		compile: func(c *compileCtx, op nodeOp, ins, outs []*autograd.Tensor) func() {
			return d.Bind(op.attrs, ins, outs, c.consts)
		},
	}, nil
}

// int8ScalePair are the attributes of a value's quantization, as a
// Dequantize has them.
type int8ScalePair = autograd.DequantizeAttrs

// divAttrs is the Div part's attribute: the constant divisor.
type divAttrs struct{ Divisor float64 }

// decodeInt8Matmul decodes an int8 product node's attributes into an
// autograd.QuantizedMatmulAttrs.
func decodeInt8Matmul(n *Node, parts []string) (any, string, error) {
	a := autograd.QuantizedMatmulAttrs{OutDType: "float32"}
	part := func(k int, t reflect.Type) (any, string, error) {
		prefix := "attrs."
		if k > 0 {
			prefix += parts[k] + "."
		}
		return decodeStruct(t, partAttrs(n, parts, k), prefix)
	}
	for k, p := range parts {
		switch {
		case k == 0 || k == 1:
			v, field, err := part(k, reflect.TypeFor[int8ScalePair]())
			if err != nil {
				return nil, field, err
			}
			q := v.(int8ScalePair)
			if k == 0 {
				a.Scale, a.ZeroPoint = q.Scale, q.ZeroPoint
			} else {
				a.OtherScale, a.OtherZeroPoint = q.Scale, q.ZeroPoint
			}
		case p == "Div":
			v, field, err := part(k, reflect.TypeFor[divAttrs]())
			if err != nil {
				return nil, field, err
			}
			a.Divisor = v.(divAttrs).Divisor
		case p == "Quantize":
			v, field, err := part(k, reflect.TypeFor[autograd.QuantizeAttrs]())
			if err != nil {
				return nil, field, err
			}
			q := v.(autograd.QuantizeAttrs)
			a.OutDType, a.OutScale, a.OutZeroPoint = q.DType, q.Scale, q.ZeroPoint
		}
	}
	return a, "", nil
}
