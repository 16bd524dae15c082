package autograd_test

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

// The cases of testdata/golden/gen_conv.py, with the same options.
var convGoldenCases = []struct {
	name     string
	conv3d   bool
	opt      autograd.ConvOptions
	xCL, wCL bool
	rtol     float64
}{
	{name: "c2d.basic"},
	{name: "c2d.stride2_pad1", opt: autograd.ConvOptions{Stride: []int{2}, Padding: []int{1}}},
	{name: "c2d.dil2", opt: autograd.ConvOptions{Stride: []int{1, 2}, Padding: []int{1, 2}, Dilation: []int{2}}},
	{name: "c2d.groups2", opt: autograd.ConvOptions{Padding: []int{1}, Groups: 2}},
	{name: "c2d.depthwise", opt: autograd.ConvOptions{Padding: []int{1}, Groups: 4}},
	{name: "c2d.pointwise"},
	// Each output sums 600 products and each weight gradient 128.
	{name: "c2d.wide", opt: autograd.ConvOptions{Padding: []int{2}}, rtol: 1e-4},
	{name: "c2d.cl", opt: autograd.ConvOptions{Stride: []int{2}, Padding: []int{1}, Groups: 2}, xCL: true, wCL: true},
	{name: "c2d.cl_x", opt: autograd.ConvOptions{Padding: []int{2}, Dilation: []int{2}}, xCL: true},
	{name: "c2d.cl_w", opt: autograd.ConvOptions{Stride: []int{2, 1}}, wCL: true},
	{name: "c2d.cl_depthwise", opt: autograd.ConvOptions{Padding: []int{1}, Groups: 5, Stride: []int{2}}, xCL: true, wCL: true},
	{name: "c2d.unbatched", opt: autograd.ConvOptions{Padding: []int{1}}},
	{name: "c3d.basic", conv3d: true, opt: autograd.ConvOptions{Stride: []int{1, 2, 1}, Padding: []int{1}}},
	{name: "c3d.groups_dil", conv3d: true, opt: autograd.ConvOptions{Groups: 2, Dilation: []int{2}, Padding: []int{1, 2, 1}}},
	{name: "c3d.cl", conv3d: true, opt: autograd.ConvOptions{Stride: []int{2}, Padding: []int{1}}, xCL: true, wCL: true},
}

func TestConvGolden(t *testing.T) {
	set := golden.Load(t, "conv.safetensors")
	for _, c := range convGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			rtol := c.rtol
			if rtol == 0 {
				rtol = 1e-5
			}
			cl, conv := autograd.ChannelsLast, autograd.Conv2d
			if c.conv3d {
				cl, conv = autograd.ChannelsLast3d, autograd.Conv3d
			}
			x := set.Get(t, c.name+".x")
			w := set.Get(t, c.name+".w")
			if c.xCL {
				x = x.To(cl)
			}
			if c.wCL {
				w = w.To(cl)
			}
			x.SetRequiresGrad(true)
			w.SetRequiresGrad(true)
			var b *autograd.Tensor
			if gb, ok := set[c.name+".b"]; ok {
				b = gb.SetRequiresGrad(true)
			}
			out := conv(x, w, b, c.opt)
			out.Backward(set.Get(t, c.name+".gout"))
			golden.AssertClose(t, "out", out, set.Get(t, c.name+".out"), rtol)
			golden.AssertClose(t, "grad_x", x.Grad(), set.Get(t, c.name+".grad_x"), rtol)
			golden.AssertClose(t, "grad_w", w.Grad(), set.Get(t, c.name+".grad_w"), rtol)
			if b != nil {
				golden.AssertClose(t, "grad_b", b.Grad(), set.Get(t, c.name+".grad_b"), rtol)
			}
			checkGoldenStrides(t, set, c.name, out)
		})
	}
}

// checkGoldenStrides compares out's strides with those of PyTorch's
// output, where the generator saved them (channels-last cases).
func checkGoldenStrides(t *testing.T, set golden.Set, name string, out *autograd.Tensor) {
	t.Helper()
	want, ok := set[name+".out_strides"]
	if !ok {
		return
	}
	if got := out.Strides(); fmt.Sprint(got) != fmt.Sprint(want.Int64s()) {
		t.Errorf("output strides %v (%v), PyTorch's %v", got, out.Format(), want.Int64s())
	}
}

// The cases of testdata/golden/gen_conv.py's POOL table.
var poolGoldenCases = []struct {
	name string
	op   func(x *autograd.Tensor) *autograd.Tensor
	xCL  bool
}{
	{name: "maxpool.k2", op: maxPool(autograd.PoolOptions{Kernel: []int{2}})},
	{name: "maxpool.k3s2p1", op: maxPool(autograd.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}})},
	{name: "maxpool.ceil", op: maxPool(autograd.PoolOptions{Kernel: []int{3, 2}, Stride: []int{2}, Padding: []int{1}, CeilMode: true})},
	{name: "maxpool.dil", op: maxPool(autograd.PoolOptions{Kernel: []int{3}, Stride: []int{2, 1}, Padding: []int{1}, Dilation: []int{2}})},
	{name: "maxpool.cl", xCL: true, op: maxPool(autograd.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}, CeilMode: true})},
	{name: "avgpool.include", op: avgPool(autograd.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}, CountIncludePad: true})},
	{name: "avgpool.exclude", op: avgPool(autograd.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}})},
	{name: "avgpool.ceil_include", op: avgPool(autograd.PoolOptions{Kernel: []int{3, 2}, Stride: []int{2}, Padding: []int{1}, CeilMode: true, CountIncludePad: true})},
	{name: "avgpool.ceil_exclude", op: avgPool(autograd.PoolOptions{Kernel: []int{3, 2}, Stride: []int{2}, Padding: []int{1}, CeilMode: true})},
	{name: "avgpool.cl", xCL: true, op: avgPool(autograd.PoolOptions{Kernel: []int{2}, Stride: []int{2}, Padding: []int{1}, CeilMode: true, CountIncludePad: true})},
	{name: "adaptive.down", op: adaptivePool(4, 3)},
	{name: "adaptive.up", op: adaptivePool(5, 7)},
	{name: "adaptive.global", op: adaptivePool(1, 1)},
	{name: "adaptive.cl", xCL: true, op: adaptivePool(3, 4)},
}

func maxPool(o autograd.PoolOptions) func(*autograd.Tensor) *autograd.Tensor {
	return func(x *autograd.Tensor) *autograd.Tensor { return autograd.MaxPool2d(x, o) }
}

func avgPool(o autograd.PoolOptions) func(*autograd.Tensor) *autograd.Tensor {
	return func(x *autograd.Tensor) *autograd.Tensor { return autograd.AvgPool2d(x, o) }
}

func adaptivePool(h, w int) func(*autograd.Tensor) *autograd.Tensor {
	return func(x *autograd.Tensor) *autograd.Tensor { return autograd.AdaptiveAvgPool2d(x, h, w) }
}

func TestPoolGolden(t *testing.T) {
	set := golden.Load(t, "conv.safetensors")
	for _, c := range poolGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			x := set.Get(t, c.name+".x")
			if c.xCL {
				x = x.To(autograd.ChannelsLast)
			}
			x.SetRequiresGrad(true)
			out := c.op(x)
			out.Backward(set.Get(t, c.name+".gout"))
			golden.AssertClose(t, "out", out, set.Get(t, c.name+".out"), 1e-5)
			golden.AssertClose(t, "grad_x", x.Grad(), set.Get(t, c.name+".grad_x"), 1e-5)
			checkGoldenStrides(t, set, c.name, out)
		})
	}
}
