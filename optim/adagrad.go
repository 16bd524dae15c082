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

func (o AdagradOptions) check() string {
	bad := func(v float64) bool { return !(v >= 0) || math.IsInf(v, 0) }
	switch {
	case bad(o.LR):
		return fmt.Sprintf("invalid learning rate: %v", o.LR)
	case bad(o.LRDecay):
		return fmt.Sprintf("invalid lr_decay value: %v", o.LRDecay)
	case bad(o.WeightDecay):
		return fmt.Sprintf("invalid weight_decay value: %v", o.WeightDecay)
	case bad(o.InitialAccumulatorValue):
		return fmt.Sprintf("invalid initial_accumulator_value value: %v", o.InitialAccumulatorValue)
	case !(o.Eps > 0) || math.IsInf(o.Eps, 0):
		return fmt.Sprintf("invalid epsilon value: %v (want > 0; DefaultAdagradOptions has 1e-10)", o.Eps)
	}
	return ""
}

func (o *AdagradOptions) fields() []field {
	return []field{num("lr", &o.LR), num("lr_decay", &o.LRDecay), num("weight_decay", &o.WeightDecay),
		num("initial_accumulator_value", &o.InitialAccumulatorValue), num("eps", &o.Eps), flag("maximize", &o.Maximize)}
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
//
// Its state dict holds every parameter's state under PyTorch's names:
// "step" (a 0-d float32 count) and "sum"; and each group's
// hyper-parameters: lr, lr_decay, weight_decay, initial_accumulator_value,
// eps, maximize and, once a scheduler set it, initial_lr. A parameter's
// saved state needs both step and sum; one without saved state starts
// afresh (step 0, sum filled with its group's initial accumulator value).
type Adagrad struct {
	base[AdagradGroup, AdagradOptions, adagradState]
}

type adagradState struct {
	step   *autograd.Tensor // 0-d float32 step count
	sum    *autograd.Tensor
	kernel kernels.AdagradStep
	split  kernels.AdagradSplitStep // for a split parameter
}

var adagradKind = newKind("Adagrad", adagradStep, func(b base[AdagradGroup, AdagradOptions, adagradState]) Optimizer { return &Adagrad{b} },
	func(g *AdagradGroup) (*[]*autograd.Tensor, *AdagradOptions) { return &g.Params, &g.AdagradOptions })

func (*adagradState) names() (bool, []string) { return true, []string{"sum"} }

// fresh sets up the state PyTorch gives every parameter when the optimizer
// is made: step 0 and a sum filled with the initial accumulator value.
func (st *adagradState) fresh(p *autograd.Tensor, o AdagradOptions) {
	st.step, st.sum = autograd.Scalar(0), zerosState(p).Fill(float32(o.InitialAccumulatorValue))
}

func (st *adagradState) save() map[string]*autograd.Tensor {
	return map[string]*autograd.Tensor{"step": st.step, "sum": st.sum}
}

func (st *adagradState) load(p *autograd.Tensor, saved map[string]*autograd.Tensor, step float32) string {
	for _, name := range []string{"step", "sum"} {
		if saved[name] == nil {
			return name
		}
	}
	st.step, st.sum = autograd.Scalar(step), copyState(saved["sum"], p)
	return ""
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
	return as[*Adagrad](build(adagradKind, false, nil, groups))
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
	return as[*Adagrad](build(adagradKind, true, sm, groups))
}

// adagradStep updates one parameter.
func adagradStep(o *AdagradOptions, st *adagradState, q param) {
	sg := q.SparseGrad()
	if sg != nil {
		q.checkSparseDecay(o.WeightDecay)
	}
	// PyTorch counts steps in a float32 tensor.
	step := st.step.Float32s()
	step[0]++
	cfg := o.config(float64(step[0]))
	if sg != nil {
		if q.split != nil {
			kernels.AdagradSparseSplit(q.BFloat16s(), q.split.Bottom, st.sum.Float32s(), sparseRows(sg), cfg)
		} else {
			kernels.AdagradSparse(q.Float32s(), st.sum.Float32s(), sparseRows(sg), cfg)
		}
		return
	}
	grad := q.grad()
	q.follow(&st.sum)
	if q.split != nil {
		k := &st.split
		k.Top, k.Bottom, k.Grad, k.Sum = q.BFloat16s(), q.split.Bottom, splitGrad(grad, q.Tensor), st.sum.Float32s()
		k.AdagradConfig = cfg
		k.Run()
		k.Grad = kernels.SplitGrad{}
		return
	}
	k := &st.kernel
	k.Param, k.Grad, k.Sum = q.Float32s(), grad.Float32s(), st.sum.Float32s()
	k.AdagradConfig = cfg
	k.Run()
	k.Grad = nil
}
