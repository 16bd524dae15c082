package optim_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/optim"
)

func TestLARSFollowsDefinition(t *testing.T) {
	grads := [][]float32{{0.5, -1, 2}, {0.25, 0.5, -3}, {-1, 1, 0.125}, {2, 0, -0.5}, {0.1, -0.2, 3}}
	cases := map[string]optim.LARSOptions{
		"default":   optim.DefaultLARSOptions(),
		"momentum":  {LR: 0.5, Momentum: 0.9, WeightDecay: 5e-4, Eeta: 1e-2},
		"nesterov":  {LR: 1, Momentum: 0.8, WeightDecay: 1e-2, Nesterov: true, Eeta: 0.1, Eps: 1e-6},
		"dampening": {LR: 0.3, Momentum: 0.5, Dampening: 0.25, Eeta: 0.05, Eps: 1e-3},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			p := leaf(1, -2, 0.5)
			opt, err := optim.NewLARS([]*autograd.Tensor{p}, o)
			if err != nil {
				t.Fatal(err)
			}
			want := []float64{1, -2, 0.5}
			var buf []float64
			for _, g := range grads {
				setGrad(p, g...)
				opt.Step()
				var pn, gn float64
				for i := range want {
					pn += want[i] * want[i]
					gn += float64(g[i]) * float64(g[i])
				}
				pn, gn = math.Sqrt(pn), math.Sqrt(gn)
				trust := o.Eeta * pn / (gn + o.WeightDecay*pn + o.Eps)
				d := make([]float64, len(want))
				for i := range want {
					d[i] = float64(g[i]) + o.WeightDecay*want[i]
				}
				if o.Momentum != 0 {
					if buf == nil {
						buf = slices.Clone(d)
					} else {
						for i := range buf {
							buf[i] = o.Momentum*buf[i] + (1-o.Dampening)*d[i]
						}
					}
					for i := range d {
						if o.Nesterov {
							d[i] += o.Momentum * buf[i]
						} else {
							d[i] = buf[i]
						}
					}
				}
				for i := range want {
					want[i] -= o.LR * trust * d[i]
				}
			}
			for i, v := range p.Values() {
				if math.Abs(v-want[i]) > 1e-5*(1+math.Abs(want[i])) {
					t.Errorf("element %d: got %v, want %v", i, v, want[i])
				}
			}
		})
	}
}

// LARS scales each layer's learning rate by η·‖w‖/‖g‖ (no weight decay):
// doubling the gradient leaves the step unchanged, and the step is
// lr·η·‖w‖ along the gradient.
func ExampleNewLARS() {
	for _, scale := range []float32{1, 2} {
		w := autograd.FromFloat32([]float32{3, 4}, 2)
		w.SetRequiresGrad(true)
		opt, err := optim.NewLARS([]*autograd.Tensor{w}, optim.LARSOptions{LR: 1, Eeta: 0.1})
		if err != nil {
			panic(err)
		}
		w.SetGrad(autograd.FromFloat32([]float32{0, scale}, 2))
		opt.Step()
		fmt.Printf("gradient ×%v: w = [%.2f %.2f]\n", scale, w.Values()[0], w.Values()[1])
	}
	// Output:
	// gradient ×1: w = [3.00 3.50]
	// gradient ×2: w = [3.00 3.50]
}
