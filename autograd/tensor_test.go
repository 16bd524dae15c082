package autograd_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/shape"
	"gorgonia.org/tensor"
)

// TestTensorBadInputs feeds the constructors, accessors and tape entry
// points shapes, dtypes, sizes and arguments they cannot take, and wants
// an *autograd.Error naming the entry point and the problem. Try re-panics
// anything else (a nil dereference, an index out of range), failing the
// test.
func TestTensorBadInputs(t *testing.T) {
	g := autograd.NewGenerator(1)
	leaf := func() *autograd.Tensor { return autograd.Ones(2, 3).SetRequiresGrad(true) }
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"FromFloat32 too few", func() { autograd.FromFloat32([]float32{1, 2}, 3) }, "FromFloat32: 2 elements do not fill shape [3] (3 elements)"},
		{"FromFloat32 negative dim", func() { autograd.FromFloat32(nil, -1, 0) }, "FromFloat32: shape [-1 0]: negative dimension -1"},
		{"FromBFloat16 too many", func() { autograd.FromBFloat16(make([]uint16, 5), 2, 2) }, "FromBFloat16: 5 elements do not fill shape [2 2] (4 elements)"},
		{"FromInt8", func() { autograd.FromInt8(make([]int8, 1), 2) }, "FromInt8: 1 elements do not fill shape [2]"},
		{"FromUint8", func() { autograd.FromUint8(nil, 1) }, "FromUint8: 0 elements do not fill shape [1]"},
		{"FromInt32", func() { autograd.FromInt32(make([]int32, 3), 1, 2) }, "FromInt32: 3 elements do not fill shape [1 2]"},
		{"FromInt64", func() { autograd.FromInt64(make([]int64, 3), 2, 2) }, "FromInt64: 3 elements do not fill shape [2 2]"},
		{"Empty negative dim", func() { autograd.Empty(autograd.Int64, 2, -3) }, "Empty: shape [2 -3]: negative dimension -3"},
		{"Empty unknown dtype", func() { autograd.Empty(autograd.DType(6), 2) }, "Empty: unknown dtype DType(6)"},
		{"Zeros overflowing int", func() { autograd.Zeros(1<<32, 1<<32) }, "Zeros: shape [4294967296 4294967296]: element count overflows"},
		{"Zeros too big to allocate", func() { autograd.Zeros(1<<24, 1<<24) }, "Zeros: 281474976710656 elements of float32 are more than can be allocated"},
		{"Full negative dim", func() { autograd.Full(1, -1) }, "Full: shape [-1]: negative dimension -1"},
		{"Ones wrapping to its data", func() { autograd.Ones(1<<60+1, 16) }, "Ones: shape [1152921504606846977 16]: element count overflows"},
		{"FromFloat32 wrapping to its data", func() { autograd.FromFloat32(make([]float32, 16), 1<<60+1, 16) }, "FromFloat32: shape [1152921504606846977 16]: element count overflows"},
		{"FromBFloat16 wrapping to its data", func() { autograd.FromBFloat16(make([]uint16, 16), 16, 1<<60+1) }, "FromBFloat16: shape [16 1152921504606846977]: element count overflows"},
		{"FromInt64 negative dims", func() { autograd.FromInt64(make([]int64, 4), -2, -2) }, "FromInt64: shape [-2 -2]: negative dimension -2"},
		{"Rand overflowing", func() { autograd.Rand(g, 1<<32, 1<<32) }, "Rand: shape [4294967296 4294967296]: element count overflows"},
		{"Randn negative dim", func() { autograd.Randn(g, 3, -1) }, "Randn: shape [3 -1]: negative dimension -1"},
		{"RandInt overflowing", func() { autograd.RandInt(g, 0, 2, 1<<62, 4) }, "RandInt: shape [4611686018427387904 4]: element count overflows"},
		{"Arange zero step", func() { autograd.Arange(0, 1, 0, autograd.Float32) }, "Arange: step must be non-zero"},
		{"Arange NaN", func() { autograd.Arange(math.NaN(), 1, 1, autograd.Float32) }, "Arange: step must be non-zero and bounds finite (start=NaN"},
		{"Arange infinite end", func() { autograd.Arange(0, math.Inf(1), 1, autograd.Float32) }, "end=+Inf"},
		{"Arange infinite step", func() { autograd.Arange(0, 1, math.Inf(-1), autograd.Int64) }, "step=-Inf"},
		{"Arange too long", func() { autograd.Arange(0, 1e30, 1, autograd.Float32) }, "Arange: [0, 1e+30) in steps of 1 has 1e+30 elements, too many to allocate"},
		{"Rand nil generator", func() { autograd.Rand(nil, 2) }, "Rand: generator is nil"},
		{"Randn nil generator", func() { autograd.Randn(nil, 2) }, "Randn: generator is nil"},
		{"RandInt nil generator", func() { autograd.RandInt(nil, 0, 2, 2) }, "RandInt: generator is nil"},
		{"RandInt empty range", func() { autograd.RandInt(g, 3, 3, 2) }, "RandInt: empty range [3, 3)"},
		{"IntN of 0", func() { g.IntN(0) }, "IntN: empty range [0, 0)"},
		{"Perm of -1", func() { g.Perm(-1) }, "Perm: negative length -1"},
		{"Uniform nil generator", func() { autograd.Zeros(2).Uniform(nil, 0, 1) }, "Uniform: generator is nil"},
		{"Uniform reversed range", func() { autograd.Zeros(2).Uniform(g, 2, 1) }, "Uniform: expects a finite range [from, to) with from <= to, got [2, 1)"},
		{"Uniform NaN bound", func() { autograd.Zeros(2).Uniform(g, 0, math.NaN()) }, "got [0, NaN)"},
		{"Uniform infinite bound", func() { autograd.Zeros(2).Uniform(g, math.Inf(-1), 0) }, "got [-Inf, 0)"},
		{"Uniform on int64", func() { autograd.Empty(autograd.Int64, 2).Uniform(g, 0, 1) }, "access: tensor is int64, not float32"},
		{"Normal nil generator", func() { autograd.Zeros(2).Normal(nil, 0, 1) }, "Normal: generator is nil"},
		{"Normal negative std", func() { autograd.Zeros(2).Normal(g, 0, -1) }, "Normal: standard deviation -1 is not a non-negative number"},
		{"Normal NaN std", func() { autograd.Zeros(2).Normal(g, 0, math.NaN()) }, "standard deviation NaN"},
		{"Fill on int32", func() { autograd.Empty(autograd.Int32, 2).Fill(1) }, "access: tensor is int32, not float32"},
		{"Item of two elements", func() { autograd.Zeros(2).Item() }, "Item: tensor of shape [2] has 2 elements, want 1"},
		{"Item of none", func() { autograd.Zeros(0, 3).Item() }, "Item: tensor of shape [0 3] has 0 elements, want 1"},
		{"Dim too large", func() { autograd.Zeros(2, 3).Dim(2) }, "Dim: dimension 2 out of range for a 2-D tensor"},
		{"Dim too negative", func() { autograd.Zeros(2, 3).Dim(-3) }, "Dim: dimension -3 out of range for a 2-D tensor"},
		{"Dim of 0-d", func() { autograd.Scalar(1).Dim(0) }, "Dim: dimension 0 out of range for a 0-D tensor"},
		{"Float32s of int64", func() { autograd.Empty(autograd.Int64, 2).Float32s() }, "access: tensor is int64, not float32"},
		{"BFloat16s of float32", func() { autograd.Zeros(2).BFloat16s() }, "access: tensor is float32, not bfloat16"},
		{"Int8s of uint8", func() { autograd.Empty(autograd.Uint8, 2).Int8s() }, "access: tensor is uint8, not int8"},
		{"Uint8s of int8", func() { autograd.Empty(autograd.Int8, 2).Uint8s() }, "access: tensor is int8, not uint8"},
		{"Int32s of int64", func() { autograd.Empty(autograd.Int64, 2).Int32s() }, "access: tensor is int64, not int32"},
		{"Int64s of float32", func() { autograd.Zeros(2).Int64s() }, "access: tensor is float32, not int64"},
		{"ContiguousFloat32s of channels-last int64", func() { autograd.Empty(autograd.Int64, 1, 2, 2, 2).To(autograd.ChannelsLast).ContiguousFloat32s() }, "not float32"},
		{"DType.Size unknown", func() { autograd.DType(9).Size() }, "Size: unknown dtype DType(9)"},
		{"SetRequiresGrad on int64", func() { autograd.Empty(autograd.Int64, 2).SetRequiresGrad(true) }, "SetRequiresGrad: only floating-point tensors can require gradients, not int64"},
		{"SetRequiresGrad on a result", func() { autograd.Mul(leaf(), leaf()).SetRequiresGrad(false) }, "SetRequiresGrad: tensor is the result of MulBackward, not a leaf"},
		{"SetGrad wrong shape", func() { autograd.Zeros(2, 3).SetGrad(autograd.Zeros(3, 2)) }, "SetGrad: gradient [3 2] float32 does not match tensor [2 3] float32"},
		{"SetGrad wrong dtype", func() { autograd.Zeros(2).SetGrad(autograd.Empty(autograd.BFloat16, 2)) }, "SetGrad: gradient [2] bfloat16 does not match tensor [2] float32"},
		{"Backward without grad", func() { autograd.Ones(2).Backward() }, "Backward: tensor does not require grad and has no grad_fn"},
		{"Backward of a vector", func() { autograd.MulScalar(leaf(), 2).Backward() }, "Backward: grad can be implicitly created only for one-element outputs, got shape [2 3]"},
		{"Backward nil gradient", func() { autograd.MulScalar(leaf(), 2).Backward(nil) }, "Backward: gradient is nil"},
		{"Backward gradient shape", func() { autograd.MulScalar(leaf(), 2).Backward(autograd.Ones(3, 2)) }, "Backward: gradient shape [3 2] does not match output shape [2 3]"},
		{"Backward gradient dtype", func() { autograd.MulScalar(leaf(), 2).Backward(autograd.Empty(autograd.Int64, 2, 3)) }, "Backward: gradient has dtype int64, output has dtype float32"},
		{"Backward bfloat16 gradient", func() {
			autograd.Sum(leaf(), nil, false).Backward(autograd.Cast(autograd.Scalar(1), autograd.BFloat16))
		}, "gradient has dtype bfloat16"},
		{"Backward two gradients", func() { autograd.Sum(leaf(), nil, false).Backward(autograd.Scalar(1), autograd.Scalar(1)) }, "Backward: takes at most one gradient, got 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(c.f)
			var ae *autograd.Error
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want an *autograd.Error containing %q", err, c.want)
			}
		})
	}
}

// lyingShape has 2^64+16 elements, which int arithmetic wraps around to
// 16: the size of the data the tensors held behind it.
var lyingShape = []int{1<<60 + 1, 16}

// TestLyingTensorsUnreachable: the shape ops and constructors that used to
// accept a shape whose element count wrapped around to the data's length
// refuse it, naming themselves and the shape, so the ops that went on to
// index out of bounds in their kernels can no longer be handed such a
// tensor.
func TestLyingTensorsUnreachable(t *testing.T) {
	dims4 := []int{1<<60 + 1, 16, 1, 1}
	makers := []struct {
		op   string
		make func(dims []int) *autograd.Tensor
	}{
		{"Reshape", func(dims []int) *autograd.Tensor { return autograd.Reshape(autograd.Ones(16), dims...) }},
		{"Reshape", func(dims []int) *autograd.Tensor {
			return autograd.Reshape(autograd.Ones(16), append([]int{-1}, dims...)...)
		}},
		{"View", func(dims []int) *autograd.Tensor { return autograd.View(autograd.Ones(16), dims...) }},
		{"View", func(dims []int) *autograd.Tensor { return autograd.View(autograd.Ones(16), append(dims, -1)...) }},
		{"FromFloat32", func(dims []int) *autograd.Tensor { return autograd.FromFloat32(make([]float32, 16), dims...) }},
		{"Zeros", func(dims []int) *autograd.Tensor { return autograd.Zeros(dims...) }},
	}
	ops := []struct {
		name string
		dims []int
		f    func(x *autograd.Tensor)
	}{
		{"Softmax", lyingShape, func(x *autograd.Tensor) { autograd.Softmax(x, 0) }},
		{"Sum", lyingShape, func(x *autograd.Tensor) { autograd.Sum(x, []int{0}, false) }},
		{"Permute", lyingShape, func(x *autograd.Tensor) { autograd.Permute(x, 1, 0) }},
		{"Matmul", lyingShape, func(x *autograd.Tensor) { autograd.Matmul(x, autograd.Ones(16, 1)) }},
		{"LayerNorm", lyingShape, func(x *autograd.Tensor) { autograd.LayerNorm(x, []int{16}, nil, nil, 1e-5) }},
		{"MaxPool2d", dims4, func(x *autograd.Tensor) { autograd.MaxPool2d(x, autograd.PoolOptions{Kernel: []int{1}}) }},
		{"Contiguous", dims4, func(x *autograd.Tensor) { x.To(autograd.ChannelsLast).Contiguous() }},
		{"To(ChannelsLast)", dims4, func(x *autograd.Tensor) { x.To(autograd.ChannelsLast) }},
	}
	for _, o := range ops {
		for _, m := range makers {
			err := autograd.Try(func() { o.f(m.make(o.dims)) })
			var ae *autograd.Error
			if !errors.As(err, &ae) || ae.Op != m.op || !strings.Contains(ae.Msg, "element count overflows") {
				t.Errorf("%s of a %s tensor of shape %v: error %v, want %s to refuse the shape", o.name, m.op, o.dims, err, m.op)
			}
		}
		d := tensor.New(tensor.WithShape(o.dims...), tensor.WithBacking(make([]float32, 16)))
		if x, err := autograd.FromDense(d); !errors.Is(err, shape.ErrOverflow) {
			t.Errorf("FromDense of shape %v = %v, %v; want shape.ErrOverflow", o.dims, x, err)
		}
	}
}

// A rejected Backward leaves no partial gradients behind.
func TestBackwardMisuseLeavesGradients(t *testing.T) {
	x := autograd.Ones(2).SetRequiresGrad(true)
	y := autograd.MulScalar(x, 3)
	if err := autograd.Try(func() { y.Backward(autograd.Empty(autograd.Int32, 2)) }); err == nil {
		t.Fatal("int32 gradient accepted")
	}
	if x.Grad() != nil {
		t.Fatalf("gradient %v after a rejected Backward", x.Grad())
	}
	y.Backward(autograd.Ones(2))
	if got := x.Grad().Values(); got[0] != 3 || got[1] != 3 {
		t.Fatalf("gradient %v, want [3 3]", got)
	}
}

func TestFromDenseBadInputs(t *testing.T) {
	sliced := tensor.New(tensor.WithShape(4, 3), tensor.WithBacking(make([]float32, 12)))
	view, err := sliced.Slice(tensor.S(1, 3))
	if err != nil {
		t.Fatal(err)
	}
	transposed := tensor.New(tensor.WithShape(2, 3, 4), tensor.WithBacking(make([]float32, 24)))
	if err := transposed.T(2, 0, 1); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		d    *tensor.Dense
		want string
	}{
		{"nil", nil, "FromDense: nil Dense"},
		{"float64", tensor.New(tensor.WithShape(2), tensor.Of(tensor.Float64)), "FromDense: dtype float64 has no Kiln equivalent"},
		{"bool", tensor.New(tensor.WithShape(2), tensor.Of(tensor.Bool)), "dtype bool has no Kiln equivalent"},
		{"sliced view", view.(*tensor.Dense), "a sliced view cannot be shared without a copy"},
		{"other transpose", transposed, "a transposed Dense of shape [4 2 3] is not a channels-last layout"},
		// gorgonia's own count wraps, so it accepts this shape for 16
		// elements.
		{"shape wrapping to its data", tensor.New(tensor.WithShape(1<<60+1, 16), tensor.WithBacking(make([]float32, 16))),
			"FromDense: shape [1152921504606846977 16]: element count overflows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, err := autograd.FromDense(c.d)
			if err == nil || x != nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("FromDense = %v, %v; want an error containing %q", x, err, c.want)
			}
		})
	}
	// Every dtype travels both ways without a copy, a 0-d tensor
	// included.
	for _, x := range []*autograd.Tensor{
		autograd.Scalar(2.5), autograd.Cast(autograd.Ones(3), autograd.BFloat16),
		autograd.FromInt8([]int8{-1, 2}), autograd.FromUint8([]uint8{255}), autograd.FromInt32([]int32{7}, 1, 1),
		autograd.FromInt64([]int64{1 << 40, -3}), autograd.Arange(0, 120, 1, autograd.Int32).Detach(),
	} {
		y, err := autograd.FromDense(x.Dense())
		if err != nil {
			t.Fatalf("%v: %v", x.DType(), err)
		}
		if y.DType() != x.DType() || y.NDim() != x.NDim() || y.Values()[0] != x.Values()[0] {
			t.Errorf("%v %v came back as %v %v", x.DType(), x.Shape(), y.DType(), y.Shape())
		}
	}
	s := autograd.Scalar(1)
	d := s.Dense()
	if !d.IsScalar() {
		t.Errorf("the Dense of a 0-d tensor has shape %v, want a scalar", d.Shape())
	}
	y, err := autograd.FromDense(d)
	if err != nil || y.NDim() != 0 || &y.Float32s()[0] != &s.Float32s()[0] {
		t.Errorf("FromDense of a scalar Dense = %v, %v; want the 0-d tensor sharing memory", y, err)
	}
}

func TestGradCheckMisuse(t *testing.T) {
	id := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.MulScalar(xs[0], 1) }
	x := func() *autograd.Tensor { return autograd.Ones(3).SetRequiresGrad(true) }
	cases := []struct {
		name string
		f    func(xs ...*autograd.Tensor) *autograd.Tensor
		ins  []*autograd.Tensor
		opt  autograd.GradCheckOptions
		want string
	}{
		{"nil output", func(...*autograd.Tensor) *autograd.Tensor { return nil }, []*autograd.Tensor{x()}, autograd.GradCheckOptions{}, "gradcheck: f returned nil"},
		{"nil input", id, []*autograd.Tensor{nil}, autograd.GradCheckOptions{}, "gradcheck: input 0 is nil"},
		{"bfloat16 input", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Cast(xs[0], autograd.Float32) },
			[]*autograd.Tensor{autograd.Cast(autograd.Ones(2), autograd.BFloat16).SetRequiresGrad(true)}, autograd.GradCheckOptions{},
			"gradcheck: input 0 is bfloat16; only float32 inputs can be perturbed"},
		{"constant output", func(...*autograd.Tensor) *autograd.Tensor { return autograd.Ones(2) }, []*autograd.Tensor{x()}, autograd.GradCheckOptions{},
			"gradcheck: output does not require grad"},
		{"NaN tolerance", id, []*autograd.Tensor{x()}, autograd.GradCheckOptions{ATol: math.NaN()}, "gradcheck: ATol must be a positive finite number, got NaN"},
		{"negative step", id, []*autograd.Tensor{x()}, autograd.GradCheckOptions{Eps: -1e-3}, "gradcheck: Eps must be a positive finite number, got -0.001"},
		{"infinite tolerance", id, []*autograd.Tensor{x()}, autograd.GradCheckOptions{RTol: math.Inf(1)}, "RTol must be a positive finite number, got +Inf"},
		// The detached branch hides half the gradient: 2x+1 numerically, 1
		// analytically.
		{"wrong gradient", func(xs ...*autograd.Tensor) *autograd.Tensor {
			d := xs[0].Detach()
			return autograd.Add(autograd.Mul(d, d), xs[0])
		}, []*autograd.Tensor{x()}, autograd.GradCheckOptions{}, "gradcheck: input 0 (shape [3], contiguous) element 0: analytic"},
		// √x stepped below zero is NaN: a NaN numeric gradient must fail,
		// not slip through the tolerance comparison.
		{"NaN numeric gradient", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sqrt(xs[0]) },
			[]*autograd.Tensor{autograd.Full(1e-4, 2).SetRequiresGrad(true)}, autograd.GradCheckOptions{}, "numeric NaN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if perr := autograd.Try(func() { err = autograd.GradCheck(c.f, c.ins, c.opt) }); perr != nil {
				t.Fatalf("GradCheck panicked: %v", perr)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
