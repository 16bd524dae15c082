package autograd_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// quantSame fails the test unless got has want's dtype and shape, memory
// format f, and the same bits in every logical element (Values widens
// float32 and the integers exactly, so float64 bits compare float32 bits).
func quantSame(t *testing.T, what string, got, want *autograd.Tensor, f autograd.MemoryFormat) {
	t.Helper()
	if got.DType() != want.DType() || !slices.Equal(got.Shape(), want.Shape()) || got.Format() != f {
		t.Fatalf("%s: %v %v %v, want %v %v %v", what, got.DType(), got.Shape(), got.Format(), want.DType(), want.Shape(), f)
	}
	gv, wv := got.Values(), want.Values()
	for i := range wv {
		if math.Float64bits(gv[i]) != math.Float64bits(wv[i]) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, gv[i], wv[i])
		}
	}
}

// The edges of the grid: ties round to even, the zero point is added
// after rounding, values past the range clamp, NaN gives the zero point
// and ±Inf the ends (where PyTorch's C++ conversion is undefined).
func TestQuantizeValues(t *testing.T) {
	x := autograd.FromFloat32([]float32{0.5, 1.5, 2.5, -0.5, -1.5, 1000, -1000,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())})
	for _, tc := range []struct {
		dtype autograd.DType
		zero  int
		want  string
	}{
		{autograd.Uint8, 10, "[10 12 12 10 8 255 0 255 0 10]"},
		{autograd.Int8, 0, "[0 2 2 0 -2 127 -128 127 -128 0]"},
		{autograd.Int8, -128, "[-128 -126 -126 -128 -128 127 -128 127 -128 -128]"},
	} {
		q := autograd.Quantize(x, 1, tc.zero, tc.dtype)
		if got := fmt.Sprint(q.Values()); q.DType() != tc.dtype || got != tc.want {
			t.Errorf("Quantize to %v with zero point %d: %v %s, want %s", tc.dtype, tc.zero, q.DType(), got, tc.want)
		}
	}
	q := autograd.FromInt8([]int8{-128, -1, 0, 5, 127})
	if got := fmt.Sprint(autograd.Dequantize(q, 0.5, -2).Values()); got != "[-63 0.5 1 3.5 64.5]" {
		t.Errorf("Dequantize = %s", got)
	}
}

// A bfloat16 input quantizes as its exact float32 widening; every memory
// format quantizes element for element and keeps its layout.
func TestQuantizeDTypesAndFormats(t *testing.T) {
	g := autograd.NewGenerator(4)
	x := autograd.MulScalar(autograd.Randn(g, 2, 3, 4, 5), 3)
	want := autograd.Quantize(autograd.Cast(autograd.Cast(x, autograd.BFloat16), autograd.Float32), 0.05, 7, autograd.Uint8)
	quantSame(t, "bfloat16", autograd.Quantize(autograd.Cast(x, autograd.BFloat16), 0.05, 7, autograd.Uint8), want, autograd.Contiguous)
	scales := autograd.FromFloat32([]float32{0.01, 0.02, 0.03})
	f := autograd.ChannelsLast
	xf := x.To(f)
	quantSame(t, "per tensor", autograd.Quantize(xf, 0.03, -4, autograd.Int8), autograd.Quantize(x, 0.03, -4, autograd.Int8), f)
	for axis := range 4 {
		s := autograd.Full(0.02, x.Dim(axis))
		if axis == 1 {
			s = scales
		}
		ref := autograd.QuantizePerChannel(x, s, axis, autograd.Int8)
		q := autograd.QuantizePerChannel(xf, s, axis, autograd.Int8)
		quantSame(t, fmt.Sprint("per channel, axis ", axis), q, ref, f)
		quantSame(t, fmt.Sprint("dequantized, axis ", axis), autograd.DequantizePerChannel(q, s, axis),
			autograd.DequantizePerChannel(ref, s, axis), f)
		quantSame(t, fmt.Sprint("fake, axis ", axis), autograd.FakeQuantizePerChannel(xf, s, axis, autograd.Int8),
			autograd.FakeQuantizePerChannel(x, s, axis, autograd.Int8), f)
	}
	// Channel c of axis 1 uses scales[c]: x = 0.3 is 30, 15 and 10 steps.
	y := autograd.QuantizePerChannel(autograd.Full(0.3, 2, 3, 1), scales, -2, autograd.Int8)
	if got := fmt.Sprint(y.Values()); got != "[30 15 10 30 15 10]" {
		t.Errorf("per-channel scales along axis -2: %s", got)
	}
}

// Quantizing and dequantizing are not differentiable, as in PyTorch: their
// results never require grad, so no gradient is recorded through them.
func TestQuantizeNotDifferentiable(t *testing.T) {
	x := autograd.Randn(autograd.NewGenerator(1), 4).SetRequiresGrad(true)
	q := autograd.Quantize(x, 0.1, 0, autograd.Int8)
	d := autograd.Dequantize(q, 0.1, 0)
	pc := autograd.QuantizePerChannel(x, autograd.Full(0.1, 4), 0, autograd.Int8)
	for _, r := range []*autograd.Tensor{q, d, pc, autograd.DequantizePerChannel(pc, autograd.Full(0.1, 4), 0)} {
		if r.RequiresGrad() {
			t.Errorf("%v result requires grad", r.DType())
		}
	}
}

// FakeQuantize's straight-through gradient is checked exactly rather than
// by finite differences: the function is a staircase, whose true
// derivative is 0 wherever it exists, so differences measure the steps,
// not the estimator. The gradient passes where the rounded value plus the
// zero point lies in the range before clamping: with scale 1 and zero
// point 3 into uint8 that is x in (-3.5, 252.5], since -3.5 rounds to
// even -4, off the range, and 252.5 to even 252, onto its end.
func TestFakeQuantizeGradient(t *testing.T) {
	const pass = "[0 0 1 1 1 1 1 1 0 0 0]"
	for _, dt := range []autograd.DType{autograd.Float32, autograd.BFloat16} {
		xs := []float32{-3.6, -3.5, -3.49, -2.5, 0, 100.2, 251.5, 252.5, 252.51, 254.5, float32(math.NaN())}
		if dt == autograd.BFloat16 {
			// Values bfloat16 holds exactly, on the same sides of the ends.
			xs = []float32{-3.75, -3.5, -3.25, -2.5, 0, 100, 251, 252, 253, 254, float32(math.NaN())}
		}
		x := autograd.FromFloat32(xs)
		x = autograd.Cast(x, dt).SetRequiresGrad(true)
		y := autograd.FakeQuantize(x, 1, 3, autograd.Uint8)
		y.Backward(autograd.Ones(len(xs)))
		if x.Grad().DType() != dt || fmt.Sprint(x.Grad().Values()) != pass {
			t.Errorf("%v: gradient %v %v, want %s", dt, x.Grad().DType(), x.Grad().Values(), pass)
		}
		if y.DType() != autograd.Float32 {
			t.Errorf("%v: result dtype %v", dt, y.DType())
		}
	}
	// Per channel, each channel's scale sets its range: with scales 1 and
	// 0.5 into int8, 100 is inside the first channel's range only.
	x := autograd.FromFloat32([]float32{100, -128.4, 100, -64.2}, 2, 2).SetRequiresGrad(true)
	s := autograd.FromFloat32([]float32{1, 0.5}).SetRequiresGrad(true)
	autograd.FakeQuantizePerChannel(x, s, 0, autograd.Int8).Backward(autograd.Full(2, 2, 2))
	if got := fmt.Sprint(x.Grad().Values()); got != "[2 2 0 2]" {
		t.Errorf("per-channel gradient %s, want [2 2 0 2]", got)
	}
	if s.Grad() != nil {
		t.Errorf("the scales received a gradient")
	}
}

func TestQuantBadInputs(t *testing.T) {
	x := autograd.Zeros(2, 3)
	q8 := autograd.Empty(autograd.Int8, 2, 3)
	s3 := autograd.Full(0.1, 3)
	tiny := math.Float32frombits(1) // a subnormal, whose reciprocal is +Inf
	shapeBadInputs(t, []shapeBadCase{
		{"nil", func() { autograd.Quantize(nil, 1, 0, autograd.Int8) }, "Quantize: input is nil"},
		{"input dtype", func() { autograd.Quantize(q8, 1, 0, autograd.Int8) }, "Quantize: input has dtype int8 (shape [2 3]); Quantize takes float32 or bfloat16"},
		{"result dtype", func() { autograd.Quantize(x, 1, 0, autograd.Int32) }, "Quantize: dtype int32 is not a quantized type; want uint8 or int8"},
		{"zero scale", func() { autograd.Quantize(x, 0, 0, autograd.Int8) }, "Quantize: scale 0 is not a positive finite number"},
		{"negative scale", func() { autograd.FakeQuantize(x, -1, 0, autograd.Int8) }, "FakeQuantize: scale -1 is not"},
		{"NaN scale", func() { autograd.Dequantize(q8, float32(math.NaN()), 0) }, "Dequantize: scale NaN is not"},
		{"Inf scale", func() { autograd.Quantize(x, float32(math.Inf(1)), 0, autograd.Uint8) }, "scale +Inf is not"},
		{"subnormal scale", func() { autograd.Quantize(x, tiny, 0, autograd.Uint8) }, "with a finite reciprocal"},
		{"u8 zero point", func() { autograd.Quantize(x, 1, 256, autograd.Uint8) }, "Quantize: zero point 256 is outside [0, 255], the range of uint8"},
		{"u8 negative zero point", func() { autograd.FakeQuantize(x, 1, -1, autograd.Uint8) }, "zero point -1 is outside [0, 255]"},
		{"s8 zero point", func() { autograd.Dequantize(q8, 1, 128) }, "Dequantize: zero point 128 is outside [-128, 127], the range of int8"},
		{"dequantize dtype", func() { autograd.Dequantize(x, 1, 0) }, "Dequantize: input has dtype float32 (shape [2 3]); Dequantize takes uint8 or int8"},
		{"dequantize nil", func() { autograd.Dequantize(nil, 1, 0) }, "Dequantize: input is nil"},
		{"axis", func() { autograd.QuantizePerChannel(x, s3, 2, autograd.Int8) }, "QuantizePerChannel: axis 2 out of range for a 2-D input of shape [2 3]"},
		{"negative axis", func() { autograd.DequantizePerChannel(q8, s3, -3) }, "DequantizePerChannel: axis -3 out of range"},
		{"0-d", func() { autograd.QuantizePerChannel(autograd.Scalar(1), s3, 0, autograd.Int8) }, "axis 0 out of range for a 0-D input"},
		{"scales length", func() { autograd.QuantizePerChannel(x, s3, 0, autograd.Int8) }, "QuantizePerChannel: scales has 3 elements, dimension 0 of input shape [2 3] has 2"},
		{"scales dtype", func() { autograd.FakeQuantizePerChannel(x, autograd.Empty(autograd.Int64, 3), 1, autograd.Int8) }, "FakeQuantizePerChannel: scales must be a 1-D float32 tensor, got int64 of shape [3]"},
		{"scales rank", func() { autograd.QuantizePerChannel(x, autograd.Full(0.1, 1, 3), 1, autograd.Int8) }, "scales must be a 1-D float32 tensor, got float32 of shape [1 3]"},
		{"scales nil", func() { autograd.DequantizePerChannel(q8, nil, 1) }, "DequantizePerChannel: scales is nil"},
		{"scale value", func() { autograd.QuantizePerChannel(x, autograd.FromFloat32([]float32{0.1, 0, 0.1}), 1, autograd.Int8) }, "QuantizePerChannel: scale 0 is not"},
		{"per-channel dtype", func() { autograd.QuantizePerChannel(x, s3, 1, autograd.BFloat16) }, "dtype bfloat16 is not a quantized type"},
		{"per-channel input", func() { autograd.DequantizePerChannel(x, s3, 1) }, "DequantizePerChannel: input has dtype float32"},
	})
	err := autograd.Try(func() { autograd.Quantize(x, 1, 0, autograd.Int32) })
	if !errors.Is(err, autograd.ErrDType) {
		t.Errorf("a non-8-bit dtype fails with %v, want ErrDType", err)
	}
}

// Quantize stores values as 8-bit integers on a grid of step scale
// offset by the zero point; Dequantize reads them back.
func ExampleQuantize() {
	x := autograd.FromFloat32([]float32{-1, 0, 0.25, 0.3, 2.5, 100})
	q := autograd.Quantize(x, 0.1, 10, autograd.Uint8)
	fmt.Println(q.DType(), q.Values())
	fmt.Println(autograd.Dequantize(q, 0.1, 10).Values())
	// Output:
	// uint8 [0 10 12 13 35 255]
	// [-1 0 0.20000000298023224 0.30000001192092896 2.5 24.5]
}
