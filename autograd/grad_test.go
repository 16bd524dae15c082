package autograd_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// TestGrad checks autograd.Grad against Backward on the same graphs: the
// same gradients for leaf inputs, the gradient of an intermediate as the
// gradient its consumers pass down, and no leaf's Grad touched.
func TestGrad(t *testing.T) {
	vec := func(v ...float32) *autograd.Tensor { return autograd.FromFloat32(v, len(v)) }
	dy := vec(1, -2, 0.5)
	for _, c := range []struct {
		name string
		f    func(x, w *autograd.Tensor) (y, mid *autograd.Tensor)
	}{
		{"product", func(x, w *autograd.Tensor) (*autograd.Tensor, *autograd.Tensor) {
			m := autograd.Mul(x, w)
			return autograd.Mul(m, m), m
		}},
		{"branches", func(x, w *autograd.Tensor) (*autograd.Tensor, *autograd.Tensor) {
			m := autograd.Exp(x)
			return autograd.Add(autograd.Mul(m, w), autograd.Mul(m, x)), m
		}},
		{"pass-through", func(x, w *autograd.Tensor) (*autograd.Tensor, *autograd.Tensor) {
			m := autograd.Reshape(autograd.Add(x, w), 3)
			return autograd.Reshape(m, 3), m
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x, w := vec(0.5, -1, 2).SetRequiresGrad(true), vec(3, 0.25, -1).SetRequiresGrad(true)
			y, _ := c.f(x, w)
			y.Backward(dy)
			wantX, wantW := x.Grad().Float32s(), w.Grad().Float32s()

			x2, w2 := vec(0.5, -1, 2).SetRequiresGrad(true), vec(3, 0.25, -1).SetRequiresGrad(true)
			y2, m2 := c.f(x2, w2)
			g := autograd.Grad([]*autograd.Tensor{y2}, []*autograd.Tensor{x2, w2, m2, x2}, []*autograd.Tensor{dy})
			if len(g) != 4 {
				t.Fatalf("%d gradients for 4 inputs", len(g))
			}
			if fmt.Sprint(g[0].Float32s(), g[1].Float32s()) != fmt.Sprint(wantX, wantW) {
				t.Errorf("gradients %v %v, want %v %v", g[0].Float32s(), g[1].Float32s(), wantX, wantW)
			}
			if fmt.Sprint(g[3].Float32s()) != fmt.Sprint(wantX) {
				t.Errorf("repeated input's gradient %v, want %v", g[3].Float32s(), wantX)
			}
			if x2.Grad() != nil || w2.Grad() != nil {
				t.Error("Grad added to a leaf's Grad")
			}
			if fmt.Sprint(dy.Float32s()) != "[1 -2 0.5]" {
				t.Errorf("the caller's gradient changed: %v", dy.Float32s())
			}
			// Writing into one result changes no other, nor the caller's.
			g[0].Float32s()[0] = 99
			if g[3].Float32s()[0] == 99 || dy.Float32s()[0] == 99 {
				t.Error("results share memory")
			}
		})
	}
}

// TestGradIntermediate checks the gradient of a non-leaf input against its
// definition: y = Σ m·m for m = 3x has dy/dm = 2m.
func TestGradIntermediate(t *testing.T) {
	x := autograd.FromFloat32([]float32{1, -2, 4}, 3).SetRequiresGrad(true)
	m := autograd.Mul(x, autograd.Scalar(3))
	y := autograd.Sum(autograd.Mul(m, m), nil, false)
	g := autograd.Grad([]*autograd.Tensor{y}, []*autograd.Tensor{m, x}, nil)
	if got := fmt.Sprint(g[0].Float32s(), g[1].Float32s()); got != "[6 -12 24] [18 -36 72]" {
		t.Errorf("gradients %s, want [6 -12 24] [18 -36 72]", got)
	}
}

// TestGradFormat checks that a gradient comes in its input's dtype and
// memory format, as Backward leaves a leaf's.
func TestGradFormat(t *testing.T) {
	x := autograd.Ones(1, 3, 2, 2).To(autograd.ChannelsLast).SetRequiresGrad(true)
	y := autograd.Sum(autograd.ReLU(x), nil, false)
	g := autograd.Grad([]*autograd.Tensor{y}, []*autograd.Tensor{x}, nil)[0]
	if g.Format() != autograd.ChannelsLast || g.DType() != autograd.Float32 || fmt.Sprint(g.Shape()) != "[1 3 2 2]" {
		t.Errorf("gradient %v %v %v, want float32 channels_last [1 3 2 2]", g.DType(), g.Format(), g.Shape())
	}
}

// TestGradInArena checks Grad inside an arena's step: the gradients of the
// computation without one, and dead after Reset.
func TestGradInArena(t *testing.T) {
	x := autograd.FromFloat32([]float32{0.5, -1, 2, 3}, 2, 2).SetRequiresGrad(true)
	w := autograd.FromFloat32([]float32{1, 2}, 2).SetRequiresGrad(true)
	dy := autograd.FromFloat32([]float32{1, -1, 0.5, 2}, 2, 2)
	f := func(x *autograd.Tensor) *autograd.Tensor {
		return autograd.LayerNorm(x, []int{2}, w, nil, 1e-5)
	}
	want := autograd.Grad([]*autograd.Tensor{f(x)}, []*autograd.Tensor{x, w}, []*autograd.Tensor{dy})
	arena := autograd.NewArena(0)
	for step := range 2 {
		xa := arena.In(x)
		got := autograd.Grad([]*autograd.Tensor{f(xa)}, []*autograd.Tensor{xa, w}, []*autograd.Tensor{dy})
		for i := range got {
			if fmt.Sprint(got[i].Float32s()) != fmt.Sprint(want[i].Float32s()) {
				t.Errorf("step %d: gradient %d %v, want %v", step, i, got[i].Float32s(), want[i].Float32s())
			}
		}
		arena.Reset()
		if err := autograd.Try(func() { got[0].Float32s() }); !errors.Is(err, autograd.ErrReset) {
			t.Errorf("step %d: the input's gradient after Reset: %v, want ErrReset", step, err)
		}
	}
	if x.Grad() != nil || w.Grad() != nil {
		t.Error("Grad added to a leaf's Grad")
	}
}

func TestGradErrors(t *testing.T) {
	x := autograd.FromFloat32([]float32{1, 2}, 2).SetRequiresGrad(true)
	unused := autograd.FromFloat32([]float32{1}, 1).SetRequiresGrad(true)
	for _, c := range []struct {
		name  string
		f     func()
		wants string
	}{
		{"no grad input", func() {
			autograd.Grad([]*autograd.Tensor{autograd.Exp(x)}, []*autograd.Tensor{autograd.Zeros(2)}, []*autograd.Tensor{autograd.Ones(2)})
		}, "input 0 does not require grad"},
		{"unused input", func() {
			autograd.Grad([]*autograd.Tensor{autograd.Exp(x)}, []*autograd.Tensor{x, unused}, []*autograd.Tensor{autograd.Ones(2)})
		}, "input 1 was not used"},
		{"nil input", func() {
			autograd.Grad([]*autograd.Tensor{autograd.Exp(x)}, []*autograd.Tensor{nil}, []*autograd.Tensor{autograd.Ones(2)})
		}, "input 0 is nil"},
		{"implied gradient of many elements", func() {
			autograd.Grad([]*autograd.Tensor{autograd.Exp(x)}, []*autograd.Tensor{x}, nil)
		}, "output 0 has shape [2]"},
		{"gradient shape", func() {
			autograd.Grad([]*autograd.Tensor{autograd.Exp(x)}, []*autograd.Tensor{x}, []*autograd.Tensor{autograd.Ones(3)})
		}, "gradient 0 has shape [3]"},
		{"graph freed", func() {
			y := autograd.Exp(x)
			autograd.Grad([]*autograd.Tensor{y}, []*autograd.Tensor{x}, []*autograd.Tensor{autograd.Ones(2)})
			autograd.Grad([]*autograd.Tensor{y}, []*autograd.Tensor{x}, []*autograd.Tensor{autograd.Ones(2)})
		}, "freed"},
	} {
		err := autograd.Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.wants) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.wants)
		}
	}
}
