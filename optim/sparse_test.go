package optim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// sparseGolden is gen_sparse.py's data: two tables and, per step, the
// lookups whose gradients train them.
type sparseGolden struct {
	set golden.Set
	t   *testing.T
}

// row returns step s of a [steps, ...] golden tensor.
func (g sparseGolden) row(name string, s int) *autograd.Tensor {
	x := g.set.Get(g.t, name)
	shape := x.Shape()[1:]
	n := x.Numel() / x.Shape()[0]
	if x.DType() == autograd.Int64 {
		return autograd.FromInt64(x.Int64s()[s*n:(s+1)*n], shape...)
	}
	return autograd.FromFloat32(x.Float32s()[s*n:(s+1)*n], shape...)
}

// backward runs step s's lookups of gen_sparse.py: sparse embedding
// lookups of w (a, or a then b), each with its own Backward, and a sparse
// mean bag of v.
func (g sparseGolden) backward(w, v *autograd.Tensor, s int, lookups ...string) {
	for _, k := range lookups {
		autograd.EmbeddingSparse(g.row(k+".idx", s), w).Backward(g.row(k+".dy", s))
	}
	offsets := g.set.Get(g.t, "bag.offsets")
	autograd.EmbeddingBagSparse(g.row("bag.idx", s), offsets, v, autograd.BagMean, nil).Backward(g.row("bag.dy", s))
}

func (g sparseGolden) tables() (w, v *autograd.Tensor) {
	w = g.set.Get(g.t, "W0").Detach()
	v = g.set.Get(g.t, "V0").Detach()
	w, v = autograd.FromFloat32(append([]float32(nil), w.Float32s()...), w.Shape()...), autograd.FromFloat32(append([]float32(nil), v.Float32s()...), v.Shape()...)
	return w.SetRequiresGrad(true), v.SetRequiresGrad(true)
}

// TestSparseGradMatchesPyTorch: a sparse lookup with repeated rows and a
// sparse mean bag give coalesced gradients bit for bit equal to PyTorch's
// grad.coalesce().
func TestSparseGradMatchesPyTorch(t *testing.T) {
	g := sparseGolden{set: golden.Load(t, "sparse.safetensors"), t: t}
	w, v := g.tables()
	g.backward(w, v, 0, "a")
	for name, p := range map[string]*autograd.Tensor{"W": w, "V": v} {
		sg := p.SparseGrad()
		if sg == nil || p.Grad() != nil {
			t.Fatalf("%s: sparse gradient %v, dense %v; want only a sparse one", name, sg, p.Grad())
		}
		wantIdx := g.set.Get(t, "grad."+name+".indices").Int64s()
		if fmt.Sprint(sg.Indices) != fmt.Sprint(wantIdx) {
			t.Errorf("%s: indices %v, PyTorch %v", name, sg.Indices, wantIdx)
		}
		if err := sameBits(sg.Values.Float32s(), g.set.Get(t, "grad."+name+".values").Float32s()); err != "" {
			t.Errorf("%s: values: %s", name, err)
		}
	}
}

// TestSparseOptimizersMatchPyTorch trains both tables for 50 steps of
// sparse gradients (repeated rows within and across lookups) with each
// SGD and Adagrad configuration and compares the tables and the state with
// torch.optim's.
//
// Adagrad matches bit for bit when each step's gradient comes from one
// lookup. Where PyTorch rounds differently, results agree within
// 1e-6·max|want| (a few ulps of the table's scale) after 50 steps: its SGD
// adds a row's entries one by one (uncoalesced gradients, and a sparse
// momentum buffer that keeps an entry per row per step) where Kiln adds
// the coalesced row once; and it adds the uncoalesced gradients of two
// lookups with a merge meant for sorted indices, which reorders the sums
// of repeated rows that Kiln sums in lookup order.
func TestSparseOptimizersMatchPyTorch(t *testing.T) {
	g := sparseGolden{set: golden.Load(t, "sparse.safetensors"), t: t}
	sgd := func(o optim.SGDOptions) func([]*autograd.Tensor) (optim.Optimizer, error) {
		return func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewSGD(p, o) }
	}
	adagrad := func(lr, lrDecay, initial, eps float64, maximize bool) func([]*autograd.Tensor) (optim.Optimizer, error) {
		o := optim.AdagradOptions{LR: lr, LRDecay: lrDecay, InitialAccumulatorValue: initial, Eps: eps, Maximize: maximize}
		return func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewAdagrad(p, o) }
	}
	cases := []struct {
		name  string
		mk    func([]*autograd.Tensor) (optim.Optimizer, error)
		state string // the state tensor gen_sparse.py saved, if any
		// rtol bounds max|got−want| / max|want|; 0 asks for bit for bit.
		// PyTorch's Nesterov step applies every entry of its uncoalesced
		// buffer (an entry per row per step) separately, each rounding at
		// the table's scale, which grows past 20 here: 2e-6.
		rtol float64
	}{
		{"sgd", sgd(optim.SGDOptions{LR: 0.1}), "", 1e-6},
		{"sgd_maximize", sgd(optim.SGDOptions{LR: 0.05, Maximize: true}), "", 1e-6},
		{"sgd_momentum", sgd(optim.SGDOptions{LR: 0.1, Momentum: 0.9, Dampening: 0.1}), "momentum_buffer", 1e-6},
		{"sgd_nesterov", sgd(optim.SGDOptions{LR: 0.1, Momentum: 0.9, Nesterov: true}), "momentum_buffer", 2e-6},
		{"adagrad", adagrad(0.1, 0.01, 0.1, 1e-10, false), "sum", 1e-6},
		{"adagrad_maximize", adagrad(0.05, 0, 0, 1e-6, true), "sum", 1e-6},
		{"sgd_single", sgd(optim.SGDOptions{LR: 0.1}), "", 1e-6},
		{"adagrad_single", adagrad(0.1, 0.01, 0.1, 1e-10, false), "sum", 0},
	}
	const steps = 50
	check := func(t *testing.T, what string, got, want *autograd.Tensor, rtol float64) {
		t.Helper()
		if rtol == 0 {
			if got == nil {
				t.Errorf("%s: missing", what)
			} else if msg := sameBits(got.Float32s(), want.Float32s()); msg != "" {
				t.Errorf("%s: %s", what, msg)
			}
			return
		}
		scale := 0.0
		for _, v := range want.Values() {
			scale = max(scale, math.Abs(v))
		}
		golden.AssertWithin(t, what, got, want, rtol*scale)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, v := g.tables()
			opt, err := c.mk([]*autograd.Tensor{w, v})
			if err != nil {
				t.Fatal(err)
			}
			lookups := []string{"a", "b"}
			if strings.HasSuffix(c.name, "_single") {
				lookups = lookups[:1]
			}
			for s := range steps {
				opt.ZeroGrad()
				g.backward(w, v, s, lookups...)
				opt.Step()
			}
			check(t, "W", w, g.set.Get(t, c.name+".W"), c.rtol)
			check(t, "V", v, g.set.Get(t, c.name+".V"), c.rtol)
			if c.state == "" {
				return
			}
			sd := opt.StateDict()
			for id, name := range []string{"W", "V"} {
				check(t, c.state+" of "+name, sd.State[id][c.state], g.set.Get(t, c.name+".state."+name), c.rtol)
			}
		})
	}
}

// embeddingNet is a model whose only parameter is a [13, 19] table, for
// split tests of sparse steps.
func embeddingNet() *nn.Embedding {
	return nn.NewEmbedding(autograd.NewGenerator(5), 13, 19, nn.EmbeddingOptions{Sparse: true})
}

// TestSparseSplitStepsMatchFP32: sparse SGD and Adagrad steps on a split
// table give the masters and state of the FP32 steps on the joined values,
// bit for bit, with the same sparse gradients.
func TestSparseSplitStepsMatchFP32(t *testing.T) {
	ada := optim.DefaultAdagradOptions()
	ada.LRDecay, ada.InitialAccumulatorValue = 1e-2, 0.1
	mom := optim.SGDOptions{LR: 0.05, Momentum: 0.9, Nesterov: true}
	plain := optim.SGDOptions{LR: 0.1, Maximize: true}
	cases := []splitCase{
		{"SGD", func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewSGD(p, plain) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewSGDSplit(sm, plain) }},
		{"SGDMomentum", func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewSGD(p, mom) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewSGDSplit(sm, mom) }},
		{"Adagrad", func(p []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewAdagrad(p, ada) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewAdagradSplit(sm, ada) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fp := embeddingNet()
			sm, err := amp.SplitModule(embeddingNet())
			if err != nil {
				t.Fatal(err)
			}
			sp := &splitPair{fp32: nn.Parameters(fp), sm: sm}
			if sp.opt, err = c.mk(sp.fp32); err != nil {
				t.Fatal(err)
			}
			if sp.sopt, err = c.mkSplit(sm); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(2, 3))
			for s := range 5 {
				// The FP32 table computes the sparse gradient; the split
				// Top, bfloat16, cannot be looked up, so it gets a copy.
				idx := make([]int64, 9)
				for i := range idx {
					idx[i] = rng.Int64N(13)
				}
				dy := autograd.Randn(autograd.NewGenerator(uint64(s)), 9, 19)
				fp.Forward(autograd.FromInt64(idx, 9)).Backward(dy)
				sg := sp.fp32[0].SparseGrad()
				top := sm.Params()[0].Param.Top
				top.SetSparseGrad(autograd.NewSparseGrad(13, sg.Indices, sg.Values))
				sp.opt.Step()
				sp.sopt.Step()
				sp.check(t, fmt.Sprintf("step %d", s+1))
				sp.opt.ZeroGrad()
				sp.sopt.ZeroGrad()
				if top.SparseGrad() != nil {
					t.Fatal("ZeroGrad left the split Top's sparse gradient")
				}
			}
		})
	}
}

// TestSparseStepErrors: options PyTorch rejects for sparse gradients panic
// naming the problem, and leave the parameter alone.
func TestSparseStepErrors(t *testing.T) {
	cases := []struct {
		name string
		mk   func(p []*autograd.Tensor) (optim.Optimizer, error)
		want string
	}{
		{"SGD weight decay", func(p []*autograd.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(p, optim.SGDOptions{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4})
		}, "SGD.Step: group 0 parameter 0 has a sparse gradient, and weight_decay 0.0001 is not compatible"},
		{"Adagrad weight decay", func(p []*autograd.Tensor) (optim.Optimizer, error) {
			o := optim.DefaultAdagradOptions()
			o.WeightDecay = 0.1
			return optim.NewAdagrad(p, o)
		}, "Adagrad.Step: group 0 parameter 0 has a sparse gradient, and weight_decay 0.1"},
		{"Lamb", func(p []*autograd.Tensor) (optim.Optimizer, error) {
			return optim.NewLamb(p, optim.DefaultLambOptions())
		},
			"Lamb does not support sparse gradients"},
		{"LARS", func(p []*autograd.Tensor) (optim.Optimizer, error) {
			return optim.NewLARS(p, optim.DefaultLARSOptions())
		},
			"LARS does not support sparse gradients"},
		{"Adam", func(p []*autograd.Tensor) (optim.Optimizer, error) {
			return optim.NewAdam(p, optim.DefaultAdamOptions())
		},
			"Adam does not support sparse gradients"},
		{"AdamW", func(p []*autograd.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamW(p, optim.DefaultAdamWOptions())
		},
			"AdamW does not support sparse gradients"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := embeddingNet()
			w := e.Weight()
			before := append([]float32(nil), w.Float32s()...)
			opt, err := c.mk(nn.Parameters(e))
			if err != nil {
				t.Fatal(err)
			}
			autograd.Sum(e.Forward(autograd.FromInt64([]int64{3, 1, 3}, 3)), nil, false).Backward()
			err = autograd.Try(opt.Step)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Step: %v, want an error containing %q", err, c.want)
			}
			if msg := sameBits(w.Float32s(), before); msg != "" {
				t.Errorf("a failed step changed the table: %s", msg)
			}
		})
	}
}
