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

func (o AdamOptions) check() string {
	return checkAdamLike(o.LR, o.Betas, o.Eps, o.WeightDecay, "DefaultAdamOptions has 1e-8")
}

// checkAdamLike checks the options Adam and Lamb share; hint says where a
// good Eps is.
func checkAdamLike(lr float64, betas [2]float64, eps, weightDecay float64, hint string) string {
	switch {
	case !(lr >= 0) || math.IsInf(lr, 0):
		return fmt.Sprintf("invalid learning rate: %v", lr)
	case !(eps > 0) || math.IsInf(eps, 0):
		return fmt.Sprintf("invalid epsilon value: %v (want > 0; %s)", eps, hint)
	case !(betas[0] >= 0 && betas[0] < 1):
		return fmt.Sprintf("invalid beta parameter at index 0: %v (want [0, 1))", betas[0])
	case !(betas[1] >= 0 && betas[1] < 1):
		return fmt.Sprintf("invalid beta parameter at index 1: %v (want [0, 1))", betas[1])
	case !(weightDecay >= 0) || math.IsInf(weightDecay, 0):
		return fmt.Sprintf("invalid weight_decay value: %v", weightDecay)
	}
	return ""
}

func (o *AdamOptions) fields() []field {
	return []field{num("lr", &o.LR), num("betas.0", &o.Betas[0]), num("betas.1", &o.Betas[1]),
		num("eps", &o.Eps), num("weight_decay", &o.WeightDecay), flag("amsgrad", &o.AMSGrad), flag("maximize", &o.Maximize)}
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
//
// Its state dict holds each stepped parameter's state under PyTorch's
// names: "step" (a 0-d float32 count), "exp_avg", "exp_avg_sq" and, with
// AMSGrad, "max_exp_avg_sq"; and each group's hyper-parameters: lr,
// betas.0, betas.1 (PyTorch's betas tuple), eps, weight_decay, amsgrad,
// maximize and, once a scheduler set it, initial_lr. A parameter's saved
// state needs step, exp_avg and exp_avg_sq, and max_exp_avg_sq when its
// group uses AMSGrad.
type Adam struct {
	base[AdamGroup, AdamOptions, adamState]
}

type adamState struct {
	moments
	kernel kernels.AdamStep
	split  kernels.AdamSplitStep // for a split parameter
}

// moments is the state of the Adam family: the step count and the running
// averages of the gradient and of its square, with AMSGrad also the
// running maximum of the latter.
type moments struct {
	step             *autograd.Tensor // 0-d float32 step count, nil until the first step
	expAvg, expAvgSq *autograd.Tensor
	maxExpAvgSq      *autograd.Tensor // with AMSGrad
}

// save returns m's tensors under PyTorch's names, none before the first
// step.
func (m *moments) save() map[string]*autograd.Tensor {
	if m.step == nil {
		return nil
	}
	saved := map[string]*autograd.Tensor{"step": m.step, "exp_avg": m.expAvg, "exp_avg_sq": m.expAvgSq}
	if m.maxExpAvgSq != nil {
		saved["max_exp_avg_sq"] = m.maxExpAvgSq
	}
	return saved
}

func (*moments) names() (bool, []string) {
	return true, []string{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
}

// load copies p's saved moments; max_exp_avg_sq is optional here, and
// AdamOptions.requires asks for it with AMSGrad.
func (m *moments) load(p *autograd.Tensor, saved map[string]*autograd.Tensor, step float32) string {
	for _, name := range []string{"step", "exp_avg", "exp_avg_sq"} {
		if saved[name] == nil {
			return name
		}
	}
	*m = moments{step: autograd.Scalar(step), expAvg: copyState(saved["exp_avg"], p), expAvgSq: copyState(saved["exp_avg_sq"], p)}
	if t := saved["max_exp_avg_sq"]; t != nil {
		m.maxExpAvgSq = copyState(t, p)
	}
	return ""
}

// requires asks a group with AMSGrad for max_exp_avg_sq.
func (o AdamOptions) requires(saved map[string]*autograd.Tensor) string {
	if o.AMSGrad && saved["max_exp_avg_sq"] == nil {
		return "max_exp_avg_sq"
	}
	return ""
}

// next makes the moments on q's first step (PyTorch counts steps in a
// float32 tensor), gives them q's memory format, counts the step and
// returns its number.
func (m *moments) next(q param, amsgrad bool) float64 {
	if m.step == nil {
		m.step = autograd.Scalar(0)
	}
	q.follow(&m.expAvg)
	q.follow(&m.expAvgSq)
	if amsgrad || m.maxExpAvgSq != nil {
		q.follow(&m.maxExpAvgSq)
	}
	step := m.step.Float32s()
	step[0]++
	return float64(step[0])
}

var (
	adamKind  = newAdamKind("Adam", false)
	adamWKind = newAdamKind("AdamW", true)
)

func newAdamKind(name string, decoupled bool) *kind[AdamGroup, AdamOptions, adamState] {
	step := func(o *AdamOptions, st *adamState, q param) { adamStep(o, st, q, decoupled) }
	return newKind(name, step, func(b base[AdamGroup, AdamOptions, adamState]) Optimizer { return &Adam{b} },
		func(g *AdamGroup) (*[]*autograd.Tensor, *AdamOptions) { return &g.Params, &g.AdamOptions })
}

// NewAdam returns an Adam optimizer over params as one group.
func NewAdam(params []*autograd.Tensor, opt AdamOptions) (*Adam, error) {
	return NewAdamGroups(AdamGroup{Params: params, AdamOptions: opt})
}

// NewAdamGroups returns an Adam optimizer over parameter groups. It fails
// when a hyper-parameter is out of range, when there are no parameters, or
// when a parameter is nil, not a float32 leaf, or in two groups.
func NewAdamGroups(groups ...AdamGroup) (*Adam, error) {
	return as[*Adam](build(adamKind, false, nil, groups))
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
	return as[*Adam](build(adamKind, true, sm, groups))
}

// NewAdamW returns an AdamW optimizer (Adam with decoupled weight decay)
// over params as one group.
func NewAdamW(params []*autograd.Tensor, opt AdamOptions) (*Adam, error) {
	return NewAdamWGroups(AdamGroup{Params: params, AdamOptions: opt})
}

// NewAdamWGroups returns an AdamW optimizer over parameter groups, failing
// as NewAdamGroups does.
func NewAdamWGroups(groups ...AdamGroup) (*Adam, error) {
	return as[*Adam](build(adamWKind, false, nil, groups))
}

// NewAdamWSplit is NewAdamSplit for AdamW.
func NewAdamWSplit(sm *amp.SplitModel, opt AdamOptions) (*Adam, error) {
	return NewAdamWSplitGroups(sm, AdamGroup{Params: splitTops(sm), AdamOptions: opt})
}

// NewAdamWSplitGroups is NewAdamSplitGroups for AdamW.
func NewAdamWSplitGroups(sm *amp.SplitModel, groups ...AdamGroup) (*Adam, error) {
	return as[*Adam](build(adamWKind, true, sm, groups))
}

// Decoupled reports whether a is AdamW (decoupled weight decay) rather
// than Adam (L2 penalty).
func (a *Adam) Decoupled() bool { return a.kind == adamWKind }

// adamStep updates one parameter.
func adamStep(o *AdamOptions, st *adamState, q param, decoupled bool) {
	q.rejectSparse()
	grad := q.grad()
	step := st.next(q, o.AMSGrad)
	var maxExpAvgSq []float32
	if o.AMSGrad {
		maxExpAvgSq = st.maxExpAvgSq.Float32s()
	}
	if q.split != nil {
		k := &st.split
		k.Top, k.Bottom, k.Grad = q.BFloat16s(), q.split.Bottom, splitGrad(grad, q.Tensor)
		k.ExpAvg, k.ExpAvgSq, k.MaxExpAvgSq = st.expAvg.Float32s(), st.expAvgSq.Float32s(), maxExpAvgSq
		k.AdamConfig = o.config(decoupled, step)
		k.Run()
		k.Grad = kernels.SplitGrad{}
		return
	}
	k := &st.kernel
	k.Param, k.Grad = q.Float32s(), grad.Float32s()
	k.ExpAvg, k.ExpAvgSq, k.MaxExpAvgSq = st.expAvg.Float32s(), st.expAvgSq.Float32s(), maxExpAvgSq
	k.AdamConfig = o.config(decoupled, step)
	k.Run()
	// Drop the reference so a gradient freed by ZeroGrad is not kept
	// alive until the next step.
	k.Grad = nil
}
