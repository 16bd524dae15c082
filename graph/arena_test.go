package graph

import (
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// TestTraceInArena: a graph traced from an input in an autograd.Arena keeps
// nothing of the arena: once the arena is reset and its memory has gone to
// other tensors, its program computes what the program traced from the
// same input without an arena does, bit for bit.
func TestTraceInArena(t *testing.T) {
	g := autograd.NewGenerator(1)
	m := nn.Eval(models.ResNet18(g, models.ResNetOptions{ChannelsLast: true, NumClasses: 10}))
	x := autograd.Randn(g, 2, 3, 32, 32).To(autograd.ChannelsLast)
	plain, _ := freezeAndCompile(t, m, x)
	arena := autograd.NewArena(0)
	inArena, _ := freezeAndCompile(t, m, arena.In(x))
	arena.Reset()
	for range 3 { // the step's buffers, overwritten
		m.Forward(arena.In(autograd.NoGrad(autograd.Randn(g, 2, 3, 32, 32).To(autograd.ChannelsLast))))
		arena.Reset()
	}
	want, err := plain.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	got, err := inArena.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(got[0], want[0]) {
		t.Fatal("the graph traced in an arena computes something else")
	}
}
