package graph

import (
	"slices"

	"github.com/kilnml/kiln/autograd"
)

// The ops Trace records, each run through the autograd op it came from.

func one(t *autograd.Tensor) []*autograd.Tensor { return []*autograd.Tensor{t} }

func unary(f func(x *autograd.Tensor) *autograd.Tensor) *opImpl {
	return eagerOp(opImpl{ins: exactly(1), infer: inferSame}, func(_ *Node, ins []*autograd.Tensor) *autograd.Tensor { return f(ins[0]) })
}

func binary(f func(a, b *autograd.Tensor) *autograd.Tensor) *opImpl {
	return eagerOp(opImpl{ins: exactly(2), infer: inferShared}, func(_ *Node, ins []*autograd.Tensor) *autograd.Tensor { return f(ins[0], ins[1]) })
}

// eagerOp completes def, whose eager form is f, giving one result.
func eagerOp(def opImpl, f func(n *Node, ins []*autograd.Tensor) *autograd.Tensor) *opImpl {
	def.outs = exactly(1)
	def.eager = func(n *Node, ins []*autograd.Tensor) []*autograd.Tensor { return one(f(n, ins)) }
	return &def
}

// scalarOp is an elementwise op of one operand with float attributes.
func scalarOp(f func(n *Node, x *autograd.Tensor) *autograd.Tensor, attrs ...string) *opImpl {
	def := opImpl{ins: exactly(1), infer: inferSame}
	for _, a := range attrs {
		def.attrs = append(def.attrs, attrSpec{name: a, kind: AttrFloat})
	}
	return eagerOp(def, func(n *Node, ins []*autograd.Tensor) *autograd.Tensor { return f(n, ins[0]) })
}

// convAttrs are a convolution's attributes over nsp spatial dimensions;
// a list of one applies to every dimension, an empty one is the default.
func convAttrs(nsp int) []attrSpec {
	return []attrSpec{
		intsAttr("stride", 1, maxDim, 0, 1, nsp), intsAttr("padding", 0, maxDim, 0, 1, nsp),
		intsAttr("dilation", 1, maxDim, 0, 1, nsp), intAttr("groups", 1, maxDim),
	}
}

// poolAttrs are MaxPool2d's and AvgPool2d's attributes.
var poolAttrs = []attrSpec{
	intsAttr("kernel", 1, maxDim, 1, 2), intsAttr("stride", 1, maxDim, 0, 1, 2), intsAttr("padding", 0, maxDim, 0, 1, 2),
	intsAttr("dilation", 1, maxDim, 0, 1, 2), {name: "ceil_mode", kind: AttrBool}, {name: "count_include_pad", kind: AttrBool},
}

// dimAttr is an attribute naming a dimension, negative from the end; its
// range is checked against the operand's rank.
func dimAttr(name string) attrSpec { return attrSpec{name: name, kind: AttrInt} }

var bagModes = []string{autograd.BagSum.String(), autograd.BagMean.String(), autograd.BagMax.String()}

func validDType(s string) error  { _, err := ParseDType(s); return err }
func validFormat(s string) error { _, err := ParseFormat(s); return err }

// widen returns a bfloat16 x as float32, anything else as it is.
func widen(x *autograd.Tensor) *autograd.Tensor {
	if x != nil && x.DType() == autograd.BFloat16 {
		return autograd.Cast(x, autograd.Float32)
	}
	return x
}

func convOptions(n *Node) autograd.ConvOptions {
	return autograd.ConvOptions{Stride: n.Ints("stride"), Padding: n.Ints("padding"), Dilation: n.Ints("dilation"), Groups: n.Int("groups")}
}

func poolOptions(n *Node) autograd.PoolOptions {
	return autograd.PoolOptions{Kernel: n.Ints("kernel"), Stride: n.Ints("stride"), Padding: n.Ints("padding"),
		Dilation: n.Ints("dilation"), CeilMode: n.Bool("ceil_mode"), CountIncludePad: n.Bool("count_include_pad")}
}

func init() {
	conv := func(nsp int, f func(x, w, b *autograd.Tensor, opt autograd.ConvOptions) *autograd.Tensor) *opImpl {
		return eagerOp(opImpl{ins: exactly(3), optional: []int{2}, attrs: convAttrs(nsp), infer: inferShared},
			func(n *Node, in []*autograd.Tensor) *autograd.Tensor { return f(in[0], in[1], in[2], convOptions(n)) })
	}
	registerOp("Conv2d", conv(2, autograd.Conv2d))
	registerOp("Conv3d", conv(3, autograd.Conv3d))
	registerOp("Linear", eagerOp(opImpl{ins: exactly(3), optional: []int{2}, infer: inferShared}, func(_ *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Linear(in[0], in[1], in[2])
	}))
	registerOp("Matmul", eagerOp(opImpl{ins: exactly(2), infer: inferShared}, func(_ *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Matmul(in[0], in[1])
	}))
	registerOp("BMM", eagerOp(opImpl{ins: exactly(2), infer: inferShared}, func(_ *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.BMM(in[0], in[1])
	}))
	// The running statistics may be absent too: inference names them.
	registerOp("BatchNorm", eagerOp(opImpl{ins: exactly(5), optional: []int{1, 2, 3, 4}, infer: inferShared,
		attrs: []attrSpec{{name: "eps", kind: AttrFloat}}}, func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.BatchNorm(in[0], in[1], in[2], in[3], in[4], false, 0.1, n.Float("eps"))
	}))
	// LayerNorm and Softmax widen a bfloat16 input, as autocast does
	// before them: traces never give them one (autocast's cast, or the
	// Cast nodes of a bfloat16 softmax outside autocast, come first), but
	// a fused "…+LayerNorm" or "…+Softmax" that took autocast's cast in
	// does.
	registerOp("LayerNorm", eagerOp(opImpl{ins: exactly(3), optional: []int{1, 2}, infer: inferLayerNorm,
		attrs: []attrSpec{intsAttr("normalized_shape", 0, maxDim), {name: "eps", kind: AttrFloat}}},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			return autograd.LayerNorm(widen(in[0]), n.Ints("normalized_shape"), in[1], in[2], n.Float("eps"))
		}))
	for name, f := range map[string]func(*autograd.Tensor) *autograd.Tensor{
		"ReLU": autograd.ReLU, "Sigmoid": autograd.Sigmoid, "Tanh": autograd.Tanh, "SiLU": autograd.SiLU,
		"Neg": autograd.Neg, "Exp": autograd.Exp, "Log": autograd.Log, "Sqrt": autograd.Sqrt,
	} {
		registerOp(name, unary(f))
	}
	registerOp("HardTanh", scalarOp(func(n *Node, x *autograd.Tensor) *autograd.Tensor {
		return autograd.HardTanh(x, float32(n.Float("min_val")), float32(n.Float("max_val")))
	}, "min_val", "max_val"))
	registerOp("ELU", scalarOp(func(n *Node, x *autograd.Tensor) *autograd.Tensor {
		return autograd.ELU(x, float32(n.Float("alpha")))
	}, "alpha"))
	registerOp("GELU", eagerOp(opImpl{ins: exactly(1), infer: inferSame,
		attrs: []attrSpec{{name: "approximate", kind: AttrString, valid: oneOf("none", "tanh")}}},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			return autograd.GELU(in[0], n.Str("approximate"))
		}))
	registerOp("Pow", scalarOp(func(n *Node, x *autograd.Tensor) *autograd.Tensor {
		return autograd.Pow(x, float32(n.Float("exponent")))
	}, "exponent"))
	registerOp("AddScalar", scalarOp(func(n *Node, x *autograd.Tensor) *autograd.Tensor {
		return autograd.AddScalar(x, float32(n.Float("value")))
	}, "value"))
	registerOp("MulScalar", scalarOp(func(n *Node, x *autograd.Tensor) *autograd.Tensor {
		return autograd.MulScalar(x, float32(n.Float("value")))
	}, "value"))
	// Dropout and Identity in a graph are evaluation-mode identities; the
	// result is a copy so no two values share storage.
	identity := unary(func(x *autograd.Tensor) *autograd.Tensor { return x.Detach().Clone() })
	registerOp("Dropout", identity)
	registerOp("Identity", identity)
	registerOp("Clone", identity)
	registerOp("Add", binary(autograd.Add))
	registerOp("Sub", binary(autograd.Sub))
	registerOp("Mul", binary(autograd.Mul))
	registerOp("Div", binary(autograd.Div))
	registerOp("MaxPool2d", eagerOp(opImpl{ins: exactly(1), attrs: poolAttrs, infer: inferPool}, func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.MaxPool2d(in[0], poolOptions(n))
	}))
	registerOp("AvgPool2d", eagerOp(opImpl{ins: exactly(1), attrs: poolAttrs, infer: inferPool}, func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.AvgPool2d(in[0], poolOptions(n))
	}))
	registerOp("AdaptiveAvgPool2d", eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{intsAttr("output_size", 1, maxDim, 2)}, infer: inferShared},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			k := n.Ints("output_size")
			return autograd.AdaptiveAvgPool2d(in[0], k[0], k[1])
		}))
	reduce := func(f func(x *autograd.Tensor, dims []int, keepDim bool) *autograd.Tensor) *opImpl {
		return eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{{name: "dims", kind: AttrInts}, {name: "keepdim", kind: AttrBool}}, infer: inferShared},
			func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
				return f(in[0], n.Ints("dims"), n.Bool("keepdim"))
			})
	}
	registerOp("Sum", reduce(autograd.Sum))
	registerOp("Mean", reduce(autograd.Mean))
	registerOp("Reshape", eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{intsAttr("shape", -1, maxDim)}, infer: func(n *Node, ins []*sig) ([]sig, error) {
		return inferOp("Reshape", n, "attrs.shape", ins)
	}},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			return autograd.Reshape(in[0], n.Ints("shape")...)
		}))
	registerOp("Flatten", eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{dimAttr("start_dim"), dimAttr("end_dim")}, infer: inferShared},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			return autograd.Flatten(in[0], n.Int("start_dim"), n.Int("end_dim"))
		}))
	registerOp("Permute", eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{{name: "dims", kind: AttrInts}}, infer: inferShared},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			return autograd.Permute(in[0], n.Ints("dims")...)
		}))
	registerOp("Cat", eagerOp(opImpl{ins: arity{1, -1}, attrs: []attrSpec{dimAttr("dim")}, infer: inferShared},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor { return autograd.Cat(in, n.Int("dim")) }))
	registerOp("Split", &opImpl{ins: exactly(1), outs: arity{1, -1}, attrs: []attrSpec{intsAttr("sizes", 0, maxDim), dimAttr("dim")}, infer: inferShared,
		eager: func(n *Node, in []*autograd.Tensor) []*autograd.Tensor {
			return autograd.SplitSizes(in[0], n.Ints("sizes"), n.Int("dim"))
		}})
	registerOp("Softmax", eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{dimAttr("dim")}, infer: inferSoftmax},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			return autograd.Softmax(widen(in[0]), n.Int("dim"))
		}))
	registerOp("LogSoftmax", eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{dimAttr("dim")}, infer: inferSoftmax},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor { return autograd.LogSoftmax(in[0], n.Int("dim")) }))
	// Embedding's padding_idx is negative for none.
	registerOp("Embedding", eagerOp(opImpl{ins: exactly(2), attrs: []attrSpec{{name: "padding_idx", kind: AttrInt}}, infer: inferShared},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			if p := n.Int("padding_idx"); p >= 0 {
				return autograd.EmbeddingPadding(in[0], in[1], int64(p))
			}
			return autograd.Embedding(in[0], in[1])
		}))
	// EmbeddingBag(input, offsets, weight, per_sample_weights).
	registerOp("EmbeddingBag", eagerOp(opImpl{ins: exactly(4), optional: []int{1, 3}, infer: inferShared,
		attrs: []attrSpec{{name: "mode", kind: AttrString, valid: oneOf(bagModes...)}}},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			m := autograd.EmbeddingBagMode(slices.Index(bagModes, n.Str("mode")))
			return autograd.EmbeddingBag(in[0], in[1], in[2], m, in[3])
		}))
	registerOp("Cast", eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{{name: "dtype", kind: AttrString, valid: validDType}}, infer: inferShared},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			d, err := ParseDType(n.Str("dtype"))
			if err != nil {
				fail(autograd.ErrDType, "Cast", "%v", err)
			}
			return autograd.Cast(in[0], d)
		}))
	registerOp("To", eagerOp(opImpl{ins: exactly(1), attrs: []attrSpec{{name: "format", kind: AttrString, valid: validFormat}}, infer: inferShared},
		func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
			f, err := ParseFormat(n.Str("format"))
			if err != nil {
				fail(autograd.ErrArgument, "To", "%v", err)
			}
			return in[0].To(f)
		}))
}
