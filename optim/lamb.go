package optim

import (
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

func (o LambOptions) check() string {
	return checkAdamLike(o.LR, o.Betas, o.Eps, o.WeightDecay, "DefaultLambOptions has 1e-8")
}

func (o *LambOptions) fields() []field {
	return []field{num("lr", &o.LR), num("betas.0", &o.Betas[0]), num("betas.1", &o.Betas[1]),
		num("eps", &o.Eps), num("weight_decay", &o.WeightDecay)}
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
//
// Its state dict holds each stepped parameter's state under IPEX's names:
// "step" (a 0-d float32 count), "exp_avg" and "exp_avg_sq"; and each
// group's hyper-parameters: lr, betas.0, betas.1, eps, weight_decay and,
// once a scheduler set it, initial_lr. A parameter's saved state needs all
// three tensors.
type Lamb struct {
	base[LambGroup, LambOptions, lambState]
}

type lambState struct {
	moments
	kernel kernels.LambStep
	split  kernels.LambSplitStep // for a split parameter
}

// names leaves out Adam's max_exp_avg_sq: Lamb has no AMSGrad.
func (*lambState) names() (bool, []string) { return true, []string{"exp_avg", "exp_avg_sq"} }

var lambKind = newKind("Lamb", lambStep, func(b base[LambGroup, LambOptions, lambState]) Optimizer { return &Lamb{b} },
	func(g *LambGroup) (*[]*autograd.Tensor, *LambOptions) { return &g.Params, &g.LambOptions })

// NewLamb returns a Lamb optimizer over params as one group.
func NewLamb(params []*autograd.Tensor, opt LambOptions) (*Lamb, error) {
	return NewLambGroups(LambGroup{Params: params, LambOptions: opt})
}

// NewLambGroups returns a Lamb optimizer over parameter groups. It fails
// when a hyper-parameter is out of range, when there are no parameters, or
// when a parameter is nil, not a float32 leaf, or in two groups.
func NewLambGroups(groups ...LambGroup) (*Lamb, error) {
	return as[*Lamb](build(lambKind, false, nil, groups))
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
	return as[*Lamb](build(lambKind, true, sm, groups))
}

// lambStep updates one parameter.
func lambStep(o *LambOptions, st *lambState, q param) {
	q.rejectSparse()
	grad := q.grad()
	step := st.next(q, false)
	if q.split != nil {
		k := &st.split
		k.Top, k.Bottom, k.Grad = q.BFloat16s(), q.split.Bottom, splitGrad(grad, q.Tensor)
		k.ExpAvg, k.ExpAvgSq = st.expAvg.Float32s(), st.expAvgSq.Float32s()
		k.LambConfig = o.config(step)
		k.Run()
		k.Grad = kernels.SplitGrad{}
		return
	}
	k := &st.kernel
	k.Param, k.Grad = q.Float32s(), grad.Float32s()
	k.ExpAvg, k.ExpAvgSq = st.expAvg.Float32s(), st.expAvgSq.Float32s()
	k.LambConfig = o.config(step)
	k.Run()
	// Drop the reference so a gradient freed by ZeroGrad is not kept
	// alive until the next step.
	k.Grad = nil
}
