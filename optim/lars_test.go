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

func TestLARSChannelsLast(t *testing.T) {
	o := optim.LARSOptions{LR: 0.5, Momentum: 0.9, WeightDecay: 1e-3, Eeta: 1e-2}
	testChannelsLast(t, func(p *autograd.Tensor) optim.Optimizer {
		opt, err := optim.NewLARS([]*autograd.Tensor{p}, o)
		if err != nil {
			t.Fatal(err)
		}
		return opt
	})
}

func TestLARSStepDoesNotAllocate(t *testing.T) {
	opt, err := optim.NewLARS(paramsWithGrads(3, 1000, 1<<16), optim.LARSOptions{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4, Eeta: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	opt.Step()
	if a := testing.AllocsPerRun(10, opt.Step); a != 0 {
		t.Fatalf("Step allocates %v times", a)
	}
}

func TestNewLARSRejectsBadInput(t *testing.T) {
	p := leaf(1)
	ok := []*autograd.Tensor{p}
	with := func(f func(o *optim.LARSOptions)) optim.LARSOptions {
		o := optim.DefaultLARSOptions()
		f(&o)
		return o
	}
	cases := []struct {
		name   string
		groups []optim.LARSGroup
		want   string
	}{
		{"negative lr", []optim.LARSGroup{{ok, with(func(o *optim.LARSOptions) { o.LR = -0.1 })}}, "group 0: invalid learning rate: -0.1"},
		{"negative momentum", []optim.LARSGroup{{ok, with(func(o *optim.LARSOptions) { o.Momentum = -0.9 })}}, "invalid momentum value: -0.9"},
		{"negative weight decay", []optim.LARSGroup{{ok, with(func(o *optim.LARSOptions) { o.WeightDecay = -1e-4 })}}, "invalid weight_decay value: -0.0001"},
		{"NaN dampening", []optim.LARSGroup{{ok, with(func(o *optim.LARSOptions) { o.Dampening = math.NaN() })}}, "invalid dampening value: NaN"},
		{"nesterov without momentum", []optim.LARSGroup{{ok, with(func(o *optim.LARSOptions) { o.Nesterov = true })}}, "Nesterov momentum requires a momentum"},
		{"zero value", []optim.LARSGroup{{ok, optim.LARSOptions{LR: 0.1}}}, "invalid eeta value: 0"},
		{"eeta above 1", []optim.LARSGroup{{ok, with(func(o *optim.LARSOptions) { o.Eeta = 1.5 })}}, "invalid eeta value: 1.5"},
		{"negative eps", []optim.LARSGroup{{ok, with(func(o *optim.LARSOptions) { o.Eps = -1 })}}, "invalid epsilon value: -1"},
		{"bad second group", []optim.LARSGroup{{ok, optim.DefaultLARSOptions()}, {[]*autograd.Tensor{leaf(2)}, with(func(o *optim.LARSOptions) { o.LR = -1 })}}, "group 1: invalid learning rate"},
		{"no groups", nil, "empty parameter list"},
		{"duplicate", []optim.LARSGroup{{ok, optim.DefaultLARSOptions()}, {ok, optim.DefaultLARSOptions()}}, "more than one parameter group"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt, err := optim.NewLARSGroups(c.groups...)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "optim: LARS: ") {
				t.Fatalf("got %v, %v; want error containing %q", opt, err, c.want)
			}
		})
	}
}

func trainedLARS(t *testing.T, steps int) (*optim.LARS, []*autograd.Tensor) {
	t.Helper()
	a, b, c := leaf(1, 2, 3), leaf(-1), leaf(0.5, 0.25)
	base := optim.LARSOptions{LR: 0.5, Momentum: 0.9, WeightDecay: 1e-3, Eeta: 1e-2, Eps: 1e-6}
	other := base
	other.LR, other.Nesterov = 0.25, true
	opt, err := optim.NewLARSGroups(optim.LARSGroup{Params: []*autograd.Tensor{a, b}, LARSOptions: base},
		optim.LARSGroup{Params: []*autograd.Tensor{c}, LARSOptions: other})
	if err != nil {
		t.Fatal(err)
	}
	params := []*autograd.Tensor{a, b, c}
	trainThree(opt, params, steps)
	return opt, params
}

func TestLARSStateDictRoundTrip(t *testing.T) {
	src, srcParams := trainedLARS(t, 3)
	if _, err := optim.NewStepLR(src, 2, 0.5); err != nil {
		t.Fatal(err)
	}
	sd := src.StateDict()
	if h := sd.Groups[1].Hyper; h["nesterov"] != 1 || h["eeta"] != 1e-2 || h["epsilon"] != 1e-6 || h["initial_lr"] != 0.25 || len(h) != 8 {
		t.Errorf("group 1 hyper-parameters %v", h)
	}
	dst, dstParams := trainedLARS(t, 0)
	for i := range dstParams {
		dstParams[i].CopyFrom(srcParams[i])
	}
	if err := dst.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	resumeAndCompare(t, src, srcParams, dst, dstParams)
}

func TestLARSLoadStateDictRejectsMismatches(t *testing.T) {
	cases := []loadCase{
		{"nil", nil, "nil state dict"},
		{"group count", func(sd *optim.StateDict) { sd.Groups = sd.Groups[:1] }, "has 1 parameter groups, the optimizer has 2"},
		{"unknown state", func(sd *optim.StateDict) { sd.State[0]["exp_avg"] = sd.State[0]["momentum_buffer"] }, "state.0.exp_avg: unknown state"},
		{"shape", func(sd *optim.StateDict) { sd.State[2]["momentum_buffer"] = autograd.Zeros(3) }, "state.2.momentum_buffer: shape [3] does not match the parameter's shape [2]"},
		{"missing eeta", func(sd *optim.StateDict) { delete(sd.Groups[0].Hyper, "eeta") }, "param_groups.0.eeta: missing hyper-parameter"},
		{"unknown hyper", func(sd *optim.StateDict) { sd.Groups[0].Hyper["maximize"] = 0 }, "param_groups.0.maximize: unknown hyper-parameter"},
		{"bad eeta", func(sd *optim.StateDict) { sd.Groups[1].Hyper["eeta"] = 2 }, "invalid eeta value: 2 (want (0, 1]; DefaultLARSOptions has 1e-3) (in param_groups.1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt, _ := trainedLARS(t, 2)
			before := opt.StateDict()
			buf, values, lr := before.State[0]["momentum_buffer"], before.State[0]["momentum_buffer"].Values(), opt.LR(1)
			var sd *optim.StateDict
			if c.mutate != nil {
				src, _ := trainedLARS(t, 1)
				sd = src.StateDict()
				c.mutate(sd)
			}
			err := opt.LoadStateDict(sd)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one containing %q", err, c.want)
			}
			after := opt.StateDict()
			if after.State[0]["momentum_buffer"] != buf || !slices.Equal(buf.Values(), values) || opt.LR(1) != lr {
				t.Error("a failed LoadStateDict changed the optimizer")
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
