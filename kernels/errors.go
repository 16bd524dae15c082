package kernels

import (
	"errors"
	"fmt"
)

// The kinds of misuse a kernel panics with. They are the one error vocabulary
// of Kiln: autograd re-exports them (autograd.ErrShape is ErrShape), and the
// packages above classify their own errors with them, so errors.Is answers the
// same question whichever layer found the problem.
var (
	// ErrShape: sizes, lengths, strides or leading dimensions that do not fit
	// together (a slice shorter than its shape needs, operands of different
	// lengths, inconsistent shape descriptors).
	ErrShape = errors.New("shape mismatch")
	// ErrDType: an element type the operation does not take.
	ErrDType = errors.New("unsupported dtype")
	// ErrIndex: an index or class label outside the range it selects from.
	ErrIndex = errors.New("index out of range")
	// ErrArgument: any other invalid argument (an unknown enum value, a
	// setting the operation does not define, a size past a limit).
	ErrArgument = errors.New("invalid argument")
	// ErrUnsupported: a valid request this build or CPU cannot run.
	ErrUnsupported = errors.New("not supported")
)

// Error is the value a kernel panics with when it is called with arguments
// that do not fit: Kernel names the exported function, Kind is one of the
// sentinels above (reached by errors.Is through Unwrap), Msg says what was
// wrong. autograd.Try turns such a panic into an ordinary error.
type Error struct {
	Kernel string
	Kind   error
	Msg    string
}

func (e *Error) Error() string { return "kernels: " + e.Kernel + ": " + e.Msg }

// Unwrap returns the kind, so errors.Is(err, kernels.ErrShape) works.
func (e *Error) Unwrap() error { return e.Kind }

// fail panics with an *Error of kind for kernel.
func fail(kind error, kernel, format string, args ...any) {
	panic(&Error{Kernel: kernel, Kind: kind, Msg: fmt.Sprintf(format, args...)})
}

// checkLens fails with ErrShape for the first operand, by name, whose
// length (l[0]) is below what it needs (l[1]). Taking the first by name
// keeps the message the same whatever order the map gives.
func checkLens(op string, lens map[string][2]int) {
	if bad := firstShort(lens, func(l [2]int) bool { return l[0] < l[1] }); bad != "" {
		fail(ErrShape, op, "%s has %d elements, needs %d", bad, lens[bad][0], lens[bad][1])
	}
}

// firstShort returns the first name, in sorted order, whose value short
// reports, or "" for none.
func firstShort[V any](lens map[string]V, short func(V) bool) string {
	bad := ""
	for name, l := range lens {
		if short(l) && (bad == "" || name < bad) {
			bad = name
		}
	}
	return bad
}
