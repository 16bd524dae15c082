package nn

import (
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/tracing"
)

// Module is implemented by every type that embeds Base.
type Module interface {
	base() *Base
}

// Layer is a module with one input and one output.
type Layer interface {
	Module
	Forward(x *autograd.Tensor) *autograd.Tensor
}

// NamedTensor pairs a dotted PyTorch-style name ("layer1.0.conv1.weight")
// with a parameter or buffer.
type NamedTensor struct {
	Name   string
	Tensor *autograd.Tensor
}

// NamedModule pairs a dotted name with a module.
type NamedModule struct {
	Name   string
	Module Module
}

type slot[T any] struct {
	name string
	val  T
}

// Base holds a module's registered parameters, buffers and children in
// registration order, and its training flag. Embed it in every module.
// Modules start in training mode, as in PyTorch.
type Base struct {
	params   []slot[*autograd.Tensor]
	buffers  []slot[*autograd.Tensor]
	children []slot[Module]
	eval     bool
}

func (b *Base) base() *Base { return b }

// RegisterParameter adds a parameter under name, marks it as requiring a
// gradient and returns it. A nil tensor registers nothing (a layer built
// with bias=false) and returns nil.
func (b *Base) RegisterParameter(name string, t *autograd.Tensor) *autograd.Tensor {
	if t == nil {
		return nil
	}
	b.checkName("RegisterParameter", name)
	t.SetRequiresGrad(true)
	b.params = append(b.params, slot[*autograd.Tensor]{name, t})
	return t
}

// RegisterBuffer adds non-trainable state (running statistics, counters)
// that is saved in the state dict.
func (b *Base) RegisterBuffer(name string, t *autograd.Tensor) *autograd.Tensor {
	if t == nil {
		return nil
	}
	b.checkName("RegisterBuffer", name)
	b.buffers = append(b.buffers, slot[*autograd.Tensor]{name, t})
	return t
}

// RegisterModule adds a child module under name and returns it. m must not
// be nil: every walk over the module tree would trip on it later.
func (b *Base) RegisterModule(name string, m Module) Module {
	b.checkName("RegisterModule", name)
	if m == nil {
		Fail(autograd.ErrArgument, "RegisterModule", "module %q is nil", name)
	}
	b.children = append(b.children, slot[Module]{name, m})
	return m
}

func (b *Base) checkName(op, name string) {
	if name == "" {
		Fail(autograd.ErrArgument, op, "empty name")
	}
	for _, s := range b.params {
		if s.name == name {
			Fail(autograd.ErrArgument, op, "name %q already holds a parameter", name)
		}
	}
	for _, s := range b.buffers {
		if s.name == name {
			Fail(autograd.ErrArgument, op, "name %q already holds a buffer", name)
		}
	}
	for _, s := range b.children {
		if s.name == name {
			Fail(autograd.ErrArgument, op, "name %q already holds a module", name)
		}
	}
}

// SetParameter replaces the tensor registered under a parameter name, for
// code (like BF16 conversion) that swaps a parameter's storage. It reports
// whether the name was found.
func (b *Base) SetParameter(name string, t *autograd.Tensor) bool {
	for i := range b.params {
		if b.params[i].name == name {
			b.params[i].val = t
			return true
		}
	}
	return false
}

// Training reports whether the module is in training mode.
func (b *Base) Training() bool { return !b.eval }

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// NamedParameters lists m's parameters and those of its descendants with
// dotted names, depth first in registration order, as
// model.named_parameters() does.
func NamedParameters(m Module) []NamedTensor {
	var out []NamedTensor
	walkModules(m, "", func(prefix string, b *Base) {
		for _, p := range b.params {
			out = append(out, NamedTensor{join(prefix, p.name), p.val})
		}
	})
	return out
}

// Parameters lists m's parameters in the order of NamedParameters.
func Parameters(m Module) []*autograd.Tensor {
	var out []*autograd.Tensor
	for _, p := range NamedParameters(m) {
		out = append(out, p.Tensor)
	}
	return out
}

// NamedBuffers lists m's buffers and those of its descendants.
func NamedBuffers(m Module) []NamedTensor {
	var out []NamedTensor
	walkModules(m, "", func(prefix string, b *Base) {
		for _, s := range b.buffers {
			out = append(out, NamedTensor{join(prefix, s.name), s.val})
		}
	})
	return out
}

// NamedModules lists m (named "") and every descendant module.
func NamedModules(m Module) []NamedModule {
	var out []NamedModule
	var visit func(prefix string, m Module)
	visit = func(prefix string, m Module) {
		out = append(out, NamedModule{prefix, m})
		for _, c := range m.base().children {
			visit(join(prefix, c.name), c.val)
		}
	}
	visit("", m)
	return out
}

// Children lists m's direct submodules with their names.
func Children(m Module) []NamedModule {
	var out []NamedModule
	for _, c := range m.base().children {
		out = append(out, NamedModule{c.name, c.val})
	}
	return out
}

func walkModules(m Module, prefix string, fn func(prefix string, b *Base)) {
	b := m.base()
	fn(prefix, b)
	for _, c := range b.children {
		walkModules(c.val, join(prefix, c.name), fn)
	}
}

// Train sets training mode (true) or evaluation mode (false) on m and all
// its descendants, like model.train(mode), and returns m.
func Train[M Module](m M, on bool) M {
	walkModules(m, "", func(_ string, b *Base) { b.eval = !on })
	return m
}

// Eval puts m and its descendants in evaluation mode and returns m.
func Eval[M Module](m M) M { return Train(m, false) }

// ZeroGrad clears the gradients of all of m's parameters.
func ZeroGrad(m Module) {
	for _, p := range Parameters(m) {
		p.ZeroGrad()
	}
}

// Enter marks the start of m's forward on input x, for a trace of x's
// computation (graph.Trace), and returns the function that marks its end.
// Modules call it first thing in Forward,
//
//	defer nn.Enter(m, x)()
//
// so that the trace names the module each op ran in (its state-dict path).
// Outside a trace it does nothing.
func Enter(m Module, x *autograd.Tensor) func() {
	return tracing.Get[*autograd.Tensor]().Enter(m, x)
}
