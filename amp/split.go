package amp

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// SplitParam is a float32 parameter cut into two 16-bit halves.
//
// Top holds the high 16 bits of each float32 as a bfloat16 tensor of the
// parameter's shape and memory format; it is the weight the model computes
// with and the leaf that receives the gradient. Bottom holds the low 16
// bits, in the same physical (memory-format) order as Top's elements.
type SplitParam struct {
	Top    *autograd.Tensor
	Bottom []uint16
}

// Split cuts a float32 tensor into a SplitParam. Top is a new bfloat16
// leaf in p's shape and memory format that requires a gradient when p
// does; p itself is left unchanged and may be dropped. Split panics with
// an *autograd.Error unless p is a float32 tensor.
func Split(p *autograd.Tensor) *SplitParam {
	if p == nil {
		fail(autograd.ErrArgument, "Split", "tensor is nil")
	}
	if p.DType() != autograd.Float32 {
		fail(autograd.ErrDType, "Split", "tensor is %v; only float32 tensors can be split", p.DType())
	}
	top := emptyLike(autograd.BFloat16, p)
	s := &SplitParam{Top: top, Bottom: make([]uint16, p.Numel())}
	splitBits(top.BFloat16s(), s.Bottom, p.Float32s())
	if p.RequiresGrad() {
		top.SetRequiresGrad(true)
	}
	return s
}

// Join returns the FP32 parameter the halves stand for, bit for bit, as a
// new float32 tensor in Top's shape and memory format.
func (s *SplitParam) Join() *autograd.Tensor {
	t := emptyLike(autograd.Float32, s.Top)
	s.JoinInto(t.Float32s())
	return t
}

// JoinInto writes the joined FP32 values into dst in physical
// (memory-format) order. dst must have Top's number of elements.
func (s *SplitParam) JoinInto(dst []float32) {
	s.check("JoinInto", len(dst))
	joinBits(dst, s.Top.BFloat16s(), s.Bottom)
}

// SplitFrom replaces the halves with the split of src, FP32 values in
// physical order, as after an optimizer step. Top keeps its identity (and
// gradient); only its elements change. src must have Top's number of
// elements.
func (s *SplitParam) SplitFrom(src []float32) {
	s.check("SplitFrom", len(src))
	splitBits(s.Top.BFloat16s(), s.Bottom, src)
}

// Step runs an FP32 update on the joined parameter and splits the result
// again. grad is the gradient, float32 or bfloat16, in Top's shape (a
// different memory format is reordered to Top's); a nil grad does nothing,
// as optimizers skip parameters without one.
//
// step is called on consecutive spans of at most StepSpan elements in
// physical order: param holds the joined values of elements off to
// off+len(param), to be updated in place, and grad the gradient of the same
// elements widened to float32 (it may share memory with a float32 grad
// tensor). Optimizer state kept per element is indexed from off. Because
// split(join(x)) is x, a pass whose step only reads param changes nothing,
// so an update that needs a whole-tensor reduction first (Lamb's norms)
// can make a reading pass and then an updating one.
//
// An elementwise update through Step gives bit for bit the result of the
// same update on the plain FP32 values.
func (s *SplitParam) Step(grad *autograd.Tensor, step func(off int, param, grad []float32)) {
	if grad == nil {
		return
	}
	s.check("Step", len(s.Bottom))
	top := s.Top.BFloat16s()
	forSpans(grad, s.Top, step, func(lo, hi int, g []float32, buf *spanBuf) {
		p := buf.param[:hi-lo]
		joinBits(p, top[lo:hi], s.Bottom[lo:hi])
		step(lo, p, g)
		splitBits(top[lo:hi], s.Bottom[lo:hi], p)
	})
}

// StepSpan is the most elements Step and MasterCopy.Step hand their step
// function at once: 16 KiB of float32 parameter and gradient each, small
// enough to stay in a core's L1/L2 cache between join, update and split.
const StepSpan = 4096

type spanBuf struct{ param, grad [StepSpan]float32 }

var spans = sync.Pool{New: func() any { return new(spanBuf) }}

// forSpans calls fn for consecutive spans [lo, hi) of like's elements in
// physical order, with grad's elements of the span as float32 and a
// scratch buffer. It does nothing and reports false when grad is nil, and
// panics when step is nil or grad does not fit like.
func forSpans(grad, like *autograd.Tensor, step func(int, []float32, []float32), fn func(lo, hi int, g []float32, buf *spanBuf)) bool {
	if grad == nil {
		return false
	}
	if step == nil {
		fail(autograd.ErrArgument, "Step", "step function is nil")
	}
	if !slices.Equal(grad.Shape(), like.Shape()) {
		fail(autograd.ErrShape, "Step", "gradient shape %v does not match parameter shape %v", grad.Shape(), like.Shape())
	}
	if grad.Format() != like.Format() {
		grad = grad.Detach().To(like.Format())
	}
	var g32 []float32
	var g16 []uint16
	switch grad.DType() {
	case autograd.Float32:
		g32 = grad.Float32s()
	case autograd.BFloat16:
		g16 = grad.BFloat16s()
	default:
		fail(autograd.ErrDType, "Step", "gradient is %v, want float32 or bfloat16", grad.DType())
	}
	buf := spans.Get().(*spanBuf)
	defer spans.Put(buf)
	for lo, n := 0, like.Numel(); lo < n; lo += StepSpan {
		hi := min(lo+StepSpan, n)
		var g []float32
		if g32 != nil {
			g = g32[lo:hi]
		} else {
			g = buf.grad[:hi-lo]
			for i, h := range g16[lo:hi] {
				g[i] = math.Float32frombits(uint32(h) << 16)
			}
		}
		fn(lo, hi, g, buf)
	}
	return true
}

// check panics unless Top is a bfloat16 tensor whose element count matches
// Bottom's and n.
func (s *SplitParam) check(op string, n int) {
	if s.Top == nil || s.Top.DType() != autograd.BFloat16 {
		fail(autograd.ErrDType, op, "split parameter has no bfloat16 Top")
	}
	if len(s.Bottom) != s.Top.Numel() {
		fail(autograd.ErrShape, op, "Bottom has %d elements, Top %d", len(s.Bottom), s.Top.Numel())
	}
	if n != len(s.Bottom) {
		fail(autograd.ErrShape, op, "slice of %d elements for a parameter of %d (shape %v)", n, len(s.Bottom), s.Top.Shape())
	}
}

// splitBits stores the high and low 16 bits of each src element in top and
// bottom.
func splitBits(top, bottom []uint16, src []float32) {
	top, bottom = top[:len(src)], bottom[:len(src)]
	for i, f := range src {
		b := math.Float32bits(f)
		top[i] = uint16(b >> 16)
		bottom[i] = uint16(b)
	}
}

// joinBits puts each pair of halves back together.
func joinBits(dst []float32, top, bottom []uint16) {
	top, bottom = top[:len(dst)], bottom[:len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(top[i])<<16 | uint32(bottom[i]))
	}
}

// emptyLike returns a zero tensor of dtype in like's shape and memory
// format.
func emptyLike(dtype autograd.DType, like *autograd.Tensor) *autograd.Tensor {
	t := autograd.Empty(dtype, like.Shape()...)
	if f := like.Format(); f != autograd.Contiguous {
		t.SetFormat(f)
	}
	return t
}

// MasterCopy is the non-split mode of mixed precision: Master is the FP32
// parameter of record and Copy a bfloat16 tensor of the same shape and
// memory format, Master rounded to nearest even, that the model computes
// with and that receives the gradient.
type MasterCopy struct {
	Master *autograd.Tensor
	Copy   *autograd.Tensor
}

// NewMasterCopy makes p the master (p itself, not a copy) and a bfloat16
// Copy of it that requires a gradient when p does. It panics with an
// *autograd.Error unless p is a float32 tensor.
func NewMasterCopy(p *autograd.Tensor) *MasterCopy {
	if p == nil {
		fail(autograd.ErrArgument, "NewMasterCopy", "tensor is nil")
	}
	if p.DType() != autograd.Float32 {
		fail(autograd.ErrDType, "NewMasterCopy", "tensor is %v; the master must be float32", p.DType())
	}
	return &MasterCopy{Master: p, Copy: rounded(p)}
}

// Refresh rounds Master into Copy (to nearest even), after Master changed.
// Copy keeps its identity and gradient.
func (m *MasterCopy) Refresh() { m.Copy.CopyFrom(m.Master) }

// Step runs an FP32 update on Master, span by span as SplitParam.Step
// does (param is Master's own memory here), then refreshes Copy. grad is
// float32 or bfloat16 in Master's shape; a nil grad does nothing.
func (m *MasterCopy) Step(grad *autograd.Tensor, step func(off int, param, grad []float32)) {
	master := m.Master.Float32s()
	if forSpans(grad, m.Master, step, func(lo, hi int, g []float32, _ *spanBuf) {
		step(lo, master[lo:hi], g)
	}) {
		m.Refresh()
	}
}

// SplitModel is a module whose float32 parameters (or those a filter
// selected) have been swapped for the Tops of their splits (see
// SplitModule and SplitModuleFunc).
type SplitModel struct {
	module nn.Module
	params []NamedSplit
	byName map[string]*SplitParam
	byTop  map[*autograd.Tensor]*SplitParam
}

// NamedSplit pairs a parameter's dotted name with its split.
type NamedSplit struct {
	Name  string
	Param *SplitParam
}

// SplitModule splits every parameter of m and its descendants and
// registers each Top in place of the FP32 parameter (nn.Base.SetParameter),
// so m's forward and backward use the bfloat16 Tops; the Bottoms stay in
// the returned SplitModel. Kiln's layers look their parameters up by name
// on each call; a module of your own that keeps a parameter in a field
// would go on using the FP32 tensor. A parameter registered under several
// names (tied weights) is split once and every name gets the same Top.
// Buffers are left as they are.
//
// It returns an error naming the parameter, and changes nothing, when a
// parameter is not a float32 leaf. Make the optimizer after splitting, from
// the split parameters: the FP32 tensors m held before are no longer m's.
func SplitModule(m nn.Module) (*SplitModel, error) {
	return splitModule("SplitModule", m, nil)
}

// SplitModuleFunc is SplitModule for the parameters keep selects; the
// others stay float32 parameters of m, which the split optimizers update
// in FP32 beside the split ones. SplitModuleFunc(m, AutocastParams) splits
// what IPEX's split_master_weight_for_bf16 splits: convolution and linear
// weights and biases. A tied tensor must be selected under all its names
// or none.
func SplitModuleFunc(m nn.Module, keep ParamFilter) (*SplitModel, error) {
	if keep == nil {
		return nil, fmt.Errorf("amp: SplitModuleFunc: filter is nil (use SplitModule to split every parameter)")
	}
	return splitModule("SplitModuleFunc", m, keep)
}

func splitModule(op string, m nn.Module, keep ParamFilter) (*SplitModel, error) {
	slots, err := selectParams(op, "split", m, keep)
	if err != nil {
		return nil, err
	}
	sm := &SplitModel{module: m, byName: map[string]*SplitParam{}, byTop: map[*autograd.Tensor]*SplitParam{}}
	for _, nt := range replaceParams(slots, func(name string, p *autograd.Tensor) *autograd.Tensor {
		sp := Split(p)
		sm.byTop[sp.Top] = sp
		sm.params = append(sm.params, NamedSplit{name, sp})
		return sp.Top
	}) {
		sm.byName[nt.Name] = sm.byTop[nt.Tensor]
	}
	return sm, nil
}

// Module returns the module, whose parameters are now the Tops.
func (sm *SplitModel) Module() nn.Module { return sm.module }

// Params lists the split parameters in nn.NamedParameters order, each once
// (a tied parameter under its first name).
func (sm *SplitModel) Params() []NamedSplit { return append([]NamedSplit(nil), sm.params...) }

// Param returns the split parameter registered under a dotted name, or nil.
func (sm *SplitModel) Param(name string) *SplitParam { return sm.byName[name] }

// StateDict lists the module's state dict as nn.StateDict does, with each
// split parameter replaced by a new float32 tensor of its joined FP32
// values; buffers (and any parameter not split) are the module's own
// tensors.
func (sm *SplitModel) StateDict() []nn.NamedTensor {
	sd := nn.StateDict(sm.module)
	for i, nt := range sd {
		if sp, ok := sm.byTop[nt.Tensor]; ok {
			sd[i].Tensor = sp.Join()
		}
	}
	return sd
}

// SaveStateDict writes StateDict to path as nn.SaveStateDict does: the
// file holds the joined FP32 parameters, the same file the unsplit module
// would save.
func (sm *SplitModel) SaveStateDict(path string) error {
	return nn.SaveTensors(path, sm.StateDict())
}

// LoadStateDict reads a state dict file as nn.LoadStateDict does, loading
// the FP32 values of split parameters into split form (Top and Bottom
// updated in place, Top keeping its identity) and everything else into the
// module's tensors. Errors are nn's *StateDictError, naming each key that
// is missing, unexpected or mismatched; nothing is loaded unless all keys
// fit. While loading, the split parameters briefly have FP32 copies.
func (sm *SplitModel) LoadStateDict(path string, opt ...nn.LoadOptions) error {
	f, done := sm.staging()
	if err := nn.LoadStateDict(f, path, opt...); err != nil {
		return err
	}
	done()
	return nil
}

// LoadTensors loads named tensors into the module as LoadStateDict loads a
// file.
func (sm *SplitModel) LoadTensors(ts []nn.NamedTensor, opt ...nn.LoadOptions) error {
	f, done := sm.staging()
	if err := nn.LoadTensors(f, ts, opt...); err != nil {
		return err
	}
	done()
	return nil
}

// flat is a module holding a whole state dict under dotted names.
type flat struct{ nn.Base }

// staging returns a module with the entries of sm's state dict, in order:
// a float32 tensor of the joined values for each split parameter, the
// module's own tensors for the rest. After a load into it, done splits the
// loaded values back (entries a non-strict load skipped still hold the
// joined values, so they come back unchanged).
func (sm *SplitModel) staging() (*flat, func()) {
	f := &flat{}
	type pending struct {
		sp  *SplitParam
		buf *autograd.Tensor
	}
	var todo []pending
	for _, nt := range nn.StateDict(sm.module) {
		t := nt.Tensor
		if sp, ok := sm.byTop[t]; ok {
			t = sp.Join()
			todo = append(todo, pending{sp, t})
		}
		// Buffers, not parameters: registering a parameter would turn on
		// its requires-grad flag.
		f.RegisterBuffer(nt.Name, t)
	}
	return f, func() {
		for _, p := range todo {
			p.sp.SplitFrom(p.buf.Float32s())
		}
	}
}
