package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/optim"
)

// lambScalar is the Lamb definition in float64 for one parameter.
type lambScalar struct {
	m, v []float64
	t    int
}

func (s *lambScalar) step(p []float64, g []float32, o optim.LambOptions) {
	if s.m == nil {
		s.m, s.v = make([]float64, len(p)), make([]float64, len(p))
	}
	s.t++
	b1, b2 := o.Betas[0], o.Betas[1]
	u := make([]float64, len(p))
	var pn, un float64
	for i := range p {
		gi := float64(g[i])
		s.m[i] = b1*s.m[i] + (1-b1)*gi
		s.v[i] = b2*s.v[i] + (1-b2)*gi*gi
		mh := s.m[i] / (1 - math.Pow(b1, float64(s.t)))
		vh := s.v[i] / (1 - math.Pow(b2, float64(s.t)))
		u[i] = mh/(math.Sqrt(vh)+o.Eps) + o.WeightDecay*p[i]
		pn += p[i] * p[i]
		un += u[i] * u[i]
	}
	trust := 1.0
	if pn > 0 && un > 0 {
		trust = math.Sqrt(pn) / math.Sqrt(un)
	}
	for i := range p {
		p[i] -= o.LR * trust * u[i]
	}
}

func TestLambFollowsDefinition(t *testing.T) {
	grads := [][]float32{{0.5, -1, 2}, {0.25, 0.5, -3}, {-1, 1, 0.125}, {2, 0, -0.5}, {0.1, -0.2, 3}}
	cases := map[string]optim.LambOptions{
		"default": optim.DefaultLambOptions(),
		"decay":   {LR: 0.05, Betas: [2]float64{0.8, 0.99}, Eps: 1e-6, WeightDecay: 0.01},
		"beta0":   {LR: 0.1, Betas: [2]float64{0, 0.5}, Eps: 1e-3, WeightDecay: 0.5},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			p := leaf(1, -2, 0.5)
			opt, err := optim.NewLamb([]*autograd.Tensor{p}, o)
			if err != nil {
				t.Fatal(err)
			}
			want := []float64{1, -2, 0.5}
			var ref lambScalar
			for _, g := range grads {
				setGrad(p, g...)
				opt.Step()
				ref.step(want, g, o)
			}
			for i, v := range p.Values() {
				if math.Abs(v-want[i]) > 1e-5*(1+math.Abs(want[i])) {
					t.Errorf("element %d: got %v, want %v", i, v, want[i])
				}
			}
		})
	}
}

// Lamb's step is the learning rate times the parameter's norm along the
// unit-free Adam direction: with w = (3, 4) (norm 5) and a constant
// gradient, each step moves w by lr·5 along (1, 1)/√2, until the trust
// ratio changes with w's norm.
func ExampleNewLamb() {
	w := autograd.FromFloat32([]float32{3, 4}, 2)
	w.SetRequiresGrad(true)
	o := optim.DefaultLambOptions()
	o.LR = 0.1
	opt, err := optim.NewLamb([]*autograd.Tensor{w}, o)
	if err != nil {
		panic(err)
	}
	for step := 1; step <= 3; step++ {
		w.SetGrad(autograd.FromFloat32([]float32{1, 1}, 2))
		before := w.Values()
		opt.Step()
		after := w.Values()
		moved := math.Hypot(after[0]-before[0], after[1]-before[1])
		fmt.Printf("step %d: |w| %.4f, moved %.4f\n", step, math.Hypot(before[0], before[1]), moved)
	}
	// Output:
	// step 1: |w| 5.0000, moved 0.5000
	// step 2: |w| 4.5056, moved 0.4506
	// step 3: |w| 4.0612, moved 0.4061
}
