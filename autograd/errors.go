package autograd

import (
	"errors"
	"fmt"
)

// Error is the value a tensor operation panics with when it is misused: a
// shape or dtype that does not fit, an index out of range, a tensor that
// cannot be differentiated. Op names the operation.
type Error struct {
	Op  string
	Msg string
}

func (e *Error) Error() string { return "autograd: " + e.Op + ": " + e.Msg }

// Fail panics with an *Error for op. It is exported for the packages built on
// autograd (nn, optim, graph) so their misuse panics read the same way.
func Fail(op, format string, args ...any) {
	panic(&Error{Op: op, Msg: fmt.Sprintf(format, args...)})
}

// Try runs f and returns the *Error it panicked with, if any. Other panics
// are bugs, not misuse, and are passed on.
func Try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			var e *Error
			if re, ok := r.(error); ok && errors.As(re, &e) {
				err = e
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}

// checkF32 panics unless t is a non-nil float32 tensor; what names the
// operand in the message ("input", "weight", "tensor 2").
func checkF32(op, what string, t *Tensor) {
	if t == nil {
		Fail(op, "%s is nil", what)
	}
	if t.dtype != Float32 {
		Fail(op, "%s has dtype %v; %s supports float32", what, t.dtype, op)
	}
}
