package nn

import "github.com/kilnml/kiln/autograd"

// CrossEntropyLoss is torch.nn.CrossEntropyLoss: log-softmax of logits
// [N, C] (or [N, C, d…]) against Int64 class indices, reduced as Options
// says (the zero value is PyTorch's default: mean, no smoothing, no ignored
// index).
type CrossEntropyLoss struct {
	Base
	Options autograd.CrossEntropyOptions
}

// NewCrossEntropyLoss returns a CrossEntropyLoss.
func NewCrossEntropyLoss(opt autograd.CrossEntropyOptions) *CrossEntropyLoss {
	return &CrossEntropyLoss{Options: opt}
}

// Forward returns the loss of logits against target.
func (l *CrossEntropyLoss) Forward(logits, target *autograd.Tensor) *autograd.Tensor {
	defer Enter(l, logits)()
	return autograd.CrossEntropy(logits, target, l.Options)
}

// MSELoss is torch.nn.MSELoss, the squared error reduced by Reduction
// (the zero value is mean, PyTorch's default).
type MSELoss struct {
	Base
	Reduction autograd.Reduction
}

// NewMSELoss returns an MSELoss.
func NewMSELoss(r autograd.Reduction) *MSELoss { return &MSELoss{Reduction: r} }

// Forward returns the loss of x against target.
func (l *MSELoss) Forward(x, target *autograd.Tensor) *autograd.Tensor {
	defer Enter(l, x)()
	return autograd.MSELoss(x, target, l.Reduction)
}

// BCEWithLogitsLoss is torch.nn.BCEWithLogitsLoss: binary cross entropy
// of sigmoid(x) against target in [0, 1], computed stably from the logits.
type BCEWithLogitsLoss struct {
	Base
	Reduction autograd.Reduction
}

// NewBCEWithLogitsLoss returns a BCEWithLogitsLoss.
func NewBCEWithLogitsLoss(r autograd.Reduction) *BCEWithLogitsLoss {
	return &BCEWithLogitsLoss{Reduction: r}
}

// Forward returns the loss of x against target.
func (l *BCEWithLogitsLoss) Forward(x, target *autograd.Tensor) *autograd.Tensor {
	defer Enter(l, x)()
	return autograd.BCEWithLogits(x, target, l.Reduction)
}
