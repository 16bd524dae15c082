package optim

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// AdamOptions are the hyper-parameters of torch.optim.Adam and
// torch.optim.AdamW. Start from DefaultAdamOptions or DefaultAdamWOptions
// and change what differs: the zero value has Eps 0, which is rejected.
type AdamOptions struct {
	// LR is the learning rate; it must be at least 0.
	LR float64
	// Betas are the decay rates of the running averages of the gradient
	// and of its square, each in [0, 1).
	Betas [2]float64
	// Eps is added to the denominator for numerical stability; it must be
	// greater than 0 (PyTorch also allows 0, which divides 0 by 0 for a
	// parameter whose gradient has always been 0).
	Eps float64
	// WeightDecay is at least 0. Adam adds WeightDecay·p to the gradient
	// (L2 penalty); AdamW multiplies p by 1 − LR·WeightDecay before the
	// update (decoupled weight decay).
	WeightDecay float64
	// AMSGrad normalises with the running maximum of the second moment.
	AMSGrad bool
	// Maximize ascends the objective instead of descending it.
	Maximize bool
}

// DefaultAdamOptions returns torch.optim.Adam's defaults: lr 1e-3, betas
// (0.9, 0.999), eps 1e-8, no weight decay.
func DefaultAdamOptions() AdamOptions {
	return AdamOptions{LR: 1e-3, Betas: [2]float64{0.9, 0.999}, Eps: 1e-8}
}

// DefaultAdamWOptions returns torch.optim.AdamW's defaults: Adam's with
// weight decay 1e-2.
func DefaultAdamWOptions() AdamOptions {
	o := DefaultAdamOptions()
	o.WeightDecay = 1e-2
	return o
}

func (o AdamOptions) check(opt string, group int) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("optim: %s: group %d: %s", opt, group, fmt.Sprintf(format, args...))
	}
	switch {
	case !(o.LR >= 0) || math.IsInf(o.LR, 0):
		return fail("invalid learning rate: %v", o.LR)
	case !(o.Eps > 0) || math.IsInf(o.Eps, 0):
		return fail("invalid epsilon value: %v (want > 0; DefaultAdamOptions has 1e-8)", o.Eps)
	case !(o.Betas[0] >= 0 && o.Betas[0] < 1):
		return fail("invalid beta parameter at index 0: %v (want [0, 1))", o.Betas[0])
	case !(o.Betas[1] >= 0 && o.Betas[1] < 1):
		return fail("invalid beta parameter at index 1: %v (want [0, 1))", o.Betas[1])
	case !(o.WeightDecay >= 0) || math.IsInf(o.WeightDecay, 0):
		return fail("invalid weight_decay value: %v", o.WeightDecay)
	}
	return nil
}

// config returns the kernel configuration of a parameter's step-th update
// (counting from 1), with the scalars computed in float64 as PyTorch's
// _single_tensor_adam computes them in Python.
func (o AdamOptions) config(decoupled bool, step float64) kernels.AdamConfig {
	b1, b2 := o.Betas[0], o.Betas[1]
	biasCorrection1 := 1 - math.Pow(b1, step)
	biasCorrection2 := 1 - math.Pow(b2, step)
	stepSize := o.LR / biasCorrection1
	c := kernels.AdamConfig{
		Beta1:               float32(b1),
		Beta2:               float32(b2),
		Keep1:               float32(1 - b1),
		Keep2:               float32(1 - b2),
		NegStepSize:         float32(-stepSize),
		BiasCorrection2Sqrt: float32(math.Sqrt(biasCorrection2)),
		Eps:                 float32(o.Eps),
		AMSGrad:             o.AMSGrad,
		Maximize:            o.Maximize,
	}
	if decoupled {
		c.Decoupled = true
		c.DecayScale = float32(1 - o.LR*o.WeightDecay)
	} else {
		c.WeightDecay = float32(o.WeightDecay)
	}
	return c
}

// AdamGroup is a parameter group for NewAdamGroups and NewAdamWGroups:
// parameters that share hyper-parameters.
type AdamGroup struct {
	Params []*autograd.Tensor
	AdamOptions
}

// Adam is the Adam optimizer with L2 weight decay, AMSGrad and
// maximisation, or with NewAdamW the AdamW optimizer with decoupled weight
// decay, following PyTorch 1.13's torch.optim.Adam and torch.optim.AdamW
// (single-tensor implementation): for each parameter p with gradient g, on
// its t-th step,
//
//	g = g (−g when Maximize) + WeightDecay·p     (Adam)
//	p = p·(1 − LR·WeightDecay)                   (AdamW)
//	m = β1·m + (1 − β1)·g
//	v = β2·v + (1 − β2)·g²
//	v̂ = max(v̂, v), used for v below             (AMSGrad)
//	p = p − LR/(1 − β1^t) · m / (√v/√(1 − β2^t) + Eps)
//
// Each parameter's update is one fused pass over its parameter, gradient
// and state (kernels.AdamStep); steps after the first allocate nothing.
// State tensors take their parameter's memory format and follow it if the
// parameter is reordered.
type Adam struct {
	lrGroups  // name is "Adam" or "AdamW"
	decoupled bool
	groups    []adamGroup
}

type adamGroup struct {
	AdamGroup
	splits []*amp.SplitParam // per parameter, nil unless split
	state  []adamState       // one per parameter
}

type adamState struct {
	step             *autograd.Tensor // 0-d float32 step count, nil until the first step
	expAvg, expAvgSq *autograd.Tensor
	maxExpAvgSq      *autograd.Tensor // with AMSGrad
	kernel           kernels.AdamStep
	split            kernels.AdamSplitStep // for a split parameter
}

// NewAdam returns an Adam optimizer over params as one group.
func NewAdam(params []*autograd.Tensor, opt AdamOptions) (*Adam, error) {
	return NewAdamGroups(AdamGroup{Params: params, AdamOptions: opt})
}

// NewAdamGroups returns an Adam optimizer over parameter groups. It fails
// when a hyper-parameter is out of range, when there are no parameters, or
// when a parameter is nil, not a float32 leaf, or in two groups.
func NewAdamGroups(groups ...AdamGroup) (*Adam, error) {
	return newAdam("Adam", false, nil, groups)
}

// NewAdamSplit returns an Adam optimizer, as one group, over the split
// parameters of sm (amp.SplitModule): its parameters are the bfloat16
// Tops, in sm.Params order, and each step updates the FP32 master that
// Top and Bottom stand for, bit for bit as NewAdam would update the FP32
// parameters with the same gradients (kernels.AdamSplitStep). The moments
// stay FP32, and state dicts number the parameters as the unsplit model's
// optimizer does, so either can load the other's.
func NewAdamSplit(sm *amp.SplitModel, opt AdamOptions) (*Adam, error) {
	return NewAdamSplitGroups(sm, AdamGroup{Params: splitTops(sm), AdamOptions: opt})
}

// NewAdamSplitGroups is NewAdamGroups for a model split by
// amp.SplitModule: the groups' parameters may be the bfloat16 Tops of sm's
// split parameters, updated as NewAdamSplit describes, beside float32
// ones. It fails as NewAdamGroups does, and when a bfloat16 parameter is
// not the Top of one of sm's split parameters.
func NewAdamSplitGroups(sm *amp.SplitModel, groups ...AdamGroup) (*Adam, error) {
	if sm == nil {
		return nil, fmt.Errorf("optim: Adam: split model is nil")
	}
	return newAdam("Adam", false, sm, groups)
}

// NewAdamWSplit is NewAdamSplit for AdamW.
func NewAdamWSplit(sm *amp.SplitModel, opt AdamOptions) (*Adam, error) {
	return NewAdamWSplitGroups(sm, AdamGroup{Params: splitTops(sm), AdamOptions: opt})
}

// NewAdamWSplitGroups is NewAdamSplitGroups for AdamW.
func NewAdamWSplitGroups(sm *amp.SplitModel, groups ...AdamGroup) (*Adam, error) {
	if sm == nil {
		return nil, fmt.Errorf("optim: AdamW: split model is nil")
	}
	return newAdam("AdamW", true, sm, groups)
}

// NewAdamW returns an AdamW optimizer (Adam with decoupled weight decay)
// over params as one group.
func NewAdamW(params []*autograd.Tensor, opt AdamOptions) (*Adam, error) {
	return NewAdamWGroups(AdamGroup{Params: params, AdamOptions: opt})
}

// NewAdamWGroups returns an AdamW optimizer over parameter groups, failing
// as NewAdamGroups does.
func NewAdamWGroups(groups ...AdamGroup) (*Adam, error) {
	return newAdam("AdamW", true, nil, groups)
}

func newAdam(name string, decoupled bool, sm *amp.SplitModel, groups []AdamGroup) (*Adam, error) {
	splits, err := checkSplitGroups(name, sm, groups, func(gr AdamGroup, g int) ([]*autograd.Tensor, error) {
		return gr.Params, gr.check(name, g)
	})
	if err != nil {
		return nil, err
	}
	a := &Adam{decoupled: decoupled, groups: make([]adamGroup, len(groups))}
	for g, gr := range groups {
		gr.Params = append([]*autograd.Tensor(nil), gr.Params...)
		a.groups[g] = adamGroup{AdamGroup: gr, splits: splits[g], state: make([]adamState, len(gr.Params))}
	}
	a.lrGroups = newLRGroups(name, len(groups), func(g int) (*float64, []*autograd.Tensor) {
		return &a.groups[g].LR, a.groups[g].Params
	})
	return a, nil
}

// Decoupled reports whether a is AdamW (decoupled weight decay) rather
// than Adam (L2 penalty).
func (a *Adam) Decoupled() bool { return a.decoupled }

// Step updates every parameter that has a gradient.
func (a *Adam) Step() {
	for gi := range a.groups {
		g := &a.groups[gi]
		for i, p := range g.Params {
			rejectSparse(a.name, gi, i, p)
			grad := p.Grad()
			if grad == nil {
				continue
			}
			st := &g.state[i]
			sp := g.splits[i]
			if sp == nil && grad.Format() != p.Format() {
				// The kernel needs the gradient in the parameter's
				// physical order.
				grad = copyState(grad, p)
			}
			if st.step == nil {
				st.step = autograd.Scalar(0)
				st.expAvg = zerosState(p)
				st.expAvgSq = zerosState(p)
			}
			if g.AMSGrad && st.maxExpAvgSq == nil {
				st.maxExpAvgSq = zerosState(p)
			}
			for _, s := range []*autograd.Tensor{st.expAvg, st.expAvgSq, st.maxExpAvgSq} {
				if s != nil && s.Format() != p.Format() {
					s.SetFormat(p.Format())
				}
			}
			// PyTorch counts steps in a float32 tensor.
			step := st.step.Float32s()
			step[0]++
			if sp != nil {
				k := &st.split
				k.Top, k.Bottom, k.Grad = p.BFloat16s(), sp.Bottom, splitGrad(grad, p)
				k.ExpAvg, k.ExpAvgSq = st.expAvg.Float32s(), st.expAvgSq.Float32s()
				k.MaxExpAvgSq = nil
				if g.AMSGrad {
					k.MaxExpAvgSq = st.maxExpAvgSq.Float32s()
				}
				k.AdamConfig = g.config(a.decoupled, float64(step[0]))
				k.Run()
				k.Grad = kernels.SplitGrad{}
				continue
			}
			k := &st.kernel
			k.Param, k.Grad = p.Float32s(), grad.Float32s()
			k.ExpAvg, k.ExpAvgSq = st.expAvg.Float32s(), st.expAvgSq.Float32s()
			k.MaxExpAvgSq = nil
			if g.AMSGrad {
				k.MaxExpAvgSq = st.maxExpAvgSq.Float32s()
			}
			k.AdamConfig = g.config(a.decoupled, float64(step[0]))
			k.Run()
			// Drop the references so a gradient freed by ZeroGrad is not
			// kept alive until the next step.
			k.Grad = nil
		}
	}
}

// Group returns a copy of group's parameters and hyper-parameters.
func (a *Adam) Group(group int) AdamGroup {
	checkGroup(a.name+".Group", group, len(a.groups))
	g := a.groups[group].AdamGroup
	g.Params = append([]*autograd.Tensor(nil), g.Params...)
	return g
}

// StateDict returns each stepped parameter's state under PyTorch's names
// (the optimizer's own tensors): "step" (a 0-d float32 count),
// "exp_avg", "exp_avg_sq" and, with AMSGrad, "max_exp_avg_sq"; and each
// group's hyper-parameters: lr, betas.0, betas.1 (PyTorch's betas tuple),
// eps, weight_decay, amsgrad, maximize and, once a scheduler set it,
// initial_lr.
func (a *Adam) StateDict() *StateDict {
	sd := &StateDict{State: map[int]map[string]*autograd.Tensor{}}
	id := 0
	for gi, g := range a.groups {
		gs := GroupState{Hyper: map[string]float64{
			"lr":           g.LR,
			"betas.0":      g.Betas[0],
			"betas.1":      g.Betas[1],
			"eps":          g.Eps,
			"weight_decay": g.WeightDecay,
			"amsgrad":      boolHyper(g.AMSGrad),
			"maximize":     boolHyper(g.Maximize),
		}}
		a.putInitialLR(gi, gs.Hyper)
		for i := range g.Params {
			if st := g.state[i]; st.step != nil {
				m := map[string]*autograd.Tensor{"step": st.step, "exp_avg": st.expAvg, "exp_avg_sq": st.expAvgSq}
				if st.maxExpAvgSq != nil {
					m["max_exp_avg_sq"] = st.maxExpAvgSq
				}
				sd.State[id] = m
			}
			gs.Params = append(gs.Params, id)
			id++
		}
		sd.Groups = append(sd.Groups, gs)
	}
	return sd
}

// LoadStateDict replaces the hyper-parameters and state with copies of
// sd's, as PyTorch's load_state_dict does: groups and parameters
// correspond by position, and parameters without saved state start afresh.
// A parameter's saved state needs step, exp_avg and exp_avg_sq, and
// max_exp_avg_sq when its group uses AMSGrad. Loaded tensors take their
// parameter's memory format. Errors name the offending key (e.g.
// "state.3.exp_avg" or "param_groups.0.betas.1"), and nothing changes when
// there is one.
func (a *Adam) LoadStateDict(sd *StateDict) error {
	byID, steps, err := checkLoadSteps(a.name, sd, a.params, "exp_avg", "exp_avg_sq", "max_exp_avg_sq")
	if err != nil {
		return err
	}
	opts, initial, err := readGroups(a.name, sd, func(r *hyperReader) AdamOptions {
		return AdamOptions{
			LR:          r.float("lr"),
			Betas:       [2]float64{r.float("betas.0"), r.float("betas.1")},
			Eps:         r.float("eps"),
			WeightDecay: r.float("weight_decay"),
			AMSGrad:     r.bool("amsgrad"),
			Maximize:    r.bool("maximize"),
		}
	}, func(o AdamOptions, g int) error { return o.check(a.name, g) })
	if err != nil {
		return err
	}
	amsgrad := map[*autograd.Tensor]bool{}
	for g, ps := range a.params {
		for _, p := range ps {
			amsgrad[p] = opts[g].AMSGrad
		}
	}
	states := map[*autograd.Tensor]adamState{}
	for _, id := range sortedKeys(sd.State) {
		st := sd.State[id]
		if len(st) == 0 {
			continue // a parameter not yet stepped
		}
		p := byID[id]
		need := []string{"step", "exp_avg", "exp_avg_sq"}
		if amsgrad[p] {
			need = append(need, "max_exp_avg_sq")
		}
		for _, name := range need {
			if st[name] == nil {
				return fmt.Errorf("optim: %s: state.%d.%s: missing state", a.name, id, name)
			}
		}
		ns := adamState{
			step:     autograd.Scalar(steps[id]),
			expAvg:   copyState(st["exp_avg"], p),
			expAvgSq: copyState(st["exp_avg_sq"], p),
		}
		if m := st["max_exp_avg_sq"]; m != nil {
			ns.maxExpAvgSq = copyState(m, p)
		}
		states[p] = ns
	}
	a.initial = initial
	for g := range a.groups {
		gr := &a.groups[g]
		gr.AdamOptions = opts[g]
		for i, p := range gr.Params {
			gr.state[i] = states[p]
		}
	}
	return nil
}
