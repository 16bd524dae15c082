package nn_test

import (
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// testNet is a small model with PyTorch-style nesting: a Sequential under
// "features", a BatchNorm under "bn1" and a Linear under "fc".
type testNet struct {
	nn.Base
	Features *nn.Sequential
	BN1      *nn.BatchNorm
	FC       *nn.Linear
}

func newTestNet(g *autograd.Generator) *testNet {
	n := &testNet{
		Features: nn.NewSequential(nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{Padding: 1}), nn.NewReLU()),
		BN1:      nn.NewBatchNorm2d(4, nn.BatchNormOptions{}),
		FC:       nn.NewLinear(g, 4, 2, nn.LinearOptions{}),
	}
	n.RegisterModule("features", n.Features)
	n.RegisterModule("bn1", n.BN1)
	n.RegisterModule("fc", n.FC)
	return n
}

// scramble gives every floating-point entry of m's state dict seeded
// random values and every integer one a count, so round trips are
// distinguishable from fresh models.
func scramble(g *autograd.Generator, m nn.Module) {
	for _, nt := range nn.StateDict(m) {
		if nt.Tensor.DType().IsFloat() {
			nn.Uniform(g, nt.Tensor, 0.1, 2)
		} else {
			nt.Tensor.Int64s()[0] = int64(g.IntN(100))
		}
	}
}
