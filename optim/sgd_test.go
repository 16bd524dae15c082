package optim_test

import (
	"fmt"
	"math"
	"slices"
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
