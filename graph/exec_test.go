package graph

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// sameBits reports whether a and b have one dtype, shape and format and
// identical memory.
func sameBits(a, b *autograd.Tensor) bool {
	if a.DType() != b.DType() || a.Format() != b.Format() || !slices.Equal(a.Shape(), b.Shape()) {
		return false
	}
	switch ad := a.Data().(type) {
	case []float32:
		bd := b.Data().([]float32)
		for i := range ad {
			if ad[i] != bd[i] && !(ad[i] != ad[i] && bd[i] != bd[i]) {
				return false
			}
		}
		return true
	case []uint16:
		return slices.Equal(ad, b.Data().([]uint16))
	}
	// The integer dtypes have one representation per value.
	return reflect.DeepEqual(a.Data(), b.Data())
}

// checkCompiled runs p on inputs and compares every output with the
// eager reference, bit for bit, and reports the plan that ran.
func checkCompiled(t *testing.T, p *Program, inputs ...*autograd.Tensor) *plan {
	t.Helper()
	want, err := p.runEager(inputs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(inputs...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d outputs, want %d", len(got), len(want))
	}
	for i := range got {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("output %d: compiled %v %v %v differs from eager %v %v %v", i,
				got[i].DType(), got[i].Shape(), got[i].Format(), want[i].DType(), want[i].Shape(), want[i].Format())
		}
	}
	return p.last
}

// freezeAndCompile traces m on x, freezes the trace and compiles it.
func freezeAndCompile(t *testing.T, m nn.Layer, x *autograd.Tensor) (*Program, *Graph) {
	t.Helper()
	traced, err := Trace(m, x)
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := Freeze(traced)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(frozen)
	if err != nil {
		t.Fatal(err)
	}
	return p, frozen
}

func traceResNet18(t *testing.T, batch int) (*Program, *autograd.Generator) {
	t.Helper()
	g := autograd.NewGenerator(3)
	m := nn.Eval(models.ResNet18(g, models.ResNetOptions{NumClasses: 10}))
	gr, err := Trace(m, autograd.Randn(g, batch, 3, 32, 32))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	return p, g
}

func TestCompiledResNet18(t *testing.T) {
	p, g := traceResNet18(t, 2)
	for _, tc := range []struct {
		name   string
		format autograd.MemoryFormat
	}{
		{"contiguous", autograd.Contiguous},
		{"channels-last", autograd.ChannelsLast},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := autograd.Randn(g, 2, 3, 32, 32).To(tc.format)
			pl := checkCompiled(t, p, x)
			if len(pl.eager) > 0 {
				t.Errorf("nodes run eagerly: %v", pl.eager)
			}
			values := len(p.g.Values) - len(p.g.Consts)
			if pl.buffers*4 > values {
				t.Errorf("%d values share %d buffers; want reuse to cut that to under a quarter", values, pl.buffers)
			}
			// A second run on new data of the same type reuses the plan.
			checkCompiled(t, p, autograd.Randn(g, 2, 3, 32, 32).To(tc.format))
			if p.last != pl {
				t.Errorf("second run at the same shape planned again")
			}
		})
	}
}

func TestCompiledResNet18BF16(t *testing.T) {
	g := autograd.NewGenerator(4)
	m := nn.Eval(models.ResNet18(g, models.ResNetOptions{NumClasses: 10}))
	x := autograd.Randn(g, 1, 3, 32, 32).To(autograd.ChannelsLast)
	var gr *Graph
	var err error
	gr, err = Trace(m, autograd.Autocast(x))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	pl := checkCompiled(t, p, x)
	if len(pl.eager) > 0 {
		for _, i := range pl.eager {
			t.Errorf("node %d (%s) runs eagerly", i, p.g.Nodes[i].Op)
		}
	}
	if pl.outs[0].DType() != autograd.BFloat16 && !strings.Contains(gr.String(), "bf16") {
		t.Errorf("autocast trace has no bfloat16 values:\n%s", gr)
	}
}

// mlp is a transformer-ish block: Linear, GELU, LayerNorm, Linear,
// residual sum, Softmax.
type mlp struct {
	nn.Base
	fc1, fc2 *nn.Linear
	lnW, lnB *autograd.Tensor
}

func (m *mlp) Forward(x *autograd.Tensor) *autograd.Tensor {
	h := autograd.GELU(m.fc1.Forward(x), "tanh")
	h = autograd.LayerNorm(h, []int{m.lnW.Dim(0)}, m.lnW, m.lnB, 1e-5)
	return autograd.Softmax(autograd.Add(m.fc2.Forward(h), x), -1)
}

func TestCompiledMLP(t *testing.T) {
	g := autograd.NewGenerator(5)
	m := &mlp{fc1: nn.NewLinear(g, 8, 16, nn.LinearOptions{}), fc2: nn.NewLinear(g, 16, 8, nn.LinearOptions{})}
	m.RegisterModule("fc1", m.fc1)
	m.RegisterModule("fc2", m.fc2)
	m.lnW = m.RegisterParameter("ln.weight", autograd.Randn(g, 16))
	m.lnB = m.RegisterParameter("ln.bias", autograd.Randn(g, 16))
	gr, err := Trace(m, autograd.Randn(g, 3, 8))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{3, 5, 3} {
		pl := checkCompiled(t, p, autograd.Randn(g, batch, 8))
		if len(pl.eager) > 0 {
			t.Errorf("batch %d: nodes run eagerly: %v", batch, pl.eager)
		}
	}
	if len(p.plans) != 2 {
		t.Errorf("%d plans for two batch sizes", len(p.plans))
	}
}

// fusedGraph builds a graph of one fused node reading input0 (and
// input1, when extra is set) and constants.
func fusedGraph(op string, x, extra *autograd.Tensor, consts []*autograd.Tensor, attrs ...Attr) *Graph {
	g := &Graph{}
	in := g.AddValue(Value{Name: "input0", Shape: x.Shape(), DType: x.DType(), Format: x.Format()})
	g.Inputs = []int{in}
	n := Node{Op: op, Inputs: []int{in}, Attrs: attrs}
	for i, c := range consts {
		n.Inputs = append(n.Inputs, g.AddConst("c"+string(rune('0'+i)), c))
	}
	if extra != nil {
		e := g.AddValue(Value{Name: "input1", Shape: extra.Shape(), DType: extra.DType(), Format: extra.Format()})
		g.Inputs = append(g.Inputs, e)
		n.Inputs = append(n.Inputs, e)
	}
	out := g.AddValue(Value{Name: "%out"})
	n.Outputs = []int{out}
	g.Nodes = []Node{n}
	g.Outputs = []int{out}
	return g
}

func TestCompiledFused(t *testing.T) {
	g := autograd.NewGenerator(6)
	convAttrs := []Attr{IntsAttr("stride", []int{1, 1}), IntsAttr("padding", []int{1, 1}),
		IntsAttr("dilation", []int{1, 1}), IntAttr("groups", 1)}
	x := autograd.Randn(g, 2, 3, 8, 8)
	w, b := autograd.Randn(g, 4, 3, 3, 3), autograd.Randn(g, 4)
	r := autograd.Randn(g, 2, 4, 8, 8)
	bf := func(x *autograd.Tensor) *autograd.Tensor { return autograd.Cast(x, autograd.BFloat16) }
	for _, tc := range []struct {
		name   string
		graph  *Graph
		inputs []*autograd.Tensor
	}{
		{"Conv2d+Add+ReLU", fusedGraph("Conv2d+Add+ReLU", x, r, []*autograd.Tensor{w, b}, convAttrs...),
			[]*autograd.Tensor{x, r}},
		{"Conv2d+Add+ReLU channels-last", fusedGraph("Conv2d+Add+ReLU", x, r, []*autograd.Tensor{w, b}, convAttrs...),
			[]*autograd.Tensor{x.To(autograd.ChannelsLast), r.To(autograd.ChannelsLast)}},
		{"Conv2d+SigmoidMul", fusedGraph("Conv2d+SigmoidMul", x, nil, []*autograd.Tensor{w, b}, convAttrs...),
			[]*autograd.Tensor{x.To(autograd.ChannelsLast)}},
		{"Conv2d+Add+ReLU bf16", fusedGraph("Conv2d+Add+ReLU", bf(x), bf(r), []*autograd.Tensor{bf(w), bf(b)}, convAttrs...),
			[]*autograd.Tensor{bf(x).To(autograd.ChannelsLast), bf(r).To(autograd.ChannelsLast)}},
		{"Conv2d+SigmoidMul bf16", fusedGraph("Conv2d+SigmoidMul", bf(x), nil, []*autograd.Tensor{bf(w), bf(b)}, convAttrs...),
			[]*autograd.Tensor{bf(x)}},
		{"Linear+ReLU+Add", fusedGraph("Linear+ReLU+Add", autograd.Randn(g, 5, 6), autograd.Randn(g, 5, 7),
			[]*autograd.Tensor{autograd.Randn(g, 7, 6), autograd.Randn(g, 7)}),
			[]*autograd.Tensor{autograd.Randn(g, 5, 6), autograd.Randn(g, 5, 7)}},
		{"Conv2d+HardTanh", fusedGraph("Conv2d+HardTanh", x, nil, []*autograd.Tensor{w, b},
			append(convAttrs, FloatAttr("HardTanh.min_val", -0.5), FloatAttr("HardTanh.max_val", 0.5))...),
			[]*autograd.Tensor{x}},
		{"Linear+GELU", fusedGraph("Linear+GELU", autograd.Randn(g, 5, 6), nil,
			[]*autograd.Tensor{autograd.Randn(g, 7, 6), autograd.Randn(g, 7)}, StringAttr("GELU.approximate", "none")),
			[]*autograd.Tensor{autograd.Randn(g, 5, 6)}},
		{"Linear+Sigmoid", fusedGraph("Linear+Sigmoid", autograd.Randn(g, 5, 6), nil,
			[]*autograd.Tensor{autograd.Randn(g, 1, 6), autograd.Randn(g, 1)}),
			[]*autograd.Tensor{autograd.Randn(g, 5, 6)}},
		{"Add+LayerNorm", fusedGraph("Add+LayerNorm", autograd.Randn(g, 4, 6), autograd.Randn(g, 6),
			nil, IntsAttr("LayerNorm.normalized_shape", []int{6}), FloatAttr("LayerNorm.eps", 1e-5)),
			[]*autograd.Tensor{autograd.Randn(g, 4, 6), autograd.Randn(g, 6)}},
		// The BF16 form autocast gives: a bfloat16 sum, widened for the
		// float32 LayerNorm.
		{"Add+LayerNorm/bf16", fusedGraph("Add+LayerNorm", bf(autograd.Randn(g, 4, 6)), bf(autograd.Randn(g, 4, 6)),
			nil, IntsAttr("LayerNorm.normalized_shape", []int{6}), FloatAttr("LayerNorm.eps", 1e-5)),
			[]*autograd.Tensor{bf(autograd.Randn(g, 4, 6)), bf(autograd.Randn(g, 4, 6))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "Add+LayerNorm") {
				// LayerNorm's weight and bias follow the Add's operand.
				gr := tc.graph
				n := &gr.Nodes[0]
				n.Inputs = append(n.Inputs, gr.AddConst("ln.weight", autograd.Randn(g, 6)), gr.AddConst("ln.bias", autograd.Randn(g, 6)))
			}
			p, err := Compile(tc.graph)
			if err != nil {
				t.Fatal(err)
			}
			pl := checkCompiled(t, p, tc.inputs...)
			if len(pl.eager) > 0 {
				t.Errorf("the fused node runs eagerly")
			}
		})
	}
}

func TestCompiledDivAddSoftmax(t *testing.T) {
	g := autograd.NewGenerator(7)
	s := autograd.Randn(g, 2, 3, 4, 4)
	scale := autograd.Full(2, 1)
	mask := autograd.Randn(g, 2, 1, 1, 4)
	gr := &Graph{}
	in := gr.AddValue(Value{Name: "input0", Shape: s.Shape(), DType: s.DType()})
	gr.Inputs = []int{in}
	out := gr.AddValue(Value{Name: "%out"})
	gr.Nodes = []Node{{Op: "Div+Add+Softmax", Inputs: []int{in, gr.AddConst("scale", scale), gr.AddConst("mask", mask)},
		Outputs: []int{out}, Attrs: []Attr{IntAttr("Softmax.dim", 3)}}}
	gr.Outputs = []int{out}
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	if pl := checkCompiled(t, p, s); len(pl.eager) > 0 {
		t.Errorf("the fused node runs eagerly")
	}
}

// bare is a module with no parameters, for tracing plain functions.
type bare struct{ nn.Base }

// TestCompiledOps traces small functions of the ops the compiled forms
// cover, in the layouts and dtypes they take, and checks every node
// compiles and matches eager mode.
func TestCompiledOps(t *testing.T) {
	g := autograd.NewGenerator(8)
	cl := func(x *autograd.Tensor) *autograd.Tensor { return x.To(autograd.ChannelsLast) }
	bf := func(x *autograd.Tensor) *autograd.Tensor { return autograd.Cast(x, autograd.BFloat16) }
	f32 := func(x *autograd.Tensor) *autograd.Tensor { return autograd.Cast(x, autograd.Float32) }
	pool := autograd.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}}
	one := func(f func(x *autograd.Tensor) *autograd.Tensor) func(in []*autograd.Tensor) []*autograd.Tensor {
		return func(in []*autograd.Tensor) []*autograd.Tensor { return []*autograd.Tensor{f(in[0])} }
	}
	x4 := autograd.Randn(g, 2, 3, 6, 5)
	for _, tc := range []struct {
		name    string
		forward func(in []*autograd.Tensor) []*autograd.Tensor
		inputs  []*autograd.Tensor
	}{
		{"activations", one(func(x *autograd.Tensor) *autograd.Tensor {
			y := autograd.SiLU(autograd.Tanh(autograd.ELU(x, 0.7)))
			y = autograd.HardTanh(autograd.MulScalar(autograd.AddScalar(y, 0.25), 1.5), -0.9, 0.8)
			return autograd.Sqrt(autograd.Exp(autograd.Pow(autograd.Neg(y), 2)))
		}), []*autograd.Tensor{x4}},
		{"clamp", one(func(x *autograd.Tensor) *autograd.Tensor {
			return autograd.Clamp(autograd.Clamp(x, -0.5, 0.75), 0.6, 0.1) // crossed: all 0.1
		}), []*autograd.Tensor{cl(x4)}},
		{"clamp bf16", one(func(x *autograd.Tensor) *autograd.Tensor {
			return autograd.Clamp(bf(x), 0.3009, 0.7) // bounds rounded to bfloat16
		}), []*autograd.Tensor{x4}},
		{"activations bf16", one(func(x *autograd.Tensor) *autograd.Tensor {
			y := autograd.GELU(autograd.Sigmoid(bf(x)), "none")
			return autograd.AddScalar(autograd.ReLU(autograd.MulScalar(y, 3)), -1)
		}), []*autograd.Tensor{cl(x4)}},
		{"binary broadcast", func(in []*autograd.Tensor) []*autograd.Tensor {
			x, b, s := in[0], in[1], in[2]
			y := autograd.Div(autograd.Sub(autograd.Mul(autograd.Add(x, b), x), s), autograd.AddScalar(b, 3))
			return []*autograd.Tensor{y, autograd.Sub(s, x)}
		}, []*autograd.Tensor{cl(x4), autograd.Randn(g, 3, 1, 1), autograd.Randn(g, 1)}},
		{"binary bf16", func(in []*autograd.Tensor) []*autograd.Tensor {
			a, b := bf(in[0]), bf(in[1])
			return []*autograd.Tensor{f32(autograd.Div(autograd.Mul(autograd.Sub(autograd.Add(a, b), b), a), b))}
		}, []*autograd.Tensor{x4, autograd.Randn(g, 2, 3, 6, 5)}},
		{"pooling", one(func(x *autograd.Tensor) *autograd.Tensor {
			y := autograd.MaxPool2d(x, pool)
			pool.CountIncludePad = true
			y = autograd.AvgPool2d(y, pool)
			return autograd.AdaptiveAvgPool2d(y, 2, 1)
		}), []*autograd.Tensor{x4}},
		{"pooling channels-last bf16", one(func(x *autograd.Tensor) *autograd.Tensor {
			y := autograd.MaxPool2d(bf(x), pool)
			return autograd.AdaptiveAvgPool2d(autograd.AvgPool2d(y, pool), 1, 1)
		}), []*autograd.Tensor{cl(x4)}},
		{"shapes", func(in []*autograd.Tensor) []*autograd.Tensor {
			x := in[0]
			p := autograd.Permute(x, 0, 2, 3, 1)
			c := autograd.Cat([]*autograd.Tensor{x, autograd.ReLU(x)}, 1)
			parts := autograd.SplitSizes(c, []int{2, 4}, 1)
			r := autograd.Reshape(parts[1], 2, -1)
			return []*autograd.Tensor{p, r, autograd.Reshape(parts[0], 4, -1), x.Contiguous()}
		}, []*autograd.Tensor{cl(x4)}},
		{"softmax and layer norm", one(func(x *autograd.Tensor) *autograd.Tensor {
			y := autograd.LogSoftmax(x, 1)
			y = autograd.LayerNorm(autograd.Softmax(cl(y), 2), []int{6, 5}, nil, nil, 1e-5)
			return autograd.Softmax(bf(y), -1)
		}), []*autograd.Tensor{x4}},
		{"convolutions", func(in []*autograd.Tensor) []*autograd.Tensor {
			x, w, b := in[0], in[1], in[2]
			y := autograd.Conv2d(x, w, b, autograd.ConvOptions{Stride: []int{2}, Padding: []int{1}, Groups: 2})
			x3, w3 := in[3], in[4]
			z := autograd.Conv3d(x3, w3, nil, autograd.ConvOptions{Padding: []int{1, 0, 1}})
			return []*autograd.Tensor{y, z, autograd.Conv2d(bf(x), bf(w), bf(b), autograd.ConvOptions{Groups: 2})}
		}, []*autograd.Tensor{autograd.Randn(g, 2, 4, 6, 5), autograd.Randn(g, 6, 2, 3, 3), autograd.Randn(g, 6),
			autograd.Randn(g, 1, 2, 4, 5, 6).To(autograd.ChannelsLast3d), autograd.Randn(g, 3, 2, 2, 2, 2).To(autograd.ChannelsLast3d)}},
		{"matmul", func(in []*autograd.Tensor) []*autograd.Tensor {
			a, b := in[0], in[1]
			return []*autograd.Tensor{autograd.Matmul(a, b), autograd.BMM(a, autograd.Permute(a, 0, 2, 1)),
				autograd.Matmul(bf(a), bf(autograd.ReLU(b)))}
		}, []*autograd.Tensor{autograd.Randn(g, 3, 4, 5), autograd.Randn(g, 5, 6)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gr, err := TraceFunc(&bare{}, tc.forward, tc.inputs...)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(gr)
			if err != nil {
				t.Fatal(err)
			}
			pl := checkCompiled(t, p, tc.inputs...)
			for _, i := range pl.eager {
				t.Errorf("node %d (%s) runs eagerly", i, gr.Nodes[i].Op)
			}
			checkCompiled(t, p, tc.inputs...)
		})
	}
}

func TestRunErrors(t *testing.T) {
	p, g := traceResNet18(t, 1)
	for _, tc := range []struct {
		name   string
		inputs []*autograd.Tensor
		want   string
	}{
		{"count", nil, "got 0 inputs, the graph takes 1"},
		{"nil", []*autograd.Tensor{nil}, "is nil"},
		{"dtype", []*autograd.Tensor{autograd.Cast(autograd.Randn(g, 1, 3, 32, 32), autograd.BFloat16)}, "has dtype bfloat16, the graph takes float32"},
		{"rank", []*autograd.Tensor{autograd.Randn(g, 3, 32, 32)}, "the graph takes a 4-D tensor"},
		{"channels", []*autograd.Tensor{autograd.Randn(g, 1, 4, 32, 32)}, "Conv2d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Run(tc.inputs...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestReplan runs ResNet-18 at a new image size (its traced flatten fixes
// the batch size, not the image size) and at the first size again.
func TestReplan(t *testing.T) {
	p, g := traceResNet18(t, 1)
	checkCompiled(t, p, autograd.Randn(g, 1, 3, 32, 32))
	first := p.last
	checkCompiled(t, p, autograd.Randn(g, 1, 3, 40, 48))
	if p.last == first || len(p.plans) != 2 {
		t.Fatalf("40×48 images did not get a plan of their own (%d plans)", len(p.plans))
	}
	checkCompiled(t, p, autograd.Randn(g, 1, 3, 32, 32))
	if p.last != first || len(p.plans) != 2 {
		t.Fatalf("32×32 images again were planned again (%d plans)", len(p.plans))
	}
}

// TestReplanSizeThatMatters: a stride-2 pool gives 8 and 9 rows the same
// result size, so the plan of 8 takes 9 rows; 10 give another result size
// and a plan of their own.
func TestReplanSizeThatMatters(t *testing.T) {
	gen := autograd.NewGenerator(2)
	pool := autograd.PoolOptions{Kernel: []int{2}, Stride: []int{2}}
	g, err := TraceFunc(&bare{}, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{autograd.MaxPool2d(in[0], pool)}
	}, autograd.Randn(gen, 1, 2, 8, 6))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ rows, plans int }{{8, 1}, {9, 1}, {10, 2}, {9, 2}, {8, 2}} {
		checkCompiled(t, p, autograd.Randn(gen, 1, 2, c.rows, 6))
		if len(p.plans) != c.plans {
			t.Errorf("after %d rows: %d plans, want %d", c.rows, len(p.plans), c.plans)
		}
	}
}

func TestRunAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	if strings.HasPrefix(kernels.Features(), "generic") {
		t.Skip("the generic reference kernels (noasm builds, CPUs without AVX2) allocate per call")
	}
	resnet, g := traceResNet18(t, 1)
	m := &mlp{fc1: nn.NewLinear(g, 64, 256, nn.LinearOptions{}), fc2: nn.NewLinear(g, 256, 64, nn.LinearOptions{})}
	m.RegisterModule("fc1", m.fc1)
	m.RegisterModule("fc2", m.fc2)
	m.lnW = m.RegisterParameter("ln.weight", autograd.Randn(g, 256))
	m.lnB = m.RegisterParameter("ln.bias", autograd.Randn(g, 256))
	gr, err := Trace(m, autograd.Randn(g, 32, 64))
	if err != nil {
		t.Fatal(err)
	}
	block, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	// The deployed form: frozen and fused, float32 and BF16.
	r18 := nn.Eval(models.ResNet18(g, models.ResNetOptions{NumClasses: 10}))
	xf := autograd.Randn(g, 1, 3, 32, 32).To(autograd.ChannelsLast)
	frozen := func(bf16 bool) *Program {
		x := xf
		if bf16 {
			x = autograd.Autocast(x)
		}
		traced, err := Trace(r18, x)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Freeze(traced)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *Program
		x    *autograd.Tensor
	}{
		{"frozen ResNet-18", frozen(false), xf},
		{"frozen BF16 ResNet-18", frozen(true), xf},
		{"ResNet-18", resnet, autograd.Randn(g, 1, 3, 32, 32)},
		{"ResNet-18 channels-last", resnet, autograd.Randn(g, 1, 3, 32, 32).To(autograd.ChannelsLast)},
		{"MLP block", block, autograd.Randn(g, 32, 64)},
	} {
		if _, err := tc.p.Run(tc.x); err != nil {
			t.Fatal(err)
		}
		// The kernels keep their scratch and job state in free lists
		// that a collection does not empty, so one warm run is enough and
		// a collection during the measurement changes nothing; 30 runs
		// give a stray allocation room to show.
		if _, err := tc.p.Run(tc.x); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(30, func() {
			if _, err := tc.p.Run(tc.x); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per run, want 0", tc.name, allocs)
		}
	}
}

// The ops only fusion makes have compiled forms too, bit for bit with
// their eager forms.
func TestCompiledSpecialOps(t *testing.T) {
	g := autograd.NewGenerator(8)
	x := autograd.Randn(g, 2, 6, 3, 5)
	w, b := autograd.Randn(g, 9, 5), autograd.Randn(g, 9)
	linearConcat := fusedGraph("LinearConcat", x, nil, []*autograd.Tensor{w, b}, IntsAttr("sizes", []int{2, 3, 4}))
	outs := []int{linearConcat.Nodes[0].Outputs[0]}
	for _, name := range []string{"%out1", "%out2"} {
		outs = append(outs, linearConcat.AddValue(Value{Name: name}))
	}
	linearConcat.Nodes[0].Outputs, linearConcat.Outputs = outs, outs
	for _, tc := range []struct {
		name  string
		graph *Graph
		x     *autograd.Tensor
	}{
		{"ChannelShuffle", fusedGraph("ChannelShuffle", x, nil, nil, IntAttr("groups", 3)), x},
		{"ChannelShuffle channels-last", fusedGraph("ChannelShuffle", x.To(autograd.ChannelsLast), nil, nil, IntAttr("groups", 2)), x.To(autograd.ChannelsLast)},
		{"LinearConcat", linearConcat, x},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.graph)
			if err != nil {
				t.Fatal(err)
			}
			if pl := checkCompiled(t, p, tc.x); len(pl.eager) > 0 {
				t.Errorf("nodes run eagerly: %v", pl.eager)
			}
		})
	}
}

// Runs of one Program from several goroutines take turns; with inputs of
// different signatures their results live in different plans, so each
// goroutine's result stays its own (run with -race).
func TestRunConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("concurrent runs of ResNet-18 take long at the lower kernel levels; skipped with -short")
	}
	p, g := traceResNet18(t, 1)
	inputs := []*autograd.Tensor{
		autograd.Randn(g, 1, 3, 32, 32), autograd.Randn(g, 2, 3, 32, 32),
		autograd.Randn(g, 3, 3, 32, 32), autograd.Randn(g, 1, 3, 32, 32).To(autograd.ChannelsLast),
	}
	want := make([]*autograd.Tensor, len(inputs))
	for i, x := range inputs {
		out, err := p.runEager([]*autograd.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = out[0]
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*len(inputs))
	for i, x := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				out, err := p.Run(x)
				if err != nil {
					errs <- err
					return
				}
				if !sameBits(out[0], want[i]) {
					errs <- fmt.Errorf("input %d: result differs from eager", i)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
