package graph_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// LeakyReLU's one attribute; graphs record it as "negative_slope".
type leakyAttrs struct {
	NegativeSlope float64
}

// leaky writes LeakyReLU of x into y: the one loop that both the eager op
// and its compiled form run, so the two agree bit for bit.
func leaky(y, x []float32, slope float32) {
	for i, v := range x {
		if v > 0 {
			y[i] = v
		} else {
			y[i] = v * slope
		}
	}
}

// leakyReLU is an op Kiln does not have, added from outside: forward,
// backward, shape inference and a compiled form.
var leakyReLU = &autograd.Function[leakyAttrs]{
	Name: "LeakyReLU",
	Forward: func(a leakyAttrs, in []*autograd.Tensor) *autograd.Tensor {
		x := in[0].Contiguous()
		y := autograd.Empty(autograd.Float32, x.Shape()...)
		leaky(y.Float32s(), x.Float32s(), float32(a.NegativeSlope))
		return y
	},
	Backward: func(a leakyAttrs, in []*autograd.Tensor, _, grad *autograd.Tensor) []*autograd.Tensor {
		x, g := in[0].ContiguousFloat32s(), grad.ContiguousFloat32s()
		dx := make([]float32, len(x))
		for i, v := range x {
			dx[i] = g[i]
			if v <= 0 {
				dx[i] *= float32(a.NegativeSlope)
			}
		}
		return []*autograd.Tensor{autograd.FromFloat32(dx, in[0].Shape()...).To(in[0].Format())}
	},
	Infer: func(_ leakyAttrs, in []autograd.TensorType) (autograd.TensorType, error) {
		if len(in) != 1 || in[0].DType != autograd.Float32 {
			return autograd.TensorType{}, fmt.Errorf("LeakyReLU takes one float32 operand")
		}
		return autograd.TensorType{DType: autograd.Float32, Shape: in[0].Shape}, nil
	},
	Compile: func(a leakyAttrs, in []*autograd.Tensor, out *autograd.Tensor) func() {
		if in[0].Format() != autograd.Contiguous {
			return nil // the plan runs Forward instead
		}
		x, y, s := in[0].Float32s(), out.Float32s(), float32(a.NegativeSlope)
		return func() { leaky(y, x, s) }
	},
}

// A model that uses the op.
type leakyNet struct {
	nn.Base
	fc1, fc2 *nn.Linear
}

func (m *leakyNet) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(m, x)()
	return m.fc2.Forward(leakyReLU.Apply(leakyAttrs{NegativeSlope: 0.1}, m.fc1.Forward(x)))
}

// An op added with autograd.Function trains like a built-in one and,
// registered with graph.Register, traces, freezes, saves, loads and runs.
func ExampleRegister() {
	if err := graph.Register(leakyReLU); err != nil {
		panic(err)
	}
	g := autograd.NewGenerator(1)
	m := &leakyNet{}
	m.fc1 = m.RegisterModule("fc1", nn.NewLinear(g, 4, 8, nn.LinearOptions{})).(*nn.Linear)
	m.fc2 = m.RegisterModule("fc2", nn.NewLinear(g, 8, 2, nn.LinearOptions{})).(*nn.Linear)
	x, target := autograd.Randn(g, 16, 4), autograd.Randn(g, 16, 2)

	// Train: the gradient flows through the op's Backward.
	opt, err := optim.NewSGD(nn.Parameters(m), optim.SGDOptions{LR: 0.1})
	if err != nil {
		panic(err)
	}
	var first, last float64
	for step := range 50 {
		loss := autograd.MSELoss(m.Forward(x), target, autograd.ReductionMean)
		opt.ZeroGrad()
		loss.Backward()
		opt.Step()
		if step == 0 {
			first = loss.Item()
		}
		last = loss.Item()
	}
	fmt.Println("loss falls:", last < first)

	// Trace, freeze, save, load and run with no model code.
	nn.Eval(m)
	traced, err := graph.Trace(m, x)
	if err != nil {
		panic(err)
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "kiln-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "leaky.kiln")
	if err := graph.Save(path, frozen); err != nil {
		panic(err)
	}
	loaded, err := graph.Load(path)
	if err != nil {
		panic(err)
	}
	for _, n := range loaded.Nodes {
		fmt.Println(n.Op, n.Attrs)
	}
	p, err := graph.Compile(loaded)
	if err != nil {
		panic(err)
	}
	out, err := p.Run(x)
	if err != nil {
		panic(err)
	}
	want := m.Forward(autograd.NoGrad(x))
	fmt.Println("same as eager:", slices.Equal(out[0].Float32s(), want.Float32s()))
	// Output:
	// loss falls: true
	// Linear []
	// LeakyReLU [negative_slope=0.1]
	// Linear []
	// same as eager: true
}
