package optim

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// LARSOptions are the hyper-parameters of IPEX's LARS
// (intel_extension_for_pytorch.optim._lars.Lars with its fused step).
// Start from DefaultLARSOptions and change what differs: the zero value
// has Eeta 0, which is rejected.
type LARSOptions struct {
	// LR is the base learning rate; it must be at least 0.
	LR float64
	// Momentum is the momentum factor (at least 0; 0 disables momentum).
	Momentum float64
	// Dampening scales down each new gradient's share of the momentum
	// buffer by (1 − Dampening); it does not apply on the first step.
	Dampening float64
	// WeightDecay (at least 0) adds WeightDecay·p to the gradient and
	// enters the trust ratio's denominator.
	WeightDecay float64
	// Nesterov selects Nesterov momentum; it needs Momentum > 0 and
	// Dampening = 0.
	Nesterov bool
	// Eeta is the trust coefficient η, in (0, 1].
	Eeta float64
	// Eps (at least 0) is added to the trust ratio's denominator.
	Eps float64
}

// DefaultLARSOptions returns IPEX Lars's defaults: lr 1e-3, no momentum,
// eeta 1e-3, no weight decay, epsilon 0.
func DefaultLARSOptions() LARSOptions {
	return LARSOptions{LR: 1e-3, Eeta: 1e-3}
}

func (o LARSOptions) check(group int) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("optim: LARS: group %d: %s", group, fmt.Sprintf(format, args...))
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
	case !(o.Eeta > 0 && o.Eeta <= 1):
		return fail("invalid eeta value: %v (want (0, 1]; DefaultLARSOptions has 1e-3)", o.Eeta)
	case !(o.Eps >= 0) || math.IsInf(o.Eps, 0):
		return fail("invalid epsilon value: %v", o.Eps)
	}
	return nil
}

func (o LARSOptions) config() kernels.LARSConfig {
	return kernels.LARSConfig{
		LR:          o.LR,
		Eeta:        o.Eeta,
		WeightDecay: o.WeightDecay,
		Eps:         o.Eps,
		SGD: kernels.SGDConfig{
			Momentum:    float32(o.Momentum),
			WeightDecay: float32(o.WeightDecay),
			Keep:        float32(1 - o.Dampening),
			Nesterov:    o.Nesterov,
		},
	}
}

// LARSGroup is a parameter group for NewLARSGroups: parameters that share
// hyper-parameters.
type LARSGroup struct {
	Params []*autograd.Tensor
	LARSOptions
}

// LARS is layer-wise adaptive rate scaling on momentum SGD (You, Gitman
// and Ginsburg, "Large batch training of convolutional networks",
// arXiv:1708.03888) as IPEX's fused CPU LARS defines it
// (torch_ipex::lars_fused_step): for each parameter p with gradient g,
//
//	trust = Eeta·‖p‖ / (‖g‖ + WeightDecay·‖p‖ + Eps), or 1 when ‖p‖ or ‖g‖ is 0
//	d = g + WeightDecay·p
//	b = d on p's first step, else Momentum·b + (1 − Dampening)·d
//	d = d + Momentum·b with Nesterov, else b   (when Momentum ≠ 0)
//	p = p − LR·trust·d
//
// The norms are over the whole tensor, reduced in float64 in an order that
// does not depend on the number of threads. Each parameter's update is
// two passes over its memory (kernels.LARSStep: the norms, then the SGD
// step); steps after the first allocate nothing.
type LARS struct {
	lrGroups
	groups []larsGroup
}

type larsGroup struct {
	LARSGroup
	splits []*amp.SplitParam // per parameter, nil unless split
	state  []larsState       // one per parameter
}

type larsState struct {
	buf    *autograd.Tensor // momentum buffer, nil until the first step with momentum
	kernel kernels.LARSStep
	split  kernels.LARSSplitStep // for a split parameter
}

// NewLARS returns a LARS optimizer over params as one group.
func NewLARS(params []*autograd.Tensor, opt LARSOptions) (*LARS, error) {
	return NewLARSGroups(LARSGroup{Params: params, LARSOptions: opt})
}

// NewLARSGroups returns a LARS optimizer over parameter groups. It fails
// when a hyper-parameter is out of range, when there are no parameters, or
// when a parameter is nil, not a float32 leaf, or in two groups.
func NewLARSGroups(groups ...LARSGroup) (*LARS, error) {
	return newLARS(nil, groups)
}

// NewLARSSplit returns a LARS optimizer, as one group, over the split
// parameters of sm (amp.SplitModule): its parameters are the bfloat16
// Tops, in sm.Params order, and each step updates the FP32 master that
// Top and Bottom stand for, bit for bit as NewLARS would update the FP32
// parameters with the same gradients (kernels.LARSSplitStep: the trust
// ratio's norms are taken over the joined FP32 values). Momentum buffers
// stay FP32, and state dicts number the parameters as the unsplit model's
// optimizer does, so either can load the other's.
func NewLARSSplit(sm *amp.SplitModel, opt LARSOptions) (*LARS, error) {
	return NewLARSSplitGroups(sm, LARSGroup{Params: splitTops(sm), LARSOptions: opt})
}

// NewLARSSplitGroups is NewLARSGroups for a model split by
// amp.SplitModule: the groups' parameters may be the bfloat16 Tops of sm's
// split parameters, updated as NewLARSSplit describes, beside float32
// ones. It fails as NewLARSGroups does, and when a bfloat16 parameter is
// not the Top of one of sm's split parameters.
func NewLARSSplitGroups(sm *amp.SplitModel, groups ...LARSGroup) (*LARS, error) {
	if sm == nil {
		return nil, fmt.Errorf("optim: LARS: split model is nil")
	}
	return newLARS(sm, groups)
}

func newLARS(sm *amp.SplitModel, groups []LARSGroup) (*LARS, error) {
	splits, err := checkSplitGroups("LARS", sm, groups, func(gr LARSGroup, g int) ([]*autograd.Tensor, error) {
		return gr.Params, gr.check(g)
	})
	if err != nil {
		return nil, err
	}
	l := &LARS{groups: make([]larsGroup, len(groups))}
	for g, gr := range groups {
		gr.Params = append([]*autograd.Tensor(nil), gr.Params...)
		l.groups[g] = larsGroup{LARSGroup: gr, splits: splits[g], state: make([]larsState, len(gr.Params))}
	}
	l.lrGroups = newLRGroups("LARS", len(groups), func(g int) (*float64, []*autograd.Tensor) {
		return &l.groups[g].LR, l.groups[g].Params
	})
	return l, nil
}

// Step updates every parameter that has a gradient.
func (l *LARS) Step() {
	for gi := range l.groups {
		g := &l.groups[gi]
		cfg := g.config()
		for i, p := range g.Params {
			rejectSparse("LARS", gi, i, p)
			grad := p.Grad()
			if grad == nil {
				continue
			}
			st := &g.state[i]
			sp := g.splits[i]
			if sp == nil && grad.Format() != p.Format() {
				grad = copyState(grad, p)
			}
			init := false
			var buf []float32
			if g.Momentum != 0 {
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
				k.Top, k.Bottom, k.Grad, k.Buf, k.Init = p.BFloat16s(), sp.Bottom, splitGrad(grad, p), buf, init
				k.LARSConfig = cfg
				k.Run()
				k.Grad = kernels.SplitGrad{}
				continue
			}
			k := &st.kernel
			k.Init, k.Buf = init, buf
			k.Param, k.Grad = p.Float32s(), grad.Float32s()
			k.LARSConfig = cfg
			k.Run()
			// Drop the reference so a gradient freed by ZeroGrad is not
			// kept alive until the next step.
			k.Grad = nil
		}
	}
}

// Group returns a copy of group's parameters and hyper-parameters.
func (l *LARS) Group(group int) LARSGroup {
	checkGroup("LARS.Group", group, len(l.groups))
	g := l.groups[group].LARSGroup
	g.Params = append([]*autograd.Tensor(nil), g.Params...)
	return g
}

// StateDict returns the momentum buffers (as "momentum_buffer", the
// optimizer's own tensors) and each group's hyper-parameters: lr,
// momentum, dampening, weight_decay, nesterov, eeta, epsilon (IPEX's
// names) and, once a scheduler set it, initial_lr.
func (l *LARS) StateDict() *StateDict {
	sd := &StateDict{State: map[int]map[string]*autograd.Tensor{}}
	id := 0
	for gi, g := range l.groups {
		gs := GroupState{Hyper: map[string]float64{
			"lr":           g.LR,
			"momentum":     g.Momentum,
			"dampening":    g.Dampening,
			"weight_decay": g.WeightDecay,
			"nesterov":     boolHyper(g.Nesterov),
			"eeta":         g.Eeta,
			"epsilon":      g.Eps,
		}}
		l.putInitialLR(gi, gs.Hyper)
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
// copies of sd's: groups and parameters correspond by position, and
// parameters without saved state lose their momentum buffer. Loaded
// buffers take their parameter's memory format. Errors name the offending
// key (e.g. "state.3.momentum_buffer" or "param_groups.0.eeta"), and
// nothing changes when there is one.
func (l *LARS) LoadStateDict(sd *StateDict) error {
	byID, err := checkLoad("LARS", sd, l.params, "momentum_buffer")
	if err != nil {
		return err
	}
	opts, initial, err := readGroups("LARS", sd, func(r *hyperReader) LARSOptions {
		return LARSOptions{
			LR:          r.float("lr"),
			Momentum:    r.float("momentum"),
			Dampening:   r.float("dampening"),
			WeightDecay: r.float("weight_decay"),
			Nesterov:    r.bool("nesterov"),
			Eeta:        r.float("eeta"),
			Eps:         r.float("epsilon"),
		}
	}, func(o LARSOptions, g int) error { return o.check(g) })
	if err != nil {
		return err
	}
	bufs := map[*autograd.Tensor]*autograd.Tensor{}
	for id, st := range sd.State {
		// An empty entry (a parameter not yet stepped) means no buffer.
		if b := st["momentum_buffer"]; b != nil {
			p := byID[id]
			bufs[p] = copyState(b, p)
		}
	}
	l.initial = initial
	for g := range l.groups {
		gr := &l.groups[g]
		gr.LARSOptions = opts[g]
		for i, p := range gr.Params {
			gr.state[i] = larsState{buf: bufs[p]}
		}
	}
	return nil
}
