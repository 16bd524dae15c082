package autograd

import (
	"sync/atomic"
)

// node is one recorded operation on the tape: the tensors it read and the
// function that maps the gradient of its output to gradients of its inputs.
type node struct {
	op     string
	inputs []*Tensor
	// backward returns one gradient per input, nil where an input needs
	// none. It runs with gradient recording off.
	backward func(grad *Tensor) []*Tensor
}

// noGradDepth counts the NoGrad calls in progress. Grad mode is
// process-wide, not per goroutine: Go has no goroutine-local state, and
// Kiln's own parallelism lives below the tape, inside kernels.
var noGradDepth atomic.Int32

// GradEnabled reports whether operations are being recorded for autograd.
func GradEnabled() bool { return noGradDepth.Load() == 0 }

// NoGrad runs f with gradient recording off, like torch.no_grad: results of
// operations inside f do not require gradients.
func NoGrad(f func()) {
	noGradDepth.Add(1)
	defer noGradDepth.Add(-1)
	f()
}

// record attaches the op to out when grad mode is on and any input requires
// a gradient, and returns out. Every differentiable op builds its result
// through record; this is also the one place a tracer hooks in.
func record(op string, out *Tensor, inputs []*Tensor, backward func(grad *Tensor) []*Tensor) *Tensor {
	if !GradEnabled() {
		return out
	}
	for _, in := range inputs {
		if in != nil && in.requiresGrad {
			out.requiresGrad = true
			out.node = &node{op: op, inputs: inputs, backward: backward}
			return out
		}
	}
	return out
}

// RequiresGrad reports whether gradients flow to or through t.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// SetRequiresGrad marks a leaf tensor as requiring a gradient (or not) and
// returns it. Only floating-point leaves can require gradients.
func (t *Tensor) SetRequiresGrad(on bool) *Tensor {
	if t.node != nil {
		Fail("SetRequiresGrad", "tensor is the result of %s, not a leaf; use Detach first", t.node.op)
	}
	if on && !t.dtype.IsFloat() {
		Fail("SetRequiresGrad", "only floating-point tensors can require gradients, not %v", t.dtype)
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

// Grad returns the gradient accumulated into a leaf by Backward, or nil.
func (t *Tensor) Grad() *Tensor { return t.grad }

// SetGrad replaces t's gradient; nil clears it.
func (t *Tensor) SetGrad(g *Tensor) {
	if g != nil && (!sameShape(g.shape, t.shape) || g.dtype != t.dtype) {
		Fail("SetGrad", "gradient %v %v does not match tensor %v %v", g.shape, g.dtype, t.shape, t.dtype)
	}
	t.grad = g
}

// ZeroGrad drops t's gradient, as PyTorch's zero_grad(set_to_none=True)
// does.
func (t *Tensor) ZeroGrad() { t.grad = nil }

// Detach returns a tensor that shares t's data but is cut off from the
// tape and requires no gradient.
func (t *Tensor) Detach() *Tensor {
	return &Tensor{dtype: t.dtype, shape: cloneInts(t.shape), format: t.format, data: t.data}
}

// Backward computes the gradient of t with respect to every leaf that
// requires one and adds it to that leaf's Grad. With no argument t must hold
// one element and its gradient is 1; otherwise grad is dL/dt and must have
// t's shape and dtype.
func (t *Tensor) Backward(grad ...*Tensor) {
	if !t.requiresGrad {
		Fail("Backward", "tensor does not require grad and has no grad_fn")
	}
	var g *Tensor
	switch len(grad) {
	case 0:
		if t.Numel() != 1 {
			Fail("Backward", "grad can be implicitly created only for one-element outputs, got shape %v", t.shape)
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
			Fail("Backward", "gradient shape %v does not match output shape %v", g.shape, t.shape)
		}
		// Each op's backward reads the gradient in its output's dtype; a
		// mismatch would surface as a misleading error deep in the tape.
		if g.dtype != t.dtype {
			Fail("Backward", "gradient has dtype %v, output has dtype %v", g.dtype, t.dtype)
		}
	default:
		Fail("Backward", "takes at most one gradient, got %d", len(grad))
	}
	NoGrad(func() { runBackward(t, g) })
}

func runBackward(root, g *Tensor) {
	// Order the recorded tensors so each comes after every tensor that
	// consumed it, then push gradients from the root down.
	var order []*Tensor
	seen := map[*Tensor]bool{}
	type frame struct {
		t    *Tensor
		next int
	}
	stack := []frame{{t: root}}
	seen[root] = true
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.t.node == nil || f.next == len(f.t.node.inputs) {
			order = append(order, f.t)
			stack = stack[:len(stack)-1]
			continue
		}
		in := f.t.node.inputs[f.next]
		f.next++
		if in != nil && in.requiresGrad && !seen[in] {
			seen[in] = true
			stack = append(stack, frame{t: in})
		}
	}
	grads := map[*Tensor]*Tensor{root: g}
	for i := len(order) - 1; i >= 0; i-- {
		t := order[i]
		gt := grads[t]
		delete(grads, t)
		if gt == nil {
			continue
		}
		if t.node == nil {
			accumulateLeaf(t, gt)
			continue
		}
		ins := t.node.backward(gt)
		if len(ins) != len(t.node.inputs) {
			Fail(t.node.op, "backward returned %d gradients for %d inputs", len(ins), len(t.node.inputs))
		}
		for j, in := range t.node.inputs {
			gi := ins[j]
			if in == nil || !in.requiresGrad || gi == nil {
				continue
			}
			if !sameShape(gi.shape, in.shape) {
				Fail(t.node.op, "backward produced gradient of shape %v for input of shape %v", gi.shape, in.shape)
			}
			if prev := grads[in]; prev != nil {
				// A backward may hand the same tensor to several inputs, so
				// a sum is built in fresh memory rather than in prev.
				grads[in] = addInto(prev.reformat(prev.format), gi)
			} else {
				grads[in] = gi
			}
		}
	}
}

// accumulateLeaf adds g to leaf t's gradient, giving the gradient t's dtype
// and memory format so optimizers can walk parameter and gradient together.
func accumulateLeaf(t, g *Tensor) {
	if g.dtype != t.dtype {
		g = g.castTo(t.dtype)
	}
	if g.format != t.format {
		g = g.reformat(t.format)
	}
	if t.grad == nil {
		// The gradient tensor may be shared with the tape (an identity
		// backward passes its input through), so the leaf gets its own copy.
		t.grad = g.reformat(g.format)
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
		bd := b.data.([]float32)
		for i := range ad {
			ad[i] += bd[i]
		}
	case []uint16:
		// BF16 gradients are summed in float32 and rounded once.
		bd := b.data.([]uint16)
		for i := range ad {
			ad[i] = bf16Add(ad[i], bd[i])
		}
	default:
		Fail("Backward", "cannot accumulate %v gradients", a.dtype)
	}
	return a
}
