package autograd

import "github.com/kilnml/kiln/kernels"

// node is one recorded operation on the tape: where each of its inputs
// came from and the function that maps the gradient of its output to
// gradients of its inputs.
//
// A node does not hold its input tensors, only edges to the nodes (or
// leaves) that made them: an activation stays alive only while a backward
// closure that needs it does, as in PyTorch, not for as long as the graph.
type node struct {
	op     string
	inputs []edge
	// backward returns one gradient per input, nil where an input needs
	// none. It runs with gradient recording off, once: Backward drops it
	// afterwards, freeing what it saved.
	backward func(grad *Tensor) []*Tensor
	// keepsGrad says backward keeps its incoming gradient past its return
	// (for a node that runs later): Backward then never hands it back for
	// reuse itself, and sets gradFree first, true when nothing else holds
	// the gradient's memory, so the op may hand it back (releaseGrad, or
	// releaseSlice in the gradient's mode) once done with it.
	keepsGrad bool
	gradFree  bool
}

// edge is the origin of one input of a node. For an input that needs no
// gradient both pointers are nil; otherwise node is the op that made it, or
// leaf the leaf itself.
type edge struct {
	node  *node
	leaf  *Tensor
	shape []int
}

func (e edge) live() bool { return e.node != nil || e.leaf != nil }

// recordKeeping is record for a backward that keeps its incoming
// gradient past its return (see node.keepsGrad): the gradient's memory
// is the op's until it hands it back, or until the collector takes it.
func recordKeeping(op string, out *Tensor, inputs []*Tensor, backward func(grad *Tensor) []*Tensor) *Tensor {
	out = record(op, out, inputs, backward)
	if out.node != nil {
		out.node.keepsGrad = true
	}
	return out
}

// record attaches the op to out when any input requires a gradient and
// the op's mode (the union of its inputs' modes) records, and returns out,
// which takes that mode. Every differentiable op builds its result through
// record; this is also the one place a tracer hooks in.
func record(op string, out *Tensor, inputs []*Tensor, backward func(grad *Tensor) []*Tensor) *Tensor {
	return recordIn(Mode{}, op, out, inputs, backward)
}

// recordIn is record for an op running in mode m, which may add to its
// inputs' modes (an autocast cast runs in the mode of the op it serves).
func recordIn(m Mode, op string, out *Tensor, inputs []*Tensor, backward func(grad *Tensor) []*Tensor) *Tensor {
	m = m.union(modeOf(inputs...))
	out.mode = out.mode.union(m)
	traceRecorded(m, op, out)
	if m.noGrad {
		return out
	}
	var edges []edge
	for i, in := range inputs {
		if in == nil || !in.requiresGrad {
			continue
		}
		if edges == nil {
			edges = make([]edge, len(inputs))
		}
		edges[i] = edge{node: in.node, shape: in.shape}
		if in.node == nil {
			edges[i].leaf = in
		}
	}
	if edges != nil {
		out.requiresGrad = true
		out.node = &node{op: op, inputs: edges, backward: backward}
	}
	return out
}

// RequiresGrad reports whether gradients flow to or through t.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// SetRequiresGrad marks a leaf tensor as requiring a gradient (or not) and
// returns it. Only floating-point leaves can require gradients.
func (t *Tensor) SetRequiresGrad(on bool) *Tensor {
	if t.node != nil {
		failGrad("SetRequiresGrad", "tensor is the result of %s, not a leaf; use Detach first", t.node.op)
	}
	if on && !t.dtype.IsFloat() {
		failDType("SetRequiresGrad", "only floating-point tensors can require gradients, not %v", t.dtype)
	}
	t.requiresGrad = on
	return t
}

// IsLeaf reports whether t was made by the user rather than by a recorded
// operation.
func (t *Tensor) IsLeaf() bool { return t.node == nil }

// GradFn names the operation that produced t, or "" for a leaf.
func (t *Tensor) GradFn() string {
	if t.node == nil {
		return ""
	}
	return t.node.op
}

// Grad returns the dense gradient accumulated into a leaf by Backward, or
// nil. It is nil for a leaf whose gradient is sparse (see SparseGrad), so
// code that only understands dense gradients cannot mistake a handful of
// rows for the whole table.
func (t *Tensor) Grad() *Tensor { return t.grad }

// SetGrad replaces t's gradient, dense or sparse; nil clears it.
func (t *Tensor) SetGrad(g *Tensor) {
	if g != nil && (!sameShape(g.shape, t.shape) || g.dtype != t.dtype) {
		failShape("SetGrad", "gradient %v %v does not match tensor %v %v", g.shape, g.dtype, t.shape, t.dtype)
	}
	t.grad, t.sparseGrad = g, nil
}

// ZeroGrad drops t's gradient, dense or sparse, as PyTorch's
// zero_grad(set_to_none=True) does.
func (t *Tensor) ZeroGrad() { t.grad, t.sparseGrad = nil, nil }

// Detach returns a tensor that shares t's data but is cut off from the
// tape and requires no gradient. It also leaves a NoGrad computation: ops
// on it record again where their other operands require gradients (the
// features of a frozen backbone, detached, train the head they feed). It
// stays in t's autocast computation and, in a trace, is an Identity.
func (t *Tensor) Detach() *Tensor {
	v := t.detached()
	v.mode.noGrad = false
	traceIdentity(t, v)
	return v
}

// detached is Detach for autograd's own views, which a trace must not see.
func (t *Tensor) detached() *Tensor {
	return &Tensor{dtype: t.dtype, shape: cloneInts(t.shape), format: t.format, data: t.data, mode: t.mode}
}

// Backward computes the gradient of t with respect to every leaf that
// requires one and adds it to that leaf's Grad. With no argument t must hold
// one element and its gradient is 1; otherwise grad is dL/dt and must have
// t's shape and dtype.
//
// As in PyTorch, Backward frees the graph as it goes: what each op saved
// for its gradient is dropped once used, so a second Backward through the
// same ops fails. BackwardRetainGraph keeps the graph.
func (t *Tensor) Backward(grad ...*Tensor) { t.backward(false, grad) }

// BackwardRetainGraph is Backward that keeps the graph for another
// Backward, PyTorch's backward(retain_graph=True).
func (t *Tensor) BackwardRetainGraph(grad ...*Tensor) { t.backward(true, grad) }

func (t *Tensor) backward(retain bool, grad []*Tensor) {
	t.checkLive("Backward")
	if !t.requiresGrad {
		if t.mode.noGrad {
			failGrad("Backward", "tensor does not require grad: it was computed from a NoGrad computation's result (Detach a NoGrad result, such as a frozen model's output, before using it in a computation that trains)")
		}
		failGrad("Backward", "tensor does not require grad and has no grad_fn")
	}
	var g *Tensor
	switch len(grad) {
	case 0:
		if t.Numel() != 1 {
			failShape("Backward", "grad can be implicitly created only for one-element outputs, got shape %v", t.shape)
		}
		g = OnesLike(t)
		if t.dtype != Float32 {
			g = g.castTo(t.dtype)
		}
	case 1:
		g = grad[0]
		if g == nil {
			Fail("Backward", "gradient is nil (call Backward() with no argument for a one-element output)")
		}
		if !sameShape(g.shape, t.shape) {
			failShape("Backward", "gradient shape %v does not match output shape %v", g.shape, t.shape)
		}
		// Each op's backward reads the gradient in its output's dtype; a
		// mismatch would surface as a misleading error deep in the tape.
		if g.dtype != t.dtype {
			failDType("Backward", "gradient has dtype %v, output has dtype %v", g.dtype, t.dtype)
		}
	default:
		Fail("Backward", "takes at most one gradient, got %d", len(grad))
	}
	// The backward ops compute from g: marking it makes them record
	// nothing, whatever the modes of the tensors they saved.
	runBackward([]*Tensor{t}, []*Tensor{g.inMode(Mode{noGrad: true})}, retain, nil)
}

// Backward computes the gradients of several outputs at once, as PyTorch's
// torch.autograd.backward(tensors, grad_tensors) does: every leaf that
// requires a gradient gets the sum over the outputs of what grads[i], the
// gradient of outputs[i] (its shape and dtype), contributes through the
// graph, each op's backward running once. It spares a caller with several
// outputs and their gradients (the tables of one merged lookup, say) the
// concatenation or the weighted sum that would join them into one. The
// graph is freed as Tensor.Backward frees it.
func Backward(outputs, grads []*Tensor) {
	runBackward(outputs, outputGrads("Backward", outputs, grads, false), false, nil)
}

// outputGrads checks the gradients grads of outputs for op (Backward or
// Grad) and returns them marked to record nothing. With implied, a nil
// grads stands for ones, for outputs of one element each.
func outputGrads(op string, outputs, grads []*Tensor, implied bool) []*Tensor {
	if grads == nil && implied {
		grads = make([]*Tensor, len(outputs))
		for i, t := range outputs {
			if t != nil && t.Numel() != 1 {
				failShape(op, "output %d has shape %v: gradients can be implied only for one-element outputs", i, t.shape)
			}
			if t != nil {
				grads[i] = OnesLike(t)
				if t.dtype != Float32 {
					grads[i] = grads[i].castTo(t.dtype)
				}
			}
		}
	}
	if len(outputs) != len(grads) {
		Fail(op, "%d outputs but %d gradients", len(outputs), len(grads))
	}
	gs := make([]*Tensor, len(grads))
	for i, t := range outputs {
		switch g := grads[i]; {
		case t == nil || g == nil:
			Fail(op, "output %d or its gradient is nil", i)
		case !t.requiresGrad:
			failGrad(op, "output %d does not require grad", i)
		case !sameShape(g.shape, t.shape):
			failShape(op, "gradient %d has shape %v, output %d has shape %v", i, g.shape, i, t.shape)
		case g.dtype != t.dtype:
			failDType(op, "gradient %d has dtype %v, output %d has dtype %v", i, g.dtype, i, t.dtype)
		}
		g := grads[i]
		g.checkLive(op)
		gs[i] = g.inMode(Mode{noGrad: true})
	}
	return gs
}

// Grad returns the gradients of the outputs with respect to each of the
// inputs, as torch.autograd.grad(outputs, inputs, grad_outputs) does:
// gradOutputs[i] is the gradient of outputs[i] (its shape and dtype; nil
// gradOutputs means ones, for outputs of one element), and the result's
// i-th tensor is the gradient of inputs[i], in its dtype and memory
// format. Unlike Backward, Grad adds nothing to any leaf's Grad and runs
// no gradient hooks: it suits a gradient wanted for its own sake (with
// respect to an input, or inside a computation in an Arena, whose memory
// the gradients then share until Reset). Every input must require a
// gradient and lie on the outputs' graph. The graph is freed as Backward
// frees it.
func Grad(outputs, inputs, gradOutputs []*Tensor) []*Tensor {
	gs := outputGrads("Grad", outputs, gradOutputs, true)
	c := &gradCapture{leaves: map[*Tensor][]int{}, nodes: map[*node][]int{}, out: make([]*Tensor, len(inputs)), inputs: inputs}
	for i, t := range inputs {
		switch {
		case t == nil:
			Fail("Grad", "input %d is nil", i)
		case !t.requiresGrad:
			failGrad("Grad", "input %d does not require grad", i)
		case t.node == nil:
			c.leaves[t] = append(c.leaves[t], i)
		default:
			c.nodes[t.node] = append(c.nodes[t.node], i)
		}
	}
	runBackward(outputs, gs, false, c)
	for i, g := range c.out {
		if g == nil {
			failGrad("Grad", "input %d was not used in the graph of the outputs (or no gradient reached it)", i)
		}
	}
	return c.out
}

// gradCapture is what Grad asks of runBackward: the gradients of its
// inputs, kept instead of added to leaves.
type gradCapture struct {
	leaves map[*Tensor][]int // a leaf input's indices in inputs
	nodes  map[*node][]int   // the indices of the inputs a node made
	inputs []*Tensor
	out    []*Tensor
	// held are the gradients kept for non-leaf inputs: Backward must not
	// reuse their memory.
	held []*Tensor
}

// take keeps g, the final gradient of the inputs at idx (owned: memory no
// one else holds), in each input's dtype and format.
func (c *gradCapture) take(idx []int, g *Tensor, owned bool) {
	for _, i := range idx {
		t, gi := c.inputs[i], g
		if gi.dtype != t.dtype {
			gi, owned = gi.castTo(t.dtype), true
		}
		if gi.format != t.format {
			gi, owned = gi.reformat(t.format), true
		}
		if !owned {
			gi = gi.reformat(gi.format) // a copy of its own
		}
		c.out[i] = gi
		owned = false // a repeated input gets a copy
	}
}

// runBackward pushes each gradient gs[i] from roots[i] down to the leaves,
// adding it to their Grad, or, with c, keeping the gradients of c's inputs
// (Grad). The gs are the caller's: their memory is never adopted or
// reused.
func runBackward(roots, gs []*Tensor, retain bool, c *gradCapture) {
	// Order the recorded nodes so each comes after every node that
	// consumed its output, then push gradients from the roots down.
	var order []*node
	seen := map[*node]bool{}
	type frame struct {
		n    *node
		next int
	}
	var stack []frame
	grads := map[*node]*Tensor{}
	for i, root := range roots {
		if root.node == nil {
			switch {
			case c == nil:
				accumulateLeaf(root, gs[i], false)
				root.runGradHooks()
			case c.leaves[root] != nil:
				// The caller's gradient, copied; a root given twice
				// gets the sum.
				if prev := c.out[c.leaves[root][0]]; prev != nil {
					c.take(c.leaves[root], sumGrads(prev, gs[i]), true)
				} else {
					c.take(c.leaves[root], gs[i], false)
				}
			}
			continue
		}
		if prev := grads[root.node]; prev != nil {
			grads[root.node] = sumGrads(prev, gs[i])
			continue
		}
		grads[root.node] = gs[i]
		if seen[root.node] {
			continue // below a root ordered already
		}
		// One root at a time: a root below another is then ordered
		// after it whichever comes first.
		seen[root.node] = true
		stack = append(stack, frame{n: root.node})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(f.n.inputs) {
				order = append(order, f.n)
				stack = stack[:len(stack)-1]
				continue
			}
			in := f.n.inputs[f.next].node
			f.next++
			if in != nil && !seen[in] {
				seen[in] = true
				stack = append(stack, frame{n: in})
			}
		}
	}
	for _, n := range order {
		if n.backward == nil {
			failGrad("Backward", "the graph through %s was freed by an earlier Backward; run the forward pass again", n.op)
		}
	}
	callers := func(t *Tensor) bool {
		for _, g := range gs {
			if overlaps(t, g) {
				return true
			}
		}
		if c != nil {
			for _, g := range c.held {
				if overlaps(t, g) {
					return true
				}
			}
		}
		return false
	}
	// A leaf's gradient is final once the last node that feeds it has
	// run: it is accumulated then, not at the end, so a gradient hook
	// (data-parallel training's bucket allreduce) starts while the rest of
	// the backward pass runs, and the leaf's share of memory is settled
	// early.
	finals := make([][]*Tensor, len(order))
	lastUse := map[*Tensor]int{}
	for i, n := range order {
		for _, e := range n.inputs {
			if e.leaf != nil {
				if _, ok := lastUse[e.leaf]; !ok {
					lastUse[e.leaf] = i
					finals[i] = append(finals[i], e.leaf)
				}
			}
		}
	}
	leafGrads := map[*Tensor]*leafGrad{}
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		gn := grads[n]
		delete(grads, n)
		if gn == nil {
			// Every path from the root to n was cut by a backward that
			// returned no gradient for it.
			if !retain {
				n.backward = nil
			}
			continue
		}
		if c != nil && c.nodes[n] != nil {
			// An input of Grad: its gradient is complete now (every node
			// that used it has run). It becomes the caller's, so nothing
			// below reuses its memory; only the caller's own gradient is
			// copied.
			c.take(c.nodes[n], gn, !callers(gn))
			c.held = append(c.held, gn)
		}
		if n.keepsGrad {
			// The node's gradients never share gn's memory (its promise),
			// so what holds gn is known before it runs.
			n.gradFree = !callers(gn) && !stillHeld(gn, nil, grads, leafGrads)
		}
		ins := n.backward(gn)
		if !retain {
			n.backward = nil // free what the op saved, as PyTorch does
		}
		if len(ins) != len(n.inputs) {
			Fail(n.op, "backward returned %d gradients for %d inputs", len(ins), len(n.inputs))
		}
		for j, e := range n.inputs {
			gi := ins[j]
			if !e.live() || gi == nil {
				continue
			}
			if !sameShape(gi.shape, e.shape) {
				failShape(n.op, "backward produced gradient of shape %v for input of shape %v", gi.shape, e.shape)
			}
			if e.leaf != nil {
				lg := leafGrads[e.leaf]
				switch {
				case lg == nil:
					leafGrads[e.leaf] = &leafGrad{g: gi, owned: !callers(gi) && freshGrad(gi, j, ins, gn)}
				default:
					lg.g, lg.owned = sumGrads(lg.g, gi), true
				}
				continue
			}
			if prev := grads[e.node]; prev != nil {
				delete(grads, e.node)
				if prev.dtype == Float32 && gi.dtype == Float32 && prev.format == gi.format &&
					!callers(prev) && !overlaps(prev, gn) && !overlaps(prev, gi) && !stillHeld(prev, ins, grads, leafGrads) {
					// prev is memory only this sum holds: add in place.
					grads[e.node] = addInto(prev, gi)
					if !callers(gi) && freshGrad(gi, j, ins, gn) && !stillHeld(gi, nil, grads, leafGrads) {
						releaseGrad(gi) // added in: nothing refers to it any more
					}
				} else {
					grads[e.node] = sumGrads(prev, gi)
				}
			} else {
				grads[e.node] = gi
			}
		}
		if !n.keepsGrad && !callers(gn) && !stillHeld(gn, ins, grads, leafGrads) {
			releaseGrad(gn)
		}
		for _, l := range finals[i] {
			if lg := leafGrads[l]; lg != nil {
				delete(leafGrads, l)
				switch {
				case c == nil:
					accumulateLeaf(l, lg.g, lg.owned)
					l.runGradHooks()
				case c.leaves[l] != nil:
					c.take(c.leaves[l], lg.g, lg.owned)
				}
			}
		}
	}
}

type leafGrad struct {
	g *Tensor
	// owned: g is memory no one else holds (not the caller's gradient, nor
	// a pass-through of another op's), so the leaf may adopt it instead of
	// copying it.
	owned bool
}

// stillHeld reports whether gradient gn, just used by its node's backward,
// shares memory with a gradient that backward returned or that waits for
// another node or leaf; if not, nothing refers to it any more and its
// buffer can be reused.
func stillHeld(gn *Tensor, ins []*Tensor, grads map[*node]*Tensor, leaves map[*Tensor]*leafGrad) bool {
	for _, o := range ins {
		if o != nil && overlaps(gn, o) {
			return true
		}
	}
	for _, o := range grads {
		if overlaps(gn, o) {
			return true
		}
	}
	for _, o := range leaves {
		if overlaps(gn, o.g) {
			return true
		}
	}
	return false
}

// freshGrad reports whether ins[j], a gradient a backward returned for
// the incoming gradient gn, shares memory with neither gn nor another of
// the gradients it returned.
func freshGrad(gi *Tensor, j int, ins []*Tensor, gn *Tensor) bool {
	if overlaps(gi, gn) {
		return false
	}
	for k, o := range ins {
		if k != j && o != nil && overlaps(gi, o) {
			return false
		}
	}
	return true
}

// overlaps reports whether a and b's storage share any bytes: views of
// one array (a reshape passed through) do.
func overlaps(a, b *Tensor) bool {
	pa, na := a.storage()
	pb, nb := b.storage()
	return na > 0 && nb > 0 && pa < pb+nb && pb < pa+na
}

// sumGrads returns prev+g for two gradients of one tensor. A backward may
// hand the same tensor to several inputs, so the sum is built in fresh
// memory rather than in prev.
func sumGrads(prev, g *Tensor) *Tensor {
	// Same dtype and format: one pass on the workers into a new tensor.
	// Copying prev first ran serially, the other threads idle (a tenth of
	// a 2-thread BF16 ResNet-50 step's serial time).
	if g.dtype == prev.dtype && g.format == prev.format {
		switch prev.dtype {
		case Float32:
			sum := gradLike(prev)
			kernels.Binary(kernels.BinAdd, sum.Float32s(), prev.Float32s(), g.Float32s())
			return sum
		case BFloat16:
			// Summed in float32 and rounded once, as addInto sums.
			sum := bf16GradLike(prev)
			kernels.BinaryBF16(kernels.BinAdd, sum.BFloat16s(), prev.BFloat16s(), g.BFloat16s())
			return sum
		}
	}
	if prev.dtype == Float32 {
		sum := gradLike(prev)
		copy(sum.Float32s(), prev.Float32s())
		return addInto(sum, g)
	}
	return addInto(prev.reformat(prev.format), g)
}

// accumulateLeaf adds g to leaf t's gradient, giving the gradient t's dtype
// and memory format so optimizers can walk parameter and gradient together.
// A g the tape alone holds (owned) becomes the gradient itself.
func accumulateLeaf(t, g *Tensor, owned bool) {
	if t.sparseGrad != nil {
		errMixedDense(t)
	}
	if g.dtype != t.dtype {
		g, owned = g.castTo(t.dtype), true
	}
	if g.format != t.format {
		g, owned = g.reformat(t.format), true
	}
	if t.grad == nil {
		switch {
		case g.mode.arena != nil:
			// A leaf's gradient outlives the step; an arena's memory
			// does not.
			g = heapCopy(g)
		case !owned:
			// The gradient may be the caller's or pass through the tape
			// (an identity backward), so the leaf gets its own copy.
			g = g.reformat(g.format)
		}
		t.grad = g
		return
	}
	t.grad = addInto(t.grad, g)
}

// addInto returns a+b for same-shape tensors, writing into a (which the
// caller owns) when the formats agree.
func addInto(a, b *Tensor) *Tensor {
	if b.dtype != a.dtype {
		b = b.castTo(a.dtype)
	}
	if b.format != a.format {
		b = b.reformat(a.format)
	}
	switch ad := a.data.(type) {
	case []float32:
		kernels.Binary(kernels.BinAdd, ad, ad, b.data.([]float32))
	case []uint16:
		// BF16 gradients are summed in float32 and rounded once.
		kernels.BinaryBF16(kernels.BinAdd, ad, ad, b.data.([]uint16))
	default:
		failDType("Backward", "cannot accumulate %v gradients", a.dtype)
	}
	return a
}
