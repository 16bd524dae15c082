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

func (o LARSOptions) check() string {
	switch msg := checkMomentumSGD(o.LR, o.Momentum, o.Dampening, o.WeightDecay, o.Nesterov); {
	case msg != "":
		return msg
	case !(o.Eeta > 0 && o.Eeta <= 1):
		return fmt.Sprintf("invalid eeta value: %v (want (0, 1]; DefaultLARSOptions has 1e-3)", o.Eeta)
	case !(o.Eps >= 0) || math.IsInf(o.Eps, 0):
		return fmt.Sprintf("invalid epsilon value: %v", o.Eps)
	}
	return ""
}

func (o *LARSOptions) fields() []field {
	return []field{num("lr", &o.LR), num("momentum", &o.Momentum), num("dampening", &o.Dampening),
		num("weight_decay", &o.WeightDecay), flag("nesterov", &o.Nesterov), num("eeta", &o.Eeta), num("epsilon", &o.Eps)}
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
//
// Its state dict holds the momentum buffers (as "momentum_buffer") and
// each group's hyper-parameters: lr, momentum, dampening, weight_decay,
// nesterov, eeta, epsilon (IPEX's names) and, once a scheduler set it,
// initial_lr. LoadStateDict drops the momentum buffer of a parameter
// without saved state.
type LARS struct {
	base[LARSGroup, LARSOptions, larsState]
}

type larsState struct {
	momentum
	kernel kernels.LARSStep
	split  kernels.LARSSplitStep // for a split parameter
}

var larsKind = newKind("LARS", larsStep, func(b base[LARSGroup, LARSOptions, larsState]) Optimizer { return &LARS{b} },
	func(g *LARSGroup) (*[]*autograd.Tensor, *LARSOptions) { return &g.Params, &g.LARSOptions })

// NewLARS returns a LARS optimizer over params as one group.
func NewLARS(params []*autograd.Tensor, opt LARSOptions) (*LARS, error) {
	return NewLARSGroups(LARSGroup{Params: params, LARSOptions: opt})
}

// NewLARSGroups returns a LARS optimizer over parameter groups. It fails
// when a hyper-parameter is out of range, when there are no parameters, or
// when a parameter is nil, not a float32 leaf, or in two groups.
func NewLARSGroups(groups ...LARSGroup) (*LARS, error) {
	return as[*LARS](build(larsKind, false, nil, groups))
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
	return as[*LARS](build(larsKind, true, sm, groups))
}

// larsStep updates one parameter.
func larsStep(o *LARSOptions, st *larsState, q param) {
	q.rejectSparse()
	grad := q.grad()
	buf, init := st.next(q, o.Momentum)
	if q.split != nil {
		k := &st.split
		k.Top, k.Bottom, k.Grad, k.Buf, k.Init = q.BFloat16s(), q.split.Bottom, splitGrad(grad, q.Tensor), buf, init
		k.LARSConfig = o.config()
		k.Run()
		k.Grad = kernels.SplitGrad{}
		return
	}
	k := &st.kernel
	k.Init, k.Buf = init, buf
	k.Param, k.Grad = q.Float32s(), grad.Float32s()
	k.LARSConfig = o.config()
	k.Run()
	// Drop the reference so a gradient freed by ZeroGrad is not kept
	// alive until the next step.
	k.Grad = nil
}
