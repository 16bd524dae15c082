package optim_test

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"weak"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// The conformance suite runs every optimizer through the same checks, in
// the manner of gonum's blas/testblas: a table of optimizers, each with
// options that exercise its features, and one set of checks that each
// must pass. An optimizer's own test file then holds only its maths (the
// update against a reference), its examples and what is peculiar to it.

// conformer is one optimizer as the suite sees it.
type conformer interface {
	caseName() string
	run(t *testing.T)
	// makers returns functions that make the optimizer, as one group with
	// the case's options, over FP32 parameters and over a split model.
	makers() (mk func([]*autograd.Tensor) (optim.Optimizer, error), mkSplit func(*amp.SplitModel) (optim.Optimizer, error))
}

// suiteCase is an optimizer with options O, groups G and type T.
type suiteCase[O, G any, T optim.Optimizer] struct {
	name  string                          // the optimizer's name in its errors
	opts  O                               // options that exercise its features (momentum, AMSGrad, …)
	hyper func(o *O) (lr, decay *float64) // the learning rate and weight decay
	group func(ps []*autograd.Tensor, o O) G
	new   func(groups ...G) (T, error)
	split func(sm *amp.SplitModel, groups ...G) (T, error)
	state string // a state tensor every stepped parameter has
	eager bool   // whether parameters have state before their first step
	// bad are option changes its constructor must reject, beside the
	// learning rate and weight decay every optimizer checks.
	bad []badOption[O]
	// load are state-dict changes LoadStateDict must reject, beside the
	// ones every optimizer rejects.
	load []loadCase
}

type badOption[O any] struct {
	set  func(o *O)
	want string
}

func (c suiteCase[O, G, T]) caseName() string { return c.name }

func (c suiteCase[O, G, T]) lr(o *O) *float64 {
	lr, _ := c.hyper(o)
	return lr
}

func (c suiteCase[O, G, T]) decay(o *O) *float64 {
	_, wd := c.hyper(o)
	return wd
}

// newCase returns the case of the optimizer called name, made by new and
// split from groups that group makes.
func newCase[O, G any, T optim.Optimizer](name string, new func(...G) (T, error), split func(*amp.SplitModel, ...G) (T, error),
	group func([]*autograd.Tensor, O) G, hyper func(o *O) (lr, decay *float64)) suiteCase[O, G, T] {
	return suiteCase[O, G, T]{name: name, new: new, split: split, group: group, hyper: hyper}
}

// with returns c's options with learning rate lr.
func (c suiteCase[O, G, T]) with(lr float64) O {
	o := c.opts
	*c.lr(&o) = lr
	return o
}

// make returns the optimizer over groups with options opts (the split form
// over sm when sm is not nil).
func (c suiteCase[O, G, T]) make(sm *amp.SplitModel, groups [][]*autograd.Tensor, opts ...O) (optim.Optimizer, error) {
	gs := make([]G, len(groups))
	for i, ps := range groups {
		gs[i] = c.group(ps, opts[i])
	}
	if sm != nil {
		return c.split(sm, gs...)
	}
	return c.new(gs...)
}

// must is make for arguments that are right.
func (c suiteCase[O, G, T]) must(t *testing.T, groups [][]*autograd.Tensor, opts ...O) optim.Optimizer {
	t.Helper()
	opt, err := c.make(nil, groups, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// trained returns c's optimizer over three parameters shaped [3], [1] and
// [2] in two groups, the second with half the learning rate, after steps
// steps of trainThree.
func (c suiteCase[O, G, T]) trained(t *testing.T, steps int) (optim.Optimizer, []*autograd.Tensor) {
	t.Helper()
	a, b, d := leaf(1, 2, 3), leaf(-1), leaf(0.5, 0.25)
	lr := *c.lr(&c.opts)
	opt := c.must(t, [][]*autograd.Tensor{{a, b}, {d}}, c.opts, c.with(lr/2))
	params := []*autograd.Tensor{a, b, d}
	trainThree(opt, params, steps)
	return opt, params
}

func (c suiteCase[O, G, T]) run(t *testing.T) {
	t.Run("RejectsBadOptions", c.testBadOptions)
	t.Run("RejectsBadParameters", c.testBadParameters)
	t.Run("GroupOptions", c.testGroupOptions)
	t.Run("GroupIndexOutOfRange", c.testGroupIndex)
	t.Run("SkipsParametersWithoutGradient", c.testSkips)
	t.Run("ChannelsLast", func(t *testing.T) {
		testChannelsLast(t, func(p *autograd.Tensor) optim.Optimizer {
			return c.must(t, [][]*autograd.Tensor{{p}}, c.opts)
		})
	})
	t.Run("StepDoesNotAllocate", c.testNoAlloc)
	t.Run("StateDictRoundTrip", c.testRoundTrip)
	t.Run("LoadStateDictRejects", c.testLoadRejects)
	t.Run("SplitMatchesFP32", c.testSplitMatchesFP32)
	t.Run("SplitForm", c.testSplitForm)
	t.Run("SplitWith", c.testSplitWith)
}

// wantError requires err to be an *optim.Error of c's optimizer whose
// message contains want.
func (c suiteCase[O, G, T]) wantError(t *testing.T, err error, want string) {
	t.Helper()
	var oe *optim.Error
	switch {
	case err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case !errors.As(err, &oe) || oe.Op != c.name:
		t.Fatalf("error %v (%T), want an *optim.Error of %s", err, err, c.name)
	case !strings.HasPrefix(err.Error(), "optim: "+c.name+": ") || !strings.Contains(err.Error(), want):
		t.Fatalf("error %q, want one starting %q and containing %q", err, "optim: "+c.name+": ", want)
	}
}

func (c suiteCase[O, G, T]) testBadOptions(t *testing.T) {
	p := [][]*autograd.Tensor{{leaf(1)}}
	bad := append([]badOption[O]{
		{func(o *O) { *c.lr(o) = -0.1 }, "group 0: invalid learning rate: -0.1"},
		{func(o *O) { *c.lr(o) = math.NaN() }, "invalid learning rate: NaN"},
		{func(o *O) { *c.lr(o) = math.Inf(1) }, "invalid learning rate: +Inf"},
		{func(o *O) { *c.decay(o) = -1e-4 }, "invalid weight_decay value: -0.0001"},
		{func(o *O) { *c.decay(o) = math.Inf(1) }, "invalid weight_decay value: +Inf"},
	}, c.bad...)
	for _, b := range bad {
		o := c.opts
		b.set(&o)
		opt, err := c.make(nil, p, o)
		if err == nil {
			t.Fatalf("%+v accepted as %v, want an error containing %q", o, opt, b.want)
		}
		c.wantError(t, err, b.want)
	}
	// The second group is checked too.
	_, err := c.make(nil, [][]*autograd.Tensor{{leaf(1)}, {leaf(2)}}, c.opts, c.with(-1))
	c.wantError(t, err, "group 1: invalid learning rate: -1")
}

func (c suiteCase[O, G, T]) testBadParameters(t *testing.T) {
	sm, err := amp.SplitModule(newSplitNet(1))
	if err != nil {
		t.Fatal(err)
	}
	other, err := amp.SplitModule(newSplitNet(1))
	if err != nil {
		t.Fatal(err)
	}
	top := sm.Params()[0].Param.Top
	loose := autograd.FromBFloat16([]uint16{0x3f80, 0x4000})
	loose.SetRequiresGrad(true)
	p := leaf(1)
	nonLeaf := autograd.Mul(p, p)
	for _, b := range []struct {
		sm     *amp.SplitModel
		groups [][]*autograd.Tensor
		want   string
	}{
		{nil, nil, "optimizer got an empty parameter list"},
		{nil, [][]*autograd.Tensor{{}}, "optimizer got an empty parameter list"},
		{nil, [][]*autograd.Tensor{{p, nil}}, "group 0 parameter 1 is nil"},
		{nil, [][]*autograd.Tensor{{nonLeaf}}, "can't optimize a non-leaf tensor"},
		{nil, [][]*autograd.Tensor{{p}, {p}}, "group 1 parameter 0 already appears in group 0"},
		{nil, [][]*autograd.Tensor{{autograd.FromInt64([]int64{1})}}, "group 0 parameter 0 is int64; only float32"},
		{nil, [][]*autograd.Tensor{{top}}, "bfloat16 Tops of split parameters need the Split constructors"},
		{sm, [][]*autograd.Tensor{{loose}}, "not the Top of one of the split model's parameters"},
		{sm, [][]*autograd.Tensor{{top}, {top}}, "more than one parameter group"},
		{sm, [][]*autograd.Tensor{{other.Params()[1].Param.Top}}, "not the Top of one of the split model's parameters"},
	} {
		opts := make([]O, len(b.groups))
		for i := range opts {
			opts[i] = c.opts
		}
		_, err := c.make(b.sm, b.groups, opts...)
		c.wantError(t, err, b.want)
	}
	_, err = c.split(nil, c.group([]*autograd.Tensor{p}, c.opts))
	c.wantError(t, err, "split model is nil")
}

// testGroupOptions gives identical parameters identical gradients in
// groups with different options, and wants each to move as a one-group
// optimizer with its group's options moves it: bit for bit the same, and
// not at all with learning rate 0.
func (c suiteCase[O, G, T]) testGroupOptions(t *testing.T) {
	lr := *c.lr(&c.opts)
	plain, decayed, frozen := c.with(lr), c.with(lr), c.with(0)
	*c.decay(&plain) = 0
	*c.decay(&decayed) = 0.25
	ps := []*autograd.Tensor{leaf(1, -2, 3), leaf(1, -2, 3), leaf(1, -2, 3)}
	refs := []*autograd.Tensor{leaf(1, -2, 3), leaf(1, -2, 3)}
	opt := c.must(t, [][]*autograd.Tensor{{ps[0]}, {ps[1]}, {ps[2]}}, plain, decayed, frozen)
	refPlain := c.must(t, [][]*autograd.Tensor{{refs[0]}}, plain)
	refDecayed := c.must(t, [][]*autograd.Tensor{{refs[1]}}, decayed)
	if n := opt.NumGroups(); n != 3 {
		t.Fatalf("%d groups, want 3", n)
	}
	if opt.LR(0) != lr || opt.LR(2) != 0 {
		t.Fatalf("learning rates %v and %v, want %v and 0", opt.LR(0), opt.LR(2), lr)
	}
	for step := range 3 {
		for _, p := range append(ps, refs...) {
			setGrad(p, 0.5, float32(step)-1, 2)
		}
		opt.Step()
		refPlain.Step()
		refDecayed.Step()
	}
	switch {
	case !slices.Equal(ps[0].Values(), refs[0].Values()):
		t.Errorf("group 0 (no weight decay): %v, alone %v", ps[0].Values(), refs[0].Values())
	case !slices.Equal(ps[1].Values(), refs[1].Values()):
		t.Errorf("group 1 (weight decay): %v, alone %v", ps[1].Values(), refs[1].Values())
	case slices.Equal(ps[0].Values(), ps[1].Values()):
		t.Errorf("weight decay made no difference: %v", ps[0].Values())
	case !slices.Equal(ps[2].Values(), []float64{1, -2, 3}):
		t.Errorf("group 2 (learning rate 0) moved to %v", ps[2].Values())
	}
	// SetLR takes effect on the next step.
	opt.SetLR(2, lr)
	setGrad(ps[2], 1, 1, 1)
	opt.Step()
	if slices.Equal(ps[2].Values(), []float64{1, -2, 3}) {
		t.Error("group 2 did not move after SetLR")
	}
}

func (c suiteCase[O, G, T]) testGroupIndex(t *testing.T) {
	opt, _ := c.trained(t, 0)
	for name, call := range map[string]func(){
		"LR":           func() { opt.LR(2) },
		"SetLR":        func() { opt.SetLR(-1, 0.1) },
		"InitialLR":    func() { opt.InitialLR(2) },
		"SetInitialLR": func() { opt.SetInitialLR(5, 0.1) },
	} {
		func() {
			defer func() {
				r := recover()
				var oe *optim.Error
				if err, ok := r.(error); !ok || !errors.As(err, &oe) || oe.Op != c.name+"."+name || !strings.Contains(oe.Msg, "out of range [0, 2)") {
					t.Errorf("%s: panic %v, want an *optim.Error for %s.%s", name, r, c.name, name)
				}
			}()
			call()
		}()
		// autograd.Try turns the panic into an error.
		if err := autograd.Try(call); err == nil || !strings.Contains(err.Error(), c.name+"."+name+": parameter group") {
			t.Errorf("%s: autograd.Try returned %v", name, err)
		}
	}
}

func (c suiteCase[O, G, T]) testSkips(t *testing.T) {
	a, b := leaf(1, 2), leaf(3)
	opt := c.must(t, [][]*autograd.Tensor{{a, b}}, c.opts)
	setGrad(a, 1, 1)
	opt.Step()
	if b.Values()[0] != 3 {
		t.Errorf("parameter without gradient moved to %v", b.Values())
	}
	if slices.Equal(a.Values(), []float64{1, 2}) {
		t.Error("parameter with gradient did not move")
	}
	if st, ok := opt.StateDict().State[1]; ok != c.eager {
		t.Errorf("parameter without gradient has state %v", st)
	}
	opt.ZeroGrad()
	if a.Grad() != nil {
		t.Error("ZeroGrad kept a gradient")
	}
}

func (c suiteCase[O, G, T]) testNoAlloc(t *testing.T) {
	sm, err := amp.SplitModule(newSplitNet(3))
	if err != nil {
		t.Fatal(err)
	}
	split, err := c.make(sm, [][]*autograd.Tensor{splitTops(sm)}, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range sm.Params() {
		ns.Param.Top.SetGrad(autograd.Cast(autograd.Randn(autograd.NewGenerator(4), ns.Param.Top.Shape()...), autograd.BFloat16))
	}
	ps := paramsWithGrads(3, 1000, 1<<16)
	for name, opt := range map[string]optim.Optimizer{
		"FP32":  c.must(t, [][]*autograd.Tensor{ps[:2], ps[2:]}, c.opts, c.with(*c.lr(&c.opts)/2)),
		"split": split,
	} {
		opt.Step()
		if a := testing.AllocsPerRun(10, opt.Step); a != 0 {
			t.Errorf("%s: Step allocates %v times", name, a)
		}
	}
}

// testRoundTrip saves a trained optimizer's state dict (with a scheduler's
// initial_lr), loads it into a fresh one over copies of the parameters,
// and wants both to go on bit for bit alike, from state that is a copy.
func (c suiteCase[O, G, T]) testRoundTrip(t *testing.T) {
	src, srcParams := c.trained(t, 3)
	if _, err := optim.NewStepLR(src, 2, 0.5); err != nil {
		t.Fatal(err)
	}
	sd := src.StateDict()
	for g, want := range [][]int{{0, 1}, {2}} {
		if !slices.Equal(sd.Groups[g].Params, want) {
			t.Errorf("group %d parameter numbers %v, want %v", g, sd.Groups[g].Params, want)
		}
	}
	if v, ok := sd.Groups[1].Hyper["initial_lr"]; !ok || v != *c.lr(&c.opts)/2 {
		t.Errorf("group 1 initial_lr %v, %v after attaching a scheduler", v, ok)
	}
	if sd.State[0][c.state] == nil {
		t.Fatalf("state.0 %v has no %s", sd.State[0], c.state)
	}
	dst, dstParams := c.trained(t, 0)
	for i := range dstParams {
		dstParams[i].CopyFrom(srcParams[i])
	}
	if err := dst.LoadStateDict(sd); err != nil {
		t.Fatal(err)
	}
	dsd := dst.StateDict()
	for g := range sd.Groups {
		if !maps.Equal(sd.Groups[g].Hyper, dsd.Groups[g].Hyper) {
			t.Errorf("group %d hyper-parameters %v after loading %v", g, dsd.Groups[g].Hyper, sd.Groups[g].Hyper)
		}
	}
	if lr, ok := dst.InitialLR(1); !ok || lr != *c.lr(&c.opts)/2 {
		t.Errorf("loaded initial_lr %v, %v", lr, ok)
	}
	if dsd.State[0][c.state] == sd.State[0][c.state] {
		t.Error("loaded state shares its tensor with the state dict")
	}
	resumeAndCompare(t, src, srcParams, dst, dstParams)
}

// testLoadRejects loads broken state dicts (of an optimizer trained one
// step) into one trained two steps, and wants an error and the optimizer
// unchanged.
func (c suiteCase[O, G, T]) testLoadRejects(t *testing.T) {
	s := c.state
	cases := append([]loadCase{
		{"nil", nil, "nil state dict"},
		{"group count", func(sd *optim.StateDict) { sd.Groups = sd.Groups[:1] }, "has 1 parameter groups, the optimizer has 2"},
		{"group size", func(sd *optim.StateDict) { sd.Groups[0].Params = sd.Groups[0].Params[:1] }, "param_groups.0: loaded group has 1 parameters, the optimizer's has 2"},
		{"duplicate number", func(sd *optim.StateDict) { sd.Groups[1].Params = []int{0} }, "param_groups.1.params: parameter number 0 appears twice"},
		{"unknown number", func(sd *optim.StateDict) { sd.State[7] = sd.State[0] }, "state.7: no parameter has number 7"},
		{"unknown state", func(sd *optim.StateDict) { sd.State[0]["bogus"] = sd.State[0][s] }, "state.0.bogus: unknown state"},
		{"nil state", func(sd *optim.StateDict) { sd.State[0][s] = nil }, "state.0." + s + ": nil tensor"},
		{"shape", func(sd *optim.StateDict) { sd.State[2][s] = autograd.Zeros(3) }, "state.2." + s + ": shape [3] does not match the parameter's shape [2]"},
		{"dtype", func(sd *optim.StateDict) { sd.State[2][s] = autograd.FromInt64([]int64{1, 2}) }, "state.2." + s + ": dtype int64"},
		{"missing lr", func(sd *optim.StateDict) { delete(sd.Groups[0].Hyper, "lr") }, "param_groups.0.lr: missing hyper-parameter"},
		{"unknown hyper", func(sd *optim.StateDict) { sd.Groups[0].Hyper["bogus"] = 0 }, "param_groups.0.bogus: unknown hyper-parameter"},
		{"NaN lr", func(sd *optim.StateDict) { sd.Groups[0].Hyper["lr"] = math.NaN() }, "param_groups.0.lr: value is NaN"},
		{"negative lr", func(sd *optim.StateDict) { sd.Groups[1].Hyper["lr"] = -1 }, "group 1: invalid learning rate: -1 (in param_groups.1)"},
		{"negative weight decay", func(sd *optim.StateDict) { sd.Groups[0].Hyper["weight_decay"] = -1 }, "invalid weight_decay value: -1 (in param_groups.0)"},
	}, c.load...)
	for _, lc := range cases {
		t.Run(lc.name, func(t *testing.T) {
			opt, _ := c.trained(t, 2)
			before := opt.StateDict()
			values := before.State[0][s].Values()
			var sd *optim.StateDict
			if lc.mutate != nil {
				src, _ := c.trained(t, 1)
				sd = src.StateDict()
				lc.mutate(sd)
			}
			c.wantError(t, opt.LoadStateDict(sd), lc.want)
			after := opt.StateDict()
			if after.State[0][s] != before.State[0][s] || !slices.Equal(after.State[0][s].Values(), values) {
				t.Error("a failed LoadStateDict changed the state")
			}
			for g := range before.Groups {
				if !maps.Equal(after.Groups[g].Hyper, before.Groups[g].Hyper) {
					t.Errorf("a failed LoadStateDict changed group %d to %v", g, after.Groups[g].Hyper)
				}
			}
		})
	}
}

// testSplitMatchesFP32: for the same bfloat16 gradients, the split-BF16
// step gives FP32 masters and state bit for bit those of the FP32 step on
// the joined values, and the two forms' state dicts are interchangeable.
func (c suiteCase[O, G, T]) makers() (func([]*autograd.Tensor) (optim.Optimizer, error), func(*amp.SplitModel) (optim.Optimizer, error)) {
	mk := func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		return c.make(nil, [][]*autograd.Tensor{ps}, c.opts)
	}
	mkSplit := func(sm *amp.SplitModel) (optim.Optimizer, error) {
		return c.make(sm, [][]*autograd.Tensor{splitTops(sm)}, c.opts)
	}
	return mk, mkSplit
}

func (c suiteCase[O, G, T]) testSplitMatchesFP32(t *testing.T) {
	mk, mkSplit := c.makers()
	sp := newSplitPair(t, mk, mkSplit)
	for s := range 3 {
		sp.step()
		sp.check(t, fmt.Sprintf("step %d", s+1))
	}
	// Fresh optimizers on both sides, each loading the other form's state.
	fresh := newSplitPair(t, mk, mkSplit)
	if err := fresh.sopt.LoadStateDict(sp.opt.StateDict()); err != nil {
		t.Fatal(err)
	}
	if err := fresh.opt.LoadStateDict(sp.sopt.StateDict()); err != nil {
		t.Fatal(err)
	}
	// Parameters come through the split model's state dict, the joined
	// FP32 values, into a new split model.
	sm2, err := amp.SplitModule(newSplitNet(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := sm2.LoadTensors(sp.sm.StateDict()); err != nil {
		t.Fatal(err)
	}
	for i, ns := range fresh.sm.Params() {
		ns.Param.SplitFrom(sm2.Params()[i].Param.Join().Float32s())
		copy(fresh.fp32[i].Float32s(), sp.fp32[i].Float32s())
	}
	fresh.rng = sp.rng
	for s := range 2 {
		fresh.step()
		fresh.check(t, fmt.Sprintf("step %d after reload", s+4))
	}
}

// testSplitForm makes the split form of a trained FP32 optimizer, as
// kiln.Optimize does, and wants it to go on bit for bit as the FP32 one.
func (c suiteCase[O, G, T]) testSplitForm(t *testing.T) {
	mk := func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		return c.make(nil, [][]*autograd.Tensor{ps[:2], ps[2:]}, c.opts, c.with(*c.lr(&c.opts)/2))
	}
	sp := newSplitPair(t, mk, func(*amp.SplitModel) (optim.Optimizer, error) { return nil, nil })
	// Train a third optimizer over the split model's parameters while they
	// are FP32 (the Joins stand for them), then split it.
	masters := make([]*autograd.Tensor, len(sp.fp32))
	tops := map[*autograd.Tensor]*autograd.Tensor{}
	for i, ns := range sp.sm.Params() {
		masters[i] = ns.Param.Join()
		masters[i].SetRequiresGrad(true)
		tops[masters[i]] = ns.Param.Top
	}
	pre, err := mk(masters)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for i, p := range masters {
			g := autograd.Randn(autograd.NewGenerator(uint64(i)), p.Shape()...)
			p.SetGrad(g)
			sp.fp32[i].SetGrad(g)
		}
		pre.Step()
		sp.opt.Step()
	}
	for i, ns := range sp.sm.Params() {
		ns.Param.SplitFrom(masters[i].Float32s())
	}
	s, ok := pre.(optim.Splittable)
	if !ok {
		t.Fatalf("%T is not an optim.Splittable", pre)
	}
	if sp.sopt, err = s.SplitForm(sp.sm, func(p *autograd.Tensor) *autograd.Tensor { return tops[p] }); err != nil {
		t.Fatal(err)
	}
	if _, ok := sp.sopt.(T); !ok {
		t.Fatalf("split form is a %T", sp.sopt)
	}
	if sp.sopt.NumGroups() != 2 || sp.sopt.LR(1) != pre.LR(1) {
		t.Errorf("split form has %d groups, learning rate %v", sp.sopt.NumGroups(), sp.sopt.LR(1))
	}
	for s := range 3 {
		sp.step()
		sp.check(t, fmt.Sprintf("split step %d", s+1))
	}
	if _, err := s.SplitForm(nil, nil); err == nil {
		t.Error("SplitForm accepted a nil split model")
	}
}

// testSplitWith trains an FP32 optimizer, splits its model with SplitWith,
// and wants the split form to go on bit for bit as an FP32 twin. The FP32
// originals must be garbage while the split runs (the optimizer holds
// none), a failing split must leave the optimizer working, and a spent one
// must refuse to be used.
func (c suiteCase[O, G, T]) testSplitWith(t *testing.T) {
	mk := func(ps []*autograd.Tensor) (optim.Optimizer, error) {
		return c.make(nil, [][]*autograd.Tensor{ps[:2], ps[2:]}, c.opts, c.with(*c.lr(&c.opts)/2))
	}
	net := newSplitNet(1)
	pre, err := mk(nn.Parameters(net))
	if err != nil {
		t.Fatal(err)
	}
	sp := &splitPair{fp32: nn.Parameters(newSplitNet(1)), rng: rand.New(rand.NewPCG(9, 9))}
	if sp.opt, err = mk(sp.fp32); err != nil {
		t.Fatal(err)
	}
	fp32Step := func() {
		for i, p := range nn.Parameters(net) {
			g := autograd.Randn(autograd.NewGenerator(uint64(i)), p.Shape()...)
			p.SetGrad(g)
			sp.fp32[i].SetGrad(g)
		}
		pre.Step()
		sp.opt.Step()
	}
	fp32Step()
	s := pre.(optim.Splittable)
	boom := errors.New("no room")
	if _, err := s.SplitWith(net, func(nn.Module) (*amp.SplitModel, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("SplitWith with a failing split returned %v", err)
	}
	fp32Step() // with the parameters it was given back
	for i, p := range nn.Parameters(net) {
		if err := sameBits(p.Float32s(), sp.fp32[i].Float32s()); err != "" {
			t.Fatalf("after a failed split, parameter %d: %s", i, err)
		}
	}
	var originals []weak.Pointer[autograd.Tensor]
	for _, p := range nn.Parameters(net) {
		originals = append(originals, weak.Make(p))
	}
	sp.sopt, err = s.SplitWith(net, func(m nn.Module) (*amp.SplitModel, error) {
		sm, err := amp.SplitModule(m)
		runtime.GC()
		for i, w := range originals {
			if w.Value() != nil {
				t.Errorf("FP32 parameter %d is still reachable after the split", i)
			}
		}
		sp.sm = sm
		return sm, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sp.sopt.(T); !ok || sp.sopt.NumGroups() != 2 {
		t.Fatalf("split form is a %T with %d groups", sp.sopt, sp.sopt.NumGroups())
	}
	for s := range 3 {
		sp.step()
		sp.check(t, fmt.Sprintf("split step %d", s+1))
	}
	defer func() {
		if e, ok := recover().(error); !ok || !strings.Contains(e.Error(), "Step: this optimizer cannot be used: it was split") {
			t.Errorf("Step of a spent optimizer panicked with %v", e)
		}
	}()
	pre.Step()
}

// splitTops returns the Tops of sm's split parameters.
func splitTops(sm *amp.SplitModel) []*autograd.Tensor {
	var tops []*autograd.Tensor
	for _, ns := range sm.Params() {
		tops = append(tops, ns.Param.Top)
	}
	return tops
}

func conformers() []conformer {
	sgd := newCase("SGD", optim.NewSGDGroups, optim.NewSGDSplitGroups,
		func(ps []*autograd.Tensor, o optim.SGDOptions) optim.SGDGroup {
			return optim.SGDGroup{Params: ps, SGDOptions: o}
		},
		func(o *optim.SGDOptions) (*float64, *float64) { return &o.LR, &o.WeightDecay })
	sgd.state = "momentum_buffer"
	sgd.opts = optim.SGDOptions{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-3, Nesterov: true}
	sgd.bad = []badOption[optim.SGDOptions]{
		{func(o *optim.SGDOptions) { o.Momentum = -0.5 }, "invalid momentum value: -0.5"},
		{func(o *optim.SGDOptions) { o.Dampening = math.NaN() }, "invalid dampening value: NaN"},
		{func(o *optim.SGDOptions) { o.Dampening = 0.1 }, "Nesterov momentum requires a momentum and zero dampening"},
		{func(o *optim.SGDOptions) { o.Momentum = 0 }, "Nesterov momentum requires a momentum and zero dampening"},
	}
	sgd.load = []loadCase{
		{"bad nesterov", func(sd *optim.StateDict) { sd.Groups[0].Hyper["nesterov"] = 2 }, "param_groups.0.nesterov: boolean hyper-parameter is 2, want 0 or 1"},
	}
	sgdDampened := sgd
	sgdDampened.opts = optim.SGDOptions{LR: 0.1, Momentum: 0.5, Dampening: 0.25, WeightDecay: 1e-2, Maximize: true}
	sgdDampened.bad = nil

	adam := newCase("Adam", optim.NewAdamGroups, optim.NewAdamSplitGroups,
		func(ps []*autograd.Tensor, o optim.AdamOptions) optim.AdamGroup {
			return optim.AdamGroup{Params: ps, AdamOptions: o}
		},
		func(o *optim.AdamOptions) (*float64, *float64) { return &o.LR, &o.WeightDecay })
	adam.state = "exp_avg"
	adam.opts = optim.AdamOptions{LR: 1e-2, Betas: [2]float64{0.9, 0.99}, Eps: 1e-8, WeightDecay: 1e-2, AMSGrad: true}
	adam.bad = []badOption[optim.AdamOptions]{
		{func(o *optim.AdamOptions) { o.Eps = 0 }, "invalid epsilon value: 0 (want > 0; DefaultAdamOptions has 1e-8)"},
		{func(o *optim.AdamOptions) { o.Eps = math.NaN() }, "invalid epsilon value: NaN"},
		{func(o *optim.AdamOptions) { o.Betas[0] = 1 }, "invalid beta parameter at index 0: 1"},
		{func(o *optim.AdamOptions) { o.Betas[1] = -0.5 }, "invalid beta parameter at index 1: -0.5"},
	}
	adam.load = []loadCase{
		{"missing exp_avg_sq", func(sd *optim.StateDict) { delete(sd.State[0], "exp_avg_sq") }, "state.0.exp_avg_sq: missing state"},
		{"missing max_exp_avg_sq", func(sd *optim.StateDict) { delete(sd.State[2], "max_exp_avg_sq") }, "state.2.max_exp_avg_sq: missing state"},
		{"step too large", func(sd *optim.StateDict) { sd.State[0]["step"] = autograd.Scalar(1 << 25) }, "state.0.step: 3.3554432e+07 is not a step count"},
	}
	adamW := adam
	adamW.name, adamW.new, adamW.split = "AdamW", optim.NewAdamWGroups, optim.NewAdamWSplitGroups
	adamW.opts = optim.DefaultAdamWOptions()
	adamW.opts.Maximize = true
	adamW.load = adam.load[:1]

	adagrad := newCase("Adagrad", optim.NewAdagradGroups, optim.NewAdagradSplitGroups,
		func(ps []*autograd.Tensor, o optim.AdagradOptions) optim.AdagradGroup {
			return optim.AdagradGroup{Params: ps, AdagradOptions: o}
		},
		func(o *optim.AdagradOptions) (*float64, *float64) { return &o.LR, &o.WeightDecay })
	adagrad.state = "sum"
	adagrad.eager = true
	adagrad.opts = optim.AdagradOptions{LR: 0.1, LRDecay: 1e-3, WeightDecay: 1e-2, InitialAccumulatorValue: 0.1, Eps: 1e-10}
	adagrad.bad = []badOption[optim.AdagradOptions]{
		{func(o *optim.AdagradOptions) { o.LRDecay = -1 }, "invalid lr_decay value: -1"},
		{func(o *optim.AdagradOptions) { o.InitialAccumulatorValue = math.NaN() }, "invalid initial_accumulator_value value: NaN"},
		{func(o *optim.AdagradOptions) { o.Eps = 0 }, "invalid epsilon value: 0 (want > 0; DefaultAdagradOptions has 1e-10)"},
	}
	adagrad.load = []loadCase{
		{"missing step", func(sd *optim.StateDict) { delete(sd.State[1], "step") }, "state.1.step: missing state"},
		{"negative accumulator", func(sd *optim.StateDict) { sd.Groups[1].Hyper["initial_accumulator_value"] = -1 }, "invalid initial_accumulator_value value: -1 (in param_groups.1)"},
	}

	lamb := newCase("Lamb", optim.NewLambGroups, optim.NewLambSplitGroups,
		func(ps []*autograd.Tensor, o optim.LambOptions) optim.LambGroup {
			return optim.LambGroup{Params: ps, LambOptions: o}
		},
		func(o *optim.LambOptions) (*float64, *float64) { return &o.LR, &o.WeightDecay })
	lamb.state = "exp_avg"
	lamb.opts = optim.LambOptions{LR: 1e-2, Betas: [2]float64{0.9, 0.99}, Eps: 1e-6, WeightDecay: 1e-2}
	lamb.bad = []badOption[optim.LambOptions]{
		{func(o *optim.LambOptions) { o.Eps = 0 }, "invalid epsilon value: 0 (want > 0; DefaultLambOptions has 1e-8)"},
		{func(o *optim.LambOptions) { o.Betas[0] = 1 }, "invalid beta parameter at index 0: 1"},
	}
	lamb.load = []loadCase{
		{"missing step", func(sd *optim.StateDict) { delete(sd.State[2], "step") }, "state.2.step: missing state"},
		{"no AMSGrad state", func(sd *optim.StateDict) { sd.State[0]["max_exp_avg_sq"] = sd.State[0]["exp_avg"] }, "state.0.max_exp_avg_sq: unknown state"},
	}

	lars := newCase("LARS", optim.NewLARSGroups, optim.NewLARSSplitGroups,
		func(ps []*autograd.Tensor, o optim.LARSOptions) optim.LARSGroup {
			return optim.LARSGroup{Params: ps, LARSOptions: o}
		},
		func(o *optim.LARSOptions) (*float64, *float64) { return &o.LR, &o.WeightDecay })
	lars.state = "momentum_buffer"
	lars.opts = optim.LARSOptions{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4, Eeta: 0.02, Eps: 1e-8, Dampening: 0.1}
	lars.bad = []badOption[optim.LARSOptions]{
		{func(o *optim.LARSOptions) { o.Eeta = 0 }, "invalid eeta value: 0 (want (0, 1]; DefaultLARSOptions has 1e-3)"},
		{func(o *optim.LARSOptions) { o.Eeta = 1.5 }, "invalid eeta value: 1.5"},
		{func(o *optim.LARSOptions) { o.Eps = -1 }, "invalid epsilon value: -1"},
		{func(o *optim.LARSOptions) { o.Nesterov = true }, "Nesterov momentum requires a momentum and zero dampening"},
	}
	lars.load = []loadCase{
		{"bad eeta", func(sd *optim.StateDict) { sd.Groups[1].Hyper["eeta"] = 2 }, "invalid eeta value: 2 (want (0, 1]; DefaultLARSOptions has 1e-3) (in param_groups.1)"},
	}
	larsNesterov := lars
	larsNesterov.opts = optim.LARSOptions{LR: 0.5, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3, Eeta: 1e-3}
	larsNesterov.bad, larsNesterov.load = nil, nil

	return []conformer{sgd, named(sgdDampened, "SGD dampened"), adam, adamW, adagrad, lamb, lars, named(larsNesterov, "LARS Nesterov")}
}

// namedCase gives a variant of an optimizer's case its own test name.
type namedCase struct {
	conformer
	name string
}

func (n namedCase) caseName() string { return n.name }

func named(c conformer, name string) conformer { return namedCase{c, name} }

func TestOptimizerConformance(t *testing.T) {
	for _, c := range conformers() {
		t.Run(strings.ReplaceAll(c.caseName(), " ", "_"), c.run)
	}
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

// trainThree steps opt steps times over three parameters shaped [3], [1]
// and [2], giving the middle one no gradient.
func trainThree(opt optim.Optimizer, params []*autograd.Tensor, steps int) {
	for i := range steps {
		setGrad(params[0], 0.1, float32(i), -1)
		setGrad(params[2], 1, -0.5*float32(i))
		opt.Step()
	}
}

// benchSizes are the parameter sizes of the step benchmarks: a bias, a
// small layer's weight and a large one (about 1.1 M elements in all).
var benchSizes = []int{64, 4096, 1 << 20}

// smallSizes are 256 parameters of 256 elements, where the cost of a step
// outside the kernels shows.
var smallSizes = func() []int {
	s := make([]int, 256)
	for i := range s {
		s[i] = 256
	}
	return s
}()

type benchNet struct{ nn.Base }

func newBenchNet(sizes []int) *benchNet {
	m := &benchNet{}
	g := autograd.NewGenerator(7)
	for i, n := range sizes {
		p := autograd.Randn(g, n)
		p.SetRequiresGrad(true)
		m.RegisterParameter(fmt.Sprintf("p%d", i), p)
	}
	return m
}

// BenchmarkStep times one Step of each optimizer of the conformance suite
// (with its options there) over benchSizes, over FP32 parameters and over a
// split-BF16 model (bfloat16 gradients).
func BenchmarkStep(b *testing.B) { benchStep(b, benchSizes) }

// BenchmarkStepSmall is BenchmarkStep over smallSizes.
func BenchmarkStepSmall(b *testing.B) { benchStep(b, smallSizes) }

func benchStep(b *testing.B, sizes []int) {
	for _, c := range conformers() {
		mk, mkSplit := c.makers()
		name := strings.ReplaceAll(c.caseName(), " ", "_")
		b.Run(name+"/FP32", func(b *testing.B) {
			ps := nn.Parameters(newBenchNet(sizes))
			g := autograd.NewGenerator(8)
			for _, p := range ps {
				p.SetGrad(autograd.MulScalar(autograd.Randn(g, p.Shape()...), 1e-2))
			}
			opt, err := mk(ps)
			if err != nil {
				b.Fatal(err)
			}
			benchSteps(b, opt)
		})
		b.Run(name+"/split", func(b *testing.B) {
			sm, err := amp.SplitModule(newBenchNet(sizes))
			if err != nil {
				b.Fatal(err)
			}
			g := autograd.NewGenerator(8)
			for _, ns := range sm.Params() {
				top := ns.Param.Top
				grad := make([]uint16, top.Numel())
				for i, v := range autograd.Randn(g, top.Shape()...).Float32s() {
					grad[i] = kernels.BF16FromF32(v * 1e-2)
				}
				top.SetGrad(autograd.FromBFloat16(grad, top.Shape()...))
			}
			opt, err := mkSplit(sm)
			if err != nil {
				b.Fatal(err)
			}
			benchSteps(b, opt)
		})
	}
}

func benchSteps(b *testing.B, opt optim.Optimizer) {
	opt.Step()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		opt.Step()
	}
}
