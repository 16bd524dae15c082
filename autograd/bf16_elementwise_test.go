package autograd_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// bf16Via runs f on bfloat16 inputs through float32: widen, f, round back,
// all differentiably. The native bfloat16 ops must give exactly this,
// values and gradients.
func bf16Via(f func(xs ...*autograd.Tensor) *autograd.Tensor, xs ...*autograd.Tensor) *autograd.Tensor {
	wide := make([]*autograd.Tensor, len(xs))
	for i, x := range xs {
		wide[i] = autograd.Cast(x, autograd.Float32)
	}
	return autograd.Cast(f(wide...), autograd.BFloat16)
}

// TestBF16ElementwiseOps checks the native bfloat16 activations and
// residual sums against the float32 route, values and gradients bit for
// bit, in both memory formats.
func TestBF16ElementwiseOps(t *testing.T) {
	ops := []struct {
		name string
		f    func(xs ...*autograd.Tensor) *autograd.Tensor
		n    int
		// savesOutput: the backward reads the saved bfloat16 output, as
		// PyTorch's does, not the float32 route's unrounded one, so only
		// the forward is compared bit for bit and the gradient within a
		// few bfloat16 ulps (1−y loses relative precision as y nears 1).
		savesOutput bool
	}{
		{"ReLU", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.ReLU(xs[0]) }, 1, false},
		{"Sigmoid", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sigmoid(xs[0]) }, 1, true},
		{"SiLU", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.SiLU(xs[0]) }, 1, false},
		{"GELU", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.GELU(xs[0], "tanh") }, 1, false},
		{"AddReLU", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.AddReLU(xs[0], xs[1]) }, 2, false},
		{"Sub", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sub(xs[0], xs[1]) }, 2, false},
		{"Mul", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Mul(xs[0], xs[1]) }, 2, false},
		{"Div", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Div(xs[0], xs[1]) }, 2, false},
		// A 0-d float32 operand keeps the result bfloat16, on either side.
		{"Div scalar", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Div(xs[0], autograd.Scalar(2.5)) }, 1, false},
		{"scalar Div", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Div(autograd.Scalar(2.5), xs[0]) }, 1, false},
		{"Sub scalar", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sub(xs[0], autograd.Scalar(0.3)) }, 1, false},
		{"scalar Mul", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Mul(autograd.Scalar(-1.7), xs[0]) }, 1, false},
		// Broadcasting bfloat16 operands (a bias, a mask).
		{"Add broadcast", func(xs ...*autograd.Tensor) *autograd.Tensor {
			return autograd.Add(xs[0], autograd.Split(xs[1], 1, 0)[0])
		}, 2, false},
		{"broadcast Div", func(xs ...*autograd.Tensor) *autograd.Tensor {
			return autograd.Div(autograd.Split(xs[1], 1, 2)[0], xs[0])
		}, 2, false},
		{"Add across formats", func(xs ...*autograd.Tensor) *autograd.Tensor {
			other := autograd.ChannelsLast
			if xs[1].Format() == other {
				other = autograd.Contiguous
			}
			return autograd.Add(xs[0], xs[1].To(other))
		}, 2, false},
		// Shape ops move bfloat16 elements without widening them.
		{"Reshape", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Reshape(xs[0], 2, -1, 7) }, 1, false},
		{"Flatten", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Flatten(xs[0], 1, 2) }, 1, false},
		{"Transpose", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Transpose(xs[0], 1, 3) }, 1, false},
		{"Permute", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Permute(xs[0], 0, 2, 3, 1) }, 1, false},
		{"Cat", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Cat(xs, 1) }, 2, false},
		{"Split", func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Split(xs[0], 2, 1)[1] }, 1, false},
	}
	for _, format := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
		for _, op := range ops {
			t.Run(fmt.Sprintf("%s/%v", op.name, format), func(t *testing.T) {
				g := autograd.NewGenerator(3)
				var xs, ref []*autograd.Tensor
				for range op.n {
					x := autograd.Cast(autograd.Randn(g, 2, 5, 3, 7).To(format), autograd.BFloat16)
					xs = append(xs, x.Detach().SetRequiresGrad(true))
					ref = append(ref, x.Detach().SetRequiresGrad(true))
				}
				got := op.f(xs...)
				want := bf16Via(op.f, ref...)
				dy := autograd.Cast(autograd.Randn(g, want.Shape()...).To(want.Format()), autograd.BFloat16)
				if got.DType() != autograd.BFloat16 || got.Format() != want.Format() || !slices.Equal(got.Shape(), want.Shape()) {
					t.Fatalf("result is %v %v %v, want bfloat16 %v %v", got.DType(), got.Shape(), got.Format(), want.Shape(), want.Format())
				}
				sameValues(t, "forward", got, want)
				got.Backward(dy)
				want.Backward(dy)
				for i := range xs {
					if xs[i].Grad().DType() != autograd.BFloat16 {
						t.Fatalf("gradient %d is %v, want bfloat16", i, xs[i].Grad().DType())
					}
					if op.savesOutput {
						withinULPs(t, fmt.Sprintf("gradient %d", i), xs[i].Grad(), ref[i].Grad())
					} else {
						sameValues(t, fmt.Sprintf("gradient %d", i), xs[i].Grad(), ref[i].Grad())
					}
				}
			})
		}
	}
}

// TestBF16MixedCat checks that float32 with bfloat16 concatenates in
// float32, as PyTorch promotes it, and that each operand's gradient comes
// back in its own dtype.
func TestBF16MixedCat(t *testing.T) {
	g := autograd.NewGenerator(5)
	a := autograd.Randn(g, 2, 3).SetRequiresGrad(true)
	b := autograd.Cast(autograd.Randn(g, 2, 4), autograd.BFloat16).SetRequiresGrad(true)
	got := autograd.Cat([]*autograd.Tensor{a, b}, 1)
	want := autograd.Cat([]*autograd.Tensor{a.Detach(), autograd.Cast(b.Detach(), autograd.Float32)}, 1)
	if got.DType() != autograd.Float32 {
		t.Fatalf("float32 ‖ bfloat16 is %v, want float32", got.DType())
	}
	sameValues(t, "forward", got, want)
	got.Backward(autograd.Ones(2, 7))
	if a.Grad().DType() != autograd.Float32 || b.Grad().DType() != autograd.BFloat16 {
		t.Fatalf("gradients are %v and %v, want float32 and bfloat16", a.Grad().DType(), b.Grad().DType())
	}
	sameValues(t, "bfloat16 operand's gradient", autograd.Cast(b.Grad(), autograd.Float32), autograd.Ones(2, 4))
}

// TestBF16InPlace checks the in-place inference forms on bfloat16 data.
func TestBF16InPlace(t *testing.T) {
	g := autograd.NewGenerator(4)
	a := autograd.Cast(autograd.Randn(g, 3, 4, 5, 6).To(autograd.ChannelsLast), autograd.BFloat16)
	b := autograd.Cast(autograd.Randn(g, 3, 4, 5, 6).To(autograd.ChannelsLast), autograd.BFloat16)
	want := autograd.AddReLU(a, b)
	func() {
		got := a.Clone()
		if autograd.AddReLUInPlace(got, b) != got {
			t.Fatal("AddReLUInPlace returned another tensor")
		}
		sameValues(t, "AddReLUInPlace", got, want)
		r := a.Clone()
		autograd.ReLUInPlace(r)
		sameValues(t, "ReLUInPlace", r, autograd.ReLU(a))
	}()
	mixed := autograd.Try(func() { autograd.AddReLUInPlace(a.Clone(), autograd.Cast(b, autograd.Float32)) })
	if mixed == nil {
		t.Error("AddReLUInPlace of bfloat16 and float32 operands: no error")
	}
	if err := autograd.Try(func() { autograd.ReLUInPlace(autograd.Empty(autograd.Int64, 3)) }); err == nil {
		t.Error("ReLUInPlace on int64: no error")
	}
	x := autograd.Cast(autograd.Randn(g, 3), autograd.BFloat16).SetRequiresGrad(true)
	if err := autograd.Try(func() { autograd.ReLUInPlace(x) }); err == nil {
		t.Error("ReLUInPlace on a tensor that requires grad: no error")
	}
}

// sameValues fails unless got and want hold the same values bit for bit
// (in logical order).
func sameValues(t *testing.T, what string, got, want *autograd.Tensor) {
	t.Helper()
	if g, w := fmt.Sprint(got.Values()), fmt.Sprint(want.Values()); g != w {
		t.Errorf("%s: got %v, want %v", what, g, w)
	}
}

// withinULPs fails unless got and want differ by at most four bfloat16
// ulps of want (2⁻⁵ relative) plus a tiny absolute slack.
func withinULPs(t *testing.T, what string, got, want *autograd.Tensor) {
	t.Helper()
	g, w := got.Values(), want.Values()
	for i := range w {
		if d := math.Abs(g[i] - w[i]); d > math.Abs(w[i])/32+1e-30 {
			t.Fatalf("%s[%d]: got %v, want %v", what, i, g[i], w[i])
		}
	}
}

// TestBatchNormBF16 checks batch norm on bfloat16 input with float32
// parameters (PyTorch's mixed CPU batch norm, what autocast runs) against
// the float32 route: output, input and parameter gradients and running
// statistics bit for bit, training and evaluation, both layouts, with and
// without the fused ReLU.
func TestBatchNormBF16(t *testing.T) {
	for _, format := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
		for _, training := range []bool{true, false} {
			for _, relu := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/training=%v/relu=%v", format, training, relu), func(t *testing.T) {
					g := autograd.NewGenerator(5)
					x := autograd.Cast(autograd.Randn(g, 3, 4, 5, 6).To(format), autograd.BFloat16)
					dy := autograd.Cast(autograd.Randn(g, 3, 4, 5, 6), autograd.BFloat16)
					type side struct{ x, w, b, rm, rv *autograd.Tensor }
					mk := func() side {
						r := autograd.NewGenerator(6)
						return side{x.Detach().SetRequiresGrad(true), autograd.Randn(r, 4).SetRequiresGrad(true),
							autograd.Randn(r, 4).SetRequiresGrad(true), autograd.Randn(r, 4), autograd.Rand(r, 4)}
					}
					bn := func(s side, in *autograd.Tensor) *autograd.Tensor {
						if relu {
							return autograd.BatchNormReLU(in, s.rm, s.rv, s.w, s.b, training, 0.1, 1e-5)
						}
						return autograd.BatchNorm(in, s.rm, s.rv, s.w, s.b, training, 0.1, 1e-5)
					}
					native, via := mk(), mk()
					got := bn(native, native.x)
					want := autograd.Cast(bn(via, autograd.Cast(via.x, autograd.Float32)), autograd.BFloat16)
					if got.DType() != autograd.BFloat16 || got.Format() != format {
						t.Fatalf("result is %v %v, want bfloat16 %v", got.DType(), got.Format(), format)
					}
					sameValues(t, "output", got, want)
					sameValues(t, "running mean", native.rm, via.rm)
					sameValues(t, "running var", native.rv, via.rv)
					got.Backward(dy)
					want.Backward(dy)
					sameValues(t, "input gradient", native.x.Grad(), via.x.Grad())
					sameValues(t, "weight gradient", native.w.Grad(), via.w.Grad())
					sameValues(t, "bias gradient", native.b.Grad(), via.b.Grad())
					func() {
						in := autograd.NoGrad(x).Clone()
						s := mk()
						bn2 := autograd.BatchNormInPlace(in, s.rm, s.rv, s.w, s.b, training, 0.1, 1e-5, relu)
						if bn2 != in {
							t.Fatal("BatchNormInPlace returned another tensor")
						}
						sameValues(t, "in place", in, want)
					}()
				})
			}
		}
	}
}

// TestBinaryBF16Promotion checks Add, Sub, Mul and Div with bfloat16
// operands against PyTorch's type promotion: bfloat16 with bfloat16 (or a
// 0-d float32 tensor) stays bfloat16, with a float32 tensor it becomes
// float32; values are the float32 op's, rounded once for bfloat16 results,
// and each operand's gradient has its own dtype.
func TestBinaryBF16Promotion(t *testing.T) {
	ops := []struct {
		name string
		f    func(a, b *autograd.Tensor) *autograd.Tensor
	}{{"Add", autograd.Add}, {"Sub", autograd.Sub}, {"Mul", autograd.Mul}, {"Div", autograd.Div}}
	g := autograd.NewGenerator(8)
	bf := func(shape ...int) *autograd.Tensor {
		return autograd.Cast(autograd.AddScalar(autograd.Rand(g, shape...), 0.5), autograd.BFloat16)
	}
	f32 := func(shape ...int) *autograd.Tensor { return autograd.AddScalar(autograd.Rand(g, shape...), 0.5) }
	cases := []struct {
		name string
		a, b *autograd.Tensor
		want autograd.DType
	}{
		{"bf16 same shape", bf(2, 3, 4, 5), bf(2, 3, 4, 5), autograd.BFloat16},
		{"bf16 channels-last", bf(2, 3, 4, 5).To(autograd.ChannelsLast), bf(2, 3, 4, 5).To(autograd.ChannelsLast), autograd.BFloat16},
		{"bf16 broadcast", bf(2, 3), bf(3), autograd.BFloat16},
		{"bf16 and 0-d float32", bf(2, 3), autograd.Scalar(1.5), autograd.BFloat16},
		{"float32 and bf16", f32(2, 3), bf(2, 3), autograd.Float32},
		{"bf16 and float32 vector", bf(2, 3), f32(3), autograd.Float32},
	}
	for _, op := range ops {
		for _, c := range cases {
			t.Run(op.name+"/"+c.name, func(t *testing.T) {
				a, b := c.a.Detach().SetRequiresGrad(true), c.b.Detach().SetRequiresGrad(true)
				ra, rb := c.a.Detach().SetRequiresGrad(true), c.b.Detach().SetRequiresGrad(true)
				got := op.f(a, b)
				want := op.f(autograd.Cast(ra, autograd.Float32), autograd.Cast(rb, autograd.Float32))
				if c.want == autograd.BFloat16 {
					want = autograd.Cast(want, autograd.BFloat16)
				}
				if got.DType() != c.want {
					t.Fatalf("result is %v, want %v", got.DType(), c.want)
				}
				sameValues(t, "value", got, want)
				autograd.Sum(autograd.Cast(got, autograd.Float32), nil, false).Backward()
				autograd.Sum(autograd.Cast(want, autograd.Float32), nil, false).Backward()
				for i, p := range [][2]*autograd.Tensor{{a, ra}, {b, rb}} {
					if p[0].Grad().DType() != p[0].DType() {
						t.Errorf("gradient %d is %v for a %v operand", i, p[0].Grad().DType(), p[0].DType())
					}
					sameValues(t, fmt.Sprintf("gradient %d", i), p[0].Grad(), p[1].Grad())
				}
			})
		}
	}
}

// TestBF16ThroughFloat32 checks the ops that compute bfloat16 input in
// float32 (reductions, reorders, softmax, pooling): they give a bfloat16
// result equal to the float32 op's rounded once, and a bfloat16 gradient equal to the float32 route's;
// under autocast the float32-policy losses take bfloat16 input.
func TestBF16ThroughFloat32(t *testing.T) {
	ops := []struct {
		name string
		f    func(x *autograd.Tensor) *autograd.Tensor
	}{
		{"Sum", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Sum(x, []int{1, 2}, false) }},
		{"Mean", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Mean(x, nil, false) }},
		{"Transpose", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Transpose(x, 1, 3) }},
		{"Permute", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Permute(x, 0, 2, 3, 1) }},
		{"Split", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Split(x, 2, 1)[1] }},
		{"SplitSizes", func(x *autograd.Tensor) *autograd.Tensor { return autograd.SplitSizes(x, []int{1, 2}, 1)[0] }},
		{"Softmax", func(x *autograd.Tensor) *autograd.Tensor { return autograd.Softmax(x, 3) }},
		{"LogSoftmax", func(x *autograd.Tensor) *autograd.Tensor { return autograd.LogSoftmax(x, 1) }},
		{"MaxPool2d", func(x *autograd.Tensor) *autograd.Tensor {
			return autograd.MaxPool2d(x, autograd.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}})
		}},
		{"MaxPool2d/channels-last", func(x *autograd.Tensor) *autograd.Tensor {
			return autograd.MaxPool2d(x.To(autograd.ChannelsLast), autograd.PoolOptions{Kernel: []int{2}})
		}},
		{"AvgPool2d", func(x *autograd.Tensor) *autograd.Tensor {
			return autograd.AvgPool2d(x, autograd.PoolOptions{Kernel: []int{3}, Padding: []int{1}})
		}},
		{"AdaptiveAvgPool2d", func(x *autograd.Tensor) *autograd.Tensor { return autograd.AdaptiveAvgPool2d(x, 1, 1) }},
	}
	g := autograd.NewGenerator(10)
	x0 := autograd.Cast(autograd.Randn(g, 2, 3, 4, 5), autograd.BFloat16)
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			x, ref := x0.Detach().SetRequiresGrad(true), x0.Detach().SetRequiresGrad(true)
			got := op.f(x)
			want := autograd.Cast(op.f(autograd.Cast(ref, autograd.Float32)), autograd.BFloat16)
			if got.DType() != autograd.BFloat16 {
				t.Fatalf("result is %v, want bfloat16", got.DType())
			}
			sameValues(t, "value", got, want)
			autograd.Sum(autograd.Cast(got, autograd.Float32), nil, false).Backward()
			autograd.Sum(autograd.Cast(want, autograd.Float32), nil, false).Backward()
			if x.Grad().DType() != autograd.BFloat16 {
				t.Fatalf("gradient is %v", x.Grad().DType())
			}
			sameValues(t, "gradient", x.Grad(), ref.Grad())
		})
	}
	func() {
		for _, loss := range []struct {
			name string
			f    func(x, y *autograd.Tensor, r autograd.Reduction) *autograd.Tensor
		}{{"MSELoss", autograd.MSELoss}, {"BCEWithLogits", autograd.BCEWithLogits}} {
			y := autograd.Cast(autograd.Rand(g, 2, 3, 4, 5), autograd.BFloat16)
			got := loss.f(autograd.Autocast(x0), y, autograd.ReductionMean)
			want := loss.f(autograd.Cast(x0, autograd.Float32), autograd.Cast(y, autograd.Float32), autograd.ReductionMean)
			if got.DType() != autograd.Float32 {
				t.Errorf("%s under autocast is %v, want float32", loss.name, got.DType())
			}
			sameValues(t, loss.name, got, want)
		}
	}()
}

// TestBF16GradientReuse runs a bfloat16 residual block's backward pass
// several times: after the first, its gradients are made in buffers the
// cache hands out again (filled with NaNs in tests), and every pass must
// give the first one's gradients bit for bit, an op whose backward left an
// element of its result unwritten would not.
func TestBF16GradientReuse(t *testing.T) {
	autograd.FreeCachedGradients()
	defer autograd.FreeCachedGradients()
	g := autograd.NewGenerator(9)
	// 64 KiB and more a tensor, so the buffers are the coloured ones.
	x0 := autograd.Cast(autograd.Randn(g, 2, 16, 32, 32).To(autograd.ChannelsLast), autograd.BFloat16)
	w1 := autograd.Cast(autograd.Randn(g, 16, 16, 3, 3).To(autograd.ChannelsLast), autograd.BFloat16)
	w2 := autograd.Cast(autograd.Randn(g, 16, 16, 1, 1).To(autograd.ChannelsLast), autograd.BFloat16)
	dy := autograd.Cast(autograd.Randn(g, 2, 16, 32, 32), autograd.BFloat16)
	pass := func() []*autograd.Tensor {
		x, a, b := x0.Detach().SetRequiresGrad(true), w1.Detach().SetRequiresGrad(true), w2.Detach().SetRequiresGrad(true)
		bnw, bnb := autograd.Ones(16).SetRequiresGrad(true), autograd.Zeros(16).SetRequiresGrad(true)
		h := autograd.Conv2d(x, a, nil, autograd.ConvOptions{Padding: []int{1, 1}})
		h = autograd.BatchNormReLU(h, autograd.Zeros(16), autograd.Ones(16), bnw, bnb, true, 0.1, 1e-5)
		h = autograd.Conv2d(h, b, nil, autograd.ConvOptions{})
		h = autograd.BatchNorm(h, autograd.Zeros(16), autograd.Ones(16), bnw, bnb, true, 0.1, 1e-5)
		autograd.AddReLU(h, x).Backward(dy)
		return []*autograd.Tensor{x.Grad(), a.Grad(), b.Grad(), bnw.Grad(), bnb.Grad()}
	}
	want := pass()
	for i := range 3 {
		for k, got := range pass() {
			sameBitsT(t, fmt.Sprintf("pass %d, gradient %d", i+2, k), got, want[k])
		}
	}
}
