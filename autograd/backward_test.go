package autograd_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// TestBackwardSeveralOutputs checks autograd.Backward against one
// Tensor.Backward of the sum of each output times its gradient, which has
// the same gradient by linearity.
func TestBackwardSeveralOutputs(t *testing.T) {
	vec := func(v ...float32) *autograd.Tensor { return autograd.FromFloat32(v, len(v)) }
	g1, g2 := vec(1, -2, 0.5), vec(3, 0.25, -1)
	for _, c := range []struct {
		name string
		outs func(x *autograd.Tensor) []*autograd.Tensor
	}{
		{"two branches", func(x *autograd.Tensor) []*autograd.Tensor {
			return []*autograd.Tensor{autograd.Mul(x, autograd.Scalar(2)), autograd.Mul(x, x)}
		}},
		{"one output above the other", func(x *autograd.Tensor) []*autograd.Tensor {
			a := autograd.Mul(x, autograd.Scalar(3))
			return []*autograd.Tensor{a, autograd.Mul(a, a)}
		}},
		{"one output below the other", func(x *autograd.Tensor) []*autograd.Tensor {
			a := autograd.Mul(x, autograd.Scalar(3))
			return []*autograd.Tensor{autograd.Mul(a, a), a}
		}},
		{"one output twice", func(x *autograd.Tensor) []*autograd.Tensor {
			y := autograd.Exp(x)
			return []*autograd.Tensor{y, y}
		}},
		{"a leaf among the outputs", func(x *autograd.Tensor) []*autograd.Tensor {
			return []*autograd.Tensor{x, autograd.Exp(x)}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := vec(0.5, -1, 2).SetRequiresGrad(true)
			outs := c.outs(x)
			autograd.Backward(outs, []*autograd.Tensor{g1, g2})
			got := x.Grad().Float32s()

			y := vec(0.5, -1, 2).SetRequiresGrad(true)
			outs = c.outs(y)
			autograd.Sum(autograd.Add(autograd.Mul(outs[0], g1), autograd.Mul(outs[1], g2)), nil, false).Backward()
			if want := y.Grad().Float32s(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("gradient %v, want %v", got, want)
			}
			if fmt.Sprint(g1.Float32s(), g2.Float32s()) != "[1 -2 0.5] [3 0.25 -1]" {
				t.Errorf("the caller's gradients changed: %v %v", g1.Float32s(), g2.Float32s())
			}
		})
	}
}

func TestBackwardSeveralOutputsErrors(t *testing.T) {
	x := autograd.FromFloat32([]float32{1, 2}, 2).SetRequiresGrad(true)
	y := autograd.Exp(x)
	for _, c := range []struct {
		name        string
		outs, grads []*autograd.Tensor
		want        string
	}{
		{"count", []*autograd.Tensor{y}, nil, "1 outputs but 0 gradients"},
		{"shape", []*autograd.Tensor{y}, []*autograd.Tensor{autograd.Zeros(3)}, "gradient 0 has shape [3]"},
		{"dtype", []*autograd.Tensor{y}, []*autograd.Tensor{autograd.Cast(autograd.Zeros(2), autograd.BFloat16)}, "gradient 0 has dtype bfloat16"},
		{"no grad", []*autograd.Tensor{autograd.Zeros(2)}, []*autograd.Tensor{autograd.Zeros(2)}, "output 0 does not require grad"},
		{"nil", []*autograd.Tensor{y}, []*autograd.Tensor{nil}, "output 0 or its gradient is nil"},
	} {
		err := autograd.Try(func() { autograd.Backward(c.outs, c.grads) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}
