package autograd_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

func TestSoftmaxGradCheck(t *testing.T) {
	g := autograd.NewGenerator(3)
	cases := []struct {
		name string
		x    *autograd.Tensor
		dim  int
	}{
		{"1d", autograd.Randn(g, 5), 0},
		{"0d", autograd.Scalar(0.7), -1},
		{"2d-dim1", autograd.Randn(g, 3, 4), 1},
		{"2d-dim0", autograd.Randn(g, 3, 4), 0},
		{"3d-dim-2", autograd.Randn(g, 2, 3, 4), -2},
		// An inner size above the kernel's tile width.
		{"wide-inner", autograd.Randn(g, 3, 300), 0},
		{"cl-dim1", autograd.Randn(g, 2, 4, 3, 3).To(autograd.ChannelsLast), 1},
		{"cl-dim2", autograd.Randn(g, 2, 3, 4, 3).To(autograd.ChannelsLast), 2},
		{"cl-dim-1", autograd.Randn(g, 2, 3, 2, 4).To(autograd.ChannelsLast), -1},
		{"cl3d-dim1", autograd.Randn(g, 1, 3, 2, 2, 3).To(autograd.ChannelsLast3d), 1},
	}
	ops := map[string]func(*autograd.Tensor, int) *autograd.Tensor{
		"Softmax": autograd.Softmax, "LogSoftmax": autograd.LogSoftmax,
	}
	for _, c := range cases {
		for name, op := range ops {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				x := c.x.Detach().SetRequiresGrad(true)
				f := func(xs ...*autograd.Tensor) *autograd.Tensor { return op(xs[0], c.dim) }
				y := f(x)
				if y.Format() != autograd.Contiguous {
					t.Errorf("output format %v, want contiguous (as PyTorch 1.13)", y.Format())
				}
				if fmt.Sprint(y.Shape()) != fmt.Sprint(x.Shape()) {
					t.Errorf("output shape %v, want %v", y.Shape(), x.Shape())
				}
				if err := autograd.GradCheck(f, []*autograd.Tensor{x}, autograd.GradCheckOptions{}); err != nil {
					t.Fatal(err)
				}
				if x.Grad().Format() != x.Format() {
					t.Errorf("gradient format %v, want %v", x.Grad().Format(), x.Format())
				}
			})
		}
	}
}

// softmaxRef is the softmax of v in float64, by definition.
func softmaxRef(v []float64) []float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	s := 0.0
	for _, x := range v {
		s += math.Exp(x - m)
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Exp(x-m) / s
	}
	return out
}

// TestSoftmaxAlongEachDim compares every dim of a channels-last and a
// contiguous tensor with the definition, element by element.
func TestSoftmaxAlongEachDim(t *testing.T) {
	g := autograd.NewGenerator(9)
	x := autograd.Randn(g, 2, 3, 4, 5)
	shape := x.Shape()
	vals := x.Values()
	strides := []int{60, 20, 5, 1}
	for _, f := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
		for dim := -4; dim < 4; dim++ {
			d := (dim + 4) % 4
			for _, log := range []bool{false, true} {
				var y *autograd.Tensor
				if log {
					y = autograd.LogSoftmax(x.To(f), dim)
				} else {
					y = autograd.Softmax(x.To(f), dim)
				}
				got := y.Values()
				for i := range vals {
					if (i/strides[d])%shape[d] != 0 {
						continue // visit each softmax once, from its first element
					}
					row := make([]float64, shape[d])
					for k := range row {
						row[k] = vals[i+k*strides[d]]
					}
					want := softmaxRef(row)
					for k := range row {
						w := want[k]
						if log {
							w = math.Log(w)
						}
						if g := got[i+k*strides[d]]; math.Abs(g-w) > 1e-6*(1+math.Abs(w)) {
							t.Fatalf("%v dim %d log=%v: element %d: %v, want %v", f, dim, log, i+k*strides[d], g, w)
						}
					}
				}
			}
		}
	}
}

func TestSoftmaxExtremes(t *testing.T) {
	nan := float32(math.NaN())
	x := autograd.FromFloat32([]float32{1000, 1000, -1000, 3, nan, 1}, 2, 3)
	y := autograd.Softmax(x, 1).Values()
	if y[0] != 0.5 || y[1] != 0.5 || y[2] != 0 {
		t.Errorf("softmax of [1000 1000 -1000] = %v, want [0.5 0.5 0]", y[:3])
	}
	for _, v := range y[3:] {
		if !math.IsNaN(v) {
			t.Errorf("softmax of a row holding NaN = %v, want all NaN", y[3:])
			break
		}
	}
	// The log-softmax stays finite where the softmax underflows to 0.
	ls := autograd.LogSoftmax(autograd.FromFloat32([]float32{0, -1000}), 0).Values()
	if ls[0] != 0 || ls[1] != -1000 {
		t.Errorf("log-softmax of [0 -1000] = %v, want [0 -1000]", ls)
	}
	// Zero-size tensors pass through.
	for _, shape := range [][]int{{0, 3}, {3, 0}} {
		x := autograd.Zeros(shape...).SetRequiresGrad(true)
		y := autograd.Softmax(x, 1)
		y.Backward(autograd.Zeros(shape...))
		if fmt.Sprint(y.Shape()) != fmt.Sprint(shape) || x.Grad() == nil {
			t.Errorf("softmax of %v: shape %v, grad %v", shape, y.Shape(), x.Grad())
		}
	}
}

func TestSoftmaxBadInputs(t *testing.T) {
	x := autograd.Zeros(2, 3)
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"nil", func() { autograd.Softmax(nil, 0) }, "Softmax: input is nil"},
		{"log nil", func() { autograd.LogSoftmax(nil, 0) }, "LogSoftmax: input is nil"},
		{"dtype", func() { autograd.Softmax(autograd.Empty(autograd.Int64, 2, 3), 1) }, "Softmax: input has dtype int64"},
		{"log dtype", func() { autograd.LogSoftmax(autograd.Empty(autograd.Int64, 2), 0) }, "LogSoftmax: input has dtype int64"},
		{"dim", func() { autograd.Softmax(x, 2) }, "Softmax: dim 2 out of range for input of shape [2 3] (valid: -2 to 1)"},
		{"negative dim", func() { autograd.LogSoftmax(x, -3) }, "LogSoftmax: dim -3 out of range for input of shape [2 3]"},
		{"0-d dim", func() { autograd.Softmax(autograd.Scalar(1), 1) }, "Softmax: dim 1 out of range for input of shape [] (valid: -1 to 0)"},
	}
	for _, c := range cases {
		err := autograd.Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

// Softmax turns scores into probabilities along a dimension.
func ExampleSoftmax() {
	x := autograd.FromFloat32([]float32{1, 2, 3, 1, 1, 1}, 2, 3)
	fmt.Printf("%.4f\n", autograd.Softmax(x, 1).Values())
	// Output: [0.0900 0.2447 0.6652 0.3333 0.3333 0.3333]
}

// LogSoftmax stays finite where Softmax would underflow to zero.
func ExampleLogSoftmax() {
	x := autograd.FromFloat32([]float32{0, -200})
	fmt.Println(autograd.Softmax(x, 0).Values(), autograd.LogSoftmax(x, 0).Values())
	// Output: [1 0] [0 -200]
}
