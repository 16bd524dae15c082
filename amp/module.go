package amp

import (
	"fmt"
	"runtime"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// A ParamFilter chooses the parameters a module conversion (SplitModuleFunc,
// CastModule, MasterCopyModule) applies to. owner is the module that
// registered the parameter, named by its dotted path from the root ("" for
// the root), and param the parameter's name within it ("weight").
type ParamFilter func(owner nn.NamedModule, param string) bool

// AutocastParams selects the weights and biases of the layers Autocast runs
// in BF16, Conv2d, Conv3d and Linear, and the tables of Embedding and
// EmbeddingBag. It is the split IPEX makes: those layers compute in BF16
// anyway, and a bfloat16 table halves the memory a lookup reads (the
// lookups gather bfloat16 rows and reduce bags in wider precision), while
// BatchNorm keeps FP32 weights and statistics (autograd's batch norm takes
// float32 parameters, and Autocast widens its input). A sparse table's
// gradient stays row-sparse with float32 values, which the split SGD and
// Adagrad apply to the FP32 masters.
func AutocastParams(owner nn.NamedModule, param string) bool {
	switch owner.Module.(type) {
	case *nn.Conv2d, *nn.Conv3d, *nn.Linear:
		return param == "weight" || param == "bias"
	case *nn.Embedding, *nn.EmbeddingBag:
		return param == "weight"
	}
	return false
}

// paramSlot is one name under which a module registered a selected
// parameter.
type paramSlot struct {
	mod         setter
	local, full string
	orig        *autograd.Tensor
}

// setter is what every module has through its embedded nn.Base.
type setter interface {
	SetParameter(name string, t *autograd.Tensor) bool
}

// selectParams lists the parameters of m and its descendants that keep
// selects (all of them for a nil keep), checking that each is a float32
// leaf. A tensor registered under several names (tied weights) must be
// selected under all of them or none: converting it for one module would
// hand the others a tensor they were not chosen to take. op prefixes the
// errors, which name the parameter, and verb says what op does to one
// ("split").
func selectParams(op, verb string, m nn.Module, keep ParamFilter) ([]paramSlot, error) {
	if m == nil {
		return nil, fmt.Errorf("amp: %s: module is nil", op)
	}
	var slots []paramSlot
	skipped := map[*autograd.Tensor]string{}
	for _, nm := range nn.NamedModules(m) {
		// A module's own parameters come first in NamedParameters, before
		// its children's.
		all := nn.NamedParameters(nm.Module)
		own := len(all)
		for _, c := range nn.Children(nm.Module) {
			own -= len(nn.NamedParameters(c.Module))
		}
		for _, p := range all[:own] {
			full := p.Name
			if nm.Name != "" {
				full = nm.Name + "." + p.Name
			}
			t := p.Tensor
			if keep != nil && !keep(nm, p.Name) {
				if t != nil {
					skipped[t] = full
				}
				continue
			}
			set, ok := nm.Module.(setter)
			switch {
			case !ok:
				return nil, fmt.Errorf("amp: %s: module %q (%T) cannot have its parameters replaced", op, nm.Name, nm.Module)
			case t == nil:
				return nil, fmt.Errorf("amp: %s: parameter %q is nil", op, full)
			case t.DType() != autograd.Float32:
				return nil, fmt.Errorf("amp: %s: parameter %q is %v; only float32 parameters can be %s", op, full, t.DType(), verb)
			case !t.IsLeaf():
				return nil, fmt.Errorf("amp: %s: parameter %q is the result of %s, not a leaf", op, full, t.GradFn())
			}
			slots = append(slots, paramSlot{set, p.Name, full, t})
		}
	}
	for _, s := range slots {
		if other, ok := skipped[s.orig]; ok {
			return nil, fmt.Errorf("amp: %s: parameters %q and %q are one tied tensor, but only %q is selected", op, s.full, other, s.full)
		}
	}
	return slots, nil
}

// replaceParams registers, under each slot's name, the tensor convert
// returns for the slot's parameter. convert is called once per distinct
// tensor, in slot order, with the first name the tensor has; every name of
// a tied tensor gets the same replacement. It returns the replacement under
// each slot's full name.
//
// It lets go of each original as soon as its last name is replaced, and
// collects garbage after every releaseGC bytes of them, so that converting
// a model whose weights fill memory (DLRM's tables) needs room for one
// original beside the converted model, not for all of them: the collector
// would otherwise let the heap double before reclaiming them.
func replaceParams(slots []paramSlot, convert func(name string, orig *autograd.Tensor) *autograd.Tensor) []nn.NamedTensor {
	// first[i] is the slot that converts slot i's tensor; last[j] the
	// last slot that holds slot j's.
	first, last := make([]int, len(slots)), map[int]int{}
	seen := map[*autograd.Tensor]int{}
	for i, s := range slots {
		j, ok := seen[s.orig]
		if !ok {
			j = i
			seen[s.orig] = i
		}
		first[i], last[j] = j, i
	}
	seen = nil
	out := make([]nn.NamedTensor, len(slots))
	released := 0
	for i := range slots {
		s := &slots[i]
		var t *autograd.Tensor
		if j := first[i]; j == i {
			t = convert(s.full, s.orig)
		} else {
			t = out[j].Tensor
		}
		s.mod.SetParameter(s.local, t)
		out[i] = nn.NamedTensor{Name: s.full, Tensor: t}
		if last[first[i]] == i {
			released += s.orig.Numel() * s.orig.DType().Size()
		}
		s.orig = nil
		if released >= releaseGC {
			runtime.GC()
			released = 0
		}
	}
	return out
}

// releaseGC is how many bytes of replaced originals replaceParams lets go
// of between collections.
const releaseGC = 16 << 20

// rounded returns a new bfloat16 leaf holding p rounded to nearest even, in
// p's shape and memory format, requiring a gradient when p does.
func rounded(p *autograd.Tensor) *autograd.Tensor {
	t := emptyLike(autograd.BFloat16, p)
	t.CopyFrom(p)
	if p.RequiresGrad() {
		t.SetRequiresGrad(true)
	}
	return t
}

// CastModule replaces the float32 parameters of m and its descendants that
// keep selects (every one for a nil keep) with bfloat16 copies rounded to
// nearest even, keeping each one's shape, memory format and requires-grad
// flag, and returns how many tensors it converted (a tied tensor counts
// once). It is the inference form of BF16, like module.to(torch.bfloat16)
// on the selected layers: the FP32 values are gone, so train with
// SplitModuleFunc or MasterCopyModule instead. Run the model under
// Autocast, which casts the float32 activations meeting the BF16 weights.
//
// It returns an error naming the parameter, and changes nothing, when a
// selected parameter is not a float32 leaf, or when a tied tensor is
// selected under one name and not another.
func CastModule(m nn.Module, keep ParamFilter) (int, error) {
	slots, err := selectParams("CastModule", "cast", m, keep)
	if err != nil {
		return 0, err
	}
	n := 0
	replaceParams(slots, func(_ string, p *autograd.Tensor) *autograd.Tensor {
		n++
		return rounded(p)
	})
	return n, nil
}

// NamedMasterCopy pairs a parameter's dotted name with its master copy.
type NamedMasterCopy struct {
	Name  string
	Param *MasterCopy
}

// MasterCopyModule is SplitModuleFunc for the master-copy mode: each
// selected float32 parameter p becomes the Master of a MasterCopy, and its
// bfloat16 Copy is registered in p's place, so the model computes with (and
// accumulates gradients into) the Copies while p stays the FP32 parameter
// of record, still held by any optimizer made over it. It returns the
// copies in nn.NamedParameters order, each once. After an update of the
// masters, call Refresh on each.
//
// The table of a sparse lookup (nn.Embedding or nn.EmbeddingBag with
// Sparse) gets no copy even when keep selects it: its gradient is
// row-sparse, and a copy's gradient reaches its master only as a dense
// tensor, so the table would silently stop training. It stays the FP32
// parameter its optimizer updates directly, as before BF16; SplitModuleFunc
// converts such tables, the split SGD and Adagrad taking sparse gradients.
//
// It fails, changing nothing, as CastModule does.
func MasterCopyModule(m nn.Module, keep ParamFilter) ([]NamedMasterCopy, error) {
	dense := func(owner nn.NamedModule, param string) bool {
		return !sparseTable(owner.Module) && (keep == nil || keep(owner, param))
	}
	slots, err := selectParams("MasterCopyModule", "given a master copy", m, dense)
	if err != nil {
		return nil, err
	}
	var out []NamedMasterCopy
	replaceParams(slots, func(name string, p *autograd.Tensor) *autograd.Tensor {
		mc := NewMasterCopy(p)
		out = append(out, NamedMasterCopy{name, mc})
		return mc.Copy
	})
	return out, nil
}

// sparseTable reports whether m is an embedding whose table gets a
// row-sparse gradient.
func sparseTable(m nn.Module) bool {
	switch e := m.(type) {
	case *nn.Embedding:
		return e.Sparse
	case *nn.EmbeddingBag:
		return e.Sparse
	}
	return false
}
