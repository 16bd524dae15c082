package nn

import "github.com/kilnml/kiln/autograd"

// LinearOptions configures NewLinear.
type LinearOptions struct {
	// NoBias leaves out the bias (PyTorch's bias=False).
	NoBias bool
}

// Linear applies y = x·Wᵀ + b to the last dimension of its input, like
// torch.nn.Linear. Its parameters are "weight" [out, in] and "bias" [out].
type Linear struct {
	Base
	In, Out int
}

// NewLinear returns a Linear layer from in to out features, initialised as
// PyTorch does from g: weight from kaiming_uniform(a=√5), i.e.
// U(-1/√in, 1/√in), and bias from U(-1/√in, 1/√in).
func NewLinear(g *autograd.Generator, in, out int, opt LinearOptions) *Linear {
	checkGen("NewLinear", g)
	if in < 0 || out < 0 {
		Fail(autograd.ErrArgument, "NewLinear", "negative size: in=%d out=%d", in, out)
	}
	l := &Linear{In: in, Out: out}
	w := l.RegisterParameter("weight", autograd.Zeros(out, in))
	var b *autograd.Tensor
	if !opt.NoBias {
		b = l.RegisterParameter("bias", autograd.Zeros(out))
	}
	initWeightAndBias(g, w, b)
	return l
}

// Weight returns the [out, in] weight.
func (l *Linear) Weight() *autograd.Tensor { return l.param("weight") }

// Bias returns the [out] bias, or nil without one.
func (l *Linear) Bias() *autograd.Tensor { return l.param("bias") }

// Forward maps x [..., in] to [..., out].
func (l *Linear) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(l, x)()
	return autograd.Linear(x, l.Weight(), l.Bias())
}

// forwardReLU is relu.Forward(l.Forward(x)) as one op.
func (l *Linear) forwardReLU(x *autograd.Tensor, relu *ReLU) *autograd.Tensor {
	defer Enter(l, x)()
	defer Enter(relu, x)()
	return autograd.LinearReLU(x, l.Weight(), l.Bias())
}

// Identity returns its input, like torch.nn.Identity; it stands in for a
// layer that a model variant leaves out.
type Identity struct{ Base }

// NewIdentity returns an Identity layer.
func NewIdentity() *Identity { return &Identity{} }

// Forward returns x.
func (m *Identity) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(m, x)()
	return x
}

// Flatten merges dimensions StartDim..EndDim (negative counts from the end)
// into one, like torch.nn.Flatten.
type Flatten struct {
	Base
	StartDim, EndDim int
}

// NewFlatten returns a Flatten layer; NewFlatten(1, -1) is PyTorch's
// default, keeping the batch dimension.
func NewFlatten(startDim, endDim int) *Flatten { return &Flatten{StartDim: startDim, EndDim: endDim} }

// Forward flattens x.
func (f *Flatten) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(f, x)()
	return autograd.Flatten(x, f.StartDim, f.EndDim)
}
