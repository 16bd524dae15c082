package optim

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// LambOptions are the hyper-parameters of IPEX's Lamb
// (intel_extension_for_pytorch.optim._lamb.Lamb). Start from
// DefaultLambOptions and change what differs: the zero value has Eps 0,
// which is rejected.
type LambOptions struct {
	// LR is the learning rate; it must be at least 0.
	LR float64
	// Betas are the decay rates of the running averages of the gradient
	// and of its square, each in [0, 1).
	Betas [2]float64
	// Eps is added to the denominator for numerical stability; it must be
	// greater than 0.
	Eps float64
	// WeightDecay is at least 0: WeightDecay·p is added to the Adam
	// direction before the trust ratio (decoupled decay inside the update).
	WeightDecay float64
}

// DefaultLambOptions returns IPEX Lamb's defaults: lr 1e-3, betas
// (0.9, 0.999), eps 1e-8, no weight decay. (The Lamb paper and NVIDIA's
// implementations use eps 1e-6 and weight decay 0.01; set them if you
// follow those.)
func DefaultLambOptions() LambOptions {
	return LambOptions{LR: 1e-3, Betas: [2]float64{0.9, 0.999}, Eps: 1e-8}
}

func (o LambOptions) check(group int) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("optim: Lamb: group %d: %s", group, fmt.Sprintf(format, args...))
	}
	switch {
	case !(o.LR >= 0) || math.IsInf(o.LR, 0):
		return fail("invalid learning rate: %v", o.LR)
	case !(o.Eps > 0) || math.IsInf(o.Eps, 0):
		return fail("invalid epsilon value: %v (want > 0; DefaultLambOptions has 1e-8)", o.Eps)
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
// (counting from 1), the bias corrections computed in float64 as IPEX
// does and then rounded.
func (o LambOptions) config(step float64) kernels.LambConfig {
	b1, b2 := o.Betas[0], o.Betas[1]
	return kernels.LambConfig{
		Beta1:           float32(b1),
		Beta2:           float32(b2),
		Keep1:           float32(1 - b1),
		Keep2:           float32(1 - b2),
		BiasCorrection1: float32(1 - math.Pow(b1, step)),
		BiasCorrection2: float32(1 - math.Pow(b2, step)),
		Eps:             float32(o.Eps),
		WeightDecay:     float32(o.WeightDecay),
		LR:              o.LR,
	}
}

// LambGroup is a parameter group for NewLambGroups: parameters that share
// hyper-parameters.
type LambGroup struct {
	Params []*autograd.Tensor
	LambOptions
}

// Lamb is the Lamb optimizer (You et al., "Large Batch Optimization for
// Deep Learning: Training BERT in 76 minutes", arXiv:1904.00962) as IPEX's
// fused CPU Lamb defines it (torch_ipex::lamb_fused_step): for each
// parameter p with gradient g, on its t-th step,
//
//	m = β1·m + (1 − β1)·g
//	v = β2·v + (1 − β2)·g²
//	u = (m/(1 − β1^t)) / (√(v/(1 − β2^t)) + Eps) + WeightDecay·p
//	trust = ‖p‖/‖u‖, or 1 when either norm is 0   (norms over the tensor)
//	p = p − LR·trust·u
//
// Each parameter's update is two passes over its memory
// (kernels.LambStep): the first updates the moments and reduces both
// norms, in float64 and in an order that does not depend on the number of
// threads; the second recomputes u and applies it. Steps after the first
// allocate nothing. State tensors take their parameter's memory format and
// follow it if the parameter is reordered.
type Lamb struct {
	lrGroups
	groups []lambGroup
}

type lambGroup struct {
	LambGroup
	splits []*amp.SplitParam // per parameter, nil unless split
	state  []lambState       // one per parameter
}

type lambState struct {
	step             *autograd.Tensor // 0-d float32 step count, nil until the first step
	expAvg, expAvgSq *autograd.Tensor
	kernel           kernels.LambStep
	split            kernels.LambSplitStep // for a split parameter
}

// NewLamb returns a Lamb optimizer over params as one group.
func NewLamb(params []*autograd.Tensor, opt LambOptions) (*Lamb, error) {
	return NewLambGroups(LambGroup{Params: params, LambOptions: opt})
}

// NewLambGroups returns a Lamb optimizer over parameter groups. It fails
// when a hyper-parameter is out of range, when there are no parameters, or
// when a parameter is nil, not a float32 leaf, or in two groups.
func NewLambGroups(groups ...LambGroup) (*Lamb, error) {
	return newLamb(nil, groups)
}

// NewLambSplit returns a Lamb optimizer, as one group, over the split
// parameters of sm (amp.SplitModule): its parameters are the bfloat16
// Tops, in sm.Params order, and each step updates the FP32 master that
// Top and Bottom stand for, bit for bit as NewLamb would update the FP32
// parameters with the same gradients (kernels.LambSplitStep: the trust
// ratio's norms are taken over the joined FP32 values). The moments stay
// FP32, and state dicts number the parameters as the unsplit model's
// optimizer does, so either can load the other's.
func NewLambSplit(sm *amp.SplitModel, opt LambOptions) (*Lamb, error) {
	return NewLambSplitGroups(sm, LambGroup{Params: splitTops(sm), LambOptions: opt})
}

// NewLambSplitGroups is NewLambGroups for a model split by
// amp.SplitModule: the groups' parameters may be the bfloat16 Tops of sm's
// split parameters, updated as NewLambSplit describes, beside float32
// ones. It fails as NewLambGroups does, and when a bfloat16 parameter is
// not the Top of one of sm's split parameters.
func NewLambSplitGroups(sm *amp.SplitModel, groups ...LambGroup) (*Lamb, error) {
	if sm == nil {
		return nil, fmt.Errorf("optim: Lamb: split model is nil")
	}
	return newLamb(sm, groups)
}

func newLamb(sm *amp.SplitModel, groups []LambGroup) (*Lamb, error) {
	splits, err := checkSplitGroups("Lamb", sm, groups, func(gr LambGroup, g int) ([]*autograd.Tensor, error) {
		return gr.Params, gr.check(g)
	})
	if err != nil {
		return nil, err
	}
	l := &Lamb{groups: make([]lambGroup, len(groups))}
	for g, gr := range groups {
		gr.Params = append([]*autograd.Tensor(nil), gr.Params...)
		l.groups[g] = lambGroup{LambGroup: gr, splits: splits[g], state: make([]lambState, len(gr.Params))}
	}
	l.lrGroups = newLRGroups("Lamb", len(groups), func(g int) (*float64, []*autograd.Tensor) {
		return &l.groups[g].LR, l.groups[g].Params
	})
	return l, nil
}

// Step updates every parameter that has a gradient.
func (l *Lamb) Step() {
	for gi := range l.groups {
		g := &l.groups[gi]
		for i, p := range g.Params {
			rejectSparse("Lamb", gi, i, p)
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
			for _, s := range []*autograd.Tensor{st.expAvg, st.expAvgSq} {
				if s.Format() != p.Format() {
					s.SetFormat(p.Format())
				}
			}
			step := st.step.Float32s()
			step[0]++
			if sp != nil {
				k := &st.split
				k.Top, k.Bottom, k.Grad = p.BFloat16s(), sp.Bottom, splitGrad(grad, p)
				k.ExpAvg, k.ExpAvgSq = st.expAvg.Float32s(), st.expAvgSq.Float32s()
				k.LambConfig = g.config(float64(step[0]))
				k.Run()
				k.Grad = kernels.SplitGrad{}
				continue
			}
			k := &st.kernel
			k.Param, k.Grad = p.Float32s(), grad.Float32s()
			k.ExpAvg, k.ExpAvgSq = st.expAvg.Float32s(), st.expAvgSq.Float32s()
			k.LambConfig = g.config(float64(step[0]))
			k.Run()
			// Drop the reference so a gradient freed by ZeroGrad is not
			// kept alive until the next step.
			k.Grad = nil
		}
	}
}

// Group returns a copy of group's parameters and hyper-parameters.
func (l *Lamb) Group(group int) LambGroup {
	checkGroup("Lamb.Group", group, len(l.groups))
	g := l.groups[group].LambGroup
	g.Params = append([]*autograd.Tensor(nil), g.Params...)
	return g
}

// StateDict returns each stepped parameter's state under IPEX's names (the
// optimizer's own tensors): "step" (a 0-d float32 count), "exp_avg" and
// "exp_avg_sq"; and each group's hyper-parameters: lr, betas.0, betas.1,
// eps, weight_decay and, once a scheduler set it, initial_lr.
func (l *Lamb) StateDict() *StateDict {
	sd := &StateDict{State: map[int]map[string]*autograd.Tensor{}}
	id := 0
	for gi, g := range l.groups {
		gs := GroupState{Hyper: map[string]float64{
			"lr":           g.LR,
			"betas.0":      g.Betas[0],
			"betas.1":      g.Betas[1],
			"eps":          g.Eps,
			"weight_decay": g.WeightDecay,
		}}
		l.putInitialLR(gi, gs.Hyper)
		for i := range g.Params {
			if st := g.state[i]; st.step != nil {
				sd.State[id] = map[string]*autograd.Tensor{"step": st.step, "exp_avg": st.expAvg, "exp_avg_sq": st.expAvgSq}
			}
			gs.Params = append(gs.Params, id)
			id++
		}
		sd.Groups = append(sd.Groups, gs)
	}
	return sd
}

// LoadStateDict replaces the hyper-parameters and state with copies of
// sd's: groups and parameters correspond by position, and parameters
// without saved state start afresh. A parameter's saved state needs step,
// exp_avg and exp_avg_sq. Loaded tensors take their parameter's memory
// format. Errors name the offending key (e.g. "state.3.exp_avg" or
// "param_groups.0.betas.1"), and nothing changes when there is one.
func (l *Lamb) LoadStateDict(sd *StateDict) error {
	byID, steps, err := checkLoadSteps("Lamb", sd, l.params, "exp_avg", "exp_avg_sq")
	if err != nil {
		return err
	}
	opts, initial, err := readGroups("Lamb", sd, func(r *hyperReader) LambOptions {
		return LambOptions{
			LR:          r.float("lr"),
			Betas:       [2]float64{r.float("betas.0"), r.float("betas.1")},
			Eps:         r.float("eps"),
			WeightDecay: r.float("weight_decay"),
		}
	}, func(o LambOptions, g int) error { return o.check(g) })
	if err != nil {
		return err
	}
	states := map[*autograd.Tensor]lambState{}
	for _, id := range sortedKeys(sd.State) {
		st := sd.State[id]
		if len(st) == 0 {
			continue // a parameter not yet stepped
		}
		p := byID[id]
		for _, name := range []string{"step", "exp_avg", "exp_avg_sq"} {
			if st[name] == nil {
				return fmt.Errorf("optim: Lamb: state.%d.%s: missing state", id, name)
			}
		}
		states[p] = lambState{
			step:     autograd.Scalar(steps[id]),
			expAvg:   copyState(st["exp_avg"], p),
			expAvgSq: copyState(st["exp_avg_sq"], p),
		}
	}
	l.initial = initial
	for g := range l.groups {
		gr := &l.groups[g]
		gr.LambOptions = opts[g]
		for i, p := range gr.Params {
			gr.state[i] = states[p]
		}
	}
	return nil
}
