package optim

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// RowWiseAdagradOptions are the hyper-parameters of dlrm's RWSAdagrad
// (facebookresearch/dlrm, optim/rwsadagrad.py, --optimizer rwsadagrad).
// Start from DefaultRowWiseAdagradOptions and change what differs: the
// zero value has Eps 0, which is rejected.
type RowWiseAdagradOptions struct {
	// LR is the learning rate; it must be at least 0.
	LR float64
	// LRDecay divides the learning rate of a parameter's t-th step by
	// 1 + (t − 1)·LRDecay; at least 0.
	LRDecay float64
	// WeightDecay adds WeightDecay·p to a dense gradient (L2 penalty); at
	// least 0, and 0 for a group whose parameters get sparse gradients.
	WeightDecay float64
	// InitialAccumulatorValue is the starting value of every sum of
	// squares, a row's or an element's; at least 0.
	InitialAccumulatorValue float64
	// Eps is added to the root of the sum for numerical stability; it must
	// be greater than 0.
	Eps float64
}

// DefaultRowWiseAdagradOptions returns RWSAdagrad's defaults: lr 1e-2,
// eps 1e-10, no lr decay, weight decay or initial accumulator.
func DefaultRowWiseAdagradOptions() RowWiseAdagradOptions {
	return RowWiseAdagradOptions{LR: 1e-2, Eps: 1e-10}
}

// adagrad returns o as Adagrad's options, whose checks and learning-rate
// rule RWSAdagrad shares.
func (o RowWiseAdagradOptions) adagrad() AdagradOptions {
	return AdagradOptions{LR: o.LR, LRDecay: o.LRDecay, WeightDecay: o.WeightDecay, InitialAccumulatorValue: o.InitialAccumulatorValue, Eps: o.Eps}
}

func (o RowWiseAdagradOptions) check() string {
	msg := o.adagrad().check()
	if strings.HasPrefix(msg, "invalid epsilon value") {
		msg = fmt.Sprintf("invalid epsilon value: %v (want > 0; DefaultRowWiseAdagradOptions has 1e-10)", o.Eps)
	}
	return msg
}

func (o *RowWiseAdagradOptions) fields() []field {
	return []field{num("lr", &o.LR), num("lr_decay", &o.LRDecay), num("weight_decay", &o.WeightDecay),
		num("initial_accumulator_value", &o.InitialAccumulatorValue), num("eps", &o.Eps)}
}

// RowWiseAdagradGroup is a parameter group for NewRowWiseAdagradGroups:
// parameters that share hyper-parameters.
type RowWiseAdagradGroup struct {
	Params []*autograd.Tensor
	RowWiseAdagradOptions
}

// RowWiseAdagrad is dlrm's row-wise Adagrad (RWSAdagrad): a parameter
// whose gradients are sparse (an embedding table, autograd.SparseGrad)
// keeps one sum of squares per row, 4 bytes a row, and on its t-th step
// updates each row r its gradient names, with gradient g_r of length d, as
//
//	h[r] = h[r] + mean_j(g_r[j]²)        (h starts at InitialAccumulatorValue)
//	w_r  = w_r − lr_t · g_r / (√h[r] + Eps)
//
// with lr_t = LR/(1 + (t − 1)·LRDecay) and the roundings described at
// kernels.RowWiseAdagradSparse; other rows and their sums are left alone.
// Sparse gradients are coalesced (each row once), as dlrm's step makes
// them. A parameter with dense gradients gets plain element-wise Adagrad,
// exactly as Adagrad computes it (weight decay included).
//
// Whether a parameter's state is row-wise is decided by its first
// gradient, as in dlrm: its state is made on its first step, and a later
// gradient of the other kind panics with an *Error. WeightDecay must be 0
// for parameters with sparse gradients, as in dlrm: Step panics otherwise.
// Where dlrm's state tensors are made from the optimizer's defaults, here
// they come from the parameter's group (the same for one group).
//
// Its state dict holds each stepped parameter's state: "step" (a 0-d
// float32 count) and "sum", a float32 [rows] vector for a row-wise
// parameter (dlrm's "momentum") and a tensor of the parameter's shape for
// a dense one; and each group's hyper-parameters: lr, lr_decay,
// weight_decay, initial_accumulator_value, eps and, once a scheduler set
// it, initial_lr. A parameter without saved state starts afresh.
type RowWiseAdagrad struct {
	base[RowWiseAdagradGroup, RowWiseAdagradOptions, rowWiseState]
}

type rowWiseState struct {
	step    *autograd.Tensor // 0-d float32 step count; nil before the first step
	sum     *autograd.Tensor // [rows] when rowWise, else the parameter's shape; nil before the first step
	rowWise bool
	kernel  kernels.AdagradStep
	split   kernels.AdagradSplitStep // for a split parameter
}

var rowWiseKind = newKind("RowWiseAdagrad", rowWiseStep, func(b base[RowWiseAdagradGroup, RowWiseAdagradOptions, rowWiseState]) Optimizer {
	return &RowWiseAdagrad{b}
}, func(g *RowWiseAdagradGroup) (*[]*autograd.Tensor, *RowWiseAdagradOptions) {
	return &g.Params, &g.RowWiseAdagradOptions
})

func (*rowWiseState) names() (bool, []string) { return true, []string{"sum"} }

func (st *rowWiseState) save() map[string]*autograd.Tensor {
	if st.sum == nil {
		return nil
	}
	return map[string]*autograd.Tensor{"step": st.step, "sum": st.sum}
}

// load sets a parameter's dense state; a row-wise sum, which the checks of
// the shared loader would reject for its shape, is taken out of saved by
// RowWiseAdagrad.LoadStateDict and set after it.
func (st *rowWiseState) load(p *autograd.Tensor, saved map[string]*autograd.Tensor, step float32) string {
	if saved["step"] == nil {
		return "step"
	}
	st.step = autograd.Scalar(step)
	if s := saved["sum"]; s != nil {
		st.sum = copyState(s, p)
	}
	return ""
}

// isRowSum reports whether s is shaped as a row-wise sum of table p.
func isRowSum(s, p *autograd.Tensor) bool {
	return s != nil && p.NDim() == 2 && s.NDim() == 1 && s.Dim(0) == p.Dim(0)
}

// NewRowWiseAdagrad returns a row-wise Adagrad optimizer over params as
// one group.
func NewRowWiseAdagrad(params []*autograd.Tensor, opt RowWiseAdagradOptions) (*RowWiseAdagrad, error) {
	return NewRowWiseAdagradGroups(RowWiseAdagradGroup{Params: params, RowWiseAdagradOptions: opt})
}

// NewRowWiseAdagradGroups returns a row-wise Adagrad optimizer over
// parameter groups. It fails when a hyper-parameter is out of range, when
// there are no parameters, or when a parameter is nil, not a float32 leaf,
// or in two groups.
func NewRowWiseAdagradGroups(groups ...RowWiseAdagradGroup) (*RowWiseAdagrad, error) {
	return as[*RowWiseAdagrad](build(rowWiseKind, false, nil, groups))
}

// NewRowWiseAdagradSplit returns a row-wise Adagrad optimizer, as one
// group, over the split parameters of sm (amp.SplitModule): its
// parameters are the bfloat16 Tops, in sm.Params order, and each step
// updates the FP32 master that Top and Bottom stand for, bit for bit as
// NewRowWiseAdagrad would update the FP32 parameters with the same
// gradients (kernels.RowWiseAdagradSparseSplit, kernels.AdagradSplitStep).
// The sums stay FP32, and state dicts number the parameters as the
// unsplit model's optimizer does, so either can load the other's.
func NewRowWiseAdagradSplit(sm *amp.SplitModel, opt RowWiseAdagradOptions) (*RowWiseAdagrad, error) {
	return NewRowWiseAdagradSplitGroups(sm, RowWiseAdagradGroup{Params: splitTops(sm), RowWiseAdagradOptions: opt})
}

// NewRowWiseAdagradSplitGroups is NewRowWiseAdagradGroups for a model
// split by amp.SplitModule: the groups' parameters may be the bfloat16
// Tops of sm's split parameters, updated as NewRowWiseAdagradSplit
// describes, beside float32 ones. It fails as NewRowWiseAdagradGroups
// does, and when a bfloat16 parameter is not the Top of one of sm's split
// parameters.
func NewRowWiseAdagradSplitGroups(sm *amp.SplitModel, groups ...RowWiseAdagradGroup) (*RowWiseAdagrad, error) {
	return as[*RowWiseAdagrad](build(rowWiseKind, true, sm, groups))
}

// LoadStateDict replaces the hyper-parameters and state with copies of
// sd's, as Adagrad's does, and takes a [rows] "sum" of a [rows, dim]
// parameter as that parameter's row-wise state. Nothing changes when it
// returns an error.
func (o *RowWiseAdagrad) LoadStateDict(sd *StateDict) error {
	if sd == nil || len(sd.Groups) != len(o.groups) {
		return o.base.LoadStateDict(sd) // which reports the mismatch
	}
	byID := map[int]*autograd.Tensor{}
	for g, gs := range sd.Groups {
		if len(gs.Params) != len(o.groups[g].params) {
			return o.base.LoadStateDict(sd)
		}
		for i, id := range gs.Params {
			byID[id] = o.groups[g].params[i]
		}
	}
	rest := &StateDict{Groups: sd.Groups, State: make(map[int]map[string]*autograd.Tensor, len(sd.State))}
	rows := map[*autograd.Tensor]*autograd.Tensor{}
	for _, id := range sortedKeys(sd.State) {
		saved, p := sd.State[id], byID[id]
		rest.State[id] = saved
		s, ok := saved["sum"]
		switch {
		case p == nil || len(saved) == 0:
			continue // reported by the shared loader, or not yet stepped
		case !ok:
			return errorf(o.kind.name, "state.%d.sum: missing state", id)
		case !isRowSum(s, p):
			continue
		case !s.DType().IsFloat():
			return errorf(o.kind.name, "state.%d.sum: dtype %v, want a floating-point tensor", id, s.DType())
		case saved["step"] == nil:
			// Without the sum the shared loader would see no state at
			// all, or a nil step it reports.
			if _, ok := saved["step"]; !ok {
				return errorf(o.kind.name, "state.%d.step: missing state", id)
			}
		}
		m := make(map[string]*autograd.Tensor, len(saved))
		for name, t := range saved {
			if name != "sum" {
				m[name] = t
			}
		}
		rest.State[id], rows[p] = m, s
	}
	if err := o.base.LoadStateDict(rest); err != nil {
		return err
	}
	for g := range o.groups {
		gr := &o.groups[g]
		for i, p := range gr.params {
			if s := rows[p]; s != nil {
				sum := autograd.Zeros(p.Dim(0))
				sum.CopyFrom(s)
				gr.state[i].sum, gr.state[i].rowWise = sum, true
			}
		}
	}
	return nil
}

// rowWiseStep updates one parameter.
func rowWiseStep(o *RowWiseAdagradOptions, st *rowWiseState, q param) {
	sg := q.SparseGrad()
	sparse := sg != nil
	if sparse {
		q.checkSparseDecay(o.WeightDecay)
	}
	switch {
	case st.sum == nil:
		// The first step makes the state the gradient's kind needs.
		init := float32(o.InitialAccumulatorValue)
		if sparse {
			st.sum, st.rowWise = autograd.Zeros(q.Dim(0)).Fill(init), true
		} else {
			st.sum = zerosState(q.Tensor).Fill(init)
		}
	case sparse != st.rowWise:
		has, kept := "a dense", "row-wise (one sum per row, from sparse gradients)"
		if sparse {
			has, kept = "a sparse", "element-wise (from dense gradients)"
		}
		fail(*q.name+".Step", "group %d parameter %d has %s gradient, but its state is %s; a parameter's gradients must all be sparse or all dense", q.group, q.index, has, kept)
	}
	if st.step == nil {
		st.step = autograd.Scalar(0)
	}
	// dlrm counts steps in a Python int; a float32 count is exact to 2²⁴.
	step := st.step.Float32s()
	step[0]++
	cfg := o.adagrad().config(float64(step[0]))
	if sparse {
		if q.split != nil {
			kernels.RowWiseAdagradSparseSplit(q.BFloat16s(), q.split.Bottom, st.sum.Float32s(), sparseRows(sg), cfg)
		} else {
			kernels.RowWiseAdagradSparse(q.Float32s(), st.sum.Float32s(), sparseRows(sg), cfg)
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
