package nn

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/autograd"
)

// BatchNormOptions configures the BatchNorm constructors. The zero value is
// PyTorch's default: eps 1e-5, momentum 0.1, affine, tracking running
// statistics.
type BatchNormOptions struct {
	// Eps is added to the variance for stability; 0 means 1e-5.
	Eps float64
	// Momentum weighs the newest batch in the running statistics; 0 means
	// 0.1. (A momentum of exactly 0, which freezes the statistics in
	// training mode, cannot be asked for; evaluation mode freezes them.)
	Momentum float64
	// CumulativeAverage makes the running statistics a plain average over
	// all batches seen, PyTorch's momentum=None.
	CumulativeAverage bool
	// NoAffine leaves out the learnable weight and bias (affine=False).
	NoAffine bool
	// NoTrackRunningStats keeps no running statistics, so the layer always
	// normalises with batch statistics (track_running_stats=False).
	NoTrackRunningStats bool
}

// BatchNorm normalises each channel of its input with batch statistics in
// training mode and running statistics in evaluation mode, like PyTorch's
// BatchNorm1d, BatchNorm2d and BatchNorm3d (one Go type; the constructor
// fixes the input rank). Its parameters are "weight" and "bias" [C]; its
// buffers "running_mean", "running_var" [C] and "num_batches_tracked" (a
// 0-d Int64 counting training forwards).
type BatchNorm struct {
	Base
	NumFeatures       int
	Eps, Momentum     float64
	CumulativeAverage bool
	name              string
	ranks             []int // accepted input ranks
	// folded is set by FoldBatchNorm once the layer before has absorbed
	// the normalisation.
	folded bool
}

func newBatchNorm(name string, ranks []int, c int, opt BatchNormOptions) *BatchNorm {
	if c <= 0 {
		Fail(autograd.ErrArgument, "New"+name, "number of features must be positive, got %d", c)
	}
	if opt.Eps == 0 {
		opt.Eps = 1e-5
	}
	if opt.Momentum == 0 {
		opt.Momentum = 0.1
	}
	// Checked here so a bad option fails where it is given, not at the
	// first Forward (or, for momentum, never: NaN would fill the running
	// statistics).
	if !(opt.Eps > 0) || math.IsInf(opt.Eps, 0) {
		Fail(autograd.ErrArgument, "New"+name, "eps must be finite and positive, got %v", opt.Eps)
	}
	if math.IsNaN(opt.Momentum) || math.IsInf(opt.Momentum, 0) {
		Fail(autograd.ErrArgument, "New"+name, "momentum must be a finite number, got %v", opt.Momentum)
	}
	bn := &BatchNorm{NumFeatures: c, Eps: opt.Eps, Momentum: opt.Momentum, CumulativeAverage: opt.CumulativeAverage, name: name, ranks: ranks}
	if !opt.NoAffine {
		bn.RegisterParameter("weight", autograd.Ones(c))
		bn.RegisterParameter("bias", autograd.Zeros(c))
	}
	if !opt.NoTrackRunningStats {
		bn.RegisterBuffer("running_mean", autograd.Zeros(c))
		bn.RegisterBuffer("running_var", autograd.Ones(c))
		bn.RegisterBuffer("num_batches_tracked", autograd.Empty(autograd.Int64))
	}
	return bn
}

// NewBatchNorm1d returns a BatchNorm over c channels for [N, C] or
// [N, C, L] inputs.
func NewBatchNorm1d(c int, opt BatchNormOptions) *BatchNorm {
	return newBatchNorm("BatchNorm1d", []int{2, 3}, c, opt)
}

// NewBatchNorm2d returns a BatchNorm over c channels for [N, C, H, W]
// inputs.
func NewBatchNorm2d(c int, opt BatchNormOptions) *BatchNorm {
	return newBatchNorm("BatchNorm2d", []int{4}, c, opt)
}

// NewBatchNorm3d returns a BatchNorm over c channels for [N, C, D, H, W]
// inputs.
func NewBatchNorm3d(c int, opt BatchNormOptions) *BatchNorm {
	return newBatchNorm("BatchNorm3d", []int{5}, c, opt)
}

// Weight returns the [C] scale, or nil when not affine.
func (bn *BatchNorm) Weight() *autograd.Tensor { return bn.param("weight") }

// Bias returns the [C] shift, or nil when not affine.
func (bn *BatchNorm) Bias() *autograd.Tensor { return bn.param("bias") }

// RunningMean returns the running mean buffer, or nil when not tracked.
func (bn *BatchNorm) RunningMean() *autograd.Tensor { return bn.buffer("running_mean") }

// RunningVar returns the running (unbiased) variance buffer, or nil.
func (bn *BatchNorm) RunningVar() *autograd.Tensor { return bn.buffer("running_var") }

// NumBatchesTracked returns the 0-d Int64 counter of training forwards, or
// nil when statistics are not tracked.
func (bn *BatchNorm) NumBatchesTracked() *autograd.Tensor {
	return bn.buffer("num_batches_tracked")
}

// Forward normalises x. In training mode it uses the batch's statistics,
// updates the running ones and counts the batch in num_batches_tracked; in
// evaluation mode it uses the running statistics (batch statistics when
// none are tracked). The output keeps x's memory format. Once folded (see
// FoldBatchNorm) it returns x.
func (bn *BatchNorm) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(bn, x)()
	return bn.forward(x, false, false)
}

// ForwardReLU is ReLU(bn.Forward(x)), bit for bit, as one fused op
// (autograd.BatchNormReLU): the pattern BatchNorm2d followed by
// ReLU(inplace=True) that ResNets repeat, in one pass over memory and one
// saved activation fewer.
func (bn *BatchNorm) ForwardReLU(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(bn, x)()
	return bn.forward(x, true, false)
}

// ForwardInPlace is Forward (with relu, ForwardReLU) writing its result
// over x, which it returns (autograd.BatchNormInPlace): for inference on a
// temporary such as a convolution's output, saving an allocation and a
// pass over memory. x must not require grad while gradients are recorded.
func (bn *BatchNorm) ForwardInPlace(x *autograd.Tensor, relu bool) *autograd.Tensor {
	defer Enter(bn, x)()
	return bn.forward(x, relu, true)
}

// Folded reports whether FoldBatchNorm has folded bn into the layer before
// it, leaving bn the identity with no parameters or buffers.
func (bn *BatchNorm) Folded() bool { return bn.folded }

// fold makes bn the identity and unregisters its state, which the layer
// before now carries.
func (bn *BatchNorm) fold() {
	bn.folded = true
	bn.params, bn.buffers = nil, nil
}

func (bn *BatchNorm) forward(x *autograd.Tensor, relu, inPlace bool) *autograd.Tensor {
	ok := false
	for _, r := range bn.ranks {
		ok = ok || x.NDim() == r
	}
	if !ok {
		want := fmt.Sprintf("%dD", bn.ranks[0])
		if len(bn.ranks) == 2 {
			want = fmt.Sprintf("%dD or %dD", bn.ranks[0], bn.ranks[1])
		}
		Fail(autograd.ErrShape, bn.name, "expected %s input (got %dD input of shape %v)", want, x.NDim(), x.Shape())
	}
	if bn.folded {
		return foldedForward(x, relu, inPlace)
	}
	rm, rv, count := bn.RunningMean(), bn.RunningVar(), bn.NumBatchesTracked()
	training := bn.Training()
	momentum := bn.Momentum
	var batches int64
	if training && count != nil {
		batches = count.Int64s()[0] + 1
		if bn.CumulativeAverage {
			momentum = 1 / float64(batches)
		}
	}
	w, b, batchStats := bn.Weight(), bn.Bias(), training || rm == nil
	var y *autograd.Tensor
	switch {
	case inPlace:
		y = autograd.BatchNormInPlace(x, rm, rv, w, b, batchStats, momentum, bn.Eps, relu)
	case relu:
		y = autograd.BatchNormReLU(x, rm, rv, w, b, batchStats, momentum, bn.Eps)
	default:
		y = autograd.BatchNorm(x, rm, rv, w, b, batchStats, momentum, bn.Eps)
	}
	if training && count != nil {
		// Counted after the op so that a rejected input leaves the
		// counter alone.
		count.Int64s()[0] = batches
	}
	return y
}

// foldedForward is a folded BatchNorm's identity, followed by ReLU when
// asked (in place for ForwardInPlace, as the unfolded op would be).
func foldedForward(x *autograd.Tensor, relu, inPlace bool) *autograd.Tensor {
	switch {
	case !relu:
		return x
	case !inPlace:
		return autograd.ReLU(x)
	}
	return autograd.ReLUInPlace(x)
}

// LayerNormOptions configures NewLayerNorm. The zero value is PyTorch's
// default: eps 1e-5 with a learnable weight and bias.
type LayerNormOptions struct {
	// Eps is added to the variance for stability; 0 means 1e-5.
	Eps float64
	// NoAffine leaves out the weight and bias
	// (elementwise_affine=False).
	NoAffine bool
}

// LayerNorm normalises over the trailing NormalizedShape dimensions, like
// torch.nn.LayerNorm. Its parameters are "weight" and "bias" of
// NormalizedShape, initialised to ones and zeros.
type LayerNorm struct {
	Base
	NormalizedShape []int
	Eps             float64
}

// NewLayerNorm returns a LayerNorm over the trailing dimensions shape.
func NewLayerNorm(shape []int, opt LayerNormOptions) *LayerNorm {
	if len(shape) == 0 {
		Fail(autograd.ErrArgument, "NewLayerNorm", "normalized shape must have at least one dimension")
	}
	for _, d := range shape {
		if d <= 0 {
			Fail(autograd.ErrArgument, "NewLayerNorm", "normalized shape %v has a non-positive dimension", shape)
		}
	}
	if opt.Eps == 0 {
		opt.Eps = 1e-5
	}
	if !(opt.Eps > 0) || math.IsInf(opt.Eps, 0) {
		Fail(autograd.ErrArgument, "NewLayerNorm", "eps must be finite and positive, got %v", opt.Eps)
	}
	l := &LayerNorm{NormalizedShape: append([]int(nil), shape...), Eps: opt.Eps}
	if !opt.NoAffine {
		l.RegisterParameter("weight", autograd.Ones(shape...))
		l.RegisterParameter("bias", autograd.Zeros(shape...))
	}
	return l
}

// Weight returns the scale, or nil when not affine.
func (l *LayerNorm) Weight() *autograd.Tensor { return l.param("weight") }

// Bias returns the shift, or nil when not affine.
func (l *LayerNorm) Bias() *autograd.Tensor { return l.param("bias") }

// Forward normalises x over its trailing dimensions.
func (l *LayerNorm) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(l, x)()
	return autograd.LayerNorm(x, l.NormalizedShape, l.Weight(), l.Bias(), l.Eps)
}
