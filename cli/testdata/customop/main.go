// Command customop is the kiln command built by a module outside Kiln
// with one op of its own, Clip, registered: the test of package cli builds
// it to check that an op added from outside trains, traces, saves, loads
// and runs through the kiln commands like a built-in one.
//
//	customop export FILE   trains a small model that uses Clip, traces,
//	                       freezes and saves it to FILE, and prints the
//	                       eager output's float32 bits for seeded inputs
//	customop ...           the kiln commands (inspect, run, bench, cpu)
package main

import (
	"fmt"
	"math"
	"os"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/cli"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

type clipAttrs struct {
	Lo, Hi float64
}

func clip(y, x []float32, lo, hi float32) {
	for i, v := range x {
		y[i] = min(max(v, lo), hi)
	}
}

var clipOp = &autograd.Function[clipAttrs]{
	Name: "Clip",
	Forward: func(a clipAttrs, in []*autograd.Tensor) *autograd.Tensor {
		x := in[0].Contiguous()
		y := autograd.Empty(autograd.Float32, x.Shape()...)
		clip(y.Float32s(), x.Float32s(), float32(a.Lo), float32(a.Hi))
		return y
	},
	Backward: func(a clipAttrs, in []*autograd.Tensor, _, grad *autograd.Tensor) []*autograd.Tensor {
		x, g := in[0].ContiguousFloat32s(), grad.ContiguousFloat32s()
		dx := make([]float32, len(x))
		for i, v := range x {
			if v > float32(a.Lo) && v < float32(a.Hi) {
				dx[i] = g[i]
			}
		}
		return []*autograd.Tensor{autograd.FromFloat32(dx, in[0].Shape()...)}
	},
	Infer: func(_ clipAttrs, in []autograd.TensorType) (autograd.TensorType, error) {
		if len(in) != 1 || in[0].DType != autograd.Float32 {
			return autograd.TensorType{}, fmt.Errorf("Clip takes one float32 operand")
		}
		return autograd.TensorType{DType: autograd.Float32, Shape: in[0].Shape}, nil
	},
	Compile: func(a clipAttrs, in []*autograd.Tensor, out *autograd.Tensor) func() {
		if in[0].Format() != autograd.Contiguous {
			return nil
		}
		x, y := in[0].Float32s(), out.Float32s()
		return func() { clip(y, x, float32(a.Lo), float32(a.Hi)) }
	},
}

type net struct {
	nn.Base
	fc1, fc2 *nn.Linear
}

func (m *net) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(m, x)()
	return m.fc2.Forward(clipOp.Apply(clipAttrs{Lo: -0.5, Hi: 0.5}, m.fc1.Forward(x)))
}

func export(path string) error {
	g := autograd.NewGenerator(1)
	m := &net{}
	m.fc1 = m.RegisterModule("fc1", nn.NewLinear(g, 4, 16, nn.LinearOptions{})).(*nn.Linear)
	m.fc2 = m.RegisterModule("fc2", nn.NewLinear(g, 16, 3, nn.LinearOptions{})).(*nn.Linear)
	x, target := autograd.Randn(g, 32, 4), autograd.Randn(g, 32, 3)
	opt, err := optim.NewSGD(nn.Parameters(m), optim.SGDOptions{LR: 0.1, Momentum: 0.9})
	if err != nil {
		return err
	}
	var first, last float64
	for step := range 100 {
		loss := autograd.MSELoss(m.Forward(x), target, autograd.ReductionMean)
		opt.ZeroGrad()
		loss.Backward()
		opt.Step()
		if step == 0 {
			first = loss.Item()
		}
		last = loss.Item()
	}
	if !(last < first) {
		return fmt.Errorf("training did not lower the loss: %v, then %v", first, last)
	}
	nn.Eval(m)
	in := autograd.Randn(autograd.NewGenerator(2), 5, 4)
	traced, err := graph.Trace(m, in)
	if err != nil {
		return err
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		return err
	}
	if err := graph.Save(path, frozen); err != nil {
		return err
	}
	for _, v := range m.Forward(autograd.NoGrad(in)).Float32s() {
		fmt.Printf("%08x\n", math.Float32bits(v))
	}
	return nil
}

func main() {
	if err := graph.Register(clipOp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(os.Args) == 3 && os.Args[1] == "export" {
		if err := export(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "customop export:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
