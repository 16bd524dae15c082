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

func (o SGDOptions) check() string {
	return checkMomentumSGD(o.LR, o.Momentum, o.Dampening, o.WeightDecay, o.Nesterov)
}

// checkMomentumSGD checks the options SGD and LARS share.
func checkMomentumSGD(lr, momentum, dampening, weightDecay float64, nesterov bool) string {
	switch {
	case !(lr >= 0) || math.IsInf(lr, 0):
		return fmt.Sprintf("invalid learning rate: %v", lr)
	case !(momentum >= 0) || math.IsInf(momentum, 0):
		return fmt.Sprintf("invalid momentum value: %v", momentum)
	case !(weightDecay >= 0) || math.IsInf(weightDecay, 0):
		return fmt.Sprintf("invalid weight_decay value: %v", weightDecay)
	case math.IsNaN(dampening) || math.IsInf(dampening, 0):
		return fmt.Sprintf("invalid dampening value: %v", dampening)
	case nesterov && (momentum <= 0 || dampening != 0):
		return fmt.Sprintf("Nesterov momentum requires a momentum and zero dampening (momentum %v, dampening %v)", momentum, dampening)
	}
	return ""
}

func (o *SGDOptions) fields() []field {
	return []field{num("lr", &o.LR), num("momentum", &o.Momentum), num("dampening", &o.Dampening),
		num("weight_decay", &o.WeightDecay), flag("nesterov", &o.Nesterov), flag("maximize", &o.Maximize)}
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
//
// Its state dict holds the momentum buffers (as "momentum_buffer") and
// each group's hyper-parameters under PyTorch's names: lr, momentum,
// dampening, weight_decay, nesterov, maximize and, once a scheduler set
// it, initial_lr. LoadStateDict drops the momentum buffer of a parameter
// without saved state, as PyTorch's load_state_dict does.
type SGD struct {
	base[SGDGroup, SGDOptions, sgdState]
}

type sgdState struct {
	momentum
	step kernels.SGDStep
	// split is the step of a split parameter, whose Top is the parameter
	// and Bottom its low half.
	split kernels.SGDSplitStep
}

var sgdKind = newKind("SGD", sgdStep, func(b base[SGDGroup, SGDOptions, sgdState]) Optimizer { return &SGD{b} },
	func(g *SGDGroup) (*[]*autograd.Tensor, *SGDOptions) { return &g.Params, &g.SGDOptions })

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
	return NewSGDSplitGroups(sm, SGDGroup{Params: splitTops(sm), SGDOptions: opt})
}

// NewSGDGroups returns an SGD optimizer over parameter groups. It fails
// when a hyper-parameter is out of range, when there are no parameters, or
// when a parameter is nil, not a float32 leaf, or in two groups.
func NewSGDGroups(groups ...SGDGroup) (*SGD, error) {
	return as[*SGD](build(sgdKind, false, nil, groups))
}

// NewSGDSplitGroups is NewSGDGroups for a model split by amp.SplitModule:
// the groups' parameters may be the bfloat16 Tops of sm's split
// parameters, updated as NewSGDSplit describes, beside float32 ones. It
// fails as NewSGDGroups does, and when a bfloat16 parameter is not the Top
// of one of sm's split parameters.
func NewSGDSplitGroups(sm *amp.SplitModel, groups ...SGDGroup) (*SGD, error) {
	return as[*SGD](build(sgdKind, true, sm, groups))
}

// sgdStep updates one parameter.
func sgdStep(o *SGDOptions, st *sgdState, q param) {
	cfg := o.config()
	grad := q.grad()
	if sg := q.SparseGrad(); sg != nil {
		q.checkSparseDecay(o.WeightDecay)
		if cfg.Momentum == 0 {
			if q.split != nil {
				kernels.SGDSparseSplit(q.BFloat16s(), q.split.Bottom, sparseRows(sg), cfg)
			} else {
				kernels.SGDSparse(q.Float32s(), sparseRows(sg), cfg)
			}
			return
		}
		// A momentum buffer decays every row on every step (PyTorch's
		// sparse buffer grows to every row ever touched and is then
		// dense in all but name), so the step is the dense one.
		grad = q.formatted(sg.Dense())
	}
	buf, init := st.next(q, float64(cfg.Momentum))
	if q.split != nil {
		k := &st.split
		k.Top, k.Bottom, k.Grad, k.Buf = q.BFloat16s(), q.split.Bottom, splitGrad(grad, q.Tensor), buf
		k.SGDConfig, k.Init = cfg, init
		k.Run()
		k.Grad = kernels.SplitGrad{}
		return
	}
	k := &st.step
	k.Buf, k.Param, k.Grad = buf, q.Float32s(), grad.Float32s()
	k.SGDConfig, k.Init = cfg, init
	k.Run()
	// Drop the references so a gradient freed by ZeroGrad is not kept
	// alive until the next step.
	k.Grad = nil
}

// momentum is the saved state of SGD and LARS: a parameter's momentum
// buffer, nil until its first step with momentum. A parameter loaded
// without one loses its buffer, as in PyTorch.
type momentum struct {
	buf *autograd.Tensor
}

func (*momentum) names() (bool, []string) { return false, []string{"momentum_buffer"} }

func (m *momentum) save() map[string]*autograd.Tensor {
	if m.buf == nil {
		return nil
	}
	return map[string]*autograd.Tensor{"momentum_buffer": m.buf}
}

func (m *momentum) load(p *autograd.Tensor, saved map[string]*autograd.Tensor, _ float32) string {
	m.buf = copyState(saved["momentum_buffer"], p)
	return ""
}

// next returns the momentum buffer of q's step, and whether it is q's
// first step with momentum, which makes the buffer; nil without momentum.
func (m *momentum) next(q param, momentum float64) (buf []float32, init bool) {
	if momentum == 0 {
		return nil, false
	}
	init = q.follow(&m.buf)
	return m.buf.Float32s(), init
}
