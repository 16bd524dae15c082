package autograd

// gradHook is one function registered by AddGradHook; its address is its
// identity, so removing one of two equal functions removes the right one.
type gradHook struct{ fn func(*Tensor) }

// AddGradHook registers fn to run when a Backward has finished adding to
// leaf t's dense gradient, PyTorch's register_post_accumulate_grad_hook:
// fn(t) runs inside Backward, on Backward's goroutine, as soon as the
// last op that feeds t has run, while the ops below it have still to
// run, and t.Grad() then holds the gradient accumulated so far. It runs
// once per Backward that gives t a dense gradient, hooks in the order
// they were added. Data-parallel training uses it to start reducing a
// group of gradients while the rest of the backward pass computes.
//
// The returned function removes the hook. t must be a leaf.
func (t *Tensor) AddGradHook(fn func(t *Tensor)) (remove func()) {
	if t.node != nil {
		failGrad("AddGradHook", "tensor is the result of %s, not a leaf", t.node.op)
	}
	if fn == nil {
		Fail("AddGradHook", "hook is nil")
	}
	h := &gradHook{fn}
	t.gradHooks = append(t.gradHooks, h)
	return func() {
		for i, o := range t.gradHooks {
			if o == h {
				t.gradHooks = append(t.gradHooks[:i:i], t.gradHooks[i+1:]...)
				return
			}
		}
	}
}

func (t *Tensor) runGradHooks() {
	for _, h := range t.gradHooks {
		h.fn(t)
	}
}
