package graph

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// A ResNet traced under autocast is a BF16 graph: its convolutions take
// bfloat16 constants, it holds the float32 graph's fusions, and it gives
// eager autocast's logits within 1e-2 relative.
func TestTraceUnderAutocastGivesBF16Graph(t *testing.T) {
	g := autograd.NewGenerator(3)
	m := nn.Eval(models.ResNet18(g, models.ResNetOptions{NumClasses: 10}))
	x := autograd.Randn(g, 2, 3, 32, 32)
	var want *autograd.Tensor
	want = m.Forward(amp.Autocast(autograd.NoGrad(x)))

	var traced *Graph
	var err error
	traced, err = Trace(m, amp.Autocast(x))
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := Freeze(traced)
	if err != nil {
		t.Fatal(err)
	}
	s := frozen.String()
	for _, op := range []string{"Conv2d+ReLU", "Conv2d+Add+ReLU"} {
		if !strings.Contains(s, "= "+op+"(") {
			t.Errorf("BF16 graph lacks %s:\n%s", op, s)
		}
	}
	bf16Convs := 0
	for _, n := range frozen.Nodes {
		if strings.HasPrefix(n.Op, "Conv2d") && frozen.Values[n.Inputs[1]].DType == autograd.BFloat16 {
			bf16Convs++
		}
	}
	if bf16Convs == 0 {
		t.Errorf("no convolution with a bfloat16 weight:\n%s", s)
	}
	p, err := Compile(frozen)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := p.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	got := autograd.Cast(outs[0], autograd.Float32).Values()
	if r := maxRelative(got, autograd.Cast(want, autograd.Float32).Values()); r > 1e-2 {
		t.Errorf("BF16 graph differs from eager autocast by %.3g relative, want <= 1e-2", r)
	} else {
		t.Logf("BF16 graph vs eager autocast: %.2g", r)
	}
}
