// Package autograd provides Kiln's Tensor and reverse-mode automatic
// differentiation.
//
// A Tensor has a dtype, a logical shape (always NCHW / NCDHW order for
// images, as in PyTorch), a memory format that says how the elements are
// laid out in memory (Contiguous, ChannelsLast or ChannelsLast3d) and a typed
// backing slice. Operations on tensors that require gradients record
// themselves on a tape; calling Backward on a result walks the tape in
// reverse and accumulates gradients into the leaves, as torch.autograd does;
// Grad returns the gradients with respect to chosen tensors instead, as
// torch.autograd.grad does.
//
// Grad mode, autocast and tracing belong to a computation, not to the
// process: each tensor carries a Mode, and an op's results carry the union
// of its operands' modes. An inference pass starts from NoGrad(x), a BF16
// pass from Autocast(x); a training step in another goroutine on the same
// parameters is unaffected and gets the bits it gets alone. Kiln keeps no
// mutable process-wide switch that changes what an op computes.
//
// Programmer errors in tensor maths — mismatched shapes or dtypes — panic
// with an *Error naming the op and the shapes, in the manner of gonum's mat
// package. Try turns such panics into ordinary errors, and also those of the
// kernels beneath (*kernels.Error) and of the packages above (nn, amp: any
// error implementing Misuse). Every one of them carries a kind that
// errors.Is tests: ErrShape, ErrDType, ErrIndex, ErrArgument, ErrUnsupported
// or ErrGrad.
package autograd
