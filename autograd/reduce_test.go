package autograd_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// shapeLeaf returns a copy of t as a fresh leaf that requires a gradient.
func shapeLeaf(t *autograd.Tensor) *autograd.Tensor {
	return t.Clone().Detach().SetRequiresGrad(true)
}

// shapeBadInputs runs each misuse and checks that Try reports an error
// containing want; a runtime panic fails the test through Try's re-panic.
func shapeBadInputs(t *testing.T, cases []shapeBadCase) {
	t.Helper()
	for _, c := range cases {
		err := autograd.Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

type shapeBadCase struct {
	name string
	f    func()
	want string
}

// reduceNaive sums x's logical values over the reduced dimensions in
// float64, giving the result in row-major order of the kept ones.
func reduceNaive(x *autograd.Tensor, reduced []bool, mean bool) []float64 {
	shape := x.Shape()
	vals := x.Values()
	outN, count := 1, 1
	for i, n := range shape {
		if reduced[i] {
			count *= n
		} else {
			outN *= n
		}
	}
	out := make([]float64, outN)
	idx := make([]int, len(shape))
	for _, v := range vals {
		o := 0
		for i, n := range shape {
			if !reduced[i] {
				o = o*n + idx[i]
			}
		}
		out[o] += v
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	if mean {
		for i := range out {
			out[i] /= float64(count)
		}
	}
	return out
}

var reduceCases = []struct {
	name    string
	shape   []int
	cl      autograd.MemoryFormat
	dims    []int
	keepDim bool
}{
	{name: "all", shape: []int{3, 4, 5}},
	{name: "all-keep", shape: []int{3, 4, 5}, keepDim: true},
	{name: "empty-dims", shape: []int{2, 3}, dims: []int{}},
	{name: "last", shape: []int{3, 4, 5}, dims: []int{-1}},
	{name: "first-keep", shape: []int{3, 4, 5}, dims: []int{0}, keepDim: true},
	{name: "outer-inner", shape: []int{4, 3, 5}, dims: []int{2, 0}},
	{name: "1-d", shape: []int{7}, dims: []int{0}},
	{name: "0-d", shape: []int{}, dims: []int{-1}, keepDim: true},
	{name: "cl-hw-keep", shape: []int{2, 3, 4, 5}, cl: autograd.ChannelsLast, dims: []int{2, 3}, keepDim: true},
	{name: "cl-hw", shape: []int{2, 3, 4, 5}, cl: autograd.ChannelsLast, dims: []int{-1, -2}},
	{name: "cl-c", shape: []int{2, 3, 4, 5}, cl: autograd.ChannelsLast, dims: []int{1}, keepDim: true},
	{name: "cl-nhw", shape: []int{2, 3, 4, 5}, cl: autograd.ChannelsLast, dims: []int{0, 2, 3}},
	{name: "cl-all", shape: []int{2, 3, 4, 5}, cl: autograd.ChannelsLast},
	{name: "cl3d-dhw", shape: []int{2, 3, 2, 3, 2}, cl: autograd.ChannelsLast3d, dims: []int{2, 3, 4}, keepDim: true},
}

func TestReduceValuesAndGradients(t *testing.T) {
	g := autograd.NewGenerator(3)
	for _, c := range reduceCases {
		for _, mean := range []bool{false, true} {
			op, name := autograd.Sum, "Sum"
			if mean {
				op, name = autograd.Mean, "Mean"
			}
			t.Run(name+"/"+c.name, func(t *testing.T) {
				x := autograd.Randn(g, c.shape...)
				if c.cl != autograd.Contiguous {
					x = x.To(c.cl)
				}
				x = shapeLeaf(x)
				y := op(x, c.dims, c.keepDim)
				if y.Format() != autograd.Contiguous {
					t.Errorf("result format %v, want contiguous (PyTorch 1.13)", y.Format())
				}
				reduced := make([]bool, len(c.shape))
				var want []int
				for i, n := range c.shape {
					reduced[i] = len(c.dims) == 0
					for _, d := range c.dims {
						reduced[i] = reduced[i] || d == i || d == i-len(c.shape)
					}
					if !reduced[i] {
						want = append(want, n)
					} else if c.keepDim {
						want = append(want, 1)
					}
				}
				if fmt.Sprint(y.Shape()) != fmt.Sprint(want) && !(len(want) == 0 && y.NDim() == 0) {
					t.Errorf("shape %v, want %v", y.Shape(), want)
				}
				naive := reduceNaive(x, reduced, mean)
				for i, v := range y.Values() {
					if math.Abs(v-naive[i]) > 1e-6*(1+math.Abs(naive[i])) {
						t.Fatalf("element %d = %v, want %v", i, v, naive[i])
					}
				}
				f := func(xs ...*autograd.Tensor) *autograd.Tensor { return op(xs[0], c.dims, c.keepDim) }
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

// The sum accumulates in float64: a float32 running sum would lose every
// 1 added to 1e8.
func TestSumAccumulatesInFloat64(t *testing.T) {
	v := make([]float32, 1002)
	v[0], v[1001] = 1e8, -1e8
	for i := 1; i <= 1000; i++ {
		v[i] = 1
	}
	if got := autograd.Sum(autograd.FromFloat32(v), nil, false).Item(); got != 1000 {
		t.Fatalf("sum = %v, want 1000", got)
	}
	if got := autograd.Mean(autograd.FromFloat32(v, 2, 501), []int{0, 1}, false).Item(); math.Abs(got-1000.0/1002) > 1e-7 {
		t.Fatalf("mean = %v, want %v", got, 1000.0/1002)
	}
}

func TestReduceEmpty(t *testing.T) {
	x := shapeLeaf(autograd.Zeros(0, 3))
	s := autograd.Sum(x, []int{0}, false)
	m := autograd.Mean(x, []int{0}, true)
	if fmt.Sprint(s.Values()) != "[0 0 0]" {
		t.Errorf("sum over an empty dimension = %v, want zeros", s.Values())
	}
	if fmt.Sprint(m.Shape()) != "[1 3]" || !math.IsNaN(m.Values()[0]) {
		t.Errorf("mean over an empty dimension = %v %v, want NaN of shape [1 3]", m.Shape(), m.Values())
	}
	if v := autograd.Mean(x, nil, false).Item(); !math.IsNaN(v) {
		t.Errorf("mean of an empty tensor = %v, want NaN", v)
	}
	autograd.Sum(x, []int{1}, false).Backward(autograd.Zeros(0))
	if fmt.Sprint(x.Grad().Shape()) != "[0 3]" {
		t.Errorf("gradient shape %v", x.Grad().Shape())
	}
}

func TestReduceBadInputs(t *testing.T) {
	x := autograd.Zeros(2, 3, 4, 5)
	shapeBadInputs(t, []shapeBadCase{
		{"nil", func() { autograd.Sum(nil, nil, false) }, "Sum: input is nil"},
		{"dtype", func() { autograd.Mean(autograd.Empty(autograd.Int64, 3), nil, false) }, "Mean: input has dtype int64; Mean supports float32"},
		{"int64", func() { autograd.Sum(autograd.Empty(autograd.Int64, 3), nil, false) }, "input has dtype int64"},
		{"dim too big", func() { autograd.Sum(x, []int{4}, false) }, "Sum: dimension 4 out of range for a 4-D tensor of shape [2 3 4 5]"},
		{"dim too small", func() { autograd.Mean(x, []int{1, -5}, true) }, "Mean: dimension -5 out of range for a 4-D tensor"},
		{"0-d dim", func() { autograd.Sum(autograd.Scalar(1), []int{1}, false) }, "dimension 1 out of range for a 0-D tensor"},
		{"duplicate", func() { autograd.Sum(x, []int{1, 1}, false) }, "Sum: dimension 1 appears more than once in dims [1 1]"},
		{"duplicate negative", func() { autograd.Mean(x, []int{3, -1}, false) }, "Mean: dimension 3 appears more than once in dims [3 -1]"},
	})
}

// Sum over the spatial dimensions of an NCHW batch.
func ExampleSum() {
	x := autograd.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 1, 2, 2, 2)
	fmt.Println(autograd.Sum(x, []int{2, 3}, false).Values())
	fmt.Println(autograd.Sum(x, []int{-1, -2}, true).Shape())
	fmt.Println(autograd.Sum(x, nil, false).Shape(), autograd.Sum(x, nil, false).Item())
	// Output:
	// [10 26]
	// [1 2 1 1]
	// [] 36
}

// Mean with the same dims rules as Sum; the gradient spreads evenly.
func ExampleMean() {
	x := autograd.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3).SetRequiresGrad(true)
	m := autograd.Mean(x, []int{0}, false)
	fmt.Println(m.Values())
	autograd.Sum(m, nil, false).Backward()
	fmt.Println(x.Grad().Values())
	// Output:
	// [2.5 3.5 4.5]
	// [0.5 0.5 0.5 0.5 0.5 0.5]
}
