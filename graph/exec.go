package graph

import (
	"fmt"
	"slices"
	"sync"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// Program is a graph ready to run. Run plans the graph for the shapes,
// dtypes and memory formats of its inputs the first time it meets them
// and keeps the plan: every value gets storage assigned once, by
// lifetime, constants are prepared once (convolution weights packed,
// batch-norm statistics computed), and each node becomes a call of the
// kernels its eager op runs, so later runs with inputs of the same types
// allocate nothing.
//
// A plan is kept for every input signature met, so a Program fed many
// shapes holds storage for each; but inputs that differ only in sizes no
// other value's type depends on (how many indices an embedding lookup
// reads) share one plan, whose storage for them grows as needed and whose
// nodes reading them are bound again when the sizes change. It reads the
// graph's constants when it plans: changing them afterwards (training the
// traced model further) needs a new Compile.
//
// Run may be called from several goroutines, which take turns; but each
// run overwrites the results of the last one of its signature, so
// goroutines that keep results should compile a Program each.
type Program struct {
	g      *Graph
	impls  []nodeOp
	budget int           // bytes
	pool   *kernels.Pool // where Run runs; nil: the caller's thread and the process-wide workers

	mu    sync.Mutex
	last  *plan   // the plan of the previous Run, tried first
	plans []*plan // every plan made, one per input signature
}

// CompileOption changes how Compile prepares a graph.
type CompileOption func(*Program)

// WithPool binds the Program to a pool of pinned threads: Run computes
// on the pool (kernels.Pool.Do), its kernels split across the pool's
// threads, so Programs bound to different pools run side by side on their
// own cores.
func WithPool(pool *kernels.Pool) CompileOption {
	return func(p *Program) { p.pool = pool }
}

// WithMemoryBudget bounds the memory, in bytes, that planning the graph
// may take for the values it computes (see Compile); the default is the
// machine's memory.
func WithMemoryBudget(bytes int) CompileOption {
	return func(p *Program) { p.budget = bytes }
}

// Compile checks g and prepares it to run: g must pass Validate, and every
// node must fit its op (a *NodeError names the first that does not): its
// operand and result counts, its attributes' kinds and ranges, and the
// shapes its operands take, inferred from the graph's inputs' declared
// types. A plan holds every value twice at most (the eager run that
// starts it and the storage it keeps), so that memory, for the declared
// inputs here and for each new input signature when Run plans it, must
// fit the budget (WithMemoryBudget) or the error wraps ErrMemoryBudget;
// nothing sized by the graph is allocated before.
func Compile(g *Graph, opts ...CompileOption) (*Program, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	impls, types, err := g.checkNodes(false)
	if err != nil {
		return nil, err
	}
	// Constants may be a model's parameters, which require gradients;
	// detached, no op the program runs on them records.
	g = g.Clone()
	for id, t := range g.Consts {
		g.Consts[id] = t.Detach()
	}
	p := &Program{g: g, impls: impls, budget: machineMemory()}
	for _, o := range opts {
		o(p)
	}
	if err := g.checkBudget(types, p.budget); err != nil {
		return nil, err
	}
	return p, nil
}

// Run computes the graph's outputs for inputs, which must match the
// graph's inputs in number, dtype and rank; their sizes and memory
// formats may vary, each new combination planned once.
//
// The results, the slice and its tensors, belong to the Program: the
// next Run with inputs of the same types overwrites them, so copy (Clone)
// what must outlive it. Nodes without a compiled form for their operands
// run through their eager ops, which allocate.
func (p *Program) Run(inputs ...*autograd.Tensor) ([]*autograd.Tensor, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pool == nil {
		return p.runLocked(inputs)
	}
	return p.runOnPool(slices.Clone(inputs))
}

// runOnPool is Run on p.pool. It takes its own copy of the inputs slice,
// which the closure handed to the pool keeps: were it Run's, every caller's
// variadic slice would escape to the heap, pool or not.
func (p *Program) runOnPool(inputs []*autograd.Tensor) (outs []*autograd.Tensor, err error) {
	p.pool.Do(func() { outs, err = p.runLocked(inputs) })
	return outs, err
}

// runLocked is Run with p.mu held, on the calling thread.
func (p *Program) runLocked(inputs []*autograd.Tensor) ([]*autograd.Tensor, error) {
	pl, err := p.planFor(inputs)
	if err != nil {
		return nil, err
	}
	if err := pl.run(inputs); err != nil {
		return nil, err
	}
	return pl.outs, nil
}

// planFor checks inputs and returns their plan, planning them if they are
// new, and makes it the one tried first next time. p.mu must be held.
func (p *Program) planFor(inputs []*autograd.Tensor) (*plan, error) {
	if err := p.checkInputs(inputs); err != nil {
		return nil, err
	}
	pl, err := p.lookup(inputs)
	if err != nil {
		return nil, err
	}
	if pl == nil {
		if pl, err = p.plan(inputs); err != nil {
			return nil, err
		}
		p.plans = append(p.plans, pl)
	}
	p.last = pl
	return pl, nil
}

// checkInputs reports inputs that cannot be the graph's.
func (p *Program) checkInputs(inputs []*autograd.Tensor) error {
	g := p.g
	if len(inputs) != len(g.Inputs) {
		return fmt.Errorf("graph: got %d inputs, the graph takes %d", len(inputs), len(g.Inputs))
	}
	for i, id := range g.Inputs {
		in, v := inputs[i], &g.Values[id]
		switch {
		case in == nil:
			return fmt.Errorf("graph: input %d (%s) is nil", i, v.Name)
		case in.DType() != v.DType:
			return fmt.Errorf("graph: input %d (%s) has dtype %v, the graph takes %v", i, v.Name, in.DType(), v.DType)
		case in.NDim() != len(v.Shape):
			return fmt.Errorf("graph: input %d (%s) has shape %v, the graph takes a %d-D tensor like %v", i, v.Name, in.Shape(), len(v.Shape), v.Shape)
		}
	}
	return nil
}

// lookup returns the plan made for inputs of these types, or one resized
// to them that differed only in the sizes of free dimensions (the number
// of indices a lookup takes), or nil.
func (p *Program) lookup(inputs []*autograd.Tensor) (*plan, error) {
	if p.last != nil && p.last.fits(inputs, false) {
		return p.last, nil
	}
	for _, pl := range p.plans {
		if pl.fits(inputs, false) {
			return pl, nil
		}
	}
	for _, pl := range p.plans {
		if !pl.fits(inputs, true) {
			continue
		}
		if ok, err := p.resize(pl, inputs); err != nil || ok {
			return pl, err
		}
	}
	return nil, nil
}

// runEager runs every node through its eager (autograd) form: the
// reference the planned executor is tested against.
func (p *Program) runEager(inputs []*autograd.Tensor) ([]*autograd.Tensor, error) {
	vals, err := p.evalEager(inputs)
	if err != nil {
		return nil, err
	}
	outs := make([]*autograd.Tensor, len(p.g.Outputs))
	for i, o := range p.g.Outputs {
		outs[i] = vals[o]
	}
	return outs, nil
}

// evalEager is runEager returning every value of the graph, by index.
func (p *Program) evalEager(inputs []*autograd.Tensor) ([]*autograd.Tensor, error) {
	if err := p.checkInputs(inputs); err != nil {
		return nil, err
	}
	g := p.g
	vals := make([]*autograd.Tensor, len(g.Values))
	for i, id := range g.Inputs {
		// A view that records nothing, even for an input that requires
		// a gradient: the program computes, it does not train.
		vals[id] = autograd.NoGrad(inputs[i])
	}
	for id, t := range g.Consts {
		vals[id] = t
	}
	cur := -1
	err := g.catch(&cur, func() {
		func() {
			for i := range g.Nodes {
				cur = i
				n := &g.Nodes[i]
				args := make([]*autograd.Tensor, len(n.Inputs))
				for j, v := range n.Inputs {
					if v != None {
						args[j] = vals[v]
					}
				}
				res := p.impls[i].eager(p.impls[i].attrs, args)
				if len(res) != len(n.Outputs) {
					fail(autograd.ErrArgument, n.Op, "node %d gave %d results for %d outputs", i, len(res), len(n.Outputs))
				}
				for j, o := range n.Outputs {
					vals[o] = res[j]
				}
			}
		}()
	})
	if err != nil {
		return nil, err
	}
	return vals, nil
}

// catch runs f and turns a panic into an error naming node *at, the node
// running: an *autograd.Error of an op that rejects its operands, or any
// other panic, which the checks Compile makes should leave unreachable.
func (g *Graph) catch(at *int, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = g.panicError(*at, r)
		}
	}()
	f()
	return nil
}

// panicError is the error of a panic r raised by node i (by no node when
// i < 0).
func (g *Graph) panicError(i int, r any) error {
	err, ok := r.(error)
	if !ok {
		err = fmt.Errorf("%v", r)
	}
	if i < 0 {
		return fmt.Errorf("graph: %w", err)
	}
	return g.nodeError(i, "", err)
}

// run executes pl's steps on inputs, turning a panic of a kernel or of a
// node run eagerly into an error that names the node.
func (pl *plan) run(inputs []*autograd.Tensor) error {
	return pl.runWith(inputs, pl.exec)
}

// runWith is run with exec in place of runSteps: Profile's timed loop
// runs through it so it fails as Run does.
func (pl *plan) runWith(inputs []*autograd.Tensor, exec func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = pl.failure(r)
		}
	}()
	pl.cur = -1
	for i, in := range inputs {
		pl.ins[i].CopyFrom(in)
	}
	exec()
	return nil
}

// failure describes a panic raised while pl ran.
func (pl *plan) failure(r any) error {
	where := "copying the inputs"
	if pl.cur >= 0 {
		if i := pl.steps[pl.cur].node; i >= 0 {
			return pl.g.panicError(i, r)
		}
		where = "copying a constant output"
	}
	if err, ok := r.(error); ok {
		return fmt.Errorf("graph: %s: %w", where, err)
	}
	return fmt.Errorf("graph: %s: %v", where, r)
}
