package nn

import "github.com/kilnml/kiln/autograd"

// ReLU applies max(0, x) elementwise (torch.nn.ReLU).
type ReLU struct{ Base }

// NewReLU returns a ReLU layer.
func NewReLU() *ReLU { return &ReLU{} }

// Forward applies the activation.
func (m *ReLU) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(m, x)()
	return autograd.ReLU(x)
}

// Sigmoid applies 1/(1+e⁻ˣ) elementwise (torch.nn.Sigmoid).
type Sigmoid struct{ Base }

// NewSigmoid returns a Sigmoid layer.
func NewSigmoid() *Sigmoid { return &Sigmoid{} }

// Forward applies the activation.
func (m *Sigmoid) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(m, x)()
	return autograd.Sigmoid(x)
}

// Tanh applies tanh elementwise (torch.nn.Tanh).
type Tanh struct{ Base }

// NewTanh returns a Tanh layer.
func NewTanh() *Tanh { return &Tanh{} }

// Forward applies the activation.
func (m *Tanh) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(m, x)()
	return autograd.Tanh(x)
}

// SiLU applies x·sigmoid(x) elementwise (torch.nn.SiLU).
type SiLU struct{ Base }

// NewSiLU returns a SiLU layer.
func NewSiLU() *SiLU { return &SiLU{} }

// Forward applies the activation.
func (m *SiLU) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(m, x)()
	return autograd.SiLU(x)
}

// HardTanh clamps its input to [Min, Max] (torch.nn.Hardtanh).
type HardTanh struct {
	Base
	Min, Max float32
}

// NewHardTanh returns a HardTanh layer; PyTorch's default is (-1, 1).
func NewHardTanh(minVal, maxVal float32) *HardTanh {
	if minVal > maxVal {
		Fail(autograd.ErrArgument, "NewHardTanh", "min %v is greater than max %v", minVal, maxVal)
	}
	return &HardTanh{Min: minVal, Max: maxVal}
}

// Forward applies the activation.
func (h *HardTanh) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(h, x)()
	return autograd.HardTanh(x, h.Min, h.Max)
}

// ELU applies x for x > 0 and Alpha·(eˣ-1) otherwise (torch.nn.ELU).
type ELU struct {
	Base
	Alpha float32
}

// NewELU returns an ELU layer; PyTorch's default alpha is 1.
func NewELU(alpha float32) *ELU { return &ELU{Alpha: alpha} }

// Forward applies the activation.
func (e *ELU) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(e, x)()
	return autograd.ELU(x, e.Alpha)
}

// GELU applies the Gaussian error linear unit (torch.nn.GELU), exactly
// ("none") or with the tanh approximation ("tanh").
type GELU struct {
	Base
	Approximate string
}

// NewGELU returns a GELU layer; approximate is "none" (PyTorch's default)
// or "tanh".
func NewGELU(approximate string) *GELU {
	if approximate != "none" && approximate != "tanh" {
		Fail(autograd.ErrArgument, "NewGELU", "approximate must be \"none\" or \"tanh\", got %q", approximate)
	}
	return &GELU{Approximate: approximate}
}

// Forward applies the activation.
func (g *GELU) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(g, x)()
	return autograd.GELU(x, g.Approximate)
}

// Softmax normalises exp(x) to sum to 1 along Dim (torch.nn.Softmax).
type Softmax struct {
	Base
	Dim int
}

// NewSoftmax returns a Softmax over dim (negative counts from the end).
func NewSoftmax(dim int) *Softmax { return &Softmax{Dim: dim} }

// Forward applies the softmax.
func (s *Softmax) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(s, x)()
	return autograd.Softmax(x, s.Dim)
}

// LogSoftmax is log(softmax(x)) along Dim, computed stably
// (torch.nn.LogSoftmax).
type LogSoftmax struct {
	Base
	Dim int
}

// NewLogSoftmax returns a LogSoftmax over dim.
func NewLogSoftmax(dim int) *LogSoftmax { return &LogSoftmax{Dim: dim} }

// Forward applies the log-softmax.
func (s *LogSoftmax) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(s, x)()
	return autograd.LogSoftmax(x, s.Dim)
}

// Dropout zeroes each element with probability P in training mode and
// scales the rest by 1/(1-P); in evaluation mode it is the identity
// (torch.nn.Dropout).
type Dropout struct {
	Base
	P   float64
	gen *autograd.Generator
}

// NewDropout returns a Dropout layer. It draws its masks from its own
// generator, seeded from g, so the masks a run sees do not depend on what
// else consumes g afterwards.
func NewDropout(g *autograd.Generator, p float64) *Dropout {
	checkGen("NewDropout", g)
	if !(p >= 0 && p <= 1) {
		Fail(autograd.ErrArgument, "NewDropout", "dropout probability has to be between 0 and 1, but got %v", p)
	}
	return &Dropout{P: p, gen: autograd.NewGenerator(g.Uint64())}
}

// Forward applies dropout according to the module's training mode.
func (d *Dropout) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(d, x)()
	return autograd.Dropout(x, d.P, d.Training(), d.gen)
}
