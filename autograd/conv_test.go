package autograd

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// convLeaf returns t as a fresh leaf that requires a gradient.
func convLeaf(t *Tensor) *Tensor { return t.Detach().SetRequiresGrad(true) }

func TestConvGradCheck(t *testing.T) {
	g := NewGenerator(7)
	cases := []struct {
		name    string
		x, w, b *Tensor
		opt     ConvOptions
		wantFmt MemoryFormat
		conv3d  bool
	}{
		{name: "basic", x: Randn(g, 2, 3, 5, 4), w: Randn(g, 4, 3, 3, 3), b: Randn(g, 4)},
		{name: "stride2-pad1", x: Randn(g, 2, 2, 6, 5), w: Randn(g, 3, 2, 3, 3), b: Randn(g, 3),
			opt: ConvOptions{Stride: []int{2}, Padding: []int{1}}},
		{name: "dilation2", x: Randn(g, 1, 2, 7, 6), w: Randn(g, 3, 2, 3, 2), b: Randn(g, 3),
			opt: ConvOptions{Dilation: []int{2}, Padding: []int{2, 1}, Stride: []int{1, 2}}},
		{name: "groups2", x: Randn(g, 2, 4, 5, 5), w: Randn(g, 4, 2, 3, 3), b: Randn(g, 4),
			opt: ConvOptions{Groups: 2, Padding: []int{1}}},
		{name: "depthwise", x: Randn(g, 2, 3, 5, 5), w: Randn(g, 3, 1, 3, 3), b: Randn(g, 3),
			opt: ConvOptions{Groups: 3, Padding: []int{1}, Stride: []int{2}}},
		{name: "no-bias", x: Randn(g, 2, 3, 4, 4), w: Randn(g, 2, 3, 2, 2)},
		{name: "pointwise", x: Randn(g, 2, 4, 3, 3), w: Randn(g, 6, 2, 1, 1), b: Randn(g, 6), opt: ConvOptions{Groups: 2}},
		{name: "cl-x-w", x: Randn(g, 2, 4, 5, 5).To(ChannelsLast), w: Randn(g, 4, 2, 3, 3).To(ChannelsLast), b: Randn(g, 4),
			opt: ConvOptions{Groups: 2, Padding: []int{1}, Stride: []int{2, 1}}, wantFmt: ChannelsLast},
		{name: "cl-x", x: Randn(g, 2, 3, 5, 4).To(ChannelsLast), w: Randn(g, 4, 3, 3, 3), b: Randn(g, 4),
			opt: ConvOptions{Dilation: []int{2}, Padding: []int{1}}, wantFmt: ChannelsLast},
		{name: "cl-w", x: Randn(g, 2, 3, 5, 4), w: Randn(g, 4, 3, 3, 3).To(ChannelsLast),
			opt: ConvOptions{Padding: []int{1}}, wantFmt: ChannelsLast},
		{name: "cl-depthwise", x: Randn(g, 2, 3, 5, 5).To(ChannelsLast), w: Randn(g, 3, 1, 3, 3).To(ChannelsLast), b: Randn(g, 3),
			opt: ConvOptions{Groups: 3, Padding: []int{1}}, wantFmt: ChannelsLast},
		{name: "cl-pointwise", x: Randn(g, 2, 4, 3, 3).To(ChannelsLast), w: Randn(g, 2, 4, 1, 1).To(ChannelsLast), b: Randn(g, 2),
			wantFmt: ChannelsLast},
		{name: "unbatched", x: Randn(g, 2, 5, 4), w: Randn(g, 3, 2, 3, 3).To(ChannelsLast), b: Randn(g, 3),
			opt: ConvOptions{Padding: []int{1}}},
		{name: "3d", x: Randn(g, 2, 2, 4, 3, 4), w: Randn(g, 3, 2, 2, 3, 2), b: Randn(g, 3),
			opt: ConvOptions{Padding: []int{1, 1, 0}, Stride: []int{2, 1, 1}}, conv3d: true},
		{name: "3d-groups-dil", x: Randn(g, 1, 4, 5, 4, 4), w: Randn(g, 4, 2, 2, 2, 2),
			opt: ConvOptions{Groups: 2, Dilation: []int{2}, Padding: []int{1}}, conv3d: true},
		{name: "3d-cl", x: Randn(g, 2, 2, 3, 4, 3).To(ChannelsLast3d), w: Randn(g, 2, 2, 2, 2, 2).To(ChannelsLast3d), b: Randn(g, 2),
			opt: ConvOptions{Padding: []int{1}, Stride: []int{1, 2, 1}}, conv3d: true, wantFmt: ChannelsLast3d},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ins := []*Tensor{convLeaf(c.x), convLeaf(c.w)}
			if c.b != nil {
				ins = append(ins, convLeaf(c.b))
			}
			conv := Conv2d
			if c.conv3d {
				conv = Conv3d
			}
			f := func(xs ...*Tensor) *Tensor {
				var b *Tensor
				if len(xs) == 3 {
					b = xs[2]
				}
				return conv(xs[0], xs[1], b, c.opt)
			}
			out := f(ins...)
			if out.Format() != c.wantFmt {
				t.Errorf("output format %v, want %v", out.Format(), c.wantFmt)
			}
			if out.NDim() != c.x.NDim() {
				t.Errorf("output shape %v for input %v", out.Shape(), c.x.Shape())
			}
			if err := GradCheck(f, ins, GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
			for i, in := range ins {
				if in.Grad().Format() != in.Format() {
					t.Errorf("input %d: gradient format %v, want %v", i, in.Grad().Format(), in.Format())
				}
			}
		})
	}
}

// TestConvLayoutsAgree checks that every combination of input and weight
// formats gives the same values and gradients.
func TestConvLayoutsAgree(t *testing.T) {
	g := NewGenerator(11)
	x0, w0, b0 := Randn(g, 3, 4, 6, 5), Randn(g, 6, 2, 3, 2), Randn(g, 6)
	gout := Randn(g, 3, 6, 3, 6)
	opt := ConvOptions{Groups: 2, Stride: []int{2, 1}, Padding: []int{1}}
	var ref []*Tensor
	for _, xf := range []MemoryFormat{Contiguous, ChannelsLast} {
		for _, wf := range []MemoryFormat{Contiguous, ChannelsLast} {
			x, w, b := convLeaf(x0.reformat(xf)), convLeaf(w0.reformat(wf)), convLeaf(b0)
			y := Conv2d(x, w, b, opt)
			y.Backward(gout)
			got := []*Tensor{y, x.Grad(), w.Grad(), b.Grad()}
			if ref == nil {
				ref = got
				continue
			}
			for i := range got {
				if err := convClose(got[i].Values(), ref[i].Values(), 1e-5); err != nil {
					t.Errorf("x %v, w %v: result %d: %v", xf, wf, i, err)
				}
			}
		}
	}
}

// A 4-D unbatched Conv3d input can be channels-last (as if it were NCHW);
// the convolution must read it in its logical order.
func TestConv3dUnbatchedChannelsLast(t *testing.T) {
	g := NewGenerator(13)
	x0, w, b := Randn(g, 2, 3, 4, 3), Randn(g, 3, 2, 2, 2, 2), Randn(g, 3)
	gout := Randn(g, 3, 2, 5, 4)
	var ref []float64
	for _, f := range []MemoryFormat{Contiguous, ChannelsLast} {
		x := convLeaf(x0.reformat(f))
		y := Conv3d(x, w, b, ConvOptions{Padding: []int{1}, Stride: []int{2, 1, 1}})
		y.Backward(gout)
		if x.Grad().Format() != f {
			t.Errorf("input %v: gradient format %v", f, x.Grad().Format())
		}
		got := append(y.Values(), x.Grad().Values()...)
		if ref == nil {
			ref = got
			continue
		}
		if err := convClose(got, ref, 1e-5); err != nil {
			t.Errorf("channels-last unbatched input: %v", err)
		}
	}
}

func convClose(got, want []float64, tol float64) error {
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*(1+math.Abs(want[i]))) {
			return fmt.Errorf("element %d: %v, want %v", i, got[i], want[i])
		}
	}
	return nil
}

func TestConvBadInputs(t *testing.T) {
	x := Zeros(2, 3, 5, 5)
	w := Zeros(8, 3, 3, 3)
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"rank", func() { Conv2d(Zeros(3, 5), w, nil, ConvOptions{}) }, "expected 3-D (unbatched) or 4-D (batched) input, got shape [3 5]"},
		{"3d rank", func() { Conv3d(Zeros(3, 5, 5), Zeros(2, 3, 1, 1, 1), nil, ConvOptions{}) }, "expected 4-D (unbatched) or 5-D (batched) input, got shape [3 5 5]"},
		{"weight rank", func() { Conv2d(x, Zeros(8, 3, 3), nil, ConvOptions{}) }, "weight must be 4-D [out, in/groups, kh, kw], got shape [8 3 3]"},
		{"channels", func() { Conv2d(x, Zeros(8, 4, 3, 3), nil, ConvOptions{}) }, "input has 3 channels, weight [8 4 3 3] expects 4×groups(1)"},
		{"groups channels", func() { Conv2d(Zeros(1, 6, 5, 5), Zeros(8, 2, 3, 3), nil, ConvOptions{Groups: 2}) }, "input has 6 channels, weight [8 2 3 3] expects 2×groups(2)"},
		{"groups out", func() { Conv2d(Zeros(1, 6, 5, 5), Zeros(8, 2, 3, 3), nil, ConvOptions{Groups: 3}) }, "8 output channels, not divisible by groups(3)"},
		{"negative groups", func() { Conv2d(x, w, nil, ConvOptions{Groups: -1}) }, "groups must be positive"},
		{"kernel too big", func() { Conv2d(x, Zeros(8, 3, 7, 3), nil, ConvOptions{Padding: []int{0}}) }, "kernel 7×3 (7×3 with dilation [1 1]) is larger than the padded input 5×5"},
		{"dilated kernel too big", func() { Conv2d(x, w, nil, ConvOptions{Dilation: []int{3}}) }, "kernel 3×3 (7×7 with dilation [3 3]) is larger than the padded input 5×5"},
		{"zero stride", func() { Conv2d(x, w, nil, ConvOptions{Stride: []int{1, 0}}) }, "stride must be positive, got [1 0]"},
		{"negative dilation", func() { Conv2d(x, w, nil, ConvOptions{Dilation: []int{-1}}) }, "dilation must be positive"},
		{"negative padding", func() { Conv2d(x, w, nil, ConvOptions{Padding: []int{-1}}) }, "padding must be non-negative"},
		{"option length", func() { Conv2d(x, w, nil, ConvOptions{Stride: []int{1, 1, 1}}) }, "stride [1 1 1] must have 1 or 2 elements"},
		{"bias shape", func() { Conv2d(x, w, Zeros(3), ConvOptions{}) }, "bias has shape [3], want [8]"},
		{"bias rank", func() { Conv2d(x, w, Zeros(8, 1), ConvOptions{}) }, "bias has shape [8 1], want [8]"},
		{"dtype", func() { Conv2d(Empty(Int64, 2, 3, 5, 5), w, nil, ConvOptions{}) }, "input has dtype int64; Conv2d supports float32"},
		{"weight dtype", func() { Conv2d(x, Empty(BFloat16, 8, 3, 3, 3), nil, ConvOptions{}) }, "weight has dtype bfloat16"},
		{"bias dtype", func() { Conv2d(x, w, Empty(Int32, 8), ConvOptions{}) }, "bias has dtype int32"},
		{"nil weight", func() { Conv2d(x, nil, nil, ConvOptions{}) }, "weight is nil"},
		{"empty input", func() { Conv2d(Zeros(2, 3, 0, 5), w, nil, ConvOptions{}) }, "input [2 3 0 5] has a zero-size"},
		{"empty weight", func() { Conv2d(x, Zeros(0, 3, 3, 3), nil, ConvOptions{}) }, "weight [0 3 3 3] has a zero-size"},
		// 2·2^62 wraps the dilated span around to 1.
		{"wrapping dilation", func() { Conv2d(x, w, nil, ConvOptions{Dilation: []int{1 << 62}}) },
			"Conv2d: kernel size 3, stride 1, padding 0 and dilation 4611686018427387904 reach past 2^48 elements"},
		{"output overflowing", func() { Conv2d(Zeros(1, 1, 1, 1), Zeros(1, 1, 1, 1), nil, ConvOptions{Padding: []int{1 << 47}}) },
			"Conv2d: shape [1 1 281474976710657 281474976710657]: element count overflows"},
		{"geometry of an output overflowing", func() {
			convGeometry("Conv2d", 2, Zeros(1, 1, 1, 1), Zeros(1, 1, 1, 1), nil, ConvOptions{Padding: []int{1 << 47}})
		},
			"Conv2d: shape [1 1 281474976710657 281474976710657]: element count overflows"},
		{"huge padding", func() { Conv3d(Zeros(1, 1, 2, 2, 2), Zeros(1, 1, 1, 1, 1), nil, ConvOptions{Padding: []int{1 << 62}}) },
			"Conv3d: kernel size 1, stride 1, padding 4611686018427387904 and dilation 1 reach past 2^48 elements"},
	}
	for _, c := range cases {
		err := Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestConvEmptyBatch(t *testing.T) {
	x := convLeaf(Zeros(0, 3, 5, 5))
	w := convLeaf(Ones(2, 3, 3, 3))
	y := Conv2d(x, w, nil, ConvOptions{})
	if !sameShape(y.Shape(), []int{0, 2, 3, 3}) {
		t.Fatalf("shape %v", y.Shape())
	}
	y.Backward(Zeros(0, 2, 3, 3))
	for _, v := range w.Grad().Values() {
		if v != 0 {
			t.Fatalf("weight gradient %v, want zeros", w.Grad().Values())
		}
	}
}

// distinctValues returns a tensor of the given shape holding a random
// permutation of 0.1, 0.2, …, so max pooling has no ties and a
// finite-difference step cannot change which element wins.
func distinctValues(g *Generator, shape ...int) *Tensor {
	n := numel("distinct", shape)
	v := make([]float32, n)
	for i, p := range g.Perm(n) {
		v[i] = float32(p+1)*0.1 - float32(n)*0.05
	}
	return FromFloat32(v, shape...)
}

func TestPoolGradCheck(t *testing.T) {
	g := NewGenerator(5)
	type pool func(x *Tensor) *Tensor
	maxp := func(o PoolOptions) pool { return func(x *Tensor) *Tensor { return MaxPool2d(x, o) } }
	avgp := func(o PoolOptions) pool { return func(x *Tensor) *Tensor { return AvgPool2d(x, o) } }
	adapt := func(h, w int) pool { return func(x *Tensor) *Tensor { return AdaptiveAvgPool2d(x, h, w) } }
	cases := []struct {
		name  string
		shape []int
		op    pool
	}{
		{"max-k2", []int{2, 3, 4, 6}, maxp(PoolOptions{Kernel: []int{2}})},
		{"max-k3s2p1", []int{2, 2, 7, 6}, maxp(PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}})},
		{"max-ceil", []int{1, 2, 5, 6}, maxp(PoolOptions{Kernel: []int{2, 3}, Stride: []int{2}, Padding: []int{1}, CeilMode: true})},
		{"max-dilation", []int{1, 2, 7, 7}, maxp(PoolOptions{Kernel: []int{3}, Stride: []int{1, 2}, Dilation: []int{2}, Padding: []int{1}})},
		{"max-unbatched", []int{3, 5, 5}, maxp(PoolOptions{Kernel: []int{3}, Stride: []int{1}})},
		{"avg-k2", []int{2, 3, 4, 6}, avgp(PoolOptions{Kernel: []int{2}, CountIncludePad: true})},
		{"avg-pad-include", []int{1, 2, 5, 6}, avgp(PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}, CountIncludePad: true})},
		{"avg-pad-exclude", []int{1, 2, 5, 6}, avgp(PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}})},
		{"avg-ceil", []int{1, 2, 5, 5}, avgp(PoolOptions{Kernel: []int{2}, Padding: []int{1}, CeilMode: true, CountIncludePad: true})},
		{"adaptive-down", []int{2, 2, 7, 5}, adapt(3, 2)},
		{"adaptive-up", []int{1, 2, 3, 2}, adapt(4, 3)},
		{"adaptive-global", []int{2, 3, 4, 5}, adapt(1, 1)},
	}
	for _, c := range cases {
		for _, cl := range []bool{false, true} {
			if cl && len(c.shape) != 4 {
				continue
			}
			t.Run(fmt.Sprintf("%s/cl=%v", c.name, cl), func(t *testing.T) {
				x := distinctValues(g, c.shape...)
				if cl {
					x = x.To(ChannelsLast)
				}
				x = convLeaf(x)
				if y := c.op(x); y.Format() != x.Format() {
					t.Errorf("output format %v, want %v", y.Format(), x.Format())
				}
				err := GradCheck(func(xs ...*Tensor) *Tensor { return c.op(xs[0]) }, []*Tensor{x}, GradCheckOptions{})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestPoolValues(t *testing.T) {
	// 1..16 in a 4×4 plane; windows of 3 with stride 2 and padding 1.
	x := Arange(1, 17, 1, Float32).Detach()
	x = FromFloat32(x.Float32s(), 1, 1, 4, 4)
	opt := PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}}
	checks := []struct {
		name string
		got  *Tensor
		want []float64
	}{
		{"max", MaxPool2d(x, opt), []float64{6, 8, 14, 16}},
		{"avg include pad", AvgPool2d(x, PoolOptions{Kernel: opt.Kernel, Stride: opt.Stride, Padding: opt.Padding, CountIncludePad: true}),
			[]float64{14.0 / 9, 30.0 / 9, 57.0 / 9, 99.0 / 9}},
		{"avg exclude pad", AvgPool2d(x, opt), []float64{14.0 / 4, 30.0 / 6, 57.0 / 6, 99.0 / 9}},
		{"adaptive", AdaptiveAvgPool2d(x, 3, 3), []float64{3.5, 4.5, 5.5, 7.5, 8.5, 9.5, 11.5, 12.5, 13.5}},
	}
	for _, c := range checks {
		if err := convClose(c.got.Values(), c.want, 1e-6); err != nil {
			t.Errorf("%s: %v (got %v)", c.name, err, c.got.Values())
		}
	}
}

func TestPoolBadInputs(t *testing.T) {
	x := Zeros(2, 3, 5, 5)
	k2 := []int{2}
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"rank", func() { MaxPool2d(Zeros(5, 5), PoolOptions{Kernel: k2}) }, "expected 3-D (unbatched) or 4-D (batched) input, got shape [5 5]"},
		{"dtype", func() { AvgPool2d(Empty(Int64, 1, 1, 4, 4), PoolOptions{Kernel: k2}) }, "input has dtype int64; AvgPool2d supports float32"},
		{"no kernel", func() { MaxPool2d(x, PoolOptions{}) }, "kernel size is required"},
		{"zero kernel", func() { MaxPool2d(x, PoolOptions{Kernel: []int{0}}) }, "kernel size must be positive, got [0 0]"},
		{"kernel length", func() { MaxPool2d(x, PoolOptions{Kernel: []int{2, 2, 2}}) }, "kernel size [2 2 2] must have 1 or 2 elements"},
		{"zero stride", func() { MaxPool2d(x, PoolOptions{Kernel: k2, Stride: []int{0}}) }, "stride must be positive"},
		{"big padding", func() { MaxPool2d(x, PoolOptions{Kernel: []int{3}, Padding: []int{2}}) }, "padding [2 2] should be at most half of kernel size [3 3]"},
		{"negative padding", func() { AvgPool2d(x, PoolOptions{Kernel: k2, Padding: []int{-1}}) }, "padding must be non-negative"},
		{"zero dilation", func() { MaxPool2d(x, PoolOptions{Kernel: k2, Dilation: []int{0}}) }, "dilation must be positive"},
		{"avg dilation", func() { AvgPool2d(x, PoolOptions{Kernel: k2, Dilation: []int{2}}) }, "dilation [2 2] is not supported"},
		{"too small", func() { MaxPool2d(Zeros(1, 1, 2, 5), PoolOptions{Kernel: []int{3}}) }, "output size 0×1 is too small for input [1 1 2 5]"},
		{"empty", func() { MaxPool2d(Zeros(1, 0, 4, 4), PoolOptions{Kernel: k2}) }, "input [1 0 4 4] has a zero-size"},
		{"adaptive size", func() { AdaptiveAvgPool2d(x, 0, 2) }, "output size 0×2 must be positive"},
		{"adaptive rank", func() { AdaptiveAvgPool2d(Zeros(2, 1, 3, 3, 3), 1, 1) }, "got shape [2 1 3 3 3]"},
		// 4·2^62 wraps the dilated span around to 1.
		{"wrapping dilation", func() { MaxPool2d(x, PoolOptions{Kernel: []int{5}, Dilation: []int{1 << 62}}) },
			"MaxPool2d: kernel size 5, stride 5, padding 0 and dilation 4611686018427387904 reach past 2^48 elements"},
		{"huge kernel", func() { AvgPool2d(x, PoolOptions{Kernel: []int{1 << 62}, Padding: []int{1 << 61}, CeilMode: true}) },
			"AvgPool2d: kernel size 4611686018427387904"},
		{"huge stride", func() { MaxPool2d(x, PoolOptions{Kernel: k2, Stride: []int{math.MaxInt}, CeilMode: true}) },
			"stride 9223372036854775807"},
		{"adaptive overflowing", func() { AdaptiveAvgPool2d(x, 1<<31, 1<<31) },
			"AdaptiveAvgPool2d: shape [2 3 2147483648 2147483648]: element count overflows"},
		{"adaptive geometry overflowing", func() { poolShape("AdaptiveAvgPool2d", x, PoolOptions{Kernel: []int{1 << 31, 1 << 31}}) },
			"AdaptiveAvgPool2d: shape [2 3 2147483648 2147483648]: element count overflows"},
	}
	for _, c := range cases {
		err := Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestMaxPoolNaN(t *testing.T) {
	nan := float32(0)
	nan /= nan
	x := FromFloat32([]float32{1, nan, 3, 4}, 1, 1, 2, 2)
	y := MaxPool2d(x, PoolOptions{Kernel: []int{2}})
	if v := y.Values()[0]; v == v {
		t.Fatalf("max over a window with NaN = %v, want NaN", v)
	}
}

// TestConv2dBF16 checks the bfloat16 convolution against the float32 one
// on the same (bfloat16-representable) values in both layouts, with and
// without bias: results and gradients within a bfloat16 ulp (both sum the
// same exact products in float32, then round once), and that autocast
// reaches Conv2d.
func TestConv2dBF16(t *testing.T) {
	g := NewGenerator(31)
	bf := func(shape ...int) *Tensor { return Cast(Randn(g, shape...), BFloat16) }
	for _, c := range []struct {
		name   string
		x, w   []int
		opt    ConvOptions
		format MemoryFormat
		bias   bool
	}{
		{"3x3 cl", []int{2, 32, 12, 12}, []int{32, 32, 3, 3}, ConvOptions{Padding: []int{1}}, ChannelsLast, true},
		{"3x3 stride contiguous", []int{2, 6, 9, 11}, []int{8, 6, 3, 3}, ConvOptions{Stride: []int{2}, Padding: []int{1}}, Contiguous, false},
		{"1x1 cl", []int{3, 16, 5, 7}, []int{32, 16, 1, 1}, ConvOptions{}, ChannelsLast, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			x, w, b := bf(c.x...), bf(c.w...), bf(c.w[0])
			if c.format != Contiguous {
				x, w = x.To(c.format), w.To(c.format)
			}
			run := func(dtype DType) []*Tensor {
				xl := Cast(x, dtype).Detach().SetRequiresGrad(true)
				wl := Cast(w, dtype).Detach().SetRequiresGrad(true)
				var bl *Tensor
				if c.bias {
					bl = Cast(b, dtype).Detach().SetRequiresGrad(true)
				}
				y := Conv2d(xl, wl, bl, c.opt)
				y.Backward(Cast(OnesLike(y), dtype))
				res := []*Tensor{y, xl.Grad(), wl.Grad()}
				if c.bias {
					res = append(res, bl.Grad())
				}
				return res
			}
			want, got := run(Float32), run(BFloat16)
			for i := range want {
				if got[i].DType() != BFloat16 || got[i].Format() != want[i].Format() {
					t.Fatalf("result %d: %v %v, want bfloat16 %v", i, got[i].DType(), got[i].Format(), want[i].Format())
				}
				gv, wv := got[i].Values(), want[i].Values()
				for j := range wv {
					if d := math.Abs(gv[j] - wv[j]); d > 0x1p-7*math.Abs(wv[j])+1e-4 {
						t.Fatalf("result %d element %d = %v in BF16, %v in FP32", i, j, gv[j], wv[j])
					}
				}
			}
			var y *Tensor
			y = Conv2d(Autocast(Cast(x, Float32)), Cast(w, Float32), nil, c.opt)
			if y.DType() != BFloat16 {
				t.Errorf("under autocast Conv2d gave %v", y.DType())
			}
		})
	}
}
