package graph

import (
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// TestTraceInArena: a graph traced from an input in an autograd.Arena keeps
// nothing of the arena: after Reset, and after the arena's memory has gone
// to other tensors, it freezes, compiles and computes what the graph traced
// from the same input without an arena does, bit for bit.
func TestTraceInArena(t *testing.T) {
	g := autograd.NewGenerator(1)
	m := nn.Eval(models.ResNet18(g, models.ResNetOptions{ChannelsLast: true, NumClasses: 10}))
	x := autograd.Randn(g, 2, 3, 32, 32).To(autograd.ChannelsLast)
	run := func(traced *Graph) *autograd.Tensor {
		t.Helper()
		frozen, err := Freeze(traced)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(frozen)
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Run(x)
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	plain, err := Trace(m, x)
	if err != nil {
		t.Fatal(err)
	}
	arena := autograd.NewArena(0)
	inArena, err := Trace(m, arena.In(x))
	if err != nil {
		t.Fatal(err)
	}
	arena.Reset()
	for range 3 { // the step's buffers, overwritten
		m.Forward(arena.In(autograd.NoGrad(autograd.Randn(g, 2, 3, 32, 32).To(autograd.ChannelsLast))))
		arena.Reset()
	}
	if !sameBits(run(inArena), run(plain)) {
		t.Fatal("the graph traced in an arena computes something else")
	}
}
