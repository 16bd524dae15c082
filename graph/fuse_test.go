package graph

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
)

// passNet is a tiny model for the pass tests: its layers are registered
// children, and fwd is its forward, given the layers.
type passNet struct {
	nn.Base
	layers []nn.Layer
	fwd    func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor
}

func (m *passNet) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(m, x)()
	return m.fwd(m.layers, x)
}

// newPassNet registers layers as children "l0", "l1", … and puts the
// model in evaluation mode.
func newPassNet(fwd func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor, layers ...nn.Layer) *passNet {
	m := &passNet{layers: layers, fwd: fwd}
	for i, l := range layers {
		m.RegisterModule("l"+string(rune('0'+i)), l)
	}
	nn.Eval(m)
	return m
}

// passSeq is a forward that runs the layers one after another.
func passSeq(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
	for _, layer := range l {
		x = layer.Forward(x)
	}
	return x
}

func passConv2d(g *autograd.Generator, in, out int) *nn.Conv2d {
	return nn.NewConv2d(g, in, out, 3, nn.ConvOptions{Padding: 1})
}

func passConv3d(g *autograd.Generator, in, out int) *nn.Conv3d {
	return nn.NewConv3d(g, in, out, 3, nn.ConvOptions{Padding: 1})
}

// fusionCase is one pattern: a model holding it, an input shape, and the
// fused op its frozen graph must hold.
type fusionCase struct {
	name  string
	model func(g *autograd.Generator) *passNet
	input []int
	op    string
	bf16  bool // traced and run under autocast
}

func fusionCases() []fusionCase {
	residual := func(act func(*autograd.Tensor) *autograd.Tensor) func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
		return func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
			y := autograd.Add(x, l[0].Forward(x)) // the residual first: Add commutes
			if act != nil {
				y = act(y)
			}
			return y
		}
	}
	img, vol := []int{2, 4, 6, 6}, []int{1, 4, 4, 5, 5}
	return []fusionCase{
		{"Conv2d+ReLU", func(g *autograd.Generator) *passNet { return newPassNet(passSeq, passConv2d(g, 4, 6), nn.NewReLU()) }, img, "Conv2d+ReLU", false},
		{"Conv2d+Add", func(g *autograd.Generator) *passNet { return newPassNet(residual(nil), passConv2d(g, 4, 4)) }, img, "Conv2d+Add", false},
		{"Conv2d+Add+ReLU", func(g *autograd.Generator) *passNet { return newPassNet(residual(autograd.ReLU), passConv2d(g, 4, 4)) }, img, "Conv2d+Add+ReLU", false},
		{"Conv2d+Sigmoid", func(g *autograd.Generator) *passNet { return newPassNet(passSeq, passConv2d(g, 4, 6), nn.NewSigmoid()) }, img, "Conv2d+Sigmoid", false},
		{"Conv2d+SigmoidMul", func(g *autograd.Generator) *passNet {
			return newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
				y := l[0].Forward(x)
				return autograd.Mul(autograd.Sigmoid(y), y)
			}, passConv2d(g, 4, 6))
		}, img, "Conv2d+SigmoidMul", false},
		{"Conv2d+HardTanh", func(g *autograd.Generator) *passNet {
			return newPassNet(passSeq, passConv2d(g, 4, 6), nn.NewHardTanh(-0.5, 0.25))
		}, img, "Conv2d+HardTanh", false},
		{"Conv2d+SiLU", func(g *autograd.Generator) *passNet { return newPassNet(passSeq, passConv2d(g, 4, 6), nn.NewSiLU()) }, img, "Conv2d+SiLU", false},
		{"Conv2d+ELU", func(g *autograd.Generator) *passNet { return newPassNet(passSeq, passConv2d(g, 4, 6), nn.NewELU(0.7)) }, img, "Conv2d+ELU", false},
		{"Conv3d+ReLU", func(g *autograd.Generator) *passNet { return newPassNet(passSeq, passConv3d(g, 4, 3), nn.NewReLU()) }, vol, "Conv3d+ReLU", false},
		{"Conv3d+Add", func(g *autograd.Generator) *passNet { return newPassNet(residual(nil), passConv3d(g, 4, 4)) }, vol, "Conv3d+Add", false},
		{"Conv3d+Add+ReLU", func(g *autograd.Generator) *passNet { return newPassNet(residual(autograd.ReLU), passConv3d(g, 4, 4)) }, vol, "Conv3d+Add+ReLU", false},
		{"Conv3d+SiLU", func(g *autograd.Generator) *passNet { return newPassNet(passSeq, passConv3d(g, 4, 3), nn.NewSiLU()) }, vol, "Conv3d+SiLU", false},
		{"Linear+ReLU", func(g *autograd.Generator) *passNet {
			return newPassNet(passSeq, nn.NewLinear(g, 8, 5, nn.LinearOptions{}), nn.NewReLU())
		}, []int{3, 8}, "Linear+ReLU", false},
		{"Linear+GELU", func(g *autograd.Generator) *passNet {
			return newPassNet(passSeq, nn.NewLinear(g, 8, 5, nn.LinearOptions{}), nn.NewGELU("none"))
		}, []int{2, 3, 8}, "Linear+GELU", false},
		// DLRM's last top layer.
		{"Linear+Sigmoid", func(g *autograd.Generator) *passNet {
			return newPassNet(passSeq, nn.NewLinear(g, 8, 1, nn.LinearOptions{}), nn.NewSigmoid())
		}, []int{3, 8}, "Linear+Sigmoid", false},
		{"Linear+Add", func(g *autograd.Generator) *passNet {
			return newPassNet(residual(nil), nn.NewLinear(g, 8, 8, nn.LinearOptions{}))
		}, []int{3, 8}, "Linear+Add", false},
		{"Add+LayerNorm", func(g *autograd.Generator) *passNet {
			return newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
				return l[0].Forward(autograd.Add(autograd.Tanh(x), x))
			}, nn.NewLayerNorm([]int{8}, nn.LayerNormOptions{}))
		}, []int{2, 3, 8}, "Add+LayerNorm", false},
		{"Div+Add+Softmax", func(g *autograd.Generator) *passNet {
			return maskedSoftmaxNet(autograd.Randn(g, 2, 4, 4))
		}, []int{2, 4, 4}, "Div+Add+Softmax", false},
		// A mask broadcast over the query dimension, as attention masks of
		// shape [B, 1, S] are.
		{"Div+Add+Softmax broadcast mask", func(g *autograd.Generator) *passNet {
			return maskedSoftmaxNet(autograd.Randn(g, 2, 1, 4))
		}, []int{2, 4, 4}, "Div+Add+Softmax", false},
		{"LinearConcat", func(g *autograd.Generator) *passNet {
			q := nn.NewLinear(g, 8, 6, nn.LinearOptions{})
			k := nn.NewLinear(g, 8, 6, nn.LinearOptions{})
			v := nn.NewLinear(g, 8, 4, nn.LinearOptions{})
			return newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
				qk := autograd.Mul(l[0].Forward(x), l[1].Forward(x))
				return autograd.Cat([]*autograd.Tensor{qk, l[2].Forward(x)}, -1)
			}, q, k, v)
		}, []int{2, 3, 8}, "LinearConcat", false},
		{"ChannelShuffle", func(g *autograd.Generator) *passNet {
			return newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
				y := l[0].Forward(x)
				y = autograd.View(y, 2, 3, 2, 6, 6)
				y = autograd.Transpose(y, 1, 2).Contiguous()
				return autograd.Flatten(y, 1, 2)
			}, passConv2d(g, 4, 6))
		}, img, "ChannelShuffle", false},
		// An Add both a Linear and a LayerNorm could take goes to the
		// LayerNorm.
		{"Linear then Add+LayerNorm", func(g *autograd.Generator) *passNet {
			return newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
				return l[1].Forward(autograd.Add(l[0].Forward(x), x))
			}, nn.NewLinear(g, 8, 8, nn.LinearOptions{}), nn.NewLayerNorm([]int{8}, nn.LayerNormOptions{}))
		}, []int{3, 8}, "Add+LayerNorm", false},
		{"Conv2d+ReLU/bf16", func(g *autograd.Generator) *passNet { return newPassNet(passSeq, passConv2d(g, 4, 6), nn.NewReLU()) }, img, "Conv2d+ReLU", true},
		{"Linear+GELU/bf16", func(g *autograd.Generator) *passNet {
			return newPassNet(passSeq, nn.NewLinear(g, 8, 5, nn.LinearOptions{}), nn.NewGELU("tanh"))
		}, []int{3, 8}, "Linear+GELU", true},
		// Autocast casts the input once per Linear; merging the casts makes
		// the three siblings again.
		{"LinearConcat/bf16", func(g *autograd.Generator) *passNet {
			return newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
				return autograd.Add(autograd.Add(l[0].Forward(x), l[1].Forward(x)), l[2].Forward(x))
			}, nn.NewLinear(g, 8, 6, nn.LinearOptions{}), nn.NewLinear(g, 8, 6, nn.LinearOptions{}), nn.NewLinear(g, 8, 6, nn.LinearOptions{}))
		}, []int{2, 8}, "LinearConcat", true},
		// Autocast casts BF16 activations to float32 before a LayerNorm
		// (or Softmax); the fused op takes that cast in.
		{"Add+LayerNorm/bf16", func(g *autograd.Generator) *passNet {
			return newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
				return l[3].Forward(l[2].Forward(autograd.Add(l[0].Forward(x), l[1].Forward(x))))
			}, nn.NewLinear(g, 8, 8, nn.LinearOptions{}), nn.NewLinear(g, 8, 8, nn.LinearOptions{}),
				nn.NewLayerNorm([]int{8}, nn.LayerNormOptions{}), nn.NewLinear(g, 8, 4, nn.LinearOptions{}))
		}, []int{3, 8}, "Add+LayerNorm", true},
		// Attention scores from a BF16 projection, scaled, masked and
		// softmaxed in float32 (autocast's cast taken in), with the mask
		// in either dtype: a float32 mask widens the scores before the
		// sum, as PyTorch's type promotion does.
		{"Div+Add+Softmax/bf16", func(g *autograd.Generator) *passNet {
			return attentionNet(g, autograd.Cast(autograd.Randn(g, 2, 3, 6), autograd.BFloat16))
		}, []int{2, 3, 8}, "Div+Add+Softmax", true},
		{"Div+Add+Softmax/bf16 float32 mask", func(g *autograd.Generator) *passNet {
			return attentionNet(g, autograd.Randn(g, 2, 3, 6))
		}, []int{2, 3, 8}, "Div+Add+Softmax", true},
		{"Div+Add+Softmax broadcast mask/bf16", func(g *autograd.Generator) *passNet {
			return attentionNet(g, autograd.Randn(g, 2, 1, 6))
		}, []int{2, 3, 8}, "Div+Add+Softmax", true},
		{"Div+Add+Softmax broadcast bf16 mask/bf16", func(g *autograd.Generator) *passNet {
			return attentionNet(g, autograd.Cast(autograd.Randn(g, 2, 1, 6), autograd.BFloat16))
		}, []int{2, 3, 8}, "Div+Add+Softmax", true},
		{"ChannelShuffle/bf16", func(g *autograd.Generator) *passNet {
			return newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
				y := autograd.View(l[0].Forward(x), 2, 3, 2, 6, 6)
				return autograd.Flatten(autograd.Transpose(y, 1, 2).Contiguous(), 1, 2)
			}, passConv2d(g, 4, 6))
		}, img, "ChannelShuffle", true},
	}
}

// maskedSoftmaxNet is softmax(x / 2.5 + mask), with x first projected by
// layers[0] and the result by layers[1] when given. The mask and scale are
// buffers, so they trace as named constants.
func maskedSoftmaxNet(mask *autograd.Tensor, layers ...nn.Layer) *passNet {
	scale := autograd.Scalar(2.5)
	m := newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
		if len(l) > 0 {
			x = l[0].Forward(x)
		}
		y := autograd.Softmax(autograd.Add(autograd.Div(x, scale), mask), -1)
		if len(l) > 1 {
			y = l[1].Forward(y)
		}
		return y
	}, layers...)
	m.RegisterBuffer("mask", mask)
	m.RegisterBuffer("scale", scale)
	return m
}

// attentionNet is maskedSoftmaxNet between two Linear layers: the scores
// come from a projection, so under autocast they are bfloat16.
func attentionNet(g *autograd.Generator, mask *autograd.Tensor) *passNet {
	return maskedSoftmaxNet(mask, nn.NewLinear(g, 8, 6, nn.LinearOptions{}), nn.NewLinear(g, 6, 4, nn.LinearOptions{}))
}

// passTrace traces m on x, under autocast for bf16, and returns the graph
// with the model's own output, computed the same way without gradients.
func passTrace(t *testing.T, m nn.Layer, x *autograd.Tensor, bf16 bool) (*Graph, *autograd.Tensor) {
	t.Helper()
	var g *Graph
	var want *autograd.Tensor
	var err error
	if bf16 {
		x = autograd.Autocast(x)
	}
	g, err = Trace(m, x)
	want = m.Forward(autograd.NoGrad(x))
	if err != nil {
		t.Fatal(err)
	}
	return g, want
}

// passRun compiles and runs g on x.
func passRun(t *testing.T, g *Graph, x *autograd.Tensor) *autograd.Tensor {
	t.Helper()
	p, err := Compile(g)
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, g)
	}
	out, err := p.Run(x)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, g)
	}
	for _, i := range p.last.eager {
		t.Errorf("node %d (%s) has no compiled form", i, g.Nodes[i].Op)
	}
	return out[0]
}

// hasFusedOp reports whether g holds a node made by a fusion pass.
func hasFusedOp(g *Graph) bool {
	for _, n := range g.Nodes {
		if strings.Contains(n.Op, FusedSep) || n.Op == "ChannelShuffle" || n.Op == "LinearConcat" {
			return true
		}
	}
	return false
}

// TestFusionPatterns runs every pattern as written and again traced under
// autocast, where the same fusions must happen on the BF16 graph (with
// type promotion's casts where a float32 tensor joins in).
func TestFusionPatterns(t *testing.T) {
	cases := fusionCases()
	written := map[string]bool{}
	for _, c := range cases {
		written[c.name] = true
	}
	for _, c := range cases {
		// Patterns with a case of their own under autocast (those with no
		// layer that autocast runs in BF16 need one) keep just that.
		if !c.bf16 && !written[c.name+"/bf16"] {
			c.name, c.bf16 = c.name+"/autocast", true
			cases = append(cases, c)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gen := autograd.NewGenerator(7)
			m := c.model(gen)
			x := autograd.Randn(gen, c.input...)
			traced, want := passTrace(t, m, x, c.bf16)
			tol := 1e-5
			if c.bf16 {
				tol = 1e-2
				if !strings.Contains(traced.String(), "bf16[") {
					t.Fatalf("the trace under autocast has no bfloat16 value:\n%s", traced)
				}
			}
			var outs []*autograd.Tensor
			for _, on := range []bool{true, false} {
				frozen, err := Freeze(traced, WithFusion(on))
				if err != nil {
					t.Fatal(err)
				}
				s := frozen.String()
				if fused := strings.Contains(s, " = "+c.op+"("); fused != on {
					t.Errorf("fusion %v: graph holds %s: %v\n%s", on, c.op, fused, s)
				}
				if !on && hasFusedOp(frozen) {
					t.Errorf("fusion off, yet the graph holds a fused op:\n%s", s)
				}
				got := passRun(t, frozen, x)
				if got.DType() != want.DType() {
					t.Errorf("fusion %v: output dtype %v, eager %v", on, got.DType(), want.DType())
				}
				golden.AssertClose(t, "frozen output", got, want, tol)
				outs = append(outs, got)
			}
			if !slices.Equal(outs[0].Values(), outs[1].Values()) {
				t.Errorf("fused and decomposed outputs differ")
			}
		})
	}
}

// TestFusionNeedsSoleReader leaves a chain unfused when its intermediate
// value has another reader or is a graph output.
func TestFusionNeedsSoleReader(t *testing.T) {
	cases := []struct {
		name string
		fwd  func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor
		outs int
	}{
		{"second reader", func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
			y := l[0].Forward(x)
			return autograd.Add(autograd.ReLU(y), autograd.Tanh(y))
		}, 1},
		{"graph output", func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor { return l[0].Forward(x) }, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gen := autograd.NewGenerator(3)
			m := newPassNet(c.fwd, passConv2d(gen, 2, 3))
			x := autograd.Randn(gen, 1, 2, 5, 5)
			traced, err := TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
				y := m.Forward(in[0])
				if c.outs == 2 {
					return []*autograd.Tensor{y, autograd.ReLU(y)}
				}
				return []*autograd.Tensor{y}
			}, x)
			if err != nil {
				t.Fatal(err)
			}
			frozen, err := Freeze(traced)
			if err != nil {
				t.Fatal(err)
			}
			if hasFusedOp(frozen) {
				t.Errorf("fused a chain whose intermediate is read elsewhere:\n%s", frozen)
			}
		})
	}
}

// TestChannelShuffleEager checks the ChannelShuffle op against the ops it
// stands for, bit for bit, in both memory formats.
func TestChannelShuffleEager(t *testing.T) {
	gen := autograd.NewGenerator(5)
	for _, f := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
		x := autograd.Randn(gen, 2, 6, 3, 4).To(f)
		var got, want *autograd.Tensor
		got = channelShuffle(x, 3)
		y := autograd.Permute(autograd.Reshape(x, 2, 3, 2, 3, 4), 0, 2, 1, 3, 4)
		want = autograd.Reshape(y.Contiguous(), 2, 6, 3, 4)
		if !slicesEqual(got.Float32s(), want.Float32s()) || got.Format() != want.Format() {
			t.Errorf("%v: ChannelShuffle differs from reshape, permute, reshape", f)
		}
	}
	if err := autograd.Try(func() { channelShuffle(autograd.Zeros(1, 5, 2, 2), 2) }); err == nil ||
		!strings.Contains(err.Error(), "5 channels") {
		t.Errorf("5 channels in 2 groups: got %v, want an error naming the channels", err)
	}
}

// TestFuseChannelShuffleWithTo fuses the shuffle written with an explicit
// contiguous copy between the permute and the reshape back.
func TestFuseChannelShuffleWithTo(t *testing.T) {
	g := &Graph{}
	x := g.AddValue(Value{Name: "input0", Shape: []int{1, 6, 2, 2}})
	g.Inputs = []int{x}
	v := x
	add := func(op string, shape []int, attr Attr) {
		out := g.AddValue(Value{Name: fmt.Sprintf("%%%d", len(g.Values)), Shape: shape})
		g.Nodes = append(g.Nodes, Node{Op: op, Inputs: []int{v}, Outputs: []int{out}, Attrs: []Attr{attr}})
		v = out
	}
	add("Reshape", []int{1, 2, 3, 2, 2}, IntsAttr("shape", []int{1, 2, 3, 2, 2}))
	add("Permute", []int{1, 3, 2, 2, 2}, IntsAttr("dims", []int{0, 2, 1, 3, 4}))
	add("To", []int{1, 3, 2, 2, 2}, StringAttr("format", "contiguous"))
	add("Reshape", []int{1, 6, 2, 2}, IntsAttr("shape", []int{1, 6, 2, 2}))
	g.Outputs = []int{v}
	in := autograd.Randn(autograd.NewGenerator(1), 1, 6, 2, 2)
	want := passRun(t, g, in)
	frozen, err := Freeze(g)
	if err != nil {
		t.Fatal(err)
	}
	if len(frozen.Nodes) != 1 || frozen.Nodes[0].Op != "ChannelShuffle" || frozen.Nodes[0].Int("groups") != 2 {
		t.Fatalf("want one ChannelShuffle of 2 groups:\n%s", frozen)
	}
	if got := passRun(t, frozen, in); !slicesEqual(got.Float32s(), want.Float32s()) {
		t.Errorf("ChannelShuffle differs from the passOps it replaced")
	}
}
