package graph

import (
	"fmt"
	"math"
	"slices"

	"github.com/kilnml/kiln/autograd"
	"gorgonia.org/tensor"
)

// sig is the type of one value in a plan: what the eager run gave it.
type sig struct {
	dtype  autograd.DType
	format autograd.MemoryFormat
	shape  []int
}

func sigOf(t *autograd.Tensor) sig {
	return sig{dtype: t.DType(), format: t.Format(), shape: t.Shape()}
}

func (s sig) equal(o sig) bool {
	return s.dtype == o.dtype && s.format == o.format && slices.Equal(s.shape, o.shape)
}

func (s sig) numel() int {
	n := 1
	for _, d := range s.shape {
		n *= d
	}
	return n
}

// step is one node's work in a plan.
type step struct {
	node int // -1 for the copy of a constant output
	fn   func()
}

// plan is a graph laid out for one signature of inputs: every value bound
// to storage and every node to the function that computes it there.
type plan struct {
	g     *Graph
	key   []sig              // the inputs' types
	ins   []*autograd.Tensor // where Run copies the inputs
	outs  []*autograd.Tensor // the graph's outputs, returned by Run
	vals  []*autograd.Tensor // every value, by index
	steps []step
	cur   int    // the step running, for error messages; -1 before the first
	exec  func() // runSteps, bound once so a run allocates no closure

	eager   []int // nodes with no compiled form for these operands
	views   []int // nodes whose result is their input's storage: no step
	folded  []int // nodes that read only constants, run once when planned: no step
	buffers int   // blocks of storage the values share

	// free[i][d] marks a dimension of input i that no other value's type
	// depends on (the number of indices of an embedding lookup): inputs
	// that differ from key only there reuse the plan (resize). Such an
	// input has storage of its own, grown as needed, and readers[i] are
	// the steps that read it, bound again when its size changes.
	free    [][]bool
	readers [][]int
	own     []any  // the storage of each input with free dimensions
	types   []sig  // every value's type as inferred from key
	static  []bool // the planner's static values
}

// fits reports whether inputs have the types pl was made for, all but
// the sizes of free dimensions when loose is set. It allocates nothing:
// it runs before every run.
func (pl *plan) fits(inputs []*autograd.Tensor, loose bool) bool {
	for i, in := range inputs {
		k := &pl.key[i]
		if in.DType() != k.dtype || in.Format() != k.format || in.NDim() != len(k.shape) {
			return false
		}
		for d, n := range k.shape {
			if in.Dim(d) != n && !(loose && pl.free[i] != nil && pl.free[i][d]) {
				return false
			}
		}
	}
	return true
}

func (pl *plan) runSteps() {
	for i := range pl.steps {
		pl.cur = i
		pl.steps[i].fn()
	}
}

// pinned is the pending-read count of a buffer that holds a graph output:
// it is never released.
const pinned = math.MaxInt / 2

// buffer is one block of storage that values take turns in.
type buffer struct {
	dtype   autograd.DType
	size    int // elements: the most any value placed in it needs
	pending int // reads still to come of the values placed in it
	free    bool
	data    any
}

// planner assigns storage to a graph's values for one input signature.
type planner struct {
	g     *Graph
	types []sig
	uses  []int  // reads of each value
	out   []bool // graph outputs
	// static marks constants and the results of nodes that read only
	// static values (a cast of a weight, say): the plan computes those
	// once, when it is made, and never again.
	static []bool
	// own marks inputs with storage of their own, never shared: a plan
	// may replace it to fit more elements (see plan.free).
	own   []bool
	buf   []int // value → buffer; -1 for constants
	bufs  []*buffer
	alias []bool // nodes whose result shares their input's storage and need no step
}

// plan makes the plan for inputs: it runs the graph eagerly once to learn
// every value's type, assigns storage by lifetime and compiles the nodes.
func (p *Program) plan(inputs []*autograd.Tensor) (*plan, error) {
	g := p.g
	// The inputs' sizes may differ from those Compile checked: bound the
	// memory for these before the eager run allocates it.
	key := make([]sig, len(inputs))
	for i, in := range inputs {
		key[i] = sigOf(in)
	}
	types, err := g.inferTypes(p.impls, key, nil)
	if err != nil {
		return nil, err
	}
	if err := g.checkBudget(types, p.budget); err != nil {
		return nil, err
	}
	vals, err := p.evalEager(inputs)
	if err != nil {
		return nil, err
	}
	pr := &planner{g: g, types: make([]sig, len(g.Values)), uses: make([]int, len(g.Values)), out: make([]bool, len(g.Values))}
	for v, t := range vals {
		if t == nil {
			return nil, fmt.Errorf("graph: value %s was not computed", g.Values[v].Name)
		}
		pr.types[v] = sigOf(t)
	}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			if v != None {
				pr.uses[v]++
			}
		}
	}
	for _, o := range g.Outputs {
		pr.out[o] = true
	}
	pr.static = make([]bool, len(g.Values))
	for v := range g.Consts {
		pr.static[v] = true
	}
	for _, n := range g.Nodes {
		static := true
		for _, v := range n.Inputs {
			static = static && (v == None || pr.static[v])
		}
		for _, o := range n.Outputs {
			pr.static[o] = static
		}
	}
	free := g.freeDims(p.impls, key, types)
	pr.own = make([]bool, len(g.Values))
	for i, f := range free {
		pr.own[g.Inputs[i]] = f != nil
	}
	pr.assign()
	pl := &plan{g: g, key: key, cur: -1, buffers: len(pr.bufs), free: free, types: types, static: pr.static}
	pl.exec = pl.runSteps
	pl.vals = make([]*autograd.Tensor, len(g.Values))
	for v := range g.Values {
		if pr.static[v] {
			// The eager run's value, which nothing writes to.
			pl.vals[v] = vals[v]
			continue
		}
		t, err := wrap(pr.types[v], pr.bufs[pr.buf[v]].data)
		if err != nil {
			return nil, fmt.Errorf("graph: value %s: %w", g.Values[v].Name, err)
		}
		pl.vals[v] = t
	}
	pl.own = make([]any, len(g.Inputs))
	for i, id := range g.Inputs {
		pl.ins = append(pl.ins, pl.vals[id])
		if free[i] != nil {
			pl.own[i] = pr.bufs[pr.buf[id]].data
		}
	}
	for i := range g.Nodes {
		if pr.alias[i] {
			pl.views = append(pl.views, i)
			continue
		}
		if len(g.Nodes[i].Outputs) > 0 && pr.static[g.Nodes[i].Outputs[0]] {
			pl.folded = append(pl.folded, i)
			continue
		}
		fn, compiled, err := p.compileNode(i, pl.vals, pr.static)
		if err != nil {
			return nil, err
		}
		if !compiled {
			pl.eager = append(pl.eager, i)
		}
		pl.steps = append(pl.steps, step{node: i, fn: fn})
	}
	pl.readers = make([][]int, len(g.Inputs))
	for k, st := range pl.steps {
		for i, id := range g.Inputs {
			if free[i] != nil && slices.Contains(g.Nodes[st.node].Inputs, id) {
				pl.readers[i] = append(pl.readers[i], k)
			}
		}
	}
	for _, o := range g.Outputs {
		t := pl.vals[o]
		if pr.static[o] {
			// A constant output is copied so the caller cannot write to
			// the graph's constant through it.
			c, err := wrap(pr.types[o], makeData(pr.types[o].dtype, pr.types[o].numel()))
			if err != nil {
				return nil, err
			}
			src := t
			pl.steps = append(pl.steps, step{node: -1, fn: func() { c.CopyFrom(src) }})
			t = c
		}
		pl.outs = append(pl.outs, t)
	}
	return pl, nil
}

// compileNode returns the function that computes node i on the plan's
// storage: its compiled form where it has one that accepts these operands,
// else its eager form followed by a copy into its planned results.
func (p *Program) compileNode(i int, vals []*autograd.Tensor, static []bool) (fn func(), compiled bool, err error) {
	g := p.g
	n := &g.Nodes[i]
	ins := make([]*autograd.Tensor, len(n.Inputs))
	c := &compileCtx{consts: make([]bool, len(n.Inputs))}
	for j, v := range n.Inputs {
		if v != None {
			ins[j] = vals[v]
			c.consts[j] = static[v]
		}
	}
	outs := make([]*autograd.Tensor, len(n.Outputs))
	for j, o := range n.Outputs {
		outs[j] = vals[o]
	}
	err = g.catch(&i, func() {
		fn = compileOp(c, p.impls[i], ins, outs)
	})
	if err != nil {
		return nil, false, err
	}
	if fn != nil {
		return fn, true, nil
	}
	op := p.impls[i]
	return func() {
		res := op.eager(op.attrs, ins)
		for j, r := range res {
			outs[j].CopyFrom(r)
		}
	}, false, nil
}

// assign places every value in a buffer: static values nowhere, a reshape or
// identity of a value in that value's buffer, an elementwise result in
// the buffer of an operand of its type that no later node reads, anything
// else in a free buffer of its dtype, the smallest big enough or else the
// largest, grown. A buffer is free once the values in it have been read
// for the last time; graph outputs' buffers never are.
func (pr *planner) assign() {
	g := pr.g
	pr.buf = make([]int, len(g.Values))
	for v := range pr.buf {
		pr.buf[v] = -1
	}
	pr.alias = make([]bool, len(g.Nodes))
	place := func(v, b int) {
		pr.buf[v] = b
		if pr.out[v] {
			pr.bufs[b].pending += pinned
		}
		pr.bufs[b].pending += pr.uses[v]
		pr.bufs[b].size = max(pr.bufs[b].size, pr.types[v].numel())
	}
	for _, v := range g.Inputs {
		if pr.own[v] {
			pr.bufs = append(pr.bufs, &buffer{dtype: pr.types[v].dtype, pending: pinned})
			place(v, len(pr.bufs)-1)
			continue
		}
		place(v, pr.alloc(pr.types[v]))
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if len(n.Outputs) > 0 && pr.static[n.Outputs[0]] {
			continue
		}
		for j, o := range n.Outputs {
			if j == 0 {
				if in, ok := pr.aliasOf(n); ok {
					pr.alias[i] = true
					place(o, pr.buf[in])
					continue
				}
				if in, ok := pr.inPlace(n); ok {
					place(o, pr.buf[in])
					continue
				}
			}
			place(o, pr.alloc(pr.types[o]))
		}
		for _, v := range n.Inputs {
			if v != None && !pr.static[v] {
				pr.release(pr.buf[v], 1)
			}
		}
		for _, o := range n.Outputs {
			pr.release(pr.buf[o], 0)
		}
	}
	for _, b := range pr.bufs {
		b.data = makeData(b.dtype, b.size)
	}
}

// release counts reads of buffer b done and frees it when none are left.
func (pr *planner) release(b, reads int) {
	buf := pr.bufs[b]
	buf.pending -= reads
	if buf.pending == 0 && !buf.free {
		buf.free = true
	}
}

// alloc takes a free buffer for a value of type t, or makes one.
func (pr *planner) alloc(t sig) int {
	n := t.numel()
	best, largest := -1, -1
	for i, b := range pr.bufs {
		if !b.free || b.dtype != t.dtype {
			continue
		}
		if b.size >= n && (best < 0 || b.size < pr.bufs[best].size) {
			best = i
		}
		if largest < 0 || b.size > pr.bufs[largest].size {
			largest = i
		}
	}
	if best < 0 {
		best = largest
	}
	if best < 0 {
		pr.bufs = append(pr.bufs, &buffer{dtype: t.dtype})
		best = len(pr.bufs) - 1
	}
	b := pr.bufs[best]
	b.free, b.pending = false, 0
	return best
}

// aliasOf reports whether n's result can be its input's storage seen with
// another shape: a reshape of a row-major value, or an identity. Graph
// outputs and constants are never shared this way, so a result the caller
// holds is never the graph's constant or another result's storage.
func (pr *planner) aliasOf(n *Node) (int, bool) {
	if len(n.Inputs) != 1 || len(n.Outputs) != 1 {
		return 0, false
	}
	in, o := n.Inputs[0], n.Outputs[0]
	if in == None || pr.static[in] || pr.out[o] {
		return 0, false
	}
	x, y := pr.types[in], pr.types[o]
	switch n.Op {
	case "Identity", "Dropout", "Clone":
		return in, x.equal(y)
	case "Reshape", "Flatten":
		rowMajor := rowMajorOrder(x) && y.format == autograd.Contiguous
		sameLayout := slices.Equal(x.shape, y.shape) && x.format == y.format
		return in, x.dtype == y.dtype && x.numel() == y.numel() && (rowMajor || sameLayout)
	}
	return 0, false
}

// rowMajorOrder reports whether values of type s lie in memory in
// row-major order of their shape: contiguous, or channels-last with one
// channel or with every spatial size 1 (the [N, C, 1, 1] a global pool
// leaves), where both orders agree.
func rowMajorOrder(s sig) bool {
	if s.format == autograd.Contiguous {
		return true
	}
	if len(s.shape) < 2 || s.shape[1] == 1 {
		return true
	}
	for _, d := range s.shape[2:] {
		if d != 1 {
			return false
		}
	}
	return true
}

// inPlaceOps are the ops whose compiled forms may write their result over
// an operand of the result's type (the kernels allow dst == src).
var inPlaceOps = map[string]bool{
	"ReLU": true, "Sigmoid": true, "Tanh": true, "SiLU": true, "HardTanh": true, "Clamp": true, "ELU": true, "GELU": true,
	"Neg": true, "Exp": true, "Log": true, "Sqrt": true, "Pow": true, "AddScalar": true, "MulScalar": true,
	"Add": true, "Sub": true, "Mul": true, "Div": true, "BatchNorm": true,
}

// inPlace picks an operand of n whose buffer n's result can take over: one
// of the result's type, in a buffer no later node reads.
func (pr *planner) inPlace(n *Node) (int, bool) {
	if !inPlaceOps[n.Op] || len(n.Outputs) != 1 || pr.out[n.Outputs[0]] {
		return 0, false
	}
	operands := n.Inputs[:1]
	if n.Op == "Add" || n.Op == "Sub" || n.Op == "Mul" || n.Op == "Div" {
		operands = n.Inputs[:2]
	}
	for _, in := range operands {
		if in == None || pr.static[in] || !pr.types[in].equal(pr.types[n.Outputs[0]]) {
			continue
		}
		b := pr.buf[in]
		reads := 0
		for _, v := range n.Inputs {
			if v != None && pr.buf[v] == b && !pr.static[v] {
				reads++
			}
		}
		if pr.bufs[b].pending == reads {
			return in, true
		}
	}
	return 0, false
}

// makeData allocates n elements of dtype.
func makeData(dtype autograd.DType, n int) any {
	switch dtype {
	case autograd.Float32:
		return make([]float32, n)
	case autograd.BFloat16:
		return make([]uint16, n)
	case autograd.Int8:
		return make([]int8, n)
	case autograd.Uint8:
		return make([]uint8, n)
	case autograd.Int32:
		return make([]int32, n)
	case autograd.Int64:
		return make([]int64, n)
	}
	panic(fmt.Sprintf("graph: unknown dtype %v", dtype))
}

// wrap returns a tensor of type t over the first elements of data, which
// it shares. Tensors have no constructor taking a memory format, so a
// channels-last one is made as autograd.FromDense takes it: the physical
// NHWC array viewed through a transpose.
func wrap(t sig, data any) (*autograd.Tensor, error) {
	n := t.numel()
	switch d := data.(type) {
	case []float32:
		data = d[:n:n]
	case []uint16:
		data = d[:n:n]
	case []int8:
		data = d[:n:n]
	case []uint8:
		data = d[:n:n]
	case []int32:
		data = d[:n:n]
	case []int64:
		data = d[:n:n]
	}
	var order []int
	switch t.format {
	case autograd.ChannelsLast:
		order = []int{0, 2, 3, 1}
	case autograd.ChannelsLast3d:
		order = []int{0, 2, 3, 4, 1}
	}
	if order == nil {
		return autograd.FromDense(tensor.New(tensor.WithShape(t.shape...), tensor.WithBacking(data)))
	}
	phys := make([]int, len(order))
	inv := make([]int, len(order))
	for i, d := range order {
		phys[i] = t.shape[d]
		inv[d] = i
	}
	d := tensor.New(tensor.WithShape(phys...), tensor.WithBacking(data))
	if err := d.T(inv...); err != nil {
		return nil, err
	}
	return autograd.FromDense(d)
}

// freeDims returns, for each input of a graph whose inputs have the types
// key and whose values then have the types types, the dimensions no other
// value's type depends on (nil for an input with none): those that can
// grow by one leaving every other type as it is. Graph outputs and inputs
// listed twice do not qualify: a plan gives a resized input new storage
// and binds its readers again, which nothing else may see. A growth by
// one that changes nothing may still be a size that does (a stride 2
// pool): resize checks each actual size.
func (g *Graph) freeDims(impls []nodeOp, key, types []sig) [][]bool {
	free := make([][]bool, len(g.Inputs))
	for i, id := range g.Inputs {
		if isOutput(g, id) || slices.Contains(g.Inputs[:i], id) {
			continue
		}
		for d := range key[i].shape {
			k := slices.Clone(key)
			k[i].shape = slices.Clone(k[i].shape)
			k[i].shape[d]++
			grown, err := g.inferTypes(impls, k, nil)
			if err != nil || !sameTypesBut(grown, types, id) {
				continue
			}
			if free[i] == nil {
				free[i] = make([]bool, len(key[i].shape))
			}
			free[i][d] = true
		}
	}
	return free
}

// sameTypesBut reports whether a and b agree on every value but v.
func sameTypesBut(a, b []sig, v int) bool {
	for u := range a {
		if u != v && !a[u].equal(b[u]) {
			return false
		}
	}
	return true
}

// resize fits pl to inputs, which pl fits but for the sizes of free
// dimensions, and reports whether it could: when inputs give every other
// value its type in pl, the inputs that differ get storage of their new
// types (kept when big enough) and their readers are bound to it again.
// The plan keeps its storage and its constants' preparation. It
// allocates, as the binding of the readers does, but nothing sized by the
// other values. On an error pl is as it was.
func (p *Program) resize(pl *plan, inputs []*autograd.Tensor) (bool, error) {
	g := p.g
	key := slices.Clone(pl.key)
	changed := false
	for i, in := range inputs {
		if pl.free[i] != nil && !slices.Equal(key[i].shape, in.Shape()) {
			key[i].shape = in.Shape()
			changed = true
		}
	}
	if !changed {
		return true, nil
	}
	types := slices.Clone(pl.types)
	resized := make([]bool, len(g.Values))
	for i, id := range g.Inputs {
		types[id] = key[i]
		resized[id] = pl.free[i] != nil && !slices.Equal(pl.key[i].shape, key[i].shape)
	}
	// Only the nodes that read a resized input see the change: when their
	// results keep their types, so does every other value. A reader
	// without a step of its own (a view) cannot be bound again.
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if !slices.ContainsFunc(n.Inputs, func(v int) bool { return v != None && resized[v] }) {
			continue
		}
		if !slices.ContainsFunc(pl.steps, func(st step) bool { return st.node == i }) {
			return false, nil
		}
		ins := make([]*sig, len(n.Inputs))
		for j, v := range n.Inputs {
			if v != None {
				ins[j] = &types[v]
			}
		}
		outs, err := p.impls[i].infer(p.impls[i].attrs, ins)
		if err != nil || len(outs) != len(n.Outputs) {
			return false, nil // planning them fails with the error
		}
		for j, o := range n.Outputs {
			if !outs[j].equal(types[o]) {
				return false, nil
			}
		}
	}
	if err := g.checkBudget(types, p.budget); err != nil {
		return false, err
	}
	// The new storage and bindings are made aside and kept only when all
	// of them are: a failure leaves pl as it was.
	vals, own := slices.Clone(pl.vals), slices.Clone(pl.own)
	var nodes []int
	for i, id := range g.Inputs {
		if pl.free[i] == nil || slices.Equal(pl.key[i].shape, key[i].shape) {
			continue
		}
		s := key[i]
		if n, c := s.numel(), sliceLen(own[i]); n > c {
			own[i] = makeData(s.dtype, max(n, 2*c))
		}
		t, err := wrap(s, own[i])
		if err != nil {
			return false, fmt.Errorf("graph: input %s: %w", g.Values[id].Name, err)
		}
		vals[id] = t
		for _, k := range pl.readers[i] {
			if !slices.Contains(nodes, k) {
				nodes = append(nodes, k)
			}
		}
	}
	fns := make([]func(), len(nodes))
	compiled := make([]bool, len(nodes))
	for j, k := range nodes {
		var err error
		if fns[j], compiled[j], err = p.compileNode(pl.steps[k].node, vals, pl.static); err != nil {
			return false, err
		}
	}
	for j, k := range nodes {
		node := pl.steps[k].node
		pl.steps[k].fn = fns[j]
		pl.eager = slices.DeleteFunc(pl.eager, func(n int) bool { return n == node })
		if !compiled[j] {
			pl.eager = append(pl.eager, node)
		}
	}
	for i, id := range g.Inputs {
		pl.ins[i] = vals[id]
	}
	pl.vals, pl.own = vals, own
	pl.key, pl.types = key, types
	return true, nil
}

// sliceLen is the length of a slice makeData made.
func sliceLen(data any) int {
	switch d := data.(type) {
	case []float32:
		return len(d)
	case []uint16:
		return len(d)
	case []int8:
		return len(d)
	case []uint8:
		return len(d)
	case []int32:
		return len(d)
	case []int64:
		return len(d)
	}
	return 0
}
