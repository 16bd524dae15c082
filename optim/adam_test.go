package optim_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/optim"
)

// adamScalar is the PyTorch Adam/AdamW update for one element in float64,
// close enough to the float32 kernel for the tolerances used here.
type adamScalar struct {
	m, v, vmax float64
	t          int
}

func (s *adamScalar) step(p, g float64, o optim.AdamOptions, decoupled bool) float64 {
	if o.Maximize {
		g = -g
	}
	if decoupled {
		p *= 1 - o.LR*o.WeightDecay
	} else {
		g += o.WeightDecay * p
	}
	s.t++
	s.m = o.Betas[0]*s.m + (1-o.Betas[0])*g
	s.v = o.Betas[1]*s.v + (1-o.Betas[1])*g*g
	v := s.v
	if o.AMSGrad {
		s.vmax = math.Max(s.vmax, s.v)
		v = s.vmax
	}
	bc1 := 1 - math.Pow(o.Betas[0], float64(s.t))
	bc2 := 1 - math.Pow(o.Betas[1], float64(s.t))
	return p - o.LR/bc1*s.m/(math.Sqrt(v)/math.Sqrt(bc2)+o.Eps)
}

// adamWith returns DefaultAdamOptions changed by f.
func adamWith(f func(o *optim.AdamOptions)) optim.AdamOptions {
	o := optim.DefaultAdamOptions()
	f(&o)
	return o
}

func TestAdamFollowsPyTorchUpdate(t *testing.T) {
	grads := [][]float32{{0.5, -1, 2}, {0.25, 0.5, -3}, {-1, 1, 0.125}, {2, 0, -0.5}, {0.1, -0.2, 3}}
	cases := []struct {
		name      string
		o         optim.AdamOptions
		decoupled bool
	}{
		{"default", optim.DefaultAdamOptions(), false},
		{"l2", adamWith(func(o *optim.AdamOptions) { o.LR, o.WeightDecay = 0.1, 0.05 }), false},
		{"amsgrad", adamWith(func(o *optim.AdamOptions) { o.LR, o.AMSGrad, o.Betas = 0.05, true, [2]float64{0.5, 0.6} }), false},
		{"maximize", adamWith(func(o *optim.AdamOptions) { o.LR, o.Maximize, o.Eps = 0.01, true, 1e-3 }), false},
		{"adamw", adamWith(func(o *optim.AdamOptions) { o.LR, o.WeightDecay = 0.1, 0.5 }), true},
		{"adamw amsgrad", adamWith(func(o *optim.AdamOptions) {
			o.LR, o.WeightDecay, o.AMSGrad, o.Betas = 0.1, 0.1, true, [2]float64{0, 0.9}
		}), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := leaf(1, -2, 0.5)
			newOpt := optim.NewAdam
			if c.decoupled {
				newOpt = optim.NewAdamW
			}
			opt, err := newOpt([]*autograd.Tensor{p}, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if opt.Decoupled() != c.decoupled {
				t.Errorf("Decoupled() = %v", opt.Decoupled())
			}
			want := []float64{1, -2, 0.5}
			ref := make([]adamScalar, 3)
			for _, g := range grads {
				setGrad(p, g...)
				opt.Step()
				for i := range want {
					want[i] = ref[i].step(want[i], float64(g[i]), c.o, c.decoupled)
				}
			}
			for i, v := range p.Values() {
				if math.Abs(v-want[i]) > 1e-5*(1+math.Abs(want[i])) {
					t.Errorf("element %d: got %v, want %v", i, v, want[i])
				}
			}
			if got := opt.StateDict().State[0]["step"].Item(); got != float64(len(grads)) {
				t.Errorf("step %v after %d steps", got, len(grads))
			}
		})
	}
}

func TestAdamSkipsParametersWithoutGradient(t *testing.T) {
	a, b := leaf(1, 2), leaf(3, 4)
	o := optim.DefaultAdamOptions()
	o.WeightDecay, o.AMSGrad = 0.1, true
	opt, err := optim.NewAdam([]*autograd.Tensor{a, b}, o)
	if err != nil {
		t.Fatal(err)
	}
	setGrad(a, 1, 1)
	opt.Step()
	if got := b.Values(); !slices.Equal(got, []float64{3, 4}) {
		t.Errorf("parameter without gradient changed to %v", got)
	}
	sd := opt.StateDict()
	if _, ok := sd.State[1]; ok {
		t.Error("parameter without gradient got state")
	}
	var names []string
	for name := range sd.State[0] {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"}; !slices.Equal(names, want) {
		t.Errorf("state names %v, want %v", names, want)
	}
	opt.ZeroGrad()
	if a.Grad() != nil {
		t.Error("ZeroGrad left a gradient")
	}
}

func TestAdamChannelsLast(t *testing.T) {
	o := optim.DefaultAdamWOptions()
	o.AMSGrad = true
	testChannelsLast(t, func(p *autograd.Tensor) optim.Optimizer {
		opt, err := optim.NewAdamW([]*autograd.Tensor{p}, o)
		if err != nil {
			t.Fatal(err)
		}
		return opt
	})
}

func TestAdamStepDoesNotAllocate(t *testing.T) {
	params := paramsWithGrads(3, 1000, 1<<16)
	o := optim.DefaultAdamOptions()
	o.AMSGrad, o.WeightDecay = true, 1e-4
	for name, mk := range map[string]func([]*autograd.Tensor, optim.AdamOptions) (*optim.Adam, error){"Adam": optim.NewAdam, "AdamW": optim.NewAdamW} {
		opt, err := mk(params, o)
		if err != nil {
			t.Fatal(err)
		}
		opt.Step()
		if a := testing.AllocsPerRun(10, opt.Step); a != 0 {
			t.Fatalf("%s.Step allocates %v times after the first", name, a)
		}
	}
}

func TestNewAdamRejectsBadInput(t *testing.T) {
	p := leaf(1)
	ok := []*autograd.Tensor{p}
	cases := []struct {
		name   string
		groups []optim.AdamGroup
		want   string
	}{
		{"negative lr", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.LR = -0.1 })}}, "group 0: invalid learning rate: -0.1"},
		{"NaN lr", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.LR = math.NaN() })}}, "invalid learning rate: NaN"},
		{"infinite lr", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.LR = math.Inf(1) })}}, "invalid learning rate: +Inf"},
		{"zero value", []optim.AdamGroup{{ok, optim.AdamOptions{LR: 1e-3}}}, "invalid epsilon value: 0"},
		{"negative eps", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.Eps = -1e-8 })}}, "invalid epsilon value: -1e-08"},
		{"NaN eps", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.Eps = math.NaN() })}}, "invalid epsilon value: NaN"},
		{"beta1 1", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.Betas[0] = 1 })}}, "invalid beta parameter at index 0: 1"},
		{"beta1 negative", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.Betas[0] = -0.1 })}}, "invalid beta parameter at index 0: -0.1"},
		{"beta2 NaN", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.Betas[1] = math.NaN() })}}, "invalid beta parameter at index 1: NaN"},
		{"beta2 above 1", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.Betas[1] = 1.5 })}}, "invalid beta parameter at index 1: 1.5"},
		{"negative weight decay", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.WeightDecay = -1e-4 })}}, "invalid weight_decay value: -0.0001"},
		{"infinite weight decay", []optim.AdamGroup{{ok, adamWith(func(o *optim.AdamOptions) { o.WeightDecay = math.Inf(1) })}}, "invalid weight_decay value: +Inf"},
		{"bad second group", []optim.AdamGroup{{ok, optim.DefaultAdamOptions()}, {[]*autograd.Tensor{leaf(2)}, adamWith(func(o *optim.AdamOptions) { o.LR = -1 })}}, "group 1: invalid learning rate"},
		{"no groups", nil, "empty parameter list"},
		{"nil parameter", []optim.AdamGroup{{[]*autograd.Tensor{p, nil}, optim.DefaultAdamOptions()}}, "group 0 parameter 1 is nil"},
		{"non-leaf", []optim.AdamGroup{{[]*autograd.Tensor{autograd.Mul(p, p)}, optim.DefaultAdamOptions()}}, "can't optimize a non-leaf tensor"},
		{"int64 parameter", []optim.AdamGroup{{[]*autograd.Tensor{autograd.FromInt64([]int64{1})}, optim.DefaultAdamOptions()}}, "is int64; only float32"},
		{"duplicate", []optim.AdamGroup{{ok, optim.DefaultAdamOptions()}, {ok, optim.DefaultAdamOptions()}}, "more than one parameter group"},
	}
	for _, c := range cases {
		for _, name := range []string{"Adam", "AdamW"} {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				newGroups := optim.NewAdamGroups
				if name == "AdamW" {
					newGroups = optim.NewAdamWGroups
				}
				opt, err := newGroups(c.groups...)
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "optim: "+name+": ") {
					t.Fatalf("got %v, %v; want error from %s containing %q", opt, err, name, c.want)
				}
			})
		}
	}
}

func TestAdamGroupsAndSchedulers(t *testing.T) {
	a, b := leaf(1), leaf(1)
	base := optim.DefaultAdamOptions()
	head := base
	head.LR = 0.01
	opt, err := optim.NewAdamGroups(optim.AdamGroup{Params: []*autograd.Tensor{a}, AdamOptions: base},
		optim.AdamGroup{Params: []*autograd.Tensor{b}, AdamOptions: head})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := optim.NewStepLR(opt, 1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	setGrad(a, 1)
	setGrad(b, 1)
	opt.Step()
	// Adam's first step moves by lr·g/(|g| + eps·…), nearly lr.
	if math.Abs(a.Item()-(1-1e-3)) > 1e-6 || math.Abs(b.Item()-0.99) > 1e-6 {
		t.Fatalf("got %v and %v, want about 0.999 and 0.99", a.Item(), b.Item())
	}
	sched.Step()
	if opt.LR(0) != 5e-4 || opt.LR(1) != 0.005 || opt.Group(1).LR != 0.005 {
		t.Errorf("LRs %v %v after one StepLR step", opt.LR(0), opt.LR(1))
	}
	if lr, ok := opt.InitialLR(1); !ok || lr != 0.01 {
		t.Errorf("initial LR %v, %v", lr, ok)
	}
	for name, call := range map[string]func(){
		"Adam.LR": func() { opt.LR(2) }, "Adam.SetLR": func() { opt.SetLR(-1, 1) }, "Adam.Group": func() { opt.Group(2) },
		"Adam.InitialLR": func() { opt.InitialLR(2) }, "Adam.SetInitialLR": func() { opt.SetInitialLR(2, 1) },
	} {
		if err := autograd.Try(call); err == nil || !strings.Contains(err.Error(), name+": parameter group") {
			t.Errorf("%s out of range: error %v", name, err)
		}
	}
	w, _ := optim.NewAdamW([]*autograd.Tensor{leaf(1)}, optim.DefaultAdamWOptions())
	if err := autograd.Try(func() { w.LR(1) }); err == nil || !strings.Contains(err.Error(), "AdamW.LR: parameter group 1 out of range") {
		t.Errorf("AdamW.LR(1): error %v", err)
	}
}

func trainedAdam(t *testing.T, steps int) (*optim.Adam, []*autograd.Tensor) {
	t.Helper()
	a, b, c := leaf(1, 2, 3), leaf(-1), leaf(0.5, 0.25)
	base := optim.DefaultAdamOptions()
	base.LR, base.WeightDecay = 0.1, 1e-3
	other := base
	other.LR, other.AMSGrad, other.Betas = 0.05, true, [2]float64{0.8, 0.95}
	opt, err := optim.NewAdamGroups(optim.AdamGroup{Params: []*autograd.Tensor{a, b}, AdamOptions: base},
		optim.AdamGroup{Params: []*autograd.Tensor{c}, AdamOptions: other})
	if err != nil {
		t.Fatal(err)
	}
	params := []*autograd.Tensor{a, b, c}
	trainThree(opt, params, steps)
	return opt, params
}

func TestAdamStateDictRoundTrip(t *testing.T) {
	src, srcParams := trainedAdam(t, 3)
	if _, err := optim.NewCosineAnnealingLR(src, 10, 0); err != nil {
		t.Fatal(err)
	}
	sd := src.StateDict()
	if got := sd.Groups[1].Params; !slices.Equal(got, []int{2}) {
		t.Errorf("group 1 parameter numbers %v, want [2]", got)
	}
	if _, ok := sd.State[1]; ok {
		t.Error("parameter 1 never had a gradient but has state")
	}
	if st := sd.State[2]; st["step"].Item() != 3 || st["max_exp_avg_sq"] == nil || len(st) != 4 {
		t.Errorf("state of parameter 2: %v", st)
	}
	if h := sd.Groups[1].Hyper; h["betas.0"] != 0.8 || h["betas.1"] != 0.95 || h["amsgrad"] != 1 || h["initial_lr"] != 0.05 {
		t.Errorf("group 1 hyper-parameters %v", h)
	}

	dst, dstParams := trainedAdam(t, 0)
	for i := range dstParams {
		dstParams[i].CopyFrom(srcParams[i])
	}
	if err := dst.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	if lr, ok := dst.InitialLR(1); !ok || lr != 0.05 {
		t.Errorf("loaded initial LR %v, %v", lr, ok)
	}
	resumeAndCompare(t, src, srcParams, dst, dstParams)
	ssd, dsd := src.StateDict(), dst.StateDict()
	if ssd.State[0]["step"].Item() != 5 || dsd.State[1]["step"].Item() != 2 {
		t.Errorf("steps %v and %v, want 5 and 2", ssd.State[0]["step"].Item(), dsd.State[1]["step"].Item())
	}
}

func TestAdamLoadStateDictRejectsMismatches(t *testing.T) {
	cases := []loadCase{
		{"nil", nil, "nil state dict"},
		{"group count", func(sd *optim.StateDict) { sd.Groups = sd.Groups[:1] }, "has 1 parameter groups, the optimizer has 2"},
		{"group size", func(sd *optim.StateDict) { sd.Groups[0].Params = sd.Groups[0].Params[:1] }, "param_groups.0: loaded group has 1 parameters"},
		{"unknown parameter", func(sd *optim.StateDict) { sd.State[7] = sd.State[0] }, "state.7: no parameter has number 7"},
		{"unknown state", func(sd *optim.StateDict) { sd.State[0]["momentum_buffer"] = sd.State[0]["exp_avg"] }, "state.0.momentum_buffer: unknown state"},
		{"nil state", func(sd *optim.StateDict) { sd.State[2]["exp_avg"] = nil }, "state.2.exp_avg: nil tensor"},
		{"missing exp_avg_sq", func(sd *optim.StateDict) { delete(sd.State[0], "exp_avg_sq") }, "state.0.exp_avg_sq: missing state"},
		{"missing step", func(sd *optim.StateDict) { delete(sd.State[0], "step") }, "state.0.step: missing state"},
		{"missing max with AMSGrad", func(sd *optim.StateDict) { delete(sd.State[2], "max_exp_avg_sq") }, "state.2.max_exp_avg_sq: missing state"},
		{"shape", func(sd *optim.StateDict) { sd.State[0]["exp_avg"] = autograd.Zeros(2) }, "state.0.exp_avg: shape [2] does not match the parameter's shape [3]"},
		{"step shape", func(sd *optim.StateDict) { sd.State[0]["step"] = autograd.Zeros(2) }, "state.0.step: shape [2], want a single number"},
		{"nil step", func(sd *optim.StateDict) { sd.State[0]["step"] = nil }, "state.0.step: nil tensor"},
		{"fractional step", func(sd *optim.StateDict) { sd.State[0]["step"] = autograd.Scalar(1.5) }, "state.0.step: 1.5 is not a step count"},
		{"negative step", func(sd *optim.StateDict) { sd.State[0]["step"] = autograd.Scalar(-1) }, "state.0.step: -1 is not a step count"},
		{"missing betas", func(sd *optim.StateDict) { delete(sd.Groups[1].Hyper, "betas.1") }, "param_groups.1.betas.1: missing hyper-parameter"},
		{"unknown hyper", func(sd *optim.StateDict) { sd.Groups[0].Hyper["momentum"] = 0.9 }, "param_groups.0.momentum: unknown hyper-parameter"},
		{"bad bool", func(sd *optim.StateDict) { sd.Groups[0].Hyper["amsgrad"] = 0.5 }, "param_groups.0.amsgrad: boolean hyper-parameter is 0.5"},
		{"bad beta", func(sd *optim.StateDict) { sd.Groups[0].Hyper["betas.0"] = 1 }, "invalid beta parameter at index 0: 1 (want [0, 1)) (in param_groups.0)"},
		{"zero eps", func(sd *optim.StateDict) { sd.Groups[1].Hyper["eps"] = 0 }, "invalid epsilon value: 0"},
	}
	testLoadRejects(t, cases, "exp_avg", func(t *testing.T, steps int) optim.Optimizer {
		opt, _ := trainedAdam(t, steps)
		return opt
	})
}

// An empty state entry, as PyTorch writes for a parameter that has not
// been stepped, loads as no state; a group switched to AMSGrad starts its
// maximum from zero.
func TestAdamLoadStateDictEmptyStateAndAMSGradSwitch(t *testing.T) {
	opt, _ := trainedAdam(t, 2)
	sd := opt.StateDict()
	sd.State[0] = map[string]*autograd.Tensor{}
	sd.Groups[0].Hyper["amsgrad"] = 1
	fresh, params := trainedAdam(t, 0)
	if err := fresh.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	if _, ok := fresh.StateDict().State[0]; ok {
		t.Error("an empty state entry loaded as state")
	}
	setGrad(params[0], 1, 2, 3)
	setGrad(params[1], 1)
	fresh.Step()
	st := fresh.StateDict().State
	if st[0]["step"].Item() != 1 || st[0]["max_exp_avg_sq"] == nil {
		t.Errorf("parameter 0 state after a step: %v", st[0])
	}
	if st[1]["max_exp_avg_sq"] == nil {
		t.Error("parameter 1 has no max_exp_avg_sq after its group switched to AMSGrad")
	}
}

// Minimise (w − 3)² with Adam.
func ExampleNewAdam() {
	w := autograd.Zeros(1)
	w.SetRequiresGrad(true)
	o := optim.DefaultAdamOptions()
	o.LR = 0.1
	opt, err := optim.NewAdam([]*autograd.Tensor{w}, o)
	if err != nil {
		panic(err)
	}
	target := autograd.Full(3, 1)
	for range 300 {
		opt.ZeroGrad()
		d := autograd.Sub(w, target)
		autograd.Mul(d, d).Backward()
		opt.Step()
	}
	fmt.Printf("w = %.3f, steps = %v\n", w.Item(), opt.StateDict().State[0]["step"].Item())
	// Output: w = 3.000, steps = 300
}

// AdamW decays the weights apart from the gradient: with no gradient
// signal at all (a zero gradient) each step multiplies w by 1 − lr·wd.
func ExampleNewAdamW() {
	w := autograd.Full(1, 1)
	w.SetRequiresGrad(true)
	o := optim.DefaultAdamWOptions() // lr 1e-3, weight decay 1e-2
	o.LR, o.WeightDecay = 0.1, 0.5
	opt, err := optim.NewAdamW([]*autograd.Tensor{w}, o)
	if err != nil {
		panic(err)
	}
	for range 3 {
		w.SetGrad(autograd.Zeros(1))
		opt.Step()
	}
	fmt.Printf("w = %.6f (0.95³ = %.6f)\n", w.Item(), math.Pow(0.95, 3))
	// Output: w = 0.857375 (0.95³ = 0.857375)
}

// testChannelsLast steps a channels-last parameter and a contiguous copy
// with the optimizers mk makes, from the same gradients (one given
// contiguous to the channels-last parameter, and the parameter made
// contiguous for the last step), and wants the same values, and every
// state tensor in its parameter's format.
func testChannelsLast(t *testing.T, mk func(p *autograd.Tensor) optim.Optimizer) {
	t.Helper()
	g := autograd.NewGenerator(1)
	shape := []int{2, 3, 2, 2}
	cl := autograd.Randn(g, shape...)
	ref := cl.Clone()
	cl.SetRequiresGrad(true)
	ref.SetRequiresGrad(true)
	cl.SetFormat(autograd.ChannelsLast)
	optCL, optRef := mk(cl), mk(ref)
	for step := range 4 {
		grad := autograd.Randn(g, shape...)
		ref.SetGrad(grad)
		cl.SetGrad(grad.To(cl.Format()))
		if step == 2 {
			cl.SetGrad(grad) // a contiguous gradient is reordered, not misread
		}
		if step == 3 {
			cl.SetFormat(autograd.Contiguous)
			cl.SetGrad(grad)
		}
		optCL.Step()
		optRef.Step()
		if !slices.Equal(cl.Values(), ref.Values()) {
			t.Fatalf("step %d: channels-last parameter differs from contiguous one", step)
		}
		for name, s := range optCL.StateDict().State[0] {
			if name != "step" && s.Format() != cl.Format() {
				t.Fatalf("step %d: %s is %v, parameter %v", step, name, s.Format(), cl.Format())
			}
			if !slices.Equal(s.Values(), optRef.StateDict().State[0][name].Values()) {
				t.Fatalf("step %d: %s differs", step, name)
			}
		}
	}
}

// paramsWithGrads returns float32 leaves of the given sizes with random
// values and gradients.
func paramsWithGrads(sizes ...int) []*autograd.Tensor {
	g := autograd.NewGenerator(2)
	var params []*autograd.Tensor
	for _, n := range sizes {
		p := autograd.Randn(g, n)
		p.SetRequiresGrad(true)
		p.SetGrad(autograd.Randn(g, n))
		params = append(params, p)
	}
	return params
}

// resumeAndCompare steps two optimizers over three parameters (shaped
// [3], [1] and [2]) twice with the same gradients, and wants the same
// parameters and state after: dst has loaded src's state dict, and the
// loaded state must be a copy that continues identically.
func resumeAndCompare(t *testing.T, src optim.Optimizer, srcParams []*autograd.Tensor, dst optim.Optimizer, dstParams []*autograd.Tensor) {
	t.Helper()
	for range 2 {
		for _, o := range []struct {
			opt    optim.Optimizer
			params []*autograd.Tensor
		}{{src, srcParams}, {dst, dstParams}} {
			setGrad(o.params[0], 1, 1, 1)
			setGrad(o.params[1], 2)
			setGrad(o.params[2], -1, -1)
			o.opt.Step()
		}
	}
	for i := range srcParams {
		if !slices.Equal(srcParams[i].Values(), dstParams[i].Values()) {
			t.Errorf("parameter %d: %v after resuming, want %v", i, dstParams[i].Values(), srcParams[i].Values())
		}
	}
	ssd, dsd := src.StateDict(), dst.StateDict()
	for id, st := range ssd.State {
		for name, v := range st {
			if !slices.Equal(v.Values(), dsd.State[id][name].Values()) {
				t.Errorf("state.%d.%s differs after resuming", id, name)
			}
		}
	}
}

// loadCase is a change to a state dict that LoadStateDict must reject with
// an error containing want; a nil mutate loads a nil state dict.
type loadCase struct {
	name   string
	mutate func(sd *optim.StateDict)
	want   string
}

// testLoadRejects loads each case's state dict (of an optimizer trained
// one step) into one trained two steps, and wants the error and the
// optimizer unchanged: parameter 0's state tensor called state (the same
// tensor and values), its step 2, and group 1's learning rate.
func testLoadRejects(t *testing.T, cases []loadCase, state string, trained func(t *testing.T, steps int) optim.Optimizer) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt := trained(t, 2)
			before := opt.StateDict()
			valuesBefore, lrBefore := before.State[0][state].Values(), opt.LR(1)
			var sd *optim.StateDict
			if c.mutate != nil {
				sd = trained(t, 1).StateDict()
				c.mutate(sd)
			}
			err := opt.LoadStateDict(sd)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one containing %q", err, c.want)
			}
			after := opt.StateDict()
			if after.State[0][state] != before.State[0][state] || !slices.Equal(after.State[0][state].Values(), valuesBefore) ||
				after.State[0]["step"].Item() != 2 || opt.LR(1) != lrBefore {
				t.Error("a failed LoadStateDict changed the optimizer")
			}
		})
	}
}

// trainThree steps opt steps times over three parameters shaped [3], [1]
// and [2], giving the middle one no gradient.
func trainThree(opt optim.Optimizer, params []*autograd.Tensor, steps int) {
	for i := range steps {
		setGrad(params[0], 0.1, float32(i), -1)
		setGrad(params[2], 1, -0.5*float32(i))
		opt.Step()
	}
}
