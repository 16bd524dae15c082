package autograd

import (
	"errors"
	"fmt"

	"github.com/kilnml/kiln/kernels"
)

// The kinds of misuse, one vocabulary for every layer: they are the kernels
// package's sentinels, so errors.Is(err, autograd.ErrShape) holds whether the
// op's own check or the kernel beneath it caught the mismatch, and the
// packages built on autograd (nn, amp, optim, graph) classify their errors
// with the same values.
var (
	// ErrShape: shapes or sizes that do not fit the op or each other.
	ErrShape = kernels.ErrShape
	// ErrDType: an element type the op does not take, or operands whose
	// dtypes disagree.
	ErrDType = kernels.ErrDType
	// ErrIndex: an index, class label or dimension outside its range.
	ErrIndex = kernels.ErrIndex
	// ErrArgument: any other invalid argument (nil operands, unknown enum
	// values, out-of-range hyperparameters). Fail's default kind.
	ErrArgument = kernels.ErrArgument
	// ErrUnsupported: a valid request this build cannot run.
	ErrUnsupported = kernels.ErrUnsupported
	// ErrGrad: a gradient that cannot be recorded, accumulated or computed
	// as asked (an in-place write to a tensor autograd needs, a sparse and a
	// dense gradient for one tensor, a tensor that does not require grad).
	ErrGrad = errors.New("gradient misuse")
)

// Error is the value a tensor operation panics with when it is misused: a
// shape or dtype that does not fit, an index out of range, a tensor that
// cannot be differentiated. Op names the operation; Kind is one of the
// sentinels above and is what Unwrap returns, so errors.Is(err, ErrShape)
// tells a shape mismatch from other misuse.
type Error struct {
	Op   string
	Kind error
	Msg  string
}

func (e *Error) Error() string { return "autograd: " + e.Op + ": " + e.Msg }

// Unwrap returns the error's kind.
func (e *Error) Unwrap() error { return e.Kind }

// Misuse marks the error values Try converts. *Error implements it; a
// package built on autograd gives its own error type a Misuse method, panics
// with it (its messages carrying its own prefix, "nn: Linear: …") and still
// has Try return it as an error.
func (e *Error) Misuse() {}

// Misuse is implemented by the error types that packages panic with for
// programmer errors (a shape, dtype or argument that does not fit), as
// opposed to bugs. Try returns such a panic as an error.
type Misuse interface {
	error
	Misuse()
}

// Fail panics with an *Error of kind ErrArgument for op.
func Fail(op, format string, args ...any) {
	fail(ErrArgument, op, format, args...)
}

// fail panics with an *Error of kind for op.
func fail(kind error, op, format string, args ...any) {
	panic(&Error{Op: op, Kind: kind, Msg: fmt.Sprintf(format, args...)})
}

func failShape(op, format string, args ...any) { fail(ErrShape, op, format, args...) }
func failDType(op, format string, args ...any) { fail(ErrDType, op, format, args...) }
func failIndex(op, format string, args ...any) { fail(ErrIndex, op, format, args...) }
func failGrad(op, format string, args ...any)  { fail(ErrGrad, op, format, args...) }

// Try runs f and returns, as an error, the misuse it panicked with: an error
// implementing Misuse (an *Error, or the error types of nn, amp and the other
// packages above) or a *kernels.Error from a kernel called with arguments
// that do not fit. Other panics are bugs, not misuse, and are passed on.
func Try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if re, ok := r.(error); ok && isMisuse(re) {
				err = re
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}

// isMisuse reports whether err is, or wraps, a misuse error.
func isMisuse(err error) bool {
	var m Misuse
	var k *kernels.Error
	return errors.As(err, &m) || errors.As(err, &k)
}

// checkF32 panics unless t is a non-nil float32 tensor; what names the
// operand in the message ("input", "weight", "tensor 2").
func checkF32(op, what string, t *Tensor) {
	if t == nil {
		Fail(op, "%s is nil", what)
	}
	if t.dtype != Float32 {
		failDType(op, "%s has dtype %v; %s supports float32", what, t.dtype, op)
	}
}
