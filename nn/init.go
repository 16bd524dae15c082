package nn

import (
	"math"

	"github.com/kilnml/kiln/autograd"
)

// The initialisers below mirror torch.nn.init. Each fills a tensor in place
// outside of autograd (as PyTorch's run under no_grad) and returns it. They
// accept float32 and bfloat16 tensors in any memory format: values are drawn
// in logical row-major order, so a seed gives the same logical tensor
// whatever the layout.

// FanMode selects which fan the Kaiming initialisers preserve.
type FanMode int

const (
	// FanIn preserves the variance of activations in the forward pass
	// (PyTorch's mode="fan_in", the default).
	FanIn FanMode = iota
	// FanOut preserves the variance of gradients in the backward pass.
	FanOut
)

// fill draws t's values in logical order with draw and copies them into t
// (converting dtype and layout).
func fill(op string, t *autograd.Tensor, draw func(i int) float32) *autograd.Tensor {
	if !t.DType().IsFloat() {
		Fail(autograd.ErrDType, op, "cannot initialise a %v tensor", t.DType())
	}
	if t.DType() == autograd.Float32 && t.IsContiguous() {
		// In place: a table the size of the memory has no room for a copy.
		v := t.Float32s()
		for i := range v {
			v[i] = draw(i)
		}
		return t
	}
	v := make([]float32, t.Numel())
	for i := range v {
		v[i] = draw(i)
	}
	t.CopyFrom(autograd.FromFloat32(v, t.Shape()...))
	return t
}

// checkGen panics unless g is a generator, naming op, so a nil one fails
// where it is passed rather than deep inside an initialiser.
func checkGen(op string, g *autograd.Generator) {
	if g == nil {
		Fail(autograd.ErrArgument, op, "generator is nil")
	}
}

// Uniform fills t with values drawn from U(lo, hi); lo must not exceed hi.
func Uniform(g *autograd.Generator, t *autograd.Tensor, lo, hi float64) *autograd.Tensor {
	checkGen("Uniform", g)
	if !(lo <= hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		Fail(autograd.ErrArgument, "Uniform", "expects a finite range [from, to) with from <= to, got [%v, %v)", lo, hi)
	}
	return fill("Uniform", t, func(int) float32 { return float32(g.Uniform(lo, hi)) })
}

// Normal fills t with values drawn from N(mean, std²).
func Normal(g *autograd.Generator, t *autograd.Tensor, mean, std float64) *autograd.Tensor {
	checkGen("Normal", g)
	if std < 0 || math.IsNaN(std) {
		Fail(autograd.ErrArgument, "Normal", "standard deviation %v is not a non-negative number", std)
	}
	return fill("Normal", t, func(int) float32 { return float32(g.Normal(mean, std)) })
}

// Constant fills t with v.
func Constant(t *autograd.Tensor, v float32) *autograd.Tensor {
	return fill("Constant", t, func(int) float32 { return v })
}

// Zeros fills t with zeros (torch.nn.init.zeros_).
func Zeros(t *autograd.Tensor) *autograd.Tensor { return Constant(t, 0) }

// Ones fills t with ones (torch.nn.init.ones_).
func Ones(t *autograd.Tensor) *autograd.Tensor { return Constant(t, 1) }

// Fans returns the fan-in and fan-out of a weight as PyTorch computes them:
// for a [out, in, k…] weight, fan-in is in·∏k and fan-out is out·∏k. The
// weight needs at least 2 dimensions.
func Fans(t *autograd.Tensor) (fanIn, fanOut int) {
	shape := t.Shape()
	if len(shape) < 2 {
		Fail(autograd.ErrShape, "Fans", "fan in and fan out need a tensor with at least 2 dimensions, got shape %v", shape)
	}
	field := 1
	for _, d := range shape[2:] {
		field *= d
	}
	return shape[1] * field, shape[0] * field
}

// Gain returns the recommended gain for a nonlinearity, as
// torch.nn.init.calculate_gain: "linear", "conv1d", "conv2d", "conv3d",
// "sigmoid" and "identity" give 1, "tanh" 5/3, "relu" √2, "leaky_relu"
// √(2/(1+param²)) (param is the negative slope; PyTorch's default 0.01 is
// the caller's to pass) and "selu" 3/4. Other names panic.
func Gain(nonlinearity string, param float64) float64 {
	switch nonlinearity {
	case "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
		"conv_transpose3d", "sigmoid", "identity":
		return 1
	case "tanh":
		return 5.0 / 3
	case "relu":
		return math.Sqrt2
	case "leaky_relu":
		return math.Sqrt(2 / (1 + param*param))
	case "selu":
		return 0.75
	}
	Fail(autograd.ErrArgument, "Gain", "unsupported nonlinearity %q", nonlinearity)
	return 0
}

// KaimingOptions configures KaimingUniform and KaimingNormal. The zero
// value is PyTorch's default: a=0, fan-in, leaky_relu.
type KaimingOptions struct {
	// A is the negative slope of the rectifier after this layer (used
	// with "leaky_relu").
	A float64
	// Mode picks the fan: FanIn (default) or FanOut.
	Mode FanMode
	// Nonlinearity is the name passed to Gain; "" means "leaky_relu".
	Nonlinearity string
}

func kaimingStd(op string, t *autograd.Tensor, opt KaimingOptions) float64 {
	fanIn, fanOut := Fans(t)
	fan := fanIn
	if opt.Mode == FanOut {
		fan = fanOut
	}
	if fan == 0 {
		Fail(autograd.ErrShape, op, "cannot initialise a weight of shape %v: its fan is zero", t.Shape())
	}
	nl := opt.Nonlinearity
	if nl == "" {
		nl = "leaky_relu"
	}
	return Gain(nl, opt.A) / math.Sqrt(float64(fan))
}

// KaimingUniform fills t from U(-b, b) with b = gain·√(3/fan), He et al.'s
// initialisation (torch.nn.init.kaiming_uniform_). Conv and Linear layers
// use it with A = √5, which makes b = 1/√fan_in.
func KaimingUniform(g *autograd.Generator, t *autograd.Tensor, opt KaimingOptions) *autograd.Tensor {
	if t.Numel() == 0 {
		return t // PyTorch skips zero-element tensors with a warning
	}
	b := math.Sqrt(3) * kaimingStd("KaimingUniform", t, opt)
	return Uniform(g, t, -b, b)
}

// KaimingNormal fills t from N(0, std²) with std = gain/√fan
// (torch.nn.init.kaiming_normal_).
func KaimingNormal(g *autograd.Generator, t *autograd.Tensor, opt KaimingOptions) *autograd.Tensor {
	if t.Numel() == 0 {
		return t
	}
	return Normal(g, t, 0, kaimingStd("KaimingNormal", t, opt))
}

// XavierUniform fills t from U(-b, b) with b = gain·√(6/(fan_in+fan_out)),
// Glorot and Bengio's initialisation (torch.nn.init.xavier_uniform_).
func XavierUniform(g *autograd.Generator, t *autograd.Tensor, gain float64) *autograd.Tensor {
	fanIn, fanOut := Fans(t)
	b := gain * math.Sqrt(6/float64(fanIn+fanOut))
	return Uniform(g, t, -b, b)
}

// XavierNormal fills t from N(0, std²) with std = gain·√(2/(fan_in+fan_out))
// (torch.nn.init.xavier_normal_).
func XavierNormal(g *autograd.Generator, t *autograd.Tensor, gain float64) *autograd.Tensor {
	fanIn, fanOut := Fans(t)
	return Normal(g, t, 0, gain*math.Sqrt(2/float64(fanIn+fanOut)))
}

// initWeightAndBias applies PyTorch's reset_parameters for Linear and
// ConvNd: weight from kaiming_uniform(a=√5), bias from U(-1/√fan_in,
// 1/√fan_in).
func initWeightAndBias(g *autograd.Generator, w, b *autograd.Tensor) {
	KaimingUniform(g, w, KaimingOptions{A: math.Sqrt(5)})
	if b != nil {
		fanIn, _ := Fans(w)
		bound := 0.0
		if fanIn > 0 {
			bound = 1 / math.Sqrt(float64(fanIn))
		}
		Uniform(g, b, -bound, bound)
	}
}
