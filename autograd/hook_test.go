package autograd

import (
	"slices"
	"testing"
)

// A gradient hook runs once per Backward, after the leaf's gradient is
// final and before the ops below the leaf's last consumer have run.
func TestGradHook(t *testing.T) {
	g := NewGenerator(1)
	x := Randn(g, 4, 3)
	w1 := Randn(g, 5, 3).SetRequiresGrad(true) // used by the first layer
	w2 := Randn(g, 2, 5).SetRequiresGrad(true) // and the second: final first
	b2 := Randn(g, 2).SetRequiresGrad(true)

	var fired []string
	var w2AtHook []float32
	w2Final := func(*Tensor) {
		if w2AtHook == nil && w1.Grad() != nil {
			t.Error("w1's gradient was ready before w2's hook ran, though w1 feeds an earlier layer")
		}
		fired = append(fired, "w2")
		w2AtHook = slices.Clone(w2.Grad().Float32s())
	}
	remove := w2.AddGradHook(w2Final)
	w1.AddGradHook(func(*Tensor) { fired = append(fired, "w1") })
	removeB := b2.AddGradHook(func(*Tensor) { fired = append(fired, "b2") })

	loss := func() *Tensor {
		h := Tanh(Linear(x, w1, nil))
		return Sum(Linear(h, w2, b2), nil, false)
	}
	loss().Backward()
	if want := []string{"b2", "w2", "w1"}; !slices.Equal(fired, want) && !slices.Equal(fired, []string{"w2", "b2", "w1"}) {
		t.Errorf("hooks ran in order %v, want w1 last of %v", fired, want)
	}
	if !slices.Equal(w2AtHook, w2.Grad().Float32s()) {
		t.Error("w2's gradient changed after its hook ran")
	}

	// Gradients accumulate across a second Backward; each hook runs again.
	fired = nil
	removeB()
	loss().Backward()
	if len(fired) != 2 {
		t.Errorf("second Backward ran hooks %v, want w2 and w1 once each", fired)
	}
	remove()
	fired = nil
	loss().Backward()
	if !slices.Equal(fired, []string{"w1"}) {
		t.Errorf("after removing w2's and b2's hooks ran %v", fired)
	}

	// A leaf that is itself the root.
	r := Scalar(2).SetRequiresGrad(true)
	n := 0
	r.AddGradHook(func(*Tensor) { n++ })
	r.Backward()
	if n != 1 || r.Grad().Float32s()[0] != 1 {
		t.Errorf("root leaf: hook ran %d times, gradient %v", n, r.Grad())
	}

	// A leaf used several times gets one call, with the sum.
	u := FromFloat32([]float32{3}, 1).SetRequiresGrad(true)
	var at float32
	u.AddGradHook(func(u *Tensor) { at = u.Grad().Float32s()[0]; n++ })
	n = 0
	Sum(Add(Mul(u, u), u), nil, false).Backward()
	if n != 1 || at != 7 {
		t.Errorf("leaf used thrice: %d calls, gradient %v at the hook, want 1 call and 7", n, at)
	}
}

func TestGradHookErrors(t *testing.T) {
	x := Scalar(1).SetRequiresGrad(true)
	y := Mul(x, x)
	if err := Try(func() { y.AddGradHook(func(*Tensor) {}) }); err == nil {
		t.Error("hook on a non-leaf: no error")
	}
	if err := Try(func() { x.AddGradHook(nil) }); err == nil {
		t.Error("nil hook: no error")
	}
}
