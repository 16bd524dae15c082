package amp

import (
	"fmt"

	"github.com/kilnml/kiln/autograd"
)

// Error is the value amp panics with when it is misused (a nil or non-float32
// tensor to split, a gradient that does not fit its parameter). Op names the
// function; Kind is one of autograd's kinds (autograd.ErrShape, ErrDType,
// ErrArgument), returned by Unwrap for errors.Is. It implements
// autograd.Misuse, so autograd.Try returns it as an error.
type Error struct {
	Op   string
	Kind error
	Msg  string
}

func (e *Error) Error() string { return "amp: " + e.Op + ": " + e.Msg }

// Unwrap returns the error's kind.
func (e *Error) Unwrap() error { return e.Kind }

// Misuse marks *Error as a misuse panic that autograd.Try converts.
func (e *Error) Misuse() {}

var _ autograd.Misuse = (*Error)(nil)

// fail panics with an *Error of kind for op.
func fail(kind error, op, format string, args ...any) {
	panic(&Error{Op: op, Kind: kind, Msg: fmt.Sprintf(format, args...)})
}
