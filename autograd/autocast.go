package autograd

import "sync/atomic"

// autocastDepth counts the WithAutocast calls in progress. Like grad mode
// it is process-wide: Go has no goroutine-local state.
var autocastDepth atomic.Int32

// WithAutocast runs f with BF16 autocast on: the ops of the policy (Linear,
// Matmul, BMM, Conv2d and Conv3d) cast float32 operands
// to bfloat16 (rounding to nearest even, differentiably, so gradients
// reach float32 parameters in float32) and compute in BF16 with float32
// accumulation, giving bfloat16 results; layer norm, softmax and losses
// cast bfloat16 inputs to float32 and compute in float32; batch norm
// computes in float32 with float32 parameters but keeps a bfloat16 input's
// dtype for its result, as PyTorch's CPU autocast does; every other op
// runs in its input dtype. amp.Autocast is the public front door.
func WithAutocast(f func()) {
	autocastDepth.Add(1)
	defer autocastDepth.Add(-1)
	f()
}

// AutocastEnabled reports whether BF16 autocast is on.
func AutocastEnabled() bool { return autocastDepth.Load() > 0 }

// autocastBF16 returns t cast to bfloat16 when autocast is on and t is
// float32, else t.
func autocastBF16(t *Tensor) *Tensor {
	if t != nil && t.dtype == Float32 && AutocastEnabled() {
		return Cast(t, BFloat16)
	}
	return t
}

// autocastF32 returns t cast to float32 when autocast is on and t is
// bfloat16, else t: the ops the policy keeps in float32 (layer norm,
// softmax, losses) take BF16 activations this way.
func autocastF32(t *Tensor) *Tensor {
	if t != nil && t.dtype == BFloat16 && AutocastEnabled() {
		return Cast(t, Float32)
	}
	return t
}

// viaFloat32 runs a float32-only op f on a bfloat16 x by widening x
// (exactly), running f and rounding the result back to bfloat16, all
// differentiably: for ops like ReLU and pooling, whose results are some of
// their inputs or exact averages of few, this is what a native BF16 kernel
// would give, at the cost of two conversions. Other dtypes go straight to
// f.
func viaFloat32(x *Tensor, f func(x *Tensor) *Tensor) *Tensor {
	if x == nil || x.dtype != BFloat16 {
		return f(x)
	}
	return Cast(f(Cast(x, Float32)), BFloat16)
}
