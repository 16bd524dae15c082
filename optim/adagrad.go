package optim

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// AdagradOptions are the hyper-parameters of torch.optim.Adagrad. Start
// from DefaultAdagradOptions and change what differs: the zero value has
// Eps 0, which is rejected.
type AdagradOptions struct {
	// LR is the learning rate; it must be at least 0.
	LR float64
	// LRDecay divides the learning rate of a parameter's t-th step by
	// 1 + (t − 1)·LRDecay; at least 0.
	LRDecay float64
	// WeightDecay adds WeightDecay·p to the gradient (L2 penalty); at least
	// 0.
	WeightDecay float64
	// InitialAccumulatorValue is the starting value of every element's sum
	// of squared gradients; at least 0.
	InitialAccumulatorValue float64
	// Eps is added to the root of the sum for numerical stability; it must
	// be greater than 0 (PyTorch also allows 0).
	Eps float64
	// Maximize ascends the objective instead of descending it.
	Maximize bool
}

// DefaultAdagradOptions returns torch.optim.Adagrad's defaults: lr 1e-2,
// eps 1e-10, no lr decay, weight decay or initial accumulator.
func DefaultAdagradOptions() AdagradOptions {
	return AdagradOptions{LR: 1e-2, Eps: 1e-10}
}

func (o AdagradOptions) check(group int) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("optim: Adagrad: group %d: %s", group, fmt.Sprintf(format, args...))
	}
	bad := func(v float64) bool { return !(v >= 0) || math.IsInf(v, 0) }
	switch {
	case bad(o.LR):
		return fail("invalid learning rate: %v", o.LR)
	case bad(o.LRDecay):
		return fail("invalid lr_decay value: %v", o.LRDecay)
	case bad(o.WeightDecay):
		return fail("invalid weight_decay value: %v", o.WeightDecay)
	case bad(o.InitialAccumulatorValue):
		return fail("invalid initial_accumulator_value value: %v", o.InitialAccumulatorValue)
	case !(o.Eps > 0) || math.IsInf(o.Eps, 0):
		return fail("invalid epsilon value: %v (want > 0; DefaultAdagradOptions has 1e-10)", o.Eps)
	}
	return nil
}

// config returns the kernel configuration of a parameter's step-th update
// (counting from 1), with the learning rate computed in float64 as
// PyTorch's _single_tensor_adagrad computes it in Python.
func (o AdagradOptions) config(step float64) kernels.AdagradConfig {
	clr := o.LR / (1 + (step-1)*o.LRDecay)
	return kernels.AdagradConfig{
		WeightDecay: float32(o.WeightDecay),
		NegLR:       float32(-clr),
		Eps:         float32(o.Eps),
		Maximize:    o.Maximize,
	}
}

// AdagradGroup is a parameter group for NewAdagradGroups: parameters that
// share hyper-parameters.
type AdagradGroup struct {
	Params []*autograd.Tensor
	AdagradOptions
}

// Adagrad is the Adagrad optimizer with learning-rate decay, weight decay
// and an initial accumulator, following PyTorch 1.13's torch.optim.Adagrad
// (single-tensor implementation, dense gradients): for each parameter p
// with gradient g, on its t-th step,
//
//	g = g (−g when Maximize) + WeightDecay·p
//	s = s + g²                      (s starts at InitialAccumulatorValue)
//	p = p − LR/(1 + (t − 1)·LRDecay) · g / (√s + Eps)
//
// Each parameter's update is one fused pass over its parameter, gradient
// and sum (kernels.AdagradStep); steps allocate nothing. As in PyTorch,
// every parameter's sum is allocated when the optimizer is made. State
// tensors take their parameter's memory format and follow it if the
// parameter is reordered.
//
// A sparse gradient (autograd.Tensor.SparseGrad, from a sparse embedding)
// updates only its rows, parameter and sum, with the roundings of
// PyTorch's sparse Adagrad (kernels.AdagradSparse); the step count still
// advances. WeightDecay must be 0 for such parameters, as in PyTorch:
// Step panics otherwise.
type Adagrad struct {
	lrGroups
	groups []adagradGroup
}

type adagradGroup struct {
	AdagradGroup
	splits []*amp.SplitParam // per parameter, nil unless split
	state  []adagradState    // one per parameter
}

type adagradState struct {
	step   *autograd.Tensor // 0-d float32 step count
	sum    *autograd.Tensor
	kernel kernels.AdagradStep
	split  kernels.AdagradSplitStep // for a split parameter
}

// newAdagradState returns the state PyTorch gives a parameter: step 0 and
// a sum filled with the initial accumulator value.
func newAdagradState(p *autograd.Tensor, initial float64) adagradState {
	return adagradState{step: autograd.Scalar(0), sum: zerosState(p).Fill(float32(initial))}
}

// NewAdagrad returns an Adagrad optimizer over params as one group.
func NewAdagrad(params []*autograd.Tensor, opt AdagradOptions) (*Adagrad, error) {
	return NewAdagradGroups(AdagradGroup{Params: params, AdagradOptions: opt})
}

// NewAdagradGroups returns an Adagrad optimizer over parameter groups. It
// fails when a hyper-parameter is out of range, when there are no
// parameters, or when a parameter is nil, not a float32 leaf, or in two
// groups.
func NewAdagradGroups(groups ...AdagradGroup) (*Adagrad, error) {
	return newAdagrad(nil, groups)
}

// NewAdagradSplit returns an Adagrad optimizer, as one group, over the
// split parameters of sm (amp.SplitModule): its parameters are the
// bfloat16 Tops, in sm.Params order, and each step updates the FP32
// master that Top and Bottom stand for, bit for bit as NewAdagrad would
// update the FP32 parameters with the same gradients
// (kernels.AdagradSplitStep). The sums stay FP32, and state dicts number
// the parameters as the unsplit model's optimizer does, so either can load
// the other's.
func NewAdagradSplit(sm *amp.SplitModel, opt AdagradOptions) (*Adagrad, error) {
	return NewAdagradSplitGroups(sm, AdagradGroup{Params: splitTops(sm), AdagradOptions: opt})
}

// NewAdagradSplitGroups is NewAdagradGroups for a model split by
// amp.SplitModule: the groups' parameters may be the bfloat16 Tops of sm's
// split parameters, updated as NewAdagradSplit describes, beside float32
// ones. It fails as NewAdagradGroups does, and when a bfloat16 parameter
// is not the Top of one of sm's split parameters.
func NewAdagradSplitGroups(sm *amp.SplitModel, groups ...AdagradGroup) (*Adagrad, error) {
	if sm == nil {
		return nil, fmt.Errorf("optim: Adagrad: split model is nil")
	}
	return newAdagrad(sm, groups)
}

func newAdagrad(sm *amp.SplitModel, groups []AdagradGroup) (*Adagrad, error) {
	splits, err := checkSplitGroups("Adagrad", sm, groups, func(gr AdagradGroup, g int) ([]*autograd.Tensor, error) {
		return gr.Params, gr.check(g)
	})
	if err != nil {
		return nil, err
	}
	a := &Adagrad{groups: make([]adagradGroup, len(groups))}
	for g, gr := range groups {
		gr.Params = append([]*autograd.Tensor(nil), gr.Params...)
		state := make([]adagradState, len(gr.Params))
		for i, p := range gr.Params {
			state[i] = newAdagradState(p, gr.InitialAccumulatorValue)
		}
		a.groups[g] = adagradGroup{AdagradGroup: gr, splits: splits[g], state: state}
	}
	a.lrGroups = newLRGroups("Adagrad", len(groups), func(g int) (*float64, []*autograd.Tensor) {
		return &a.groups[g].LR, a.groups[g].Params
	})
	return a, nil
}

// Step updates every parameter that has a gradient.
func (a *Adagrad) Step() {
	for gi := range a.groups {
		g := &a.groups[gi]
		for i, p := range g.Params {
			grad, sg := p.Grad(), p.SparseGrad()
			if grad == nil && sg == nil {
				continue
			}
			st := &g.state[i]
			sp := g.splits[i]
			if sg != nil {
				checkSparseDecay("Adagrad", gi, i, g.WeightDecay)
				step := st.step.Float32s()
				step[0]++
				cfg := g.config(float64(step[0]))
				if sp != nil {
					kernels.AdagradSparseSplit(p.BFloat16s(), sp.Bottom, st.sum.Float32s(), sparseRows(sg), cfg)
				} else {
					kernels.AdagradSparse(p.Float32s(), st.sum.Float32s(), sparseRows(sg), cfg)
				}
				continue
			}
			if sp == nil && grad.Format() != p.Format() {
				grad = copyState(grad, p)
			}
			if st.sum.Format() != p.Format() {
				st.sum.SetFormat(p.Format())
			}
			// PyTorch counts steps in a float32 tensor.
			step := st.step.Float32s()
			step[0]++
			if sp != nil {
				k := &st.split
				k.Top, k.Bottom, k.Grad, k.Sum = p.BFloat16s(), sp.Bottom, splitGrad(grad, p), st.sum.Float32s()
				k.AdagradConfig = g.config(float64(step[0]))
				k.Run()
				k.Grad = kernels.SplitGrad{}
				continue
			}
			k := &st.kernel
			k.Param, k.Grad, k.Sum = p.Float32s(), grad.Float32s(), st.sum.Float32s()
			k.AdagradConfig = g.config(float64(step[0]))
			k.Run()
			k.Grad = nil
		}
	}
}

// Group returns a copy of group's parameters and hyper-parameters.
func (a *Adagrad) Group(group int) AdagradGroup {
	checkGroup("Adagrad.Group", group, len(a.groups))
	g := a.groups[group].AdagradGroup
	g.Params = append([]*autograd.Tensor(nil), g.Params...)
	return g
}

// StateDict returns every parameter's state under PyTorch's names (the
// optimizer's own tensors): "step" (a 0-d float32 count) and "sum"; and
// each group's hyper-parameters: lr, lr_decay, weight_decay,
// initial_accumulator_value, eps, maximize and, once a scheduler set it,
// initial_lr.
func (a *Adagrad) StateDict() *StateDict {
	sd := &StateDict{State: map[int]map[string]*autograd.Tensor{}}
	id := 0
	for gi, g := range a.groups {
		gs := GroupState{Hyper: map[string]float64{
			"lr":                        g.LR,
			"lr_decay":                  g.LRDecay,
			"weight_decay":              g.WeightDecay,
			"initial_accumulator_value": g.InitialAccumulatorValue,
			"eps":                       g.Eps,
			"maximize":                  boolHyper(g.Maximize),
		}}
		a.putInitialLR(gi, gs.Hyper)
		for i := range g.Params {
			if st := g.state[i]; st.step != nil {
				sd.State[id] = map[string]*autograd.Tensor{"step": st.step, "sum": st.sum}
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
// correspond by position. A parameter's saved state needs both step and
// sum; a parameter without saved state starts afresh (step 0, sum filled
// with its group's initial accumulator value). Loaded sums take their
// parameter's memory format. Errors name the offending key (e.g.
// "state.3.sum" or "param_groups.0.lr_decay"), and nothing changes when
// there is one.
func (a *Adagrad) LoadStateDict(sd *StateDict) error {
	byID, steps, err := checkLoadSteps(a.name, sd, a.params, "sum")
	if err != nil {
		return err
	}
	opts, initial, err := readGroups(a.name, sd, func(r *hyperReader) AdagradOptions {
		return AdagradOptions{
			LR:                      r.float("lr"),
			LRDecay:                 r.float("lr_decay"),
			WeightDecay:             r.float("weight_decay"),
			InitialAccumulatorValue: r.float("initial_accumulator_value"),
			Eps:                     r.float("eps"),
			Maximize:                r.bool("maximize"),
		}
	}, AdagradOptions.check)
	if err != nil {
		return err
	}
	states := map[*autograd.Tensor]adagradState{}
	for _, id := range sortedKeys(sd.State) {
		st := sd.State[id]
		if len(st) == 0 {
			continue
		}
		for _, name := range []string{"step", "sum"} {
			if st[name] == nil {
				return fmt.Errorf("optim: %s: state.%d.%s: missing state", a.name, id, name)
			}
		}
		p := byID[id]
		states[p] = adagradState{step: autograd.Scalar(steps[id]), sum: copyState(st["sum"], p)}
	}
	a.initial = initial
	for g := range a.groups {
		gr := &a.groups[g]
		gr.AdagradOptions = opts[g]
		for i, p := range gr.Params {
			if st, ok := states[p]; ok {
				gr.state[i] = st
			} else {
				gr.state[i] = newAdagradState(p, gr.InitialAccumulatorValue)
			}
		}
	}
	return nil
}
