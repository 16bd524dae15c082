package optim_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/optim"
)

func leaf(vals ...float32) *autograd.Tensor {
	t := autograd.FromFloat32(vals)
	t.SetRequiresGrad(true)
	return t
}

func setGrad(p *autograd.Tensor, vals ...float32) {
	g := autograd.FromFloat32(vals, p.Shape()...)
	if p.Format() != autograd.Contiguous {
		g = g.To(p.Format())
	}
	p.SetGrad(g)
}

// sgdScalar is the PyTorch update for one element in float64, close enough
// to the float32 kernel for the tolerances used here.
type sgdScalar struct {
	buf  float64
	init bool
}

func (s *sgdScalar) step(p, g float64, o optim.SGDOptions) float64 {
	if o.Maximize {
		g = -g
	}
	g += o.WeightDecay * p
	if o.Momentum != 0 {
		if !s.init {
			s.buf, s.init = g, true
		} else {
			s.buf = o.Momentum*s.buf + (1-o.Dampening)*g
		}
		if o.Nesterov {
			g += o.Momentum * s.buf
		} else {
			g = s.buf
		}
	}
	return p - o.LR*g
}

func TestSGDFollowsPyTorchUpdate(t *testing.T) {
	grads := [][]float32{{0.5, -1, 2}, {0.25, 0.5, -3}, {-1, 1, 0.125}, {2, 0, -0.5}}
	cases := map[string]optim.SGDOptions{
		"plain":     {LR: 0.1},
		"decay":     {LR: 0.1, WeightDecay: 0.01},
		"momentum":  {LR: 0.1, Momentum: 0.9},
		"dampening": {LR: 0.05, Momentum: 0.8, Dampening: 0.3, WeightDecay: 0.02},
		"nesterov":  {LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3},
		"maximize":  {LR: 0.2, Momentum: 0.5, Maximize: true},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			p := leaf(1, -2, 0.5)
			opt, err := optim.NewSGD([]*autograd.Tensor{p}, o)
			if err != nil {
				t.Fatal(err)
			}
			want := []float64{1, -2, 0.5}
			ref := make([]sgdScalar, 3)
			for _, g := range grads {
				setGrad(p, g...)
				opt.Step()
				for i := range want {
					want[i] = ref[i].step(want[i], float64(g[i]), o)
				}
			}
			for i, v := range p.Values() {
				if math.Abs(v-want[i]) > 1e-6*(1+math.Abs(want[i])) {
					t.Errorf("element %d: got %v, want %v", i, v, want[i])
				}
			}
		})
	}
}

func TestSGDSkipsParametersWithoutGradient(t *testing.T) {
	a, b := leaf(1, 2), leaf(3, 4)
	opt, err := optim.NewSGD([]*autograd.Tensor{a, b}, optim.SGDOptions{LR: 0.5, Momentum: 0.9, WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	setGrad(a, 1, 1)
	opt.Step()
	if got := b.Values(); !slices.Equal(got, []float64{3, 4}) {
		t.Errorf("parameter without gradient changed to %v", got)
	}
	if _, ok := opt.StateDict().State[1]; ok {
		t.Error("parameter without gradient got a momentum buffer")
	}
	if _, ok := opt.StateDict().State[0]; !ok {
		t.Error("parameter with gradient has no momentum buffer")
	}
	opt.ZeroGrad()
	if a.Grad() != nil {
		t.Error("ZeroGrad left a gradient")
	}
}

func TestSGDGroupsHaveTheirOwnHyperParameters(t *testing.T) {
	a, b := leaf(1), leaf(1)
	base := optim.SGDOptions{LR: 0.1}
	head := base
	head.LR = 0.01
	opt, err := optim.NewSGDGroups(optim.SGDGroup{Params: []*autograd.Tensor{a}, SGDOptions: base},
		optim.SGDGroup{Params: []*autograd.Tensor{b}, SGDOptions: head})
	if err != nil {
		t.Fatal(err)
	}
	setGrad(a, 1)
	setGrad(b, 1)
	opt.Step()
	if a.Item() != float64(float32(0.9)) || b.Item() != float64(float32(0.99)) {
		t.Fatalf("got %v and %v, want 0.9 and 0.99", a.Item(), b.Item())
	}
	opt.SetLR(1, 0.5)
	if opt.LR(0) != 0.1 || opt.LR(1) != 0.5 || opt.Group(1).LR != 0.5 {
		t.Errorf("LRs %v %v after SetLR(1, 0.5)", opt.LR(0), opt.LR(1))
	}
	err = autograd.Try(func() { opt.LR(2) })
	if err == nil || !strings.Contains(err.Error(), "group 2 out of range") {
		t.Errorf("LR(2): got error %v", err)
	}
}

// A channels-last parameter's momentum buffer takes its format, and follows
// it when the parameter is reordered.
func TestSGDChannelsLast(t *testing.T) {
	g := autograd.NewGenerator(1)
	shape := []int{2, 3, 2, 2}
	mk := func() *autograd.Tensor {
		p := autograd.Randn(g, shape...)
		p.SetRequiresGrad(true)
		return p
	}
	cl, ref := mk(), mk()
	ref.CopyFrom(cl)
	cl.SetFormat(autograd.ChannelsLast)
	o := optim.SGDOptions{LR: 0.1, Momentum: 0.9, WeightDecay: 0.01}
	optCL, _ := optim.NewSGD([]*autograd.Tensor{cl}, o)
	optRef, _ := optim.NewSGD([]*autograd.Tensor{ref}, o)
	for step := range 4 {
		grad := autograd.Randn(g, shape...)
		ref.SetGrad(grad)
		cl.SetGrad(grad.To(cl.Format()))
		if step == 2 {
			// A contiguous gradient for a channels-last parameter is
			// reordered, not misread.
			cl.SetGrad(grad)
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
		buf := optCL.StateDict().State[0]["momentum_buffer"]
		if buf.Format() != cl.Format() {
			t.Fatalf("step %d: momentum buffer is %v, parameter %v", step, buf.Format(), cl.Format())
		}
		if !slices.Equal(buf.Values(), optRef.StateDict().State[0]["momentum_buffer"].Values()) {
			t.Fatalf("step %d: momentum buffers differ", step)
		}
	}
}

func TestSGDStepDoesNotAllocate(t *testing.T) {
	g := autograd.NewGenerator(2)
	var params []*autograd.Tensor
	for _, n := range []int{3, 1000, 1 << 16} {
		p := autograd.Randn(g, n)
		p.SetRequiresGrad(true)
		p.SetGrad(autograd.Randn(g, n))
		params = append(params, p)
	}
	opt, err := optim.NewSGD(params, optim.SGDOptions{LR: 0.01, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	opt.Step()
	if a := testing.AllocsPerRun(10, opt.Step); a != 0 {
		t.Fatalf("Step allocates %v times after the first", a)
	}
}

func TestNewSGDRejectsBadInput(t *testing.T) {
	p := leaf(1)
	nonLeaf := autograd.Mul(p, p)
	ints := autograd.FromInt64([]int64{1})
	ok := []*autograd.Tensor{p}
	cases := []struct {
		name   string
		groups []optim.SGDGroup
		want   string
	}{
		{"negative lr", []optim.SGDGroup{{ok, optim.SGDOptions{LR: -0.1}}}, "invalid learning rate: -0.1"},
		{"NaN lr", []optim.SGDGroup{{ok, optim.SGDOptions{LR: math.NaN()}}}, "invalid learning rate: NaN"},
		{"infinite lr", []optim.SGDGroup{{ok, optim.SGDOptions{LR: math.Inf(1)}}}, "invalid learning rate: +Inf"},
		{"NaN momentum", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1, Momentum: math.NaN()}}}, "invalid momentum value: NaN"},
		{"infinite momentum", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1, Momentum: math.Inf(1)}}}, "invalid momentum value: +Inf"},
		{"NaN weight decay", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1, WeightDecay: math.NaN()}}}, "invalid weight_decay value: NaN"},
		{"NaN dampening", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1, Momentum: 0.9, Dampening: math.NaN()}}}, "invalid dampening value: NaN"},
		{"infinite dampening", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1, Dampening: math.Inf(-1)}}}, "invalid dampening value: -Inf"},
		{"bfloat16 parameter", []optim.SGDGroup{{[]*autograd.Tensor{autograd.Cast(autograd.Ones(2), autograd.BFloat16).SetRequiresGrad(true)}, optim.SGDOptions{LR: 0.1}}},
			"group 0 parameter 0 is bfloat16; only float32 parameters are supported"},
		{"negative momentum", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1, Momentum: -1}}}, "invalid momentum value: -1"},
		{"negative weight decay", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1, WeightDecay: -1e-4}}}, "invalid weight_decay value"},
		{"nesterov without momentum", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1, Nesterov: true}}}, "Nesterov momentum requires a momentum and zero dampening"},
		{"nesterov with dampening", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1, Momentum: 0.9, Dampening: 0.1, Nesterov: true}}}, "Nesterov momentum requires"},
		{"bad second group", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1}}, {[]*autograd.Tensor{leaf(2)}, optim.SGDOptions{LR: -1}}}, "group 1: invalid learning rate"},
		{"no groups", nil, "empty parameter list"},
		{"no parameters", []optim.SGDGroup{{nil, optim.SGDOptions{LR: 0.1}}}, "empty parameter list"},
		{"nil parameter", []optim.SGDGroup{{[]*autograd.Tensor{p, nil}, optim.SGDOptions{LR: 0.1}}}, "group 0 parameter 1 is nil"},
		{"non-leaf", []optim.SGDGroup{{[]*autograd.Tensor{nonLeaf}, optim.SGDOptions{LR: 0.1}}}, "can't optimize a non-leaf tensor"},
		{"int64 parameter", []optim.SGDGroup{{[]*autograd.Tensor{ints}, optim.SGDOptions{LR: 0.1}}}, "is int64; only float32"},
		{"duplicate", []optim.SGDGroup{{ok, optim.SGDOptions{LR: 0.1}}, {ok, optim.SGDOptions{LR: 0.2}}}, "more than one parameter group"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt, err := optim.NewSGDGroups(c.groups...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want error containing %q", opt, err, c.want)
			}
		})
	}
}

func TestSGDGroupIndexOutOfRange(t *testing.T) {
	opt := twoGroupSGD(t)
	calls := map[string]func(g int){
		"SGD.Group":        func(g int) { opt.Group(g) },
		"SGD.LR":           func(g int) { opt.LR(g) },
		"SGD.SetLR":        func(g int) { opt.SetLR(g, 1) },
		"SGD.InitialLR":    func(g int) { opt.InitialLR(g) },
		"SGD.SetInitialLR": func(g int) { opt.SetInitialLR(g, 1) },
	}
	for name, call := range calls {
		for _, g := range []int{-1, 2} {
			err := autograd.Try(func() { call(g) })
			if want := fmt.Sprintf("%s: parameter group %d out of range [0, 2)", name, g); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s(%d): error %v, want %q", name, g, err, want)
			}
		}
	}
	if opt.LR(0) != 0.1 || opt.LR(1) != 0.05 {
		t.Errorf("rejected calls changed the learning rates to %v, %v", opt.LR(0), opt.LR(1))
	}
}

// An empty state entry, as PyTorch writes for a parameter that has not
// been stepped, loads as no momentum buffer.
func TestSGDLoadStateDictEmptyState(t *testing.T) {
	opt, _ := trainedSGD(t, 2)
	sd := opt.StateDict()
	sd.State[0] = map[string]*autograd.Tensor{}
	fresh, _ := trainedSGD(t, 0)
	if err := autograd.Try(func() {
		if err := fresh.LoadStateDict(sd); err != nil {
			t.Fatal(err)
		}
	}); err != nil {
		t.Fatalf("LoadStateDict panicked: %v", err)
	}
	if _, ok := fresh.StateDict().State[0]; ok {
		t.Error("an empty state entry loaded as a momentum buffer")
	}
	if _, ok := fresh.StateDict().State[2]; !ok {
		t.Error("parameter 2 lost its momentum buffer")
	}
}

func trainedSGD(t *testing.T, steps int) (*optim.SGD, []*autograd.Tensor) {
	t.Helper()
	a, b, c := leaf(1, 2, 3), leaf(-1), leaf(0.5, 0.25)
	base := optim.SGDOptions{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-3}
	other := base
	other.LR, other.Nesterov = 0.05, true
	opt, err := optim.NewSGDGroups(optim.SGDGroup{Params: []*autograd.Tensor{a, b}, SGDOptions: base},
		optim.SGDGroup{Params: []*autograd.Tensor{c}, SGDOptions: other})
	if err != nil {
		t.Fatal(err)
	}
	for i := range steps {
		setGrad(a, 0.1, float32(i), -1)
		setGrad(c, 1, -0.5)
		opt.Step()
	}
	return opt, []*autograd.Tensor{a, b, c}
}

func TestSGDStateDictRoundTrip(t *testing.T) {
	src, srcParams := trainedSGD(t, 3)
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
	if v, ok := sd.Groups[0].Hyper["initial_lr"]; !ok || v != 0.1 {
		t.Errorf("initial_lr %v, %v after attaching a scheduler", v, ok)
	}

	dst, dstParams := trainedSGD(t, 0)
	for i := range dstParams {
		dstParams[i].CopyFrom(srcParams[i])
	}
	if err := dst.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	if lr, ok := dst.InitialLR(1); !ok || lr != 0.05 {
		t.Errorf("loaded initial LR %v, %v", lr, ok)
	}
	// The loaded buffers are copies: stepping one optimizer leaves the
	// other's state alone, and both continue identically.
	for _, o := range []struct {
		opt    *optim.SGD
		params []*autograd.Tensor
	}{{src, srcParams}, {dst, dstParams}} {
		setGrad(o.params[0], 1, 1, 1)
		setGrad(o.params[1], 2)
		setGrad(o.params[2], -1, -1)
		o.opt.Step()
	}
	for i := range srcParams {
		if !slices.Equal(srcParams[i].Values(), dstParams[i].Values()) {
			t.Errorf("parameter %d: %v after resuming, want %v", i, dstParams[i].Values(), srcParams[i].Values())
		}
	}
}

func TestSGDLoadStateDictRejectsMismatches(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(sd *optim.StateDict)
		want   string
	}{
		{"nil", nil, "nil state dict"},
		{"group count", func(sd *optim.StateDict) { sd.Groups = sd.Groups[:1] }, "has 1 parameter groups, the optimizer has 2"},
		{"group size", func(sd *optim.StateDict) { sd.Groups[0].Params = sd.Groups[0].Params[:1] }, "param_groups.0: loaded group has 1 parameters"},
		{"repeated number", func(sd *optim.StateDict) { sd.Groups[1].Params = []int{0} }, "param_groups.1.params: parameter number 0 appears twice"},
		{"unknown parameter", func(sd *optim.StateDict) { sd.State[7] = sd.State[0] }, "state.7: no parameter has number 7"},
		{"unknown state", func(sd *optim.StateDict) { sd.State[0]["exp_avg"] = sd.State[0]["momentum_buffer"] }, "state.0.exp_avg: unknown state"},
		{"nil state", func(sd *optim.StateDict) { sd.State[2]["momentum_buffer"] = nil }, "state.2.momentum_buffer: nil tensor"},
		{"shape", func(sd *optim.StateDict) { sd.State[0]["momentum_buffer"] = autograd.Zeros(2) }, "state.0.momentum_buffer: shape [2] does not match the parameter's shape [3]"},
		{"dtype", func(sd *optim.StateDict) { sd.State[2]["momentum_buffer"] = autograd.FromInt64([]int64{1, 2}) }, "state.2.momentum_buffer: dtype int64"},
		{"missing lr", func(sd *optim.StateDict) { delete(sd.Groups[1].Hyper, "lr") }, "param_groups.1.lr: missing hyper-parameter"},
		{"unknown hyper", func(sd *optim.StateDict) { sd.Groups[0].Hyper["betas"] = 0.9 }, "param_groups.0.betas: unknown hyper-parameter"},
		{"bad bool", func(sd *optim.StateDict) { sd.Groups[0].Hyper["nesterov"] = 0.5 }, "param_groups.0.nesterov: boolean hyper-parameter is 0.5"},
		{"NaN", func(sd *optim.StateDict) { sd.Groups[0].Hyper["momentum"] = math.NaN() }, "param_groups.0.momentum: value is NaN"},
		{"negative lr", func(sd *optim.StateDict) { sd.Groups[0].Hyper["lr"] = -1 }, "invalid learning rate: -1 (in param_groups.0)"},
		{"nesterov", func(sd *optim.StateDict) { sd.Groups[1].Hyper["dampening"] = 0.5 }, "Nesterov momentum requires"},
		{"infinite lr", func(sd *optim.StateDict) { sd.Groups[1].Hyper["lr"] = math.Inf(1) }, "invalid learning rate: +Inf (in param_groups.1)"},
		{"NaN initial lr", func(sd *optim.StateDict) { sd.Groups[0].Hyper["initial_lr"] = math.NaN() }, "param_groups.0.initial_lr: value is NaN"},
		{"nil groups' hyper-parameters", func(sd *optim.StateDict) { sd.Groups[0].Hyper = nil }, "param_groups.0.lr: missing hyper-parameter"},
		{"0-d state for a vector", func(sd *optim.StateDict) { sd.State[0]["momentum_buffer"] = autograd.Scalar(1) }, "state.0.momentum_buffer: shape [] does not match the parameter's shape [3]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt, _ := trainedSGD(t, 2)
			before := opt.StateDict()
			bufBefore := before.State[0]["momentum_buffer"].Values()
			var sd *optim.StateDict
			if c.mutate != nil {
				fresh, _ := trainedSGD(t, 1)
				sd = fresh.StateDict()
				c.mutate(sd)
			}
			err := opt.LoadStateDict(sd)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one containing %q", err, c.want)
			}
			after := opt.StateDict()
			if after.State[0]["momentum_buffer"] != before.State[0]["momentum_buffer"] ||
				!slices.Equal(after.State[0]["momentum_buffer"].Values(), bufBefore) || opt.LR(1) != 0.05 {
				t.Error("a failed LoadStateDict changed the optimizer")
			}
		})
	}
}

// TestSGDMatchesPyTorchBitForBit drives SGD with gen_optim.py's gradients,
// no model in between, and wants PyTorch's parameters and momentum buffers
// exactly, with the 4-D parameter contiguous and channels-last.
func TestSGDMatchesPyTorchBitForBit(t *testing.T) {
	set := golden.Load(t, "optim.safetensors")
	p0, q0 := set.Get(t, "direct.p0"), set.Get(t, "direct.q0")
	gp, gq := set.Get(t, "direct.gp"), set.Get(t, "direct.gq")
	steps := gp.Dim(0)
	cases := map[string]optim.SGDOptions{
		"plain":     {LR: 0.1},
		"decay":     {LR: 0.1, WeightDecay: 1e-2},
		"momentum":  {LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4},
		"dampening": {LR: 0.05, Momentum: 0.8, Dampening: 0.3, WeightDecay: 1e-3},
		"nesterov":  {LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-4},
		"maximize":  {LR: 0.02, Momentum: 0.5, Maximize: true, WeightDecay: 1e-2},
	}
	same := func(what string, got, want *autograd.Tensor) {
		t.Helper()
		if !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(got.Values(), want.Values()) {
			t.Errorf("%s differs from PyTorch: %v", what, golden.Close(got, want, 0))
		}
	}
	for name, o := range cases {
		for _, format := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
			t.Run(fmt.Sprintf("%s/%v", name, format), func(t *testing.T) {
				p, q := p0.Clone(), q0.Clone()
				p.SetRequiresGrad(true)
				q.SetRequiresGrad(true)
				p.SetFormat(format)
				opt, err := optim.NewSGD([]*autograd.Tensor{p, q}, o)
				if err != nil {
					t.Fatal(err)
				}
				np, nq := p.Numel(), q.Numel()
				for i := range steps {
					g := autograd.FromFloat32(append([]float32(nil), gp.Float32s()[i*np:(i+1)*np]...), p.Shape()...)
					p.SetGrad(g.To(format))
					q.SetGrad(nil)
					if i%2 == 0 {
						q.SetGrad(autograd.FromFloat32(append([]float32(nil), gq.Float32s()[i*nq:(i+1)*nq]...), nq))
					}
					opt.Step()
				}
				same("p", p, set.Get(t, "direct."+name+".p"))
				same("q", q, set.Get(t, "direct."+name+".q"))
				if o.Momentum != 0 {
					st := opt.StateDict().State
					same("momentum buffer of p", st[0]["momentum_buffer"], set.Get(t, "direct."+name+".mp"))
					same("momentum buffer of q", st[1]["momentum_buffer"], set.Get(t, "direct."+name+".mq"))
				}
			})
		}
	}
}
