package optim

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// SGDOptions are the hyper-parameters of torch.optim.SGD. The zero value of
// every field but LR gives plain gradient descent.
type SGDOptions struct {
	// LR is the learning rate; it must be at least 0.
	LR float64
	// Momentum is the momentum factor (at least 0; 0 disables momentum).
	Momentum float64
	// Dampening scales down each new gradient's share of the momentum
	// buffer by (1 − Dampening); it does not apply on the first step.
	Dampening float64
	// WeightDecay adds WeightDecay·p to the gradient (L2 penalty); at least
	// 0.
	WeightDecay float64
	// Nesterov selects Nesterov momentum; it needs Momentum > 0 and
	// Dampening = 0.
	Nesterov bool
	// Maximize ascends the objective instead of descending it.
	Maximize bool
}

func (o SGDOptions) check(group int) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("optim: SGD: group %d: %s", group, fmt.Sprintf(format, args...))
	}
	switch {
	case !(o.LR >= 0) || math.IsInf(o.LR, 0):
		return fail("invalid learning rate: %v", o.LR)
	case !(o.Momentum >= 0) || math.IsInf(o.Momentum, 0):
		return fail("invalid momentum value: %v", o.Momentum)
	case !(o.WeightDecay >= 0) || math.IsInf(o.WeightDecay, 0):
		return fail("invalid weight_decay value: %v", o.WeightDecay)
	case math.IsNaN(o.Dampening) || math.IsInf(o.Dampening, 0):
		return fail("invalid dampening value: %v", o.Dampening)
	case o.Nesterov && (o.Momentum <= 0 || o.Dampening != 0):
		return fail("Nesterov momentum requires a momentum and zero dampening (momentum %v, dampening %v)", o.Momentum, o.Dampening)
	}
	return nil
}

func (o SGDOptions) config() kernels.SGDConfig {
	return kernels.SGDConfig{
		LR:          float32(o.LR),
		Momentum:    float32(o.Momentum),
		WeightDecay: float32(o.WeightDecay),
		Keep:        float32(1 - o.Dampening),
		Nesterov:    o.Nesterov,
		Maximize:    o.Maximize,
	}
}

// SGDGroup is a parameter group for NewSGDGroups: parameters that share
// hyper-parameters. Copy a base SGDOptions and change what differs:
//
//	head := base
//	head.LR = 0.01
//	opt, err := optim.NewSGDGroups(
//		optim.SGDGroup{Params: backbone, SGDOptions: base},
//		optim.SGDGroup{Params: classifier, SGDOptions: head})
//
// With NewSGDSplitGroups, Params may hold the bfloat16 Tops of split
// parameters.
type SGDGroup struct {
	Params []*autograd.Tensor
	SGDOptions
}

// SGD is stochastic gradient descent with momentum, dampening, Nesterov
// momentum, weight decay and maximisation, following PyTorch 1.13's
// torch.optim.SGD: for each parameter p with gradient g,
//
//	d = g (−g when Maximize) + WeightDecay·p
//	b = d on p's first step, else Momentum·b + (1 − Dampening)·d
//	d = d + Momentum·b with Nesterov, else b   (when Momentum ≠ 0)
//	p = p − LR·d
//
// Each parameter's update is one fused pass over its parameter, gradient
// and momentum buffer (kernels.SGDStep); steps after the first allocate
// nothing. Momentum buffers take their parameter's memory format and follow
// it if the parameter is reordered (autograd's SetFormat).
//
// A sparse gradient (autograd.Tensor.SparseGrad, from a sparse embedding)
// updates only its rows when Momentum is 0; with momentum the step is the
// dense one on the densified gradient, which is what PyTorch's sparse
// momentum buffer amounts to. WeightDecay must be 0 for such parameters,
// as in PyTorch: Step panics otherwise.
type SGD struct {
	groups []sgdGroup
}

type sgdGroup struct {
	SGDGroup
	splits       []*amp.SplitParam // per parameter, nil unless split
	initialLR    float64
	hasInitialLR bool
	state        []sgdState // one per parameter
}

type sgdState struct {
	buf  *autograd.Tensor // momentum buffer, nil until the first step with momentum
	step kernels.SGDStep
	// split is the step of a split parameter, whose Top is the parameter
	// and Bottom its low half.
	split kernels.SGDSplitStep
}

// NewSGD returns an SGD optimizer over params as one group.
func NewSGD(params []*autograd.Tensor, opt SGDOptions) (*SGD, error) {
	return NewSGDGroups(SGDGroup{Params: params, SGDOptions: opt})
}

// NewSGDSplit returns an SGD optimizer, as one group, over the split
// parameters of sm (amp.SplitModule): its parameters are the bfloat16
// Tops, in sm.Params order, and each step updates the FP32 master that
// Top and Bottom stand for, bit for bit as NewSGD would update the FP32
// parameters with the same gradients (kernels.SGDSplitStep). Momentum
// buffers stay FP32, and state dicts number the parameters as the
// unsplit model's optimizer does, so either can load the other's.
func NewSGDSplit(sm *amp.SplitModel, opt SGDOptions) (*SGD, error) {
	if sm == nil {
		return nil, fmt.Errorf("optim: SGD: split model is nil")
	}
	return NewSGDSplitGroups(sm, SGDGroup{Params: splitTops(sm), SGDOptions: opt})
}

// NewSGDGroups returns an SGD optimizer over parameter groups. It fails
// when a hyper-parameter is out of range, when there are no parameters, or
// when a parameter is nil, not a float32 leaf, or in two groups.
func NewSGDGroups(groups ...SGDGroup) (*SGD, error) {
	return newSGD(nil, groups)
}

// NewSGDSplitGroups is NewSGDGroups for a model split by amp.SplitModule:
// the groups' parameters may be the bfloat16 Tops of sm's split
// parameters, updated as NewSGDSplit describes, beside float32 ones. It
// fails as NewSGDGroups does, and when a bfloat16 parameter is not the Top
// of one of sm's split parameters.
func NewSGDSplitGroups(sm *amp.SplitModel, groups ...SGDGroup) (*SGD, error) {
	if sm == nil {
		return nil, fmt.Errorf("optim: SGD: split model is nil")
	}
	return newSGD(sm, groups)
}

func newSGD(sm *amp.SplitModel, groups []SGDGroup) (*SGD, error) {
	lists := make([][]*autograd.Tensor, len(groups))
	var models []*amp.SplitModel
	for g, gr := range groups {
		if err := gr.check(g); err != nil {
			return nil, err
		}
		lists[g] = gr.Params
		if sm != nil {
			models = append(models, sm)
		}
	}
	splits, err := checkSplitParams("SGD", lists, models)
	if err != nil {
		return nil, err
	}
	s := &SGD{groups: make([]sgdGroup, len(groups))}
	for g, gr := range groups {
		gr.Params = append([]*autograd.Tensor(nil), gr.Params...)
		s.groups[g] = sgdGroup{SGDGroup: gr, splits: splits[g], state: make([]sgdState, len(gr.Params))}
	}
	return s, nil
}

// Step updates every parameter that has a gradient.
func (s *SGD) Step() {
	for gi := range s.groups {
		g := &s.groups[gi]
		cfg := g.config()
		for i, p := range g.Params {
			grad := p.Grad()
			sp := g.splits[i]
			if sg := p.SparseGrad(); sg != nil {
				checkSparseDecay("SGD", gi, i, g.WeightDecay)
				if cfg.Momentum == 0 {
					if sp != nil {
						kernels.SGDSparseSplit(p.BFloat16s(), sp.Bottom, sparseRows(sg), cfg)
					} else {
						kernels.SGDSparse(p.Float32s(), sparseRows(sg), cfg)
					}
					continue
				}
				// A momentum buffer decays every row on every step (PyTorch's
				// sparse buffer grows to every row ever touched and is then
				// dense in all but name), so the step is the dense one.
				grad = sg.Dense()
			}
			if grad == nil {
				continue
			}
			st := &g.state[i]
			if sp == nil && grad.Format() != p.Format() {
				// The tape gives a leaf's gradient the leaf's format; a
				// gradient set by hand may differ, and the kernel needs
				// the same physical order.
				grad = copyState(grad, p)
			}
			init := false
			var buf []float32
			if cfg.Momentum != 0 {
				switch {
				case st.buf == nil:
					st.buf = zerosState(p)
					init = true
				case st.buf.Format() != p.Format():
					st.buf.SetFormat(p.Format())
				}
				buf = st.buf.Float32s()
			}
			if sp != nil {
				k := &st.split
				k.Top, k.Bottom, k.Grad, k.Buf = p.BFloat16s(), sp.Bottom, splitGrad(grad, p), buf
				k.SGDConfig, k.Init = cfg, init
				k.Run()
				k.Grad = kernels.SplitGrad{}
				continue
			}
			st.step.Buf = buf
			st.step.Param = p.Float32s()
			st.step.Grad = grad.Float32s()
			st.step.SGDConfig = cfg
			st.step.Init = init
			st.step.Run()
			// Drop the references so a gradient freed by ZeroGrad is not
			// kept alive until the next step.
			st.step.Grad = nil
		}
	}
}

// ZeroGrad drops every parameter's gradient.
func (s *SGD) ZeroGrad() {
	for _, g := range s.groups {
		for _, p := range g.Params {
			p.ZeroGrad()
		}
	}
}

// NumGroups returns the number of parameter groups.
func (s *SGD) NumGroups() int { return len(s.groups) }

// Group returns a copy of group's parameters and hyper-parameters.
func (s *SGD) Group(group int) SGDGroup {
	checkGroup("SGD.Group", group, len(s.groups))
	g := s.groups[group].SGDGroup
	g.Params = append([]*autograd.Tensor(nil), g.Params...)
	return g
}

// LR returns group's learning rate.
func (s *SGD) LR(group int) float64 {
	checkGroup("SGD.LR", group, len(s.groups))
	return s.groups[group].LR
}

// SetLR sets group's learning rate. Like PyTorch it does not validate lr;
// schedulers call it on every step.
func (s *SGD) SetLR(group int, lr float64) {
	checkGroup("SGD.SetLR", group, len(s.groups))
	s.groups[group].LR = lr
}

// InitialLR returns group's initial learning rate, if a scheduler set one.
func (s *SGD) InitialLR(group int) (float64, bool) {
	checkGroup("SGD.InitialLR", group, len(s.groups))
	return s.groups[group].initialLR, s.groups[group].hasInitialLR
}

// SetInitialLR records group's initial learning rate.
func (s *SGD) SetInitialLR(group int, lr float64) {
	checkGroup("SGD.SetInitialLR", group, len(s.groups))
	s.groups[group].initialLR, s.groups[group].hasInitialLR = lr, true
}

// StateDict returns the momentum buffers (as "momentum_buffer", the
// optimizer's own tensors) and each group's hyper-parameters under
// PyTorch's names: lr, momentum, dampening, weight_decay, nesterov,
// maximize and, once a scheduler set it, initial_lr.
func (s *SGD) StateDict() *StateDict {
	sd := &StateDict{State: map[int]map[string]*autograd.Tensor{}}
	id := 0
	for _, g := range s.groups {
		gs := GroupState{Hyper: map[string]float64{
			"lr":           g.LR,
			"momentum":     g.Momentum,
			"dampening":    g.Dampening,
			"weight_decay": g.WeightDecay,
			"nesterov":     boolHyper(g.Nesterov),
			"maximize":     boolHyper(g.Maximize),
		}}
		if g.hasInitialLR {
			gs.Hyper["initial_lr"] = g.initialLR
		}
		for i := range g.Params {
			if b := g.state[i].buf; b != nil {
				sd.State[id] = map[string]*autograd.Tensor{"momentum_buffer": b}
			}
			gs.Params = append(gs.Params, id)
			id++
		}
		sd.Groups = append(sd.Groups, gs)
	}
	return sd
}

// LoadStateDict replaces the hyper-parameters and momentum buffers with
// copies of sd's, as PyTorch's load_state_dict does: groups and parameters
// correspond by position, and parameters without saved state lose their
// momentum buffer. Loaded buffers take their parameter's memory format.
// Errors name the offending key (e.g. "state.3.momentum_buffer" or
// "param_groups.0.lr"), and nothing changes when there is one.
func (s *SGD) LoadStateDict(sd *StateDict) error {
	lists := make([][]*autograd.Tensor, len(s.groups))
	for g := range s.groups {
		lists[g] = s.groups[g].Params
	}
	byID, err := checkLoad("SGD", sd, lists, "momentum_buffer")
	if err != nil {
		return err
	}
	type loaded struct {
		opt        SGDOptions
		initial    float64
		hasInitial bool
	}
	hyper := make([]loaded, len(s.groups))
	for g, gs := range sd.Groups {
		r := newHyperReader("SGD", g, gs.Hyper)
		h := &hyper[g]
		h.opt = SGDOptions{
			LR:          r.float("lr"),
			Momentum:    r.float("momentum"),
			Dampening:   r.float("dampening"),
			WeightDecay: r.float("weight_decay"),
			Nesterov:    r.bool("nesterov"),
			Maximize:    r.bool("maximize"),
		}
		h.initial, h.hasInitial = r.optional("initial_lr")
		if err := r.done(); err != nil {
			return err
		}
		if err := h.opt.check(g); err != nil {
			return fmt.Errorf("%w (in param_groups.%d)", err, g)
		}
	}
	bufs := map[*autograd.Tensor]*autograd.Tensor{}
	for id, st := range sd.State {
		// An empty entry (a parameter not yet stepped) means no buffer.
		if b := st["momentum_buffer"]; b != nil {
			p := byID[id]
			bufs[p] = copyState(b, p)
		}
	}
	for g := range s.groups {
		gr := &s.groups[g]
		gr.SGDOptions = hyper[g].opt
		gr.initialLR, gr.hasInitialLR = hyper[g].initial, hyper[g].hasInitial
		for i, p := range gr.Params {
			gr.state[i] = sgdState{buf: bufs[p]}
		}
	}
	return nil
}
