package autograd_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

// convertGrid returns a leaf of shape whose values are ±k/64 with k in
// [33, 126]: numbers bfloat16 holds exactly, as it does each value ± 1/64,
// so a finite difference with that step sees no rounding.
func convertGrid(g *autograd.Generator, shape ...int) *autograd.Tensor {
	x := autograd.Zeros(shape...)
	d := x.Float32s()
	for i := range d {
		d[i] = float32(33+g.IntN(94)) / 64
		if g.IntN(2) == 0 {
			d[i] = -d[i]
		}
	}
	return x
}

func TestConvertGradCheck(t *testing.T) {
	g := autograd.NewGenerator(31)
	bf16 := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Cast(xs[0], autograd.BFloat16) }
	roundTrip := func(xs ...*autograd.Tensor) *autograd.Tensor {
		return autograd.Cast(autograd.Cast(xs[0], autograd.BFloat16), autograd.Float32)
	}
	same := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Cast(xs[0], autograd.Float32) }
	to := func(f autograd.MemoryFormat) func(xs ...*autograd.Tensor) *autograd.Tensor {
		return func(xs ...*autograd.Tensor) *autograd.Tensor { return xs[0].To(f) }
	}
	contiguous := func(xs ...*autograd.Tensor) *autograd.Tensor { return xs[0].Contiguous() }
	clone := func(xs ...*autograd.Tensor) *autograd.Tensor { return xs[0].Clone() }
	// Each result feeds an op, so a gradient that came back in the wrong
	// layout would be summed into the wrong elements.
	thenSum := func(f func(xs ...*autograd.Tensor) *autograd.Tensor) func(xs ...*autograd.Tensor) *autograd.Tensor {
		return func(xs ...*autograd.Tensor) *autograd.Tensor {
			return autograd.Sum(autograd.Mul(f(xs...), f(xs...)), []int{1}, false)
		}
	}
	c, cl, cl3 := autograd.Contiguous, autograd.ChannelsLast, autograd.ChannelsLast3d
	cases := []struct {
		name    string
		shape   []int
		format  autograd.MemoryFormat
		f       func(xs ...*autograd.Tensor) *autograd.Tensor
		wantFmt autograd.MemoryFormat
	}{
		{"Cast bf16 0-d", []int{}, c, bf16, c},
		{"Cast bf16 1-D", []int{7}, c, bf16, c},
		{"Cast bf16 cl", []int{2, 3, 2, 2}, cl, bf16, cl},
		{"Cast bf16 cl3d", []int{2, 2, 2, 1, 3}, cl3, bf16, cl3},
		{"Cast bf16 and back", []int{3, 4}, c, roundTrip, c},
		{"Cast bf16 and back cl", []int{2, 3, 2, 3}, cl, roundTrip, cl},
		{"Cast to own dtype", []int{2, 3}, c, same, c},
		{"To cl", []int{2, 3, 2, 3}, c, to(cl), cl},
		{"To cl3d", []int{2, 3, 2, 2, 2}, c, to(cl3), cl3},
		{"To cl then op", []int{2, 3, 2, 3}, c, thenSum(to(cl)), c},
		{"To own format", []int{2, 3, 2, 3}, cl, to(cl), cl},
		{"Contiguous of cl", []int{2, 3, 2, 3}, cl, contiguous, c},
		{"Contiguous of cl3d", []int{1, 3, 2, 2, 2}, cl3, contiguous, c},
		{"Contiguous of cl then op", []int{2, 3, 2, 3}, cl, thenSum(contiguous), c},
		{"Contiguous of contiguous", []int{4, 3}, c, contiguous, c},
		{"Clone 0-d", []int{}, c, clone, c},
		{"Clone 2-D", []int{3, 5}, c, clone, c},
		{"Clone cl", []int{2, 3, 2, 3}, cl, clone, cl},
		{"Clone cl3d", []int{1, 2, 3, 2, 2}, cl3, clone, cl3},
		{"Clone cl then op", []int{2, 3, 2, 3}, cl, thenSum(clone), c},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := convertGrid(g, tc.shape...)
			if tc.format != c {
				x = x.To(tc.format).Detach()
			}
			x.SetRequiresGrad(true)
			if got := tc.f(x).Format(); got != tc.wantFmt {
				t.Errorf("result format %v, want %v", got, tc.wantFmt)
			}
			if err := autograd.GradCheck(tc.f, []*autograd.Tensor{x}, autograd.GradCheckOptions{Eps: 1.0 / 64}); err != nil {
				t.Fatal(err)
			}
			if x.Grad().Format() != x.Format() || x.Grad().DType() != autograd.Float32 {
				t.Errorf("gradient %v %v, want float32 %v", x.Grad().DType(), x.Grad().Format(), x.Format())
			}
		})
	}
}

// convertCastGolden are gen_convert.py's cast cases with their target
// dtypes.
var convertCastGolden = []struct {
	name  string
	dtype autograd.DType
}{
	{"f32_bf16", autograd.BFloat16}, {"bf16_f32", autograd.Float32},
	{"f32_i8", autograd.Int8}, {"f32_u8", autograd.Uint8}, {"f32_i32", autograd.Int32}, {"f32_i64", autograd.Int64},
	{"bf16_i32", autograd.Int32},
	{"i64_f32", autograd.Float32}, {"i64_bf16", autograd.BFloat16}, {"i64_i32", autograd.Int32},
	{"i64_i8", autograd.Int8}, {"i64_u8", autograd.Uint8},
	{"i8_u8", autograd.Uint8}, {"i8_i32", autograd.Int32}, {"i8_i64", autograd.Int64}, {"i8_f32", autograd.Float32},
	{"u8_i8", autograd.Int8}, {"i32_i64", autograd.Int64},
}

// convertSame reports the first element where got and want differ in
// dtype or bits (any NaN matching any NaN), comparing int64s as integers
// since float64 cannot hold them all.
func convertSame(got, want *autograd.Tensor) error {
	if got.DType() != want.DType() || !slices.Equal(got.Shape(), want.Shape()) {
		return fmt.Errorf("got %v %v, want %v %v", got.DType(), got.Shape(), want.DType(), want.Shape())
	}
	if got.DType() == autograd.Int64 {
		g, w := got.Contiguous().Int64s(), want.Int64s()
		for i := range w {
			if g[i] != w[i] {
				return fmt.Errorf("element %d: got %d, want %d", i, g[i], w[i])
			}
		}
		return nil
	}
	g, w := got.Values(), want.Values()
	for i := range w {
		if g[i] != w[i] && !(math.IsNaN(g[i]) && math.IsNaN(w[i])) || math.Signbit(g[i]) != math.Signbit(w[i]) && !math.IsNaN(w[i]) {
			return fmt.Errorf("element %d: got %v, want %v", i, g[i], w[i])
		}
	}
	return nil
}

// TestConvertGolden checks Cast, To, Contiguous and Clone against
// testdata/golden/gen_convert.py: every dtype pair's values bit for bit
// (rounding, truncation, wrapping), gradients of float casts, and the
// strides of every format change and of the gradients flowing back.
func TestConvertGolden(t *testing.T) {
	set := golden.Load(t, "convert.safetensors")
	for _, c := range convertCastGolden {
		name := "cast." + c.name
		t.Run(name, func(t *testing.T) {
			x := set.Get(t, name+".x")
			if x.DType().IsFloat() && c.dtype.IsFloat() {
				x.SetRequiresGrad(true)
			}
			y := autograd.Cast(x, c.dtype)
			if err := convertSame(y, set.Get(t, name+".out")); err != nil {
				t.Fatal(err)
			}
			gout, ok := set[name+".gout"]
			if !ok {
				return
			}
			y.Backward(gout)
			if err := convertSame(x.Grad(), set.Get(t, name+".grad_x")); err != nil {
				t.Errorf("gradient: %v", err)
			}
		})
	}
	formats := []struct {
		name string
		in   autograd.MemoryFormat
		f    func(x *autograd.Tensor) *autograd.Tensor
	}{
		{"to_cl", autograd.Contiguous, func(x *autograd.Tensor) *autograd.Tensor { return x.To(autograd.ChannelsLast) }},
		{"to_cl3d", autograd.Contiguous, func(x *autograd.Tensor) *autograd.Tensor { return x.To(autograd.ChannelsLast3d) }},
		{"contiguous", autograd.ChannelsLast, (*autograd.Tensor).Contiguous},
		{"contiguous_3d", autograd.ChannelsLast3d, (*autograd.Tensor).Contiguous},
		{"clone", autograd.Contiguous, (*autograd.Tensor).Clone},
		{"clone_cl", autograd.ChannelsLast, (*autograd.Tensor).Clone},
		{"to_cl_int64", autograd.Contiguous, func(x *autograd.Tensor) *autograd.Tensor { return x.To(autograd.ChannelsLast) }},
		{"to_cl_c1", autograd.Contiguous, func(x *autograd.Tensor) *autograd.Tensor { return x.To(autograd.ChannelsLast) }},
		{"to_cl_hw1", autograd.Contiguous, func(x *autograd.Tensor) *autograd.Tensor { return x.To(autograd.ChannelsLast) }},
	}
	for _, c := range formats {
		name := "format." + c.name
		t.Run(name, func(t *testing.T) {
			x := set.Get(t, name+".x").To(c.in)
			if x.DType() == autograd.Float32 {
				x = x.Detach().SetRequiresGrad(true)
			}
			y := c.f(x)
			if err := convertSame(y, set.Get(t, name+".out")); err != nil {
				t.Fatal(err)
			}
			if got, want := y.Strides(), set.Get(t, name+".out_strides").Int64s(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("strides %v (%v), PyTorch's %v", got, y.Format(), want)
			}
			gout, ok := set[name+".gout"]
			if !ok {
				return
			}
			y.Backward(gout)
			if err := convertSame(x.Grad(), gout); err != nil {
				t.Errorf("gradient: %v", err)
			}
			if got, want := x.Grad().Strides(), set.Get(t, name+".grad_strides").Int64s(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("gradient strides %v, PyTorch's %v", got, want)
			}
		})
	}
}

func TestConvertBadInputs(t *testing.T) {
	x4 := autograd.Zeros(2, 3, 2, 2)
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"Cast nil", func() { autograd.Cast(nil, autograd.Float32) }, "Cast: input is nil"},
		{"Cast unknown dtype", func() { autograd.Cast(x4, autograd.DType(9)) }, "Cast: unknown dtype DType(9)"},
		{"Cast negative dtype", func() { autograd.Cast(x4, autograd.DType(-1)) }, "Cast: unknown dtype DType(-1)"},
		{"To unknown format", func() { x4.To(autograd.MemoryFormat(7)) }, "To: unknown memory format MemoryFormat(7)"},
		{"To channels-last on 5-D", func() { autograd.Zeros(1, 2, 2, 2, 2).To(autograd.ChannelsLast) }, "To: channels_last needs a 4-D tensor, got shape [1 2 2 2 2]"},
		{"To channels-last-3d on 4-D", func() { x4.To(autograd.ChannelsLast3d) }, "To: channels_last_3d needs a 5-D tensor, got shape [2 3 2 2]"},
		{"To channels-last on 0-d", func() { autograd.Scalar(1).To(autograd.ChannelsLast) }, "got shape []"},
		{"SetFormat unknown format", func() { autograd.Zeros(2).SetFormat(autograd.MemoryFormat(-2)) }, "SetFormat: unknown memory format MemoryFormat(-2)"},
		{"SetFormat wrong rank", func() { autograd.Zeros(2, 3).SetFormat(autograd.ChannelsLast) }, "SetFormat: channels_last needs a 4-D tensor, got shape [2 3]"},
		{"CopyFrom nil", func() { x4.CopyFrom(nil) }, "CopyFrom: source is nil"},
		{"CopyFrom shape", func() { x4.CopyFrom(autograd.Zeros(2, 3, 2)) }, "CopyFrom: source shape [2 3 2] does not match destination [2 3 2 2]"},
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
	if x4.Format() != autograd.Contiguous {
		t.Errorf("a rejected conversion left the tensor %v", x4.Format())
	}
}
