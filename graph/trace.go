package graph

import (
	"errors"
	"fmt"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/tracing"
	"github.com/kilnml/kiln/nn"
)

// Trace runs model's Forward once on inputs, in evaluation mode and without
// gradient recording, and returns the ops it ran as a graph. model must be
// an nn.Layer (one input, one output); TraceFunc traces any forward.
// Parameters and buffers become constants named by their state-dict names
// and shared with the model until Freeze copies them. With an input marked
// by amp.Autocast, the trace records the autocast casts and gives a BF16
// graph. Only the ops computed from the inputs and from model's
// parameters and buffers are traced: other goroutines, and other traces
// running meanwhile, are not seen. A tensor the forward reaches otherwise
// is frozen at its value as a constant. Like the switch to evaluation
// mode, the trace changes model while it runs: do not use model in another
// goroutine meanwhile.
func Trace(model nn.Module, inputs ...*autograd.Tensor) (*Graph, error) {
	l, ok := model.(nn.Layer)
	if !ok {
		return nil, fmt.Errorf("graph.Trace: %T has no Forward(x *autograd.Tensor) *autograd.Tensor; use TraceFunc", model)
	}
	if len(inputs) != 1 {
		return nil, fmt.Errorf("graph.Trace: %T takes one input, got %d", model, len(inputs))
	}
	return TraceFunc(model, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{l.Forward(in[0])}
	}, inputs...)
}

// TraceFunc is Trace for a forward of any arity: forward receives the
// inputs and returns the graph's outputs. model names the parameters and
// the module scopes (nil for none); it is put in evaluation mode for the
// trace and its modules' training flags are restored afterwards.
//
// Ops that have no graph form (losses, training-mode dropout or batch
// norm, the sparse forms of Embedding and EmbeddingBag) are reported in
// the error by name with the path of the module they ran in, when their
// results reach an output. Merged lookups (nn.MergedEmbeddingBag, DLRM's
// tables) trace with sparse tables too: sparse changes only gradients.
func TraceFunc(model nn.Module, forward func(inputs []*autograd.Tensor) []*autograd.Tensor, inputs ...*autograd.Tensor) (g *Graph, err error) {
	for i, in := range inputs {
		if in == nil {
			return nil, fmt.Errorf("graph.Trace: input %d is nil", i)
		}
	}
	if model == nil {
		model = &nn.Base{} // a forward with no module: nothing to name
	}
	t := newTracer(model)
	// The forward runs on views of the inputs that carry this trace, and
	// the model's parameters and buffers join it while it runs: only ops
	// computed from them report to t, so other goroutines' ops, and other
	// traces, are not seen.
	var state []*autograd.Tensor
	for p := range t.params {
		state = append(state, p)
	}
	inputs, end := tracing.Get[*autograd.Tensor]().Start(t, inputs, state)
	defer end()
	for i, in := range inputs {
		id := t.g.AddValue(Value{Name: fmt.Sprintf("input%d", i), Shape: in.Shape(), DType: in.DType(), Format: in.Format()})
		t.g.Inputs = append(t.g.Inputs, id)
		t.ids[in] = id
	}
	modules := nn.NamedModules(model)
	training := make([]bool, len(modules))
	for i, m := range modules {
		training[i] = m.Module.(interface{ Training() bool }).Training()
	}
	nn.Eval(model)
	defer func() {
		// NamedModules lists parents before children, so each later Train
		// call puts back a descendant's own flag.
		for i, m := range modules {
			nn.Train(m.Module, training[i])
		}
	}()
	var outs []*autograd.Tensor
	runErr := autograd.Try(func() {
		outs = forward(inputs)
	})
	if runErr != nil {
		return nil, fmt.Errorf("graph.Trace: forward failed: %w", runErr)
	}
	for i, o := range outs {
		if o == nil {
			return nil, fmt.Errorf("graph.Trace: output %d is nil", i)
		}
		id, err := t.use(o)
		if err != nil {
			t.errs = append(t.errs, err)
			continue
		}
		t.g.Outputs = append(t.g.Outputs, id)
	}
	if len(t.errs) > 0 {
		return nil, fmt.Errorf("graph.Trace: %w", errors.Join(t.errs...))
	}
	if err := t.g.Validate(); err != nil {
		return nil, fmt.Errorf("graph.Trace: %w", err)
	}
	return t.g, nil
}

// tracer is the tracing.Tracer of one trace, building a Graph.
type tracer struct {
	g       *Graph
	ids     map[*autograd.Tensor]int
	params  map[*autograd.Tensor]string
	paths   map[any]string
	scope   []string
	pending map[*autograd.Tensor]string // made by an op with no trace form: its description
	nconst  int
	errs    []error
}

func newTracer(model nn.Module) *tracer {
	t := &tracer{
		g:       &Graph{Consts: map[int]*autograd.Tensor{}},
		ids:     map[*autograd.Tensor]int{},
		params:  map[*autograd.Tensor]string{},
		paths:   map[any]string{},
		pending: map[*autograd.Tensor]string{},
	}
	for _, p := range nn.NamedParameters(model) {
		t.params[p.Tensor] = p.Name
	}
	for _, b := range nn.NamedBuffers(model) {
		t.params[b.Tensor] = b.Name
	}
	for _, m := range nn.NamedModules(model) {
		t.paths[m.Module] = m.Name
	}
	return t
}

func (t *tracer) Enter(module any) {
	path, ok := t.paths[module]
	if !ok && len(t.scope) > 0 {
		path = t.scope[len(t.scope)-1] // a module outside the tree: report its caller's
	}
	t.scope = append(t.scope, path)
}

func (t *tracer) Exit() {
	if len(t.scope) > 0 {
		t.scope = t.scope[:len(t.scope)-1]
	}
}

func (t *tracer) where() string {
	if len(t.scope) == 0 || t.scope[len(t.scope)-1] == "" {
		return "the root module"
	}
	return fmt.Sprintf("module %q", t.scope[len(t.scope)-1])
}

func (t *tracer) currentScope() string {
	if len(t.scope) == 0 {
		return ""
	}
	return t.scope[len(t.scope)-1]
}

func (t *tracer) Recorded(op string, out *autograd.Tensor) {
	if _, ok := t.ids[out]; !ok {
		t.pending[out] = fmt.Sprintf("op %s in %s cannot be traced", op, t.where())
	}
}

// use returns the value id of a tensor an op reads, making constants of
// parameters and of tensors the trace has not seen.
func (t *tracer) use(x *autograd.Tensor) (int, error) {
	if msg, ok := t.pending[x]; ok {
		return 0, errors.New(msg)
	}
	if id, ok := t.ids[x]; ok {
		return id, nil
	}
	if x.Data() == nil && x.Numel() != 0 {
		return 0, fmt.Errorf("a tensor without data reached the trace in %s", t.where())
	}
	name, isParam := t.params[x]
	data := x
	if !isParam {
		// A tensor made outside the traced ops (a constant the forward
		// built): frozen at its value now, as PyTorch's trace does.
		name = fmt.Sprintf("const.%d", t.nconst)
		t.nconst++
		// Copied without a traced op (Clone would report itself to this
		// very tracer).
		data = autograd.Empty(x.DType(), x.Shape()...)
		data.SetFormat(x.Format())
		data.CopyFrom(x)
	}
	id := t.g.AddConst(name, data)
	t.ids[x] = id
	return id, nil
}

func (t *tracer) Op(op string, typed any, inputs, outputs []*autograd.Tensor) {
	n := Node{Op: op, Scope: t.currentScope()}
	for _, in := range inputs {
		if in == nil {
			n.Inputs = append(n.Inputs, None)
			continue
		}
		id, err := t.use(in)
		if err != nil {
			t.errs = append(t.errs, err)
			return
		}
		n.Inputs = append(n.Inputs, id)
	}
	attrs, err := tracing.StructAttrs(typed)
	if err != nil {
		t.errs = append(t.errs, fmt.Errorf("op %s in %s: %w", op, t.where(), err))
		return
	}
	for _, a := range attrs {
		n.Attrs = append(n.Attrs, convertAttr(a))
	}
	for _, o := range outputs {
		id := t.g.AddValue(Value{Name: fmt.Sprintf("%%%d", len(t.g.Values)), Shape: o.Shape(), DType: o.DType(), Format: o.Format()})
		n.Outputs = append(n.Outputs, id)
		t.ids[o] = id // an in-place op's result replaces its input
		delete(t.pending, o)
	}
	t.g.Nodes = append(t.g.Nodes, n)
}

// convertAttr is a of an attribute struct as a node's attribute.
func convertAttr(a tracing.Attr) Attr {
	switch v := a.Value.(type) {
	case int:
		return IntAttr(a.Name, v)
	case []int:
		return IntsAttr(a.Name, v)
	case float64:
		return FloatAttr(a.Name, v)
	case bool:
		return BoolAttr(a.Name, v)
	}
	return StringAttr(a.Name, a.Value.(string))
}
