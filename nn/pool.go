package nn

import "github.com/kilnml/kiln/autograd"

// MaxPoolOptions configures NewMaxPool2d. The zero value is PyTorch's
// default: stride equal to the kernel, no padding, dilation 1, floor
// rounding.
type MaxPoolOptions struct {
	// Stride is the window step; 0 means the kernel size.
	Stride int
	// Padding is the implicit -∞ padding on each side.
	Padding int
	// Dilation is the spacing of the window's taps; 0 means 1.
	Dilation int
	// CeilMode rounds the output size up instead of down.
	CeilMode bool
}

// MaxPool2d takes the maximum over square windows of [N, C, H, W] inputs
// in either memory format (torch.nn.MaxPool2d).
type MaxPool2d struct {
	Base
	Kernel  int
	Options MaxPoolOptions // with defaults filled in
}

func checkPool(op string, kernel, stride, padding int) {
	if kernel <= 0 || stride < 0 || padding < 0 {
		Fail(autograd.ErrArgument, op, "kernel size must be positive and stride, padding non-negative: kernel=%d stride=%d padding=%d", kernel, stride, padding)
	}
}

// NewMaxPool2d returns a MaxPool2d with kernel×kernel windows.
func NewMaxPool2d(kernel int, opt MaxPoolOptions) *MaxPool2d {
	checkPool("NewMaxPool2d", kernel, opt.Stride, opt.Padding)
	if opt.Stride == 0 {
		opt.Stride = kernel
	}
	if opt.Dilation == 0 {
		opt.Dilation = 1
	}
	return &MaxPool2d{Kernel: kernel, Options: opt}
}

// Forward pools x; the output keeps x's memory format.
func (p *MaxPool2d) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(p, x)()
	o := p.Options
	return autograd.MaxPool2d(x, autograd.PoolOptions{Kernel: []int{p.Kernel}, Stride: []int{o.Stride}, Padding: []int{o.Padding}, Dilation: []int{o.Dilation}, CeilMode: o.CeilMode})
}

// AvgPoolOptions configures NewAvgPool2d. The zero value is PyTorch's
// default: stride equal to the kernel, no padding, floor rounding, padding
// counted in the divisor.
type AvgPoolOptions struct {
	// Stride is the window step; 0 means the kernel size.
	Stride int
	// Padding is the implicit zero padding on each side.
	Padding int
	// CeilMode rounds the output size up instead of down.
	CeilMode bool
	// ExcludePad leaves padded zeros out of the divisor
	// (count_include_pad=False).
	ExcludePad bool
}

// AvgPool2d averages over square windows of [N, C, H, W] inputs in either
// memory format (torch.nn.AvgPool2d).
type AvgPool2d struct {
	Base
	Kernel  int
	Options AvgPoolOptions // with defaults filled in
}

// NewAvgPool2d returns an AvgPool2d with kernel×kernel windows.
func NewAvgPool2d(kernel int, opt AvgPoolOptions) *AvgPool2d {
	checkPool("NewAvgPool2d", kernel, opt.Stride, opt.Padding)
	if opt.Stride == 0 {
		opt.Stride = kernel
	}
	return &AvgPool2d{Kernel: kernel, Options: opt}
}

// Forward pools x; the output keeps x's memory format.
func (p *AvgPool2d) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(p, x)()
	o := p.Options
	return autograd.AvgPool2d(x, autograd.PoolOptions{Kernel: []int{p.Kernel}, Stride: []int{o.Stride}, Padding: []int{o.Padding}, CeilMode: o.CeilMode, CountIncludePad: !o.ExcludePad})
}

// AdaptiveAvgPool2d averages [N, C, H, W] inputs down to [N, C, OutH,
// OutW] whatever H and W are (torch.nn.AdaptiveAvgPool2d).
type AdaptiveAvgPool2d struct {
	Base
	OutH, OutW int
}

// NewAdaptiveAvgPool2d returns an AdaptiveAvgPool2d with output size
// outH×outW; (1, 1) is global average pooling.
func NewAdaptiveAvgPool2d(outH, outW int) *AdaptiveAvgPool2d {
	if outH <= 0 || outW <= 0 {
		Fail(autograd.ErrArgument, "NewAdaptiveAvgPool2d", "output size must be positive, got %dx%d", outH, outW)
	}
	return &AdaptiveAvgPool2d{OutH: outH, OutW: outW}
}

// Forward pools x; the output keeps x's memory format.
func (p *AdaptiveAvgPool2d) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(p, x)()
	return autograd.AdaptiveAvgPool2d(x, p.OutH, p.OutW)
}
