package nn

import (
	"sync/atomic"

	"github.com/kilnml/kiln/autograd"
)

// ConvOptions configures NewConv2d and NewConv3d. The zero value is
// PyTorch's default: stride 1, no padding, dilation 1, one group, with
// bias. Sizes apply to every spatial dimension (square or cubic windows).
type ConvOptions struct {
	// Stride is the step of the window; 0 means 1.
	Stride int
	// Padding is the number of zeros added on each side of each spatial
	// dimension.
	Padding int
	// Dilation is the spacing of the kernel's taps; 0 means 1.
	Dilation int
	// Groups splits the channels into independent convolutions; 0 means 1.
	// In and out channels must both be divisible by it.
	Groups int
	// NoBias leaves out the bias (PyTorch's bias=False).
	NoBias bool
}

func (o ConvOptions) withDefaults() ConvOptions {
	if o.Stride == 0 {
		o.Stride = 1
	}
	if o.Dilation == 0 {
		o.Dilation = 1
	}
	if o.Groups == 0 {
		o.Groups = 1
	}
	return o
}

func (o ConvOptions) op() autograd.ConvOptions {
	return autograd.ConvOptions{Stride: []int{o.Stride}, Padding: []int{o.Padding}, Dilation: []int{o.Dilation}, Groups: o.Groups}
}

// Conv2d is a 2-D convolution over [N, C, H, W] inputs in either memory
// format, like torch.nn.Conv2d. Its parameters are "weight"
// [out, in/groups, k, k] and "bias" [out].
type Conv2d struct {
	Base
	In, Out, Kernel int
	Options         ConvOptions // with defaults filled in
	prepacked
}

// Conv3d is a 3-D convolution over [N, C, D, H, W] inputs, like
// torch.nn.Conv3d. Its parameters are "weight" [out, in/groups, k, k, k]
// and "bias" [out].
type Conv3d struct {
	Base
	In, Out, Kernel int
	Options         ConvOptions // with defaults filled in
	prepacked
}

// newConvWeight validates a convolution's sizes, registers its parameters
// on b and initialises them as PyTorch's _ConvNd.reset_parameters does.
func newConvWeight(op string, g *autograd.Generator, b *Base, in, out, kernel, dims int, opt ConvOptions) ConvOptions {
	checkGen(op, g)
	opt = opt.withDefaults()
	switch {
	case in <= 0 || out <= 0 || kernel <= 0:
		Fail(autograd.ErrArgument, op, "channels and kernel size must be positive: in=%d out=%d kernel=%d", in, out, kernel)
	case opt.Stride < 0 || opt.Padding < 0 || opt.Dilation < 0 || opt.Groups < 0:
		Fail(autograd.ErrArgument, op, "negative stride, padding, dilation or groups: %+v", opt)
	case in%opt.Groups != 0:
		Fail(autograd.ErrArgument, op, "in channels %d must be divisible by groups %d", in, opt.Groups)
	case out%opt.Groups != 0:
		Fail(autograd.ErrArgument, op, "out channels %d must be divisible by groups %d", out, opt.Groups)
	}
	shape := []int{out, in / opt.Groups}
	for range dims {
		shape = append(shape, kernel)
	}
	w := b.RegisterParameter("weight", autograd.Zeros(shape...))
	var bias *autograd.Tensor
	if !opt.NoBias {
		bias = b.RegisterParameter("bias", autograd.Zeros(out))
	}
	initWeightAndBias(g, w, bias)
	return opt
}

// NewConv2d returns a Conv2d from in to out channels with a kernel×kernel
// window, initialised from g as PyTorch does: weight from
// kaiming_uniform(a=√5) and bias from U(-1/√fan_in, 1/√fan_in), where
// fan_in = in/groups·kernel².
func NewConv2d(g *autograd.Generator, in, out, kernel int, opt ConvOptions) *Conv2d {
	c := &Conv2d{In: in, Out: out, Kernel: kernel}
	c.Options = newConvWeight("NewConv2d", g, &c.Base, in, out, kernel, 2, opt)
	return c
}

// NewConv3d returns a Conv3d with a kernel³ window, initialised like
// NewConv2d.
func NewConv3d(g *autograd.Generator, in, out, kernel int, opt ConvOptions) *Conv3d {
	c := &Conv3d{In: in, Out: out, Kernel: kernel}
	c.Options = newConvWeight("NewConv3d", g, &c.Base, in, out, kernel, 3, opt)
	return c
}

// Weight returns the convolution kernel.
func (c *Conv2d) Weight() *autograd.Tensor { return c.param("weight") }

// Bias returns the [out] bias, or nil without one.
func (c *Conv2d) Bias() *autograd.Tensor { return c.param("bias") }

// Forward convolves x [N, in, H, W]; the output keeps x's memory format.
// After Prepack, an evaluation forward without gradient recording reads
// the packed weights.
func (c *Conv2d) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(c, x)()
	if w := c.packedWeight(&c.Base, x, c.Weight(), c.Options.Groups); w != nil {
		return autograd.ConvPacked(x, w, c.Bias(), c.Options.op())
	}
	return autograd.Conv2d(x, c.Weight(), c.Bias(), c.Options.op())
}

// Weight returns the convolution kernel.
func (c *Conv3d) Weight() *autograd.Tensor { return c.param("weight") }

// Bias returns the [out] bias, or nil without one.
func (c *Conv3d) Bias() *autograd.Tensor { return c.param("bias") }

// Forward convolves x [N, in, D, H, W]; the output keeps x's memory format.
// After Prepack, an evaluation forward without gradient recording reads
// the packed weights.
func (c *Conv3d) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(c, x)()
	if w := c.packedWeight(&c.Base, x, c.Weight(), c.Options.Groups); w != nil {
		return autograd.ConvPacked(x, w, c.Bias(), c.Options.op())
	}
	return autograd.Conv3d(x, c.Weight(), c.Bias(), c.Options.op())
}

// prepacked is a convolution's opt-in to packed weights for inference
// (IPEX's weight prepacking): the GEMM panels of the weight are packed at
// the first evaluation forward without gradient recording and reused by
// the following ones, instead of being packed in every call.
//
// The packed copy is dropped whenever the weights may change through nn:
// a forward that records gradients or runs in training mode (an optimizer
// step may follow), LoadStateDict, FoldBatchNorm, or a new weight tensor.
// Writing into the weight's values directly leaves it stale: call Prepack
// again after that.
//
// Inference forwards may run from several goroutines at once: the packed
// copy is swapped atomically (two first calls may both pack; one copy
// wins, and both are right).
type prepacked struct {
	on     bool
	packed atomic.Pointer[autograd.PackedConvWeight]
}

// Prepack turns weight prepacking on (see Forward) and drops any packed
// copy, so the next evaluation forward packs the current weights.
func (p *prepacked) Prepack() {
	p.on = true
	p.packed.Store(nil)
}

// Prepacked reports whether Prepack was called.
func (p *prepacked) Prepacked() bool { return p.on }

// dropPacked forgets the packed copy (the weights changed).
func (p *prepacked) dropPacked() { p.packed.Store(nil) }

// packedWeight returns the packed weight for a forward on x, packing w if
// needed, or nil where the plain convolution runs: in training, and in a
// computation that records gradients.
func (p *prepacked) packedWeight(b *Base, x, w *autograd.Tensor, groups int) *autograd.PackedConvWeight {
	if !p.on || b.Training() || x == nil || !x.Mode().NoGrad() {
		if p.on {
			p.packed.Store(nil)
		}
		return nil
	}
	pw := p.packed.Load()
	if pw == nil || pw.Weight() != w {
		pw = autograd.PackConvWeight(w, groups)
		p.packed.Store(pw)
	}
	return pw
}

// dropPackedWeights forgets the packed weights of every convolution in m,
// after nn has changed weights in place.
func dropPackedWeights(m Module) {
	for _, nm := range NamedModules(m) {
		if d, ok := nm.Module.(interface{ dropPacked() }); ok {
			d.dropPacked()
		}
	}
}
