package autograd_test

import (
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

// TestArithGolden checks broadcasting Add, Sub, Mul and Div, their
// gradients and their result formats against testdata/golden/gen_arith.py.
func TestArithGolden(t *testing.T) {
	set := golden.Load(t, "arith.safetensors")
	ops := []struct {
		name string
		fn   func(a, b *autograd.Tensor) *autograd.Tensor
	}{{"add", autograd.Add}, {"sub", autograd.Sub}, {"mul", autograd.Mul}, {"div", autograd.Div}}
	// The cases of gen_arith.py's CASES table: which operands are channels-last.
	cases := []struct {
		name     string
		aCL, bCL bool
	}{
		{name: "same"}, {name: "row"}, {name: "outer"}, {name: "scalar"}, {name: "rank3"},
		{name: "cl_bias", aCL: true}, {name: "cl_cl", aCL: true, bCL: true},
		{name: "cl_contig", aCL: true}, {name: "contig_cl", bCL: true},
	}
	for _, op := range ops {
		for _, c := range cases {
			name := op.name + "." + c.name
			t.Run(name, func(t *testing.T) {
				a, b := set.Get(t, name+".a"), set.Get(t, name+".b")
				if c.aCL {
					a = a.To(autograd.ChannelsLast)
				}
				if c.bCL {
					b = b.To(autograd.ChannelsLast)
				}
				a.SetRequiresGrad(true)
				b.SetRequiresGrad(true)
				out := op.fn(a, b)
				out.Backward(set.Get(t, name+".gout"))
				golden.AssertClose(t, "out", out, set.Get(t, name+".out"), 1e-5)
				golden.AssertClose(t, "grad_a", a.Grad(), set.Get(t, name+".grad_a"), 1e-5)
				golden.AssertClose(t, "grad_b", b.Grad(), set.Get(t, name+".grad_b"), 1e-5)
				checkGoldenStrides(t, set, name, out)
			})
		}
	}
}
