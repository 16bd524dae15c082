package graph

import (
	"github.com/kilnml/kiln/autograd"
)

// The ops Trace records, each run through the autograd op it came from.

func one(t *autograd.Tensor) []*autograd.Tensor { return []*autograd.Tensor{t} }

func unary(f func(x *autograd.Tensor) *autograd.Tensor) *opImpl {
	return &opImpl{eager: func(_ *Node, ins []*autograd.Tensor) []*autograd.Tensor { return one(f(ins[0])) }}
}

func binary(f func(a, b *autograd.Tensor) *autograd.Tensor) *opImpl {
	return &opImpl{eager: func(_ *Node, ins []*autograd.Tensor) []*autograd.Tensor { return one(f(ins[0], ins[1])) }}
}

func eagerOp(f func(n *Node, ins []*autograd.Tensor) *autograd.Tensor) *opImpl {
	return &opImpl{eager: func(n *Node, ins []*autograd.Tensor) []*autograd.Tensor { return one(f(n, ins)) }}
}

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
	registerOp("Conv2d", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Conv2d(in[0], in[1], in[2], convOptions(n))
	}))
	registerOp("Conv3d", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Conv3d(in[0], in[1], in[2], convOptions(n))
	}))
	registerOp("Linear", eagerOp(func(_ *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Linear(in[0], in[1], in[2])
	}))
	registerOp("Matmul", binary(autograd.Matmul))
	registerOp("BMM", binary(autograd.BMM))
	registerOp("BatchNorm", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.BatchNorm(in[0], in[1], in[2], in[3], in[4], false, 0.1, n.Float("eps"))
	}))
	// LayerNorm and Softmax widen a bfloat16 input, as autocast does
	// before them: traces never give them one (autocast's cast, or the
	// Cast nodes of a bfloat16 softmax outside autocast, come first), but
	// a fused "…+LayerNorm" or "…+Softmax" that took autocast's cast in
	// does.
	registerOp("LayerNorm", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.LayerNorm(widen(in[0]), n.Ints("normalized_shape"), in[1], in[2], n.Float("eps"))
	}))
	for name, f := range map[string]func(*autograd.Tensor) *autograd.Tensor{
		"ReLU": autograd.ReLU, "Sigmoid": autograd.Sigmoid, "Tanh": autograd.Tanh, "SiLU": autograd.SiLU,
		"Neg": autograd.Neg, "Exp": autograd.Exp, "Log": autograd.Log, "Sqrt": autograd.Sqrt,
	} {
		registerOp(name, unary(f))
	}
	registerOp("HardTanh", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.HardTanh(in[0], float32(n.Float("min_val")), float32(n.Float("max_val")))
	}))
	registerOp("ELU", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.ELU(in[0], float32(n.Float("alpha")))
	}))
	registerOp("GELU", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.GELU(in[0], n.Str("approximate"))
	}))
	registerOp("Pow", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Pow(in[0], float32(n.Float("exponent")))
	}))
	registerOp("AddScalar", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.AddScalar(in[0], float32(n.Float("value")))
	}))
	registerOp("MulScalar", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.MulScalar(in[0], float32(n.Float("value")))
	}))
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
	registerOp("MaxPool2d", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.MaxPool2d(in[0], poolOptions(n))
	}))
	registerOp("AvgPool2d", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.AvgPool2d(in[0], poolOptions(n))
	}))
	registerOp("AdaptiveAvgPool2d", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		k := n.Ints("kernel")
		if len(k) != 2 {
			autograd.Fail("AdaptiveAvgPool2d", "kernel attribute must hold the output height and width, got %v", k)
		}
		return autograd.AdaptiveAvgPool2d(in[0], k[0], k[1])
	}))
	registerOp("Sum", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Sum(in[0], n.Ints("dims"), n.Bool("keepdim"))
	}))
	registerOp("Mean", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Mean(in[0], n.Ints("dims"), n.Bool("keepdim"))
	}))
	registerOp("Reshape", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Reshape(in[0], n.Ints("shape")...)
	}))
	registerOp("Flatten", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Flatten(in[0], n.Int("start_dim"), n.Int("end_dim"))
	}))
	registerOp("Permute", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Permute(in[0], n.Ints("dims")...)
	}))
	registerOp("Cat", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Cat(in, n.Int("dim"))
	}))
	registerOp("Split", &opImpl{eager: func(n *Node, in []*autograd.Tensor) []*autograd.Tensor {
		return autograd.SplitSizes(in[0], n.Ints("sizes"), n.Int("dim"))
	}})
	registerOp("Softmax", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.Softmax(widen(in[0]), n.Int("dim"))
	}))
	registerOp("LogSoftmax", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		return autograd.LogSoftmax(in[0], n.Int("dim"))
	}))
	registerOp("Embedding", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		if p := n.Int("padding_idx"); p >= 0 {
			return autograd.EmbeddingPadding(in[0], in[1], int64(p))
		}
		return autograd.Embedding(in[0], in[1])
	}))
	registerOp("EmbeddingBag", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		mode := n.Str("mode")
		for m := autograd.BagSum; m <= autograd.BagMax; m++ {
			if m.String() == mode {
				return autograd.EmbeddingBag(in[0], in[1], in[2], m, in[3])
			}
		}
		autograd.Fail("EmbeddingBag", "unknown mode %q", mode)
		return nil
	}))
	registerOp("Cast", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		d, err := ParseDType(n.Str("dtype"))
		if err != nil {
			autograd.Fail("Cast", "%v", err)
		}
		return autograd.Cast(in[0], d)
	}))
	registerOp("To", eagerOp(func(n *Node, in []*autograd.Tensor) *autograd.Tensor {
		f, err := ParseFormat(n.Str("format"))
		if err != nil {
			autograd.Fail("To", "%v", err)
		}
		return in[0].To(f)
	}))
}
