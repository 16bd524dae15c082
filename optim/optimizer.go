package optim

import (
	"fmt"
	"math"
	"slices"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
)

// Optimizer updates parameters from their gradients. Its parameters are
// split into groups, each with its own hyper-parameters, like PyTorch's
// param_groups; schedulers drive the groups' learning rates through LR and
// SetLR.
type Optimizer interface {
	// Step updates every parameter that has a gradient; parameters whose
	// Grad is nil are skipped, as in PyTorch.
	Step()
	// ZeroGrad drops every parameter's gradient (PyTorch's
	// zero_grad(set_to_none=True)).
	ZeroGrad()
	// NumGroups returns the number of parameter groups.
	NumGroups() int
	// LR returns group's learning rate.
	LR(group int) float64
	// SetLR sets group's learning rate.
	SetLR(group int, lr float64)
	// InitialLR returns group's initial learning rate (PyTorch's
	// param_group["initial_lr"]) and whether one is set: the first
	// scheduler attached to the optimizer records it, and later schedulers
	// compute from it.
	InitialLR(group int) (lr float64, ok bool)
	// SetInitialLR records group's initial learning rate.
	SetInitialLR(group int, lr float64)
	// StateDict returns the optimizer's state: per-parameter state tensors
	// (the optimizer's own, not copies) and each group's hyper-parameters.
	StateDict() *StateDict
	// LoadStateDict replaces the optimizer's state and hyper-parameters
	// with copies of sd's, after checking that sd fits: nothing changes
	// when it returns an error.
	LoadStateDict(sd *StateDict) error
}

// StateDict is an optimizer's state laid out as PyTorch's
// optimizer.state_dict(): parameters are numbered 0, 1, … across all groups
// in order, per-parameter state is keyed by that number, and each group
// lists its hyper-parameters and its parameters' numbers.
type StateDict struct {
	// State maps a parameter's number to its named state tensors, e.g.
	// {"momentum_buffer": buf}. Parameters without state are absent.
	State map[int]map[string]*autograd.Tensor
	// Groups holds each parameter group in order.
	Groups []GroupState
}

// GroupState is one parameter group in a StateDict.
type GroupState struct {
	// Hyper holds the hyper-parameters under PyTorch's names ("lr",
	// "momentum", "weight_decay", …); booleans are 0 or 1.
	Hyper map[string]float64
	// Params lists the numbers of the group's parameters.
	Params []int
}

// checkSplitParams validates the parameter lists of an optimizer's groups
// as PyTorch's Optimizer constructor does, plus Kiln's own limits: every
// parameter is a float32 leaf or, when sm is not nil, the bfloat16 Top of
// one of sm's split parameters. It returns each parameter's split, nil for
// a float32 parameter.
func checkSplitParams(opt string, groups [][]*autograd.Tensor, sm *amp.SplitModel) ([][]*amp.SplitParam, error) {
	seen := map[*autograd.Tensor]int{}
	tops := map[*autograd.Tensor]*amp.SplitParam{}
	if sm != nil {
		for _, ns := range sm.Params() {
			tops[ns.Param.Top] = ns.Param
		}
	}
	splits := make([][]*amp.SplitParam, len(groups))
	total := 0
	for g, ps := range groups {
		splits[g] = make([]*amp.SplitParam, len(ps))
		for i, p := range ps {
			switch {
			case p == nil:
				return nil, errorf(opt, "group %d parameter %d is nil", g, i)
			case p.GradFn() != "":
				return nil, errorf(opt, "group %d parameter %d is the result of %s; can't optimize a non-leaf tensor", g, i, p.GradFn())
			case p.DType() == autograd.BFloat16 && sm != nil:
				sp := tops[p]
				if sp == nil {
					return nil, errorf(opt, "group %d parameter %d is bfloat16 but not the Top of one of the split model's parameters, so it has no Bottom (FP32 master) to update", g, i)
				}
				splits[g][i] = sp
			case p.DType() != autograd.Float32:
				what := "only float32 parameters are supported (bfloat16 Tops of split parameters need the Split constructors)"
				if sm != nil {
					what = "only float32 parameters and the bfloat16 Tops of split parameters are supported"
				}
				return nil, errorf(opt, "group %d parameter %d is %v; %s", g, i, p.DType(), what)
			}
			if prev, dup := seen[p]; dup {
				return nil, errorf(opt, "group %d parameter %d already appears in group %d; some parameters appear in more than one parameter group", g, i, prev)
			}
			seen[p] = g
			total++
		}
	}
	if total == 0 {
		return nil, errorf(opt, "optimizer got an empty parameter list")
	}
	return splits, nil
}

// splitTops returns the Tops of sm's split parameters, in sm.Params order
// (nn.NamedParameters order, so optimizer state numbers match those of the
// unsplit model's parameters). A nil sm has none.
func splitTops(sm *amp.SplitModel) []*autograd.Tensor {
	if sm == nil {
		return nil
	}
	ps := sm.Params()
	tops := make([]*autograd.Tensor, len(ps))
	for i, ns := range ps {
		tops[i] = ns.Param.Top
	}
	return tops
}

// splitGrad returns a split parameter's gradient for the kernels, in p's
// memory format: a bfloat16 or float32 gradient as it is, any other dtype
// converted to float32.
func splitGrad(grad, p *autograd.Tensor) kernels.SplitGrad {
	if grad.Format() != p.Format() || (grad.DType() != autograd.BFloat16 && grad.DType() != autograd.Float32) {
		grad = copyState(grad, p)
	}
	if grad.DType() == autograd.BFloat16 {
		return kernels.SplitGrad{BF16: grad.BFloat16s()}
	}
	return kernels.SplitGrad{F32: grad.Float32s()}
}

// zerosState returns a float32 state tensor of zeros in p's shape and
// memory format; a split parameter's Top is bfloat16, its state FP32.
func zerosState(p *autograd.Tensor) *autograd.Tensor {
	t := autograd.Zeros(p.Shape()...)
	if f := p.Format(); f != autograd.Contiguous {
		t.SetFormat(f)
	}
	return t
}

// checkLoad validates the parts of sd every optimizer shares: the group
// count and sizes, the parameter numbering, and that each state tensor is
// float32-compatible and shaped like its parameter with a name in
// stateNames. It returns the parameter each number stands for.
func checkLoad(opt string, sd *StateDict, groups [][]*autograd.Tensor, stateNames ...string) (map[int]*autograd.Tensor, error) {
	if sd == nil {
		return nil, errorf(opt, "nil state dict")
	}
	if len(sd.Groups) != len(groups) {
		return nil, errorf(opt, "loaded state dict has %d parameter groups, the optimizer has %d", len(sd.Groups), len(groups))
	}
	byID := map[int]*autograd.Tensor{}
	for g, gs := range sd.Groups {
		if len(gs.Params) != len(groups[g]) {
			return nil, errorf(opt, "param_groups.%d: loaded group has %d parameters, the optimizer's has %d", g, len(gs.Params), len(groups[g]))
		}
		for i, id := range gs.Params {
			if _, dup := byID[id]; dup {
				return nil, errorf(opt, "param_groups.%d.params: parameter number %d appears twice", g, id)
			}
			byID[id] = groups[g][i]
		}
	}
	for _, id := range sortedKeys(sd.State) {
		p, ok := byID[id]
		if !ok {
			return nil, errorf(opt, "state.%d: no parameter has number %d", id, id)
		}
		st := sd.State[id]
		for _, name := range sortedKeys(st) {
			key := fmt.Sprintf("state.%d.%s", id, name)
			t := st[name]
			switch {
			case !slices.Contains(stateNames, name):
				return nil, errorf(opt, "%s: unknown state (want one of %q)", key, stateNames)
			case t == nil:
				return nil, errorf(opt, "%s: nil tensor", key)
			case !t.DType().IsFloat():
				return nil, errorf(opt, "%s: dtype %v, want a floating-point tensor", key, t.DType())
			case !slices.Equal(t.Shape(), p.Shape()):
				return nil, errorf(opt, "%s: shape %v does not match the parameter's shape %v", key, t.Shape(), p.Shape())
			}
		}
	}
	return byID, nil
}

// copyState returns a float32 copy of src in p's shape and memory format,
// so the kernels can walk state and parameter in the same physical order.
// (State is float32 for split parameters too, whose Tops are bfloat16.)
func copyState(src, p *autograd.Tensor) *autograd.Tensor {
	t := zerosState(p)
	t.CopyFrom(src)
	return t
}

// hyperReader reads one group's hyper-parameters from a GroupState,
// remembering the first problem so callers can read every key and check
// once.
type hyperReader struct {
	opt   string
	group int
	m     map[string]float64
	used  map[string]bool
	err   error
}

func newHyperReader(opt string, group int, m map[string]float64) *hyperReader {
	return &hyperReader{opt: opt, group: group, m: m, used: map[string]bool{}}
}

func (r *hyperReader) fail(key, format string, args ...any) {
	if r.err == nil {
		r.err = errorf(r.opt, "param_groups.%d.%s: %s", r.group, key, fmt.Sprintf(format, args...))
	}
}

// float returns the value under key, which must be present and not NaN.
func (r *hyperReader) float(key string) float64 {
	v, ok := r.m[key]
	r.used[key] = true
	switch {
	case !ok:
		r.fail(key, "missing hyper-parameter")
	case math.IsNaN(v):
		r.fail(key, "value is NaN")
	}
	return v
}

// optional returns the value under key and whether it is present.
func (r *hyperReader) optional(key string) (float64, bool) {
	if _, ok := r.m[key]; !ok {
		return 0, false
	}
	return r.float(key), true
}

// bool returns the 0-or-1 value under key as a bool.
func (r *hyperReader) bool(key string) bool {
	v := r.float(key)
	if v != 0 && v != 1 {
		r.fail(key, "boolean hyper-parameter is %v, want 0 or 1", v)
	}
	return v == 1
}

// done reports the first problem, or a key that was never read.
func (r *hyperReader) done() error {
	for _, k := range sortedKeys(r.m) {
		if !r.used[k] {
			r.fail(k, "unknown hyper-parameter")
		}
	}
	return r.err
}

func boolHyper(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[K int | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkLoadSteps is checkLoad for optimizers whose state includes PyTorch's
// "step": a one-element float tensor (0-d in PyTorch 1.13) that checkLoad,
// which wants every state tensor shaped like its parameter, does not
// accept. It checks the steps itself, each a whole number from 0 to 2²⁴
// (exact in float32), and returns them by parameter number.
func checkLoadSteps(opt string, sd *StateDict, groups [][]*autograd.Tensor, stateNames ...string) (map[int]*autograd.Tensor, map[int]float32, error) {
	if sd == nil {
		return nil, nil, errorf(opt, "nil state dict")
	}
	rest := &StateDict{State: map[int]map[string]*autograd.Tensor{}, Groups: sd.Groups}
	steps := map[int]float32{}
	for id, st := range sd.State {
		m := map[string]*autograd.Tensor{}
		for name, t := range st {
			if name != "step" {
				m[name] = t
				continue
			}
			key := fmt.Sprintf("state.%d.step", id)
			switch {
			case t == nil:
				return nil, nil, errorf(opt, "%s: nil tensor", key)
			case !t.DType().IsFloat() && t.DType() != autograd.Int64:
				return nil, nil, errorf(opt, "%s: dtype %v, want a number", key, t.DType())
			case t.Numel() != 1:
				return nil, nil, errorf(opt, "%s: shape %v, want a single number", key, t.Shape())
			}
			v := t.Item()
			if !(v >= 0 && v <= 1<<24) || v != math.Trunc(v) {
				return nil, nil, errorf(opt, "%s: %v is not a step count", key, v)
			}
			steps[id] = float32(v)
		}
		rest.State[id] = m
	}
	byID, err := checkLoad(opt, rest, groups, append([]string{"step"}, stateNames...)...)
	if err != nil {
		return nil, nil, err
	}
	return byID, steps, nil
}

// Splittable is an Optimizer that can make its split-BF16 form: the same
// optimizer over a model split by amp.SplitModule, whose bfloat16 Tops it
// steps by updating the FP32 masters they stand for. kiln.Optimize uses it
// to rebuild the optimizer it is given; all of Kiln's optimizers are
// Splittable.
type Splittable interface {
	Optimizer
	// SplitForm returns an optimizer of the same kind over the split model
	// sm, with the same groups, hyper-parameters and state, each parameter
	// p replaced by swap(p): the Top of p's split parameter, or p itself
	// to keep p FP32. Parameters keep their places, so state dicts number
	// them alike.
	SplitForm(sm *amp.SplitModel, swap func(p *autograd.Tensor) *autograd.Tensor) (Optimizer, error)
	// SplitWith splits m with split (amp.SplitModuleFunc, say) and returns
	// the split form over it. Unlike SplitForm it holds none of the FP32
	// parameters while split runs, so a model the size of the memory can
	// be split: each original is freed once it is replaced. The optimizer
	// finds its parameters in m by name (the first name of a tied one);
	// those m does not hold stay as they are. When split fails, the
	// optimizer is left as it was; otherwise it is spent, and its methods
	// panic: use the returned one.
	SplitWith(m nn.Module, split func(nn.Module) (*amp.SplitModel, error)) (Optimizer, error)
}
