package optim

import (
	"fmt"

	"github.com/kilnml/kiln/autograd"
)

// Error is the error optim returns when an optimizer or scheduler is
// misconfigured (a hyper-parameter out of range, a parameter list or state
// dict that does not fit), and the value its methods panic with when they
// are misused (a group index out of range, a sparse gradient an optimizer
// cannot take). Op names the optimizer or method ("SGD", "Adam.LR").
// Test for it with errors.As.
type Error struct {
	Op  string
	Msg string
}

func (e *Error) Error() string { return "optim: " + e.Op + ": " + e.Msg }

// Unwrap returns e as an *autograd.Error, which is what autograd.Try
// recovers: Try turns optim's panics into errors like autograd's own.
func (e *Error) Unwrap() error { return &autograd.Error{Op: e.Op, Msg: e.Msg} }

// errorf returns an *Error for op.
func errorf(op, format string, args ...any) error {
	return &Error{Op: op, Msg: fmt.Sprintf(format, args...)}
}

// fail panics with an *Error for op.
func fail(op, format string, args ...any) {
	panic(errorf(op, format, args...))
}
