package optim_test

import (
	"fmt"
	"math"
	"strings"
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

func TestLambSkipsParametersWithoutGradient(t *testing.T) {
	a, b := leaf(1, 2), leaf(3)
	opt, err := optim.NewLamb([]*autograd.Tensor{a, b}, optim.DefaultLambOptions())
	if err != nil {
		t.Fatal(err)
	}
	setGrad(a, 1, 1)
	opt.Step()
	if b.Values()[0] != 3 {
		t.Errorf("parameter without gradient moved to %v", b.Values())
	}
	sd := opt.StateDict()
	if _, ok := sd.State[1]; ok || sd.State[0]["step"].Item() != 1 {
		t.Errorf("state %v", sd.State)
	}
}

func TestLambChannelsLast(t *testing.T) {
	o := optim.LambOptions{LR: 0.1, Betas: [2]float64{0.9, 0.99}, Eps: 1e-6, WeightDecay: 0.01}
	testChannelsLast(t, func(p *autograd.Tensor) optim.Optimizer {
		opt, err := optim.NewLamb([]*autograd.Tensor{p}, o)
		if err != nil {
			t.Fatal(err)
		}
		return opt
	})
}

func TestLambStepDoesNotAllocate(t *testing.T) {
	opt, err := optim.NewLamb(paramsWithGrads(3, 1000, 1<<16), optim.LambOptions{LR: 0.01, Betas: [2]float64{0.9, 0.999}, Eps: 1e-6, WeightDecay: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	opt.Step()
	if a := testing.AllocsPerRun(10, opt.Step); a != 0 {
		t.Fatalf("Step allocates %v times", a)
	}
}

func TestNewLambRejectsBadInput(t *testing.T) {
	p := leaf(1)
	ok := []*autograd.Tensor{p}
	with := func(f func(o *optim.LambOptions)) optim.LambOptions {
		o := optim.DefaultLambOptions()
		f(&o)
		return o
	}
	cases := []struct {
		name   string
		groups []optim.LambGroup
		want   string
	}{
		{"negative lr", []optim.LambGroup{{ok, with(func(o *optim.LambOptions) { o.LR = -0.1 })}}, "group 0: invalid learning rate: -0.1"},
		{"NaN lr", []optim.LambGroup{{ok, with(func(o *optim.LambOptions) { o.LR = math.NaN() })}}, "invalid learning rate: NaN"},
		{"zero value", []optim.LambGroup{{ok, optim.LambOptions{LR: 0.01}}}, "invalid epsilon value: 0"},
		{"beta0", []optim.LambGroup{{ok, with(func(o *optim.LambOptions) { o.Betas[0] = 1 })}}, "invalid beta parameter at index 0: 1"},
		{"beta1", []optim.LambGroup{{ok, with(func(o *optim.LambOptions) { o.Betas[1] = -0.5 })}}, "invalid beta parameter at index 1: -0.5"},
		{"negative weight decay", []optim.LambGroup{{ok, with(func(o *optim.LambOptions) { o.WeightDecay = -1e-4 })}}, "invalid weight_decay value: -0.0001"},
		{"infinite weight decay", []optim.LambGroup{{ok, with(func(o *optim.LambOptions) { o.WeightDecay = math.Inf(1) })}}, "invalid weight_decay value: +Inf"},
		{"bad second group", []optim.LambGroup{{ok, optim.DefaultLambOptions()}, {[]*autograd.Tensor{leaf(2)}, with(func(o *optim.LambOptions) { o.LR = -1 })}}, "group 1: invalid learning rate"},
		{"no groups", nil, "empty parameter list"},
		{"nil parameter", []optim.LambGroup{{[]*autograd.Tensor{p, nil}, optim.DefaultLambOptions()}}, "group 0 parameter 1 is nil"},
		{"duplicate", []optim.LambGroup{{ok, optim.DefaultLambOptions()}, {ok, optim.DefaultLambOptions()}}, "more than one parameter group"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt, err := optim.NewLambGroups(c.groups...)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "optim: Lamb: ") {
				t.Fatalf("got %v, %v; want error containing %q", opt, err, c.want)
			}
		})
	}
}

func trainedLamb(t *testing.T, steps int) (*optim.Lamb, []*autograd.Tensor) {
	t.Helper()
	a, b, c := leaf(1, 2, 3), leaf(-1), leaf(0.5, 0.25)
	base := optim.LambOptions{LR: 0.1, Betas: [2]float64{0.9, 0.99}, Eps: 1e-6, WeightDecay: 1e-2}
	other := base
	other.LR = 0.05
	opt, err := optim.NewLambGroups(optim.LambGroup{Params: []*autograd.Tensor{a, b}, LambOptions: base},
		optim.LambGroup{Params: []*autograd.Tensor{c}, LambOptions: other})
	if err != nil {
		t.Fatal(err)
	}
	params := []*autograd.Tensor{a, b, c}
	trainThree(opt, params, steps)
	return opt, params
}

func TestLambStateDictRoundTrip(t *testing.T) {
	src, srcParams := trainedLamb(t, 3)
	if _, err := optim.NewStepLR(src, 2, 0.5); err != nil {
		t.Fatal(err)
	}
	sd := src.StateDict()
	if h := sd.Groups[1].Hyper; h["betas.1"] != 0.99 || h["weight_decay"] != 0.01 || h["initial_lr"] != 0.05 || len(h) != 6 {
		t.Errorf("group 1 hyper-parameters %v", h)
	}
	if _, ok := sd.State[1]; ok {
		t.Error("parameter 1 (never stepped) has state")
	}
	dst, dstParams := trainedLamb(t, 0)
	for i := range dstParams {
		dstParams[i].CopyFrom(srcParams[i])
	}
	if err := dst.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	resumeAndCompare(t, src, srcParams, dst, dstParams)
	if s, d := src.StateDict().State[0]["step"].Item(), dst.StateDict().State[0]["step"].Item(); s != 5 || d != 5 {
		t.Errorf("steps %v and %v, want 5", s, d)
	}
}

func TestLambLoadStateDictRejectsMismatches(t *testing.T) {
	cases := []loadCase{
		{"nil", nil, "nil state dict"},
		{"group count", func(sd *optim.StateDict) { sd.Groups = sd.Groups[:1] }, "has 1 parameter groups, the optimizer has 2"},
		{"unknown state", func(sd *optim.StateDict) { sd.State[0]["sum"] = sd.State[0]["exp_avg"] }, "state.0.sum: unknown state"},
		{"missing exp_avg_sq", func(sd *optim.StateDict) { delete(sd.State[0], "exp_avg_sq") }, "state.0.exp_avg_sq: missing state"},
		{"missing step", func(sd *optim.StateDict) { delete(sd.State[2], "step") }, "state.2.step: missing state"},
		{"shape", func(sd *optim.StateDict) { sd.State[2]["exp_avg"] = autograd.Zeros(3) }, "state.2.exp_avg: shape [3] does not match the parameter's shape [2]"},
		{"step too large", func(sd *optim.StateDict) { sd.State[0]["step"] = autograd.Scalar(1 << 25) }, "state.0.step: 3.3554432e+07 is not a step count"},
		{"missing eps", func(sd *optim.StateDict) { delete(sd.Groups[0].Hyper, "eps") }, "param_groups.0.eps: missing hyper-parameter"},
		{"unknown hyper", func(sd *optim.StateDict) { sd.Groups[0].Hyper["amsgrad"] = 0 }, "param_groups.0.amsgrad: unknown hyper-parameter"},
		{"bad beta", func(sd *optim.StateDict) { sd.Groups[1].Hyper["betas.0"] = 1.5 }, "invalid beta parameter at index 0: 1.5 (want [0, 1)) (in param_groups.1)"},
	}
	testLoadRejects(t, cases, "exp_avg", func(t *testing.T, steps int) optim.Optimizer {
		opt, _ := trainedLamb(t, steps)
		return opt
	})
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
