package graph

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// passRandomiseBNs gives every BatchNorm under m running statistics and an
// affine transform far from the identity, so folding them is visible.
func passRandomiseBNs(g *autograd.Generator, m nn.Module) {
	for _, nm := range nn.NamedModules(m) {
		bn, ok := nm.Module.(*nn.BatchNorm)
		if !ok {
			continue
		}
		for i := range bn.NumFeatures {
			bn.RunningMean().Float32s()[i] = float32(g.Normal(0, 1))
			bn.RunningVar().Float32s()[i] = float32(g.Uniform(0.25, 2))
			if w := bn.Weight(); w != nil {
				w.Float32s()[i] = float32(g.Normal(1, 0.3))
				bn.Bias().Float32s()[i] = float32(g.Normal(0, 0.5))
			}
		}
	}
}

// passOps lists the ops of g's nodes in order.
func passOps(g *Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.Op)
	}
	return out
}

// passConst returns g's constant called name, or nil.
func passConst(g *Graph, name string) *autograd.Tensor {
	for id, t := range g.Consts {
		if g.Values[id].Name == name {
			return t
		}
	}
	return nil
}

// passFreeze freezes g, failing the test on an error.
func passFreeze(t *testing.T, g *Graph) *Graph {
	t.Helper()
	f, err := Freeze(g)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFreezeFoldsBatchNorm folds each kind of layer-BatchNorm pair and
// checks the folded weights against nn.FoldBatchNorm's bit for bit, and
// the output against the unfolded model.
func TestFreezeFoldsBatchNorm(t *testing.T) {
	cases := []struct {
		name  string
		model func(g *autograd.Generator) *nn.Sequential
		input []int
		layer string // the folded layer's op
		bf16  bool   // traced under autocast
	}{
		{"Conv2d", func(g *autograd.Generator) *nn.Sequential {
			return nn.NewSequential(passConv2d(g, 3, 5), nn.NewBatchNorm2d(5, nn.BatchNormOptions{}))
		}, []int{2, 3, 6, 6}, "Conv2d", false},
		{"Conv2d without bias", func(g *autograd.Generator) *nn.Sequential {
			return nn.NewSequential(nn.NewConv2d(g, 4, 6, 3, nn.ConvOptions{Groups: 2, NoBias: true}), nn.NewBatchNorm2d(6, nn.BatchNormOptions{Eps: 1e-3}))
		}, []int{1, 4, 5, 5}, "Conv2d", false},
		{"Conv2d channels-last", func(g *autograd.Generator) *nn.Sequential {
			c := passConv2d(g, 3, 5)
			c.Weight().SetFormat(autograd.ChannelsLast)
			return nn.NewSequential(c, nn.NewBatchNorm2d(5, nn.BatchNormOptions{}))
		}, []int{1, 3, 4, 4}, "Conv2d", false},
		{"Conv2d BatchNorm without affine", func(g *autograd.Generator) *nn.Sequential {
			return nn.NewSequential(passConv2d(g, 3, 5), nn.NewBatchNorm2d(5, nn.BatchNormOptions{NoAffine: true}))
		}, []int{1, 3, 4, 4}, "Conv2d", false},
		{"Conv3d", func(g *autograd.Generator) *nn.Sequential {
			return nn.NewSequential(passConv3d(g, 2, 3), nn.NewBatchNorm3d(3, nn.BatchNormOptions{}))
		}, []int{1, 2, 3, 4, 4}, "Conv3d", false},
		{"Linear", func(g *autograd.Generator) *nn.Sequential {
			return nn.NewSequential(nn.NewLinear(g, 6, 4, nn.LinearOptions{}), nn.NewBatchNorm1d(4, nn.BatchNormOptions{}))
		}, []int{3, 6}, "Linear", false},
		{"Linear without bias", func(g *autograd.Generator) *nn.Sequential {
			return nn.NewSequential(nn.NewLinear(g, 6, 4, nn.LinearOptions{NoBias: true}), nn.NewBatchNorm1d(4, nn.BatchNormOptions{}))
		}, []int{3, 6}, "Linear", false},
		{"Conv2d under autocast", func(g *autograd.Generator) *nn.Sequential {
			return nn.NewSequential(passConv2d(g, 3, 5), nn.NewBatchNorm2d(5, nn.BatchNormOptions{}))
		}, []int{2, 3, 6, 6}, "Conv2d", true},
		{"Conv2d without bias under autocast", func(g *autograd.Generator) *nn.Sequential {
			return nn.NewSequential(nn.NewConv2d(g, 3, 5, 3, nn.ConvOptions{NoBias: true}), nn.NewBatchNorm2d(5, nn.BatchNormOptions{}))
		}, []int{2, 3, 6, 6}, "Conv2d", true},
		{"Linear under autocast", func(g *autograd.Generator) *nn.Sequential {
			return nn.NewSequential(nn.NewLinear(g, 6, 4, nn.LinearOptions{}), nn.NewBatchNorm1d(4, nn.BatchNormOptions{}))
		}, []int{3, 6}, "Linear", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			build := func() *nn.Sequential {
				gen := autograd.NewGenerator(11)
				m := c.model(gen)
				passRandomiseBNs(gen, m)
				return nn.Eval(m)
			}
			m, folded := build(), build()
			if n, err := nn.FoldBatchNorm(folded); n != 1 || err != nil {
				t.Fatalf("nn.FoldBatchNorm = %d, %v", n, err)
			}
			x := autograd.Randn(autograd.NewGenerator(2), c.input...)
			traced, want := passTrace(t, m, x, c.bf16)
			frozen := passFreeze(t, traced)
			layers := []string{c.layer}
			if c.bf16 {
				layers = []string{"Cast", c.layer} // the input's cast stays
			}
			if got := passOps(frozen); !slices.Equal(got, layers) {
				t.Errorf("frozen passOps %v, want %v\n%s", got, layers, frozen)
			}
			// Under autocast the folded float32 weights are cast once.
			for _, p := range nn.NamedParameters(folded) {
				want, ft := p.Tensor, passConst(frozen, p.Name)
				if c.bf16 {
					want = autograd.Cast(want, autograd.BFloat16)
					if ft == nil {
						ft = passConst(frozen, p.Name+".bfloat16")
					}
				}
				if ft == nil {
					t.Errorf("frozen graph has no constant %s:\n%s", p.Name, frozen)
					continue
				}
				if ft.Format() != want.Format() || ft.DType() != want.DType() || !slices.Equal(ft.Values(), want.Values()) {
					t.Errorf("%s differs from nn.FoldBatchNorm's", p.Name)
				}
			}
			got := passRun(t, frozen, x)
			if !c.bf16 {
				golden.AssertClose(t, "frozen output", got, want, 1e-5)
				return
			}
			// Eager BF16 rounds the layer's output before the BatchNorm
			// scales it, the frozen graph rounds the scaled weights: the
			// two differ by BF16 rounding of the output's magnitude, not
			// of each element's.
			golden.AssertWithin(t, "frozen output", got, want, 1e-2*passMaxAbs(want))
		})
	}
}

// TestFreezeKeepsUnfoldableBatchNorm leaves a BatchNorm whose input is
// also read elsewhere, or that follows no layer.
func TestFreezeKeepsUnfoldableBatchNorm(t *testing.T) {
	gen := autograd.NewGenerator(4)
	bn := nn.NewBatchNorm2d(3, nn.BatchNormOptions{})
	m := newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
		y := l[0].Forward(x)
		return autograd.Add(l[1].Forward(y), y)
	}, passConv2d(gen, 3, 3), bn)
	passRandomiseBNs(gen, m)
	x := autograd.Randn(gen, 1, 3, 4, 4)
	traced, want := passTrace(t, m, x, false)
	frozen := passFreeze(t, traced)
	if !slices.Contains(passOps(frozen), "BatchNorm") {
		t.Errorf("folded a BatchNorm whose input is also read by an Add:\n%s", frozen)
	}
	golden.AssertClose(t, "frozen output", passRun(t, frozen, x), want, 1e-5)
}

// TestFreezeResNet18 folds every BatchNorm of a ResNet-18 and fuses its
// convolutions with their ReLUs and residual sums.
func TestFreezeResNet18(t *testing.T) {
	gen := autograd.NewGenerator(8)
	m := nn.Eval(models.ResNet18(gen, models.ResNetOptions{NumClasses: 10}))
	passRandomiseBNs(gen, m)
	x := autograd.Randn(gen, 2, 3, 32, 32)
	traced, want := passTrace(t, m, x, false)
	frozen := passFreeze(t, traced)
	o := passOps(frozen)
	if slices.Contains(o, "BatchNorm") {
		t.Errorf("BatchNorm left after freezing:\n%s", frozen)
	}
	for _, fused := range []string{"Conv2d+ReLU", "Conv2d+Add+ReLU"} {
		if !slices.Contains(o, fused) {
			t.Errorf("no %s in the frozen ResNet-18:\n%s", fused, frozen)
		}
	}
	golden.AssertClose(t, "frozen ResNet-18", passRun(t, frozen, x), want, 1e-4)

	// Under autocast the BatchNorms fold into the float32 weights, which
	// are then cast once. Eager BF16 rounds each convolution's output
	// before its BatchNorm instead, so both are compared with float32:
	// within BF16 rounding of the logits' scale.
	traced, _ = passTrace(t, m, x, true)
	frozen = passFreeze(t, traced)
	if slices.Contains(passOps(frozen), "BatchNorm") {
		t.Errorf("BatchNorm left after freezing under autocast:\n%s", frozen)
	}
	got := passRun(t, frozen, x)
	if got.DType() != autograd.BFloat16 {
		t.Errorf("autocast graph gives %v, want bfloat16", got.DType())
	}
	golden.AssertWithin(t, "frozen BF16 ResNet-18", got, want, 3e-2*passMaxAbs(want))
}

// passMaxAbs returns the largest magnitude in t.
func passMaxAbs(t *autograd.Tensor) float64 {
	m := 0.0
	for _, v := range t.Values() {
		m = max(m, math.Abs(v))
	}
	return m
}

// TestFreezeFoldsConstArith folds an elementwise op by a scalar or
// per-channel constant into the convolution or linear layer before it.
func TestFreezeFoldsConstArith(t *testing.T) {
	type op func(y, k *autograd.Tensor) *autograd.Tensor
	cases := []struct {
		name   string
		linear bool
		k      []int // shape of the constant; nil for a scalar op
		f      op
		folded bool
	}{
		{"Mul scalar", false, []int{}, autograd.Mul, true},
		{"Mul constant first", false, []int{1}, func(y, k *autograd.Tensor) *autograd.Tensor { return autograd.Mul(k, y) }, true},
		{"Add [C,1,1]", false, []int{4, 1, 1}, autograd.Add, true},
		{"Sub [1,C,1,1]", false, []int{1, 4, 1, 1}, autograd.Sub, true},
		{"Div [C,1,1]", false, []int{4, 1, 1}, autograd.Div, true},
		{"MulScalar", false, nil, func(y, _ *autograd.Tensor) *autograd.Tensor { return autograd.MulScalar(y, -1.5) }, true},
		{"AddScalar", false, nil, func(y, _ *autograd.Tensor) *autograd.Tensor { return autograd.AddScalar(y, 0.75) }, true},
		{"Linear Mul [C]", true, []int{4}, autograd.Mul, true},
		{"Linear Add [1,C]", true, []int{1, 4}, autograd.Add, true},
		{"Sub constant first", false, []int{4, 1, 1}, func(y, k *autograd.Tensor) *autograd.Tensor { return autograd.Sub(k, y) }, false},
		{"Mul per pixel", false, []int{1, 1, 5, 5}, autograd.Mul, false},
		{"Mul growing the rank", false, []int{1, 1, 1, 1, 1}, autograd.Mul, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gen := autograd.NewGenerator(6)
			var layer nn.Layer = nn.NewConv2d(gen, 3, 4, 3, nn.ConvOptions{Padding: 1, NoBias: true})
			input := []int{2, 3, 5, 5}
			if c.linear {
				layer, input = nn.NewLinear(gen, 3, 4, nn.LinearOptions{}), []int{2, 3}
			}
			var k *autograd.Tensor
			if c.k != nil {
				k = autograd.AddScalar(autograd.Rand(gen, c.k...), 0.5) // away from 0: Div
			}
			m := newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor { return c.f(l[0].Forward(x), k) }, layer)
			if k != nil {
				m.RegisterBuffer("k", k)
			}
			x := autograd.Randn(gen, input...)
			traced, want := passTrace(t, m, x, false)
			frozen := passFreeze(t, traced)
			if folded := len(frozen.Nodes) == 1; folded != c.folded {
				t.Errorf("folded %v, want %v:\n%s", folded, c.folded, frozen)
			}
			golden.AssertClose(t, "frozen output", passRun(t, frozen, x), want, 1e-5)
		})
	}
}

// TestFreezeFoldsRepeatedly folds a multiply, the BatchNorm after it and
// an add after that into one convolution.
func TestFreezeFoldsRepeatedly(t *testing.T) {
	gen := autograd.NewGenerator(14)
	m := newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
		y := autograd.MulScalar(l[0].Forward(x), 0.5)
		return autograd.AddScalar(l[1].Forward(y), -1)
	}, passConv2d(gen, 3, 4), nn.NewBatchNorm2d(4, nn.BatchNormOptions{}))
	passRandomiseBNs(gen, m)
	x := autograd.Randn(gen, 1, 3, 5, 5)
	traced, want := passTrace(t, m, x, false)
	frozen := passFreeze(t, traced)
	if got := passOps(frozen); !slices.Equal(got, []string{"Conv2d"}) {
		t.Errorf("frozen ops %v, want [Conv2d]\n%s", got, frozen)
	}
	golden.AssertClose(t, "frozen output", passRun(t, frozen, x), want, 1e-5)
}

// TestFreezeRemovesIdentities drops Dropout, Identity and Clone, also
// where one gives the graph's output. The graph is built by hand: traced
// models reach these nodes the same way.
func TestFreezeRemovesIdentities(t *testing.T) {
	gen := autograd.NewGenerator(9)
	g := &Graph{}
	x := g.AddValue(Value{Name: "input0", Shape: []int{3, 5}})
	g.Inputs = []int{x}
	w, b := g.AddConst("fc.weight", autograd.Randn(gen, 4, 5)), g.AddConst("fc.bias", autograd.Randn(gen, 4))
	v := x
	add := func(op string, ins ...int) {
		out := g.AddValue(Value{Name: fmt.Sprintf("%%%d", len(g.Values)), Shape: []int{3, 4}})
		g.Nodes = append(g.Nodes, Node{Op: op, Inputs: ins, Outputs: []int{out}})
		v = out
	}
	add("Linear", x, w, b)
	add("Dropout", v)
	g.Nodes[len(g.Nodes)-1].Attrs = []Attr{FloatAttr("p", 0.5)}
	add("Clone", v)
	add("Identity", v)
	add("Tanh", v)
	add("Dropout", v)
	g.Outputs = []int{v}
	in := autograd.Randn(gen, 3, 5)
	want := passRun(t, g, in)
	frozen := passFreeze(t, g)
	if got := passOps(frozen); !slices.Equal(got, []string{"Linear", "Tanh"}) {
		t.Errorf("frozen passOps %v, want [Linear Tanh]\n%s", got, frozen)
	}
	golden.AssertClose(t, "frozen output", passRun(t, frozen, in), want, 0)
}

// TestFreezePropagatesConstants evaluates the ops on parameters alone
// once, and merges repeated computations.
func TestFreezePropagatesConstants(t *testing.T) {
	gen := autograd.NewGenerator(10)
	b := autograd.Randn(gen, 4)
	m := newPassNet(func(_ []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
		k := autograd.MulScalar(autograd.Exp(b), 2)
		y := autograd.Add(autograd.Mul(autograd.Tanh(x), autograd.Tanh(x)), k)
		// A reshape of a parameter shares its memory: the frozen graph
		// must hold a copy.
		return autograd.Sub(y, autograd.Reshape(b, 1, 4))
	})
	m.RegisterBuffer("b", b)
	x := autograd.Randn(gen, 3, 4)
	traced, want := passTrace(t, m, x, false)
	frozen := passFreeze(t, traced)
	if got := passOps(frozen); !slices.Equal(got, []string{"Tanh", "Mul", "Add", "Sub"}) {
		t.Errorf("frozen passOps %v, want [Tanh Mul Add Sub]\n%s", got, frozen)
	}
	k := passConst(frozen, "b.exp.mulscalar")
	if k == nil {
		t.Fatalf("no constant b.exp.mulscalar:\n%s", frozen)
	}
	var wantK *autograd.Tensor
	wantK = autograd.MulScalar(autograd.Exp(autograd.NoGrad(b)), 2)
	if !slicesEqual(k.Float32s(), wantK.Float32s()) {
		t.Errorf("propagated constant %v, want %v", k, wantK)
	}
	golden.AssertClose(t, "frozen output", passRun(t, frozen, x), want, 0)
	b.Float32s()[0] = 1e6
	golden.AssertClose(t, "frozen output after changing the buffer", passRun(t, frozen, x), want, 0)
}

// TestFreezeEliminatesDeadCode drops a branch whose result no output
// reads, with the constants only it read.
func TestFreezeEliminatesDeadCode(t *testing.T) {
	gen := autograd.NewGenerator(12)
	m := newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
		_ = autograd.ReLU(l[1].Forward(x)) // computed, never used
		return l[0].Forward(x)
	}, nn.NewLinear(gen, 4, 3, nn.LinearOptions{}), nn.NewLinear(gen, 4, 2, nn.LinearOptions{}))
	x := autograd.Randn(gen, 2, 4)
	traced, want := passTrace(t, m, x, false)
	if len(traced.Nodes) != 3 {
		t.Fatalf("trace has %d nodes, want 3:\n%s", len(traced.Nodes), traced)
	}
	frozen := passFreeze(t, traced)
	if got := passOps(frozen); !slices.Equal(got, []string{"Linear"}) {
		t.Errorf("frozen passOps %v, want [Linear]\n%s", got, frozen)
	}
	if passConst(frozen, "l1.weight") != nil || len(frozen.Consts) != 2 {
		t.Errorf("dead branch's constants kept:\n%s", frozen)
	}
	golden.AssertClose(t, "frozen output", passRun(t, frozen, x), want, 0)
}

// TestFreezeLeavesInputUnchanged checks that Freeze changes neither the
// traced graph nor the model, and that the frozen graph owns its data.
func TestFreezeLeavesInputUnchanged(t *testing.T) {
	gen := autograd.NewGenerator(13)
	m := nn.Eval(nn.NewSequential(passConv2d(gen, 3, 4), nn.NewBatchNorm2d(4, nn.BatchNormOptions{}), nn.NewReLU()))
	passRandomiseBNs(gen, m)
	x := autograd.Randn(gen, 1, 3, 5, 5)
	traced, want := passTrace(t, m, x, false)
	before := traced.String()
	data := map[int][]float32{}
	for id, c := range traced.Consts {
		if c.DType() == autograd.Float32 {
			data[id] = slices.Clone(c.Float32s())
		}
	}
	frozen := passFreeze(t, traced)
	if after := traced.String(); after != before {
		t.Errorf("Freeze changed its input graph:\nbefore %s\nafter %s", before, after)
	}
	for id, d := range data {
		if !slicesEqual(traced.Consts[id].Float32s(), d) {
			t.Errorf("Freeze changed the data of %s", traced.Values[id].Name)
		}
	}
	// The model's parameters change; the frozen graph must not.
	for _, p := range nn.NamedParameters(m) {
		p.Tensor.CopyFrom(autograd.ZerosLike(p.Tensor))
	}
	golden.AssertClose(t, "frozen output after zeroing the model", passRun(t, frozen, x), want, 1e-5)
}

// TestFreezeErrors reports a malformed graph, a node that does not fit its
// op and a constant op that fails.
func TestFreezeErrors(t *testing.T) {
	bad := &Graph{Values: []Value{{Name: "x", Shape: []int{2}}}, Outputs: []int{0}}
	// constGraph is one node of op reading the constant c reads times.
	constGraph := func(op string, c *autograd.Tensor, reads int, attrs ...Attr) *Graph {
		g := &Graph{}
		in := g.AddConst("k", c)
		out := g.AddValue(Value{Name: "%1"})
		g.Nodes = []Node{{Op: op, Inputs: slices.Repeat([]int{in}, reads), Outputs: []int{out}, Attrs: attrs}}
		g.Outputs = []int{out}
		return g
	}
	for _, c := range []struct {
		name string
		g    *Graph
		want string
	}{
		{"undefined output", bad, "never defined"},
		{"misfit node", constGraph("Reshape", autograd.Zeros(2), 1, IntsAttr("shape", []int{3})), `node 0 "Reshape": autograd: Reshape: shape [3] is invalid`},
		// Shapes fit, dtypes do not: only the op itself says so.
		{"failing constant op", constGraph("Matmul", autograd.Cast(autograd.Zeros(2, 2), autograd.Int32), 2), "evaluating constant node 0 (Matmul)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Freeze(c.g)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
