package optim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// TestRowWiseAdagradMatchesDLRM steps gen_rwsadagrad.py's embedding table
// (sparse gradients) and Linear weight and bias (dense) three times with
// PyTorch's gradients and compares the parameters and state with dlrm's
// RWSAdagrad: touched table rows and their sums within 1e-6 relative
// (golden.Close: PyTorch sums a row's squares in its own order), rows never
// touched bit for bit (as initialised, sums at the initial accumulator
// value), and the dense parameters and sums, which take Adagrad's step,
// bit for bit.
func TestRowWiseAdagradMatchesDLRM(t *testing.T) {
	set := golden.Load(t, "rwsadagrad.safetensors")
	cases := []struct {
		name string
		opts optim.RowWiseAdagradOptions
	}{
		{"default", optim.RowWiseAdagradOptions{LR: 0.1, Eps: 1e-10}},
		{"decay", optim.RowWiseAdagradOptions{LR: 0.05, LRDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-6}},
	}
	const steps, rtol = 3, 1e-6
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var params []*autograd.Tensor
			for _, n := range []string{"table", "weight", "bias"} {
				params = append(params, set.Get(t, "init."+n).Clone().SetRequiresGrad(true))
			}
			table := params[0]
			rows := table.Dim(0)
			opt, err := optim.NewRowWiseAdagrad(params, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			touched := map[int64]bool{}
			for k := range steps {
				pre := fmt.Sprintf("%s.step%d.grad.", c.name, k)
				idx := set.Get(t, pre+"indices").Int64s()
				for _, r := range idx {
					touched[r] = true
				}
				opt.ZeroGrad()
				table.SetSparseGrad(autograd.NewSparseGrad(rows, idx, set.Get(t, pre+"values")))
				params[1].SetGrad(set.Get(t, pre+"weight"))
				params[2].SetGrad(set.Get(t, pre+"bias"))
				opt.Step()
			}
			if len(touched) == 0 || len(touched) == rows {
				t.Fatalf("%d of %d rows touched: the golden data should leave some alone", len(touched), rows)
			}
			sd := opt.StateDict()
			rowWise := func(what string, got, want, init *autograd.Tensor, width int) {
				t.Helper()
				if got == nil || !slices.Equal(got.Shape(), want.Shape()) {
					t.Fatalf("%s: got %v, want shape %v", what, got, want.Shape())
				}
				g, w, i0 := got.Float32s(), want.Float32s(), init.Float32s()
				var gt, wt []float32
				for r := range rows {
					span := g[r*width : (r+1)*width]
					if touched[int64(r)] {
						gt, wt = append(gt, span...), append(wt, w[r*width:(r+1)*width]...)
						continue
					}
					if msg := sameBits(span, w[r*width:(r+1)*width]); msg != "" {
						t.Errorf("%s: untouched row %d: %s", what, r, msg)
					}
					if msg := sameBits(span, i0[r*width:(r+1)*width]); msg != "" {
						t.Errorf("%s: untouched row %d changed: %s", what, r, msg)
					}
				}
				golden.AssertClose(t, what+" (touched rows)", autograd.FromFloat32(gt, len(gt)), autograd.FromFloat32(wt, len(wt)), rtol)
				ulps := 0.0
				for i := range gt {
					ulps = max(ulps, math.Abs(float64(math.Float32bits(gt[i]))-float64(math.Float32bits(wt[i]))))
				}
				t.Logf("%s: touched rows differ from dlrm's by up to %v ulps", what, ulps)
			}
			rowWise("table", table, set.Get(t, c.name+".table"), set.Get(t, "init.table"), table.Dim(1))
			init := autograd.Full(float32(c.opts.InitialAccumulatorValue), rows)
			rowWise("state.0.sum", sd.State[0]["sum"], set.Get(t, c.name+".state.0.sum"), init, 1)
			for i, n := range []string{"weight", "bias"} {
				if msg := sameBits(params[i+1].Float32s(), set.Get(t, c.name+"."+n).Float32s()); msg != "" {
					t.Errorf("%s: %s", n, msg)
				}
				if msg := sameBits(sd.State[i+1]["sum"].Float32s(), set.Get(t, fmt.Sprintf("%s.state.%d.sum", c.name, i+1)).Float32s()); msg != "" {
					t.Errorf("state.%d.sum: %s", i+1, msg)
				}
			}
			for id := range 3 {
				if got, want := sd.State[id]["step"].Item(), set.Get(t, fmt.Sprintf("%s.state.%d.step", c.name, id)).Item(); got != want {
					t.Errorf("state.%d.step: %v, dlrm %v", id, got, want)
				}
			}
		})
	}
}

// TestRowWiseAdagradConformance runs the optimizer suite (dense gradients,
// split form, state dicts, …) on RowWiseAdagrad.
func TestRowWiseAdagradConformance(t *testing.T) {
	c := newCase("RowWiseAdagrad", optim.NewRowWiseAdagradGroups, optim.NewRowWiseAdagradSplitGroups,
		func(ps []*autograd.Tensor, o optim.RowWiseAdagradOptions) optim.RowWiseAdagradGroup {
			return optim.RowWiseAdagradGroup{Params: ps, RowWiseAdagradOptions: o}
		},
		func(o *optim.RowWiseAdagradOptions) (*float64, *float64) { return &o.LR, &o.WeightDecay })
	c.state = "sum"
	c.opts = optim.RowWiseAdagradOptions{LR: 0.1, LRDecay: 1e-3, WeightDecay: 1e-2, InitialAccumulatorValue: 0.1, Eps: 1e-10}
	c.bad = []badOption[optim.RowWiseAdagradOptions]{
		{func(o *optim.RowWiseAdagradOptions) { o.LRDecay = -1 }, "invalid lr_decay value: -1"},
		{func(o *optim.RowWiseAdagradOptions) { o.InitialAccumulatorValue = math.NaN() }, "invalid initial_accumulator_value value: NaN"},
		{func(o *optim.RowWiseAdagradOptions) { o.Eps = 0 }, "invalid epsilon value: 0 (want > 0; DefaultRowWiseAdagradOptions has 1e-10)"},
		{func(o *optim.RowWiseAdagradOptions) { o.Eps = math.Inf(1) }, "invalid epsilon value: +Inf"},
	}
	c.load = []loadCase{
		// Parameter 1 never has a gradient, so no state: it is lazy.
		{"missing step", func(sd *optim.StateDict) { delete(sd.State[2], "step") }, "state.2.step: missing state"},
		{"missing sum", func(sd *optim.StateDict) { delete(sd.State[0], "sum") }, "state.0.sum: missing state"},
		{"negative accumulator", func(sd *optim.StateDict) { sd.Groups[1].Hyper["initial_accumulator_value"] = -1 }, "invalid initial_accumulator_value value: -1 (in param_groups.1)"},
		{"maximize", func(sd *optim.StateDict) { sd.Groups[0].Hyper["maximize"] = 0 }, "param_groups.0.maximize: unknown hyper-parameter"},
	}
	c.run(t)
}

// Dense parameters take Adagrad's step: bit for bit, parameters and sums.
func TestRowWiseAdagradDenseIsAdagrad(t *testing.T) {
	o := optim.RowWiseAdagradOptions{LR: 0.1, LRDecay: 1e-2, WeightDecay: 1e-3, InitialAccumulatorValue: 0.25, Eps: 1e-8}
	a := paramsWithGrads(7, 1000, 33)
	b := make([]*autograd.Tensor, len(a))
	for i, p := range a {
		b[i] = autograd.FromFloat32(slices.Clone(p.Float32s()), p.Shape()...).SetRequiresGrad(true)
	}
	rw, err := optim.NewRowWiseAdagrad(a, o)
	if err != nil {
		t.Fatal(err)
	}
	ada, err := optim.NewAdagrad(b, optim.AdagradOptions{LR: o.LR, LRDecay: o.LRDecay, WeightDecay: o.WeightDecay, InitialAccumulatorValue: o.InitialAccumulatorValue, Eps: o.Eps})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 9))
	for s := range 4 {
		for i := range a {
			g := make([]float32, a[i].Numel())
			for j := range g {
				g[j] = float32(rng.NormFloat64())
			}
			a[i].SetGrad(autograd.FromFloat32(g, a[i].Shape()...))
			b[i].SetGrad(autograd.FromFloat32(slices.Clone(g), b[i].Shape()...))
		}
		rw.Step()
		ada.Step()
		rsd, asd := rw.StateDict(), ada.StateDict()
		for i := range a {
			if msg := sameBits(a[i].Float32s(), b[i].Float32s()); msg != "" {
				t.Fatalf("step %d parameter %d: %s", s+1, i, msg)
			}
			if msg := sameBits(rsd.State[i]["sum"].Float32s(), asd.State[i]["sum"].Float32s()); msg != "" {
				t.Fatalf("step %d sum %d: %s", s+1, i, msg)
			}
		}
	}
}

// rowWiseModel is a sparse [13, 19] table and a dense Linear(19, 2), and
// the step that gives the table a sparse gradient (rows repeat in the
// lookup) and the Linear dense ones.
type rowWiseModel struct {
	table *nn.Embedding
	head  *nn.Linear
}

func newRowWiseModel() rowWiseModel {
	g := autograd.NewGenerator(5)
	return rowWiseModel{nn.NewEmbedding(g, 13, 19, nn.EmbeddingOptions{Sparse: true}), nn.NewLinear(g, 19, 2, nn.LinearOptions{})}
}

func (m rowWiseModel) params() []*autograd.Tensor {
	return append(nn.Parameters(m.table), nn.Parameters(m.head)...)
}

func (m rowWiseModel) backward(s int) {
	rng := rand.New(rand.NewPCG(uint64(s), 7))
	idx := make([]int64, 9)
	for i := range idx {
		idx[i] = rng.Int64N(10) // rows 10..12 are never touched
	}
	y := m.head.Forward(m.table.Forward(autograd.FromInt64(idx, 9)))
	autograd.Sum(autograd.Mul(y, y), nil, false).Backward()
}

// TestRowWiseAdagradStateDict: a table's state is one float32 per row, the
// state dict carries it, and an optimizer that loads it goes on bit for
// bit as the original; broken row-wise state is rejected with nothing
// changed.
func TestRowWiseAdagradStateDict(t *testing.T) {
	o := optim.DefaultRowWiseAdagradOptions()
	o.LR, o.InitialAccumulatorValue = 0.1, 0.05
	src := newRowWiseModel()
	opt, err := optim.NewRowWiseAdagrad(src.params(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(opt.StateDict().State) != 0 {
		t.Error("state before the first step")
	}
	for s := range 2 {
		opt.ZeroGrad()
		src.backward(s)
		opt.Step()
	}
	sd := opt.StateDict()
	if sum := sd.State[0]["sum"]; !slices.Equal(sum.Shape(), []int{13}) || sum.DType() != autograd.Float32 {
		t.Fatalf("table state %v %v, want float32 [13]", sum.DType(), sum.Shape())
	}
	if sum := sd.State[1]["sum"]; !slices.Equal(sum.Shape(), []int{2, 19}) {
		t.Fatalf("weight state %v, want [2 19]", sum.Shape())
	}
	if got := sd.State[0]["sum"].Values()[12]; got != float64(float32(0.05)) {
		t.Errorf("untouched row's sum %v, want the initial 0.05", got)
	}

	dst := newRowWiseModel()
	for i, p := range dst.params() {
		p.CopyFrom(src.params()[i])
	}
	opt2, err := optim.NewRowWiseAdagrad(dst.params(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := opt2.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	if opt2.StateDict().State[0]["sum"] == sd.State[0]["sum"] {
		t.Error("loaded row-wise state shares its tensor with the state dict")
	}
	for s := 2; s < 5; s++ {
		for _, pair := range []struct {
			m   rowWiseModel
			opt optim.Optimizer
		}{{src, opt}, {dst, opt2}} {
			pair.opt.ZeroGrad()
			pair.m.backward(s)
			pair.opt.Step()
		}
	}
	for i, p := range dst.params() {
		if msg := sameBits(p.Float32s(), src.params()[i].Float32s()); msg != "" {
			t.Errorf("parameter %d after resuming: %s", i, msg)
		}
	}

	rejects := []struct {
		name   string
		mutate func(sd *optim.StateDict)
		want   string
	}{
		{"row sum dtype", func(sd *optim.StateDict) { sd.State[0]["sum"] = autograd.FromInt64(make([]int64, 13), 13) }, "state.0.sum: dtype int64, want a floating-point tensor"},
		{"row count", func(sd *optim.StateDict) { sd.State[0]["sum"] = autograd.Zeros(14) }, "state.0.sum: shape [14] does not match the parameter's shape [13 19]"},
		{"missing sum", func(sd *optim.StateDict) { delete(sd.State[0], "sum") }, "state.0.sum: missing state"},
		{"missing step", func(sd *optim.StateDict) { delete(sd.State[0], "step") }, "state.0.step: missing state"},
		{"nil step", func(sd *optim.StateDict) { sd.State[0]["step"] = nil }, "state.0.step: nil tensor"},
		{"bad hyper", func(sd *optim.StateDict) { sd.Groups[0].Hyper["eps"] = 0 }, "invalid epsilon value: 0"},
	}
	for _, r := range rejects {
		t.Run(r.name, func(t *testing.T) {
			bad := opt.StateDict()
			bad.State = map[int]map[string]*autograd.Tensor{0: {"step": bad.State[0]["step"], "sum": bad.State[0]["sum"]}, 1: bad.State[1], 2: bad.State[2]}
			bad.Groups = []optim.GroupState{{Hyper: map[string]float64{}, Params: bad.Groups[0].Params}}
			for k, v := range opt.StateDict().Groups[0].Hyper {
				bad.Groups[0].Hyper[k] = v
			}
			r.mutate(bad)
			before := opt2.StateDict().State[0]["sum"]
			values := before.Values()
			err := opt2.LoadStateDict(bad)
			if err == nil || !strings.Contains(err.Error(), r.want) {
				t.Fatalf("error %v, want one containing %q", err, r.want)
			}
			if after := opt2.StateDict().State[0]["sum"]; after != before || !slices.Equal(after.Values(), values) {
				t.Error("a failed LoadStateDict changed the state")
			}
		})
	}
}

// TestRowWiseAdagradSplitMatchesFP32: sparse steps on a split table give
// the masters and row sums of the FP32 steps bit for bit, also after the
// split optimizer loads the FP32 one's row-wise state.
func TestRowWiseAdagradSplitMatchesFP32(t *testing.T) {
	o := optim.RowWiseAdagradOptions{LR: 0.05, LRDecay: 1e-2, InitialAccumulatorValue: 0.1, Eps: 1e-10}
	fp := embeddingNet()
	sm, err := amp.SplitModule(embeddingNet())
	if err != nil {
		t.Fatal(err)
	}
	sp := &splitPair{fp32: nn.Parameters(fp), sm: sm}
	if sp.opt, err = optim.NewRowWiseAdagrad(sp.fp32, o); err != nil {
		t.Fatal(err)
	}
	if sp.sopt, err = optim.NewRowWiseAdagradSplit(sm, o); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	top := sm.Params()[0].Param.Top
	for s := range 6 {
		if s == 3 {
			// A fresh split optimizer takes over from the FP32 one's state.
			if sp.sopt, err = optim.NewRowWiseAdagradSplit(sm, o); err != nil {
				t.Fatal(err)
			}
			if err := sp.sopt.LoadStateDict(sp.opt.StateDict()); err != nil {
				t.Fatal(err)
			}
		}
		idx := make([]int64, 9)
		for i := range idx {
			idx[i] = rng.Int64N(13)
		}
		dy := autograd.Randn(autograd.NewGenerator(uint64(s)), 9, 19)
		fp.Forward(autograd.FromInt64(idx, 9)).Backward(dy)
		sg := sp.fp32[0].SparseGrad()
		top.SetSparseGrad(autograd.NewSparseGrad(13, sg.Indices, sg.Values))
		sp.opt.Step()
		sp.sopt.Step()
		sp.check(t, fmt.Sprintf("step %d", s+1))
		sp.opt.ZeroGrad()
		sp.sopt.ZeroGrad()
	}
	if n := sp.sopt.StateDict().State[0]["sum"].Numel(); n != 13 {
		t.Errorf("split table state has %d values, want one per row (13)", n)
	}
}

// TestRowWiseAdagradStepErrors: weight decay with a sparse gradient, and a
// parameter whose gradients change kind, panic naming the problem and
// leave the table alone.
func TestRowWiseAdagradStepErrors(t *testing.T) {
	sparseStep := func(e *nn.Embedding) {
		autograd.Sum(e.Forward(autograd.FromInt64([]int64{3, 1, 3}, 3)), nil, false).Backward()
	}
	denseStep := func(e *nn.Embedding) { e.Weight().SetGrad(autograd.Ones(13, 19)) }
	cases := []struct {
		name        string
		wd          float64
		first, then func(e *nn.Embedding)
		want        string
	}{
		{"weight decay", 0.1, nil, sparseStep, "RowWiseAdagrad.Step: group 0 parameter 0 has a sparse gradient, and weight_decay 0.1 is not compatible"},
		{"dense then sparse", 0, denseStep, sparseStep, "RowWiseAdagrad.Step: group 0 parameter 0 has a sparse gradient, but its state is element-wise"},
		{"sparse then dense", 0, sparseStep, denseStep, "RowWiseAdagrad.Step: group 0 parameter 0 has a dense gradient, but its state is row-wise"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := embeddingNet()
			o := optim.DefaultRowWiseAdagradOptions()
			o.WeightDecay = c.wd
			opt, err := optim.NewRowWiseAdagrad(nn.Parameters(e), o)
			if err != nil {
				t.Fatal(err)
			}
			if c.first != nil {
				c.first(e)
				opt.Step()
				opt.ZeroGrad()
			}
			c.then(e)
			before := slices.Clone(e.Weight().Float32s())
			stepsBefore := opt.StateDict().State[0]
			err = autograd.Try(opt.Step)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Step: %v, want an error containing %q", err, c.want)
			}
			if msg := sameBits(e.Weight().Float32s(), before); msg != "" {
				t.Errorf("a failed step changed the table: %s", msg)
			}
			if stepsBefore != nil && opt.StateDict().State[0]["step"].Item() != 1 {
				t.Error("a failed step advanced the step count")
			}
		})
	}
}
