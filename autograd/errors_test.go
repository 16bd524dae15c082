package autograd_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// testMisuse stands for the error type of a package built on autograd (nn,
// amp): Try converts it because it implements autograd.Misuse.
type testMisuse struct{ msg string }

func (e *testMisuse) Error() string { return "pkg: " + e.msg }
func (e *testMisuse) Misuse()       {}

// TestErrorKinds checks that Try turns each kind of misuse into an error that
// errors.Is and errors.As classify: autograd's own checks, a kernel's typed
// panic, and another package's Misuse error.
func TestErrorKinds(t *testing.T) {
	x := autograd.Zeros(2, 3)
	cases := []struct {
		name string
		f    func()
		kind error
		as   func(error) bool
		want string
	}{
		{"shape", func() { autograd.Add(x, autograd.Zeros(4)) }, autograd.ErrShape, isAutograd, "autograd: Add: shapes [2 3] and [4]"},
		{"linear shape", func() { autograd.Linear(x, autograd.Zeros(4, 5), nil) }, autograd.ErrShape, isAutograd, "weight [4 5] expects 5"},
		{"dtype", func() { autograd.Add(autograd.Empty(autograd.Int64, 2, 3), x) }, autograd.ErrDType, isAutograd, "has dtype int64"},
		{"index", func() { autograd.Softmax(x, 5) }, autograd.ErrIndex, isAutograd, "dim 5 out of range"},
		{"argument", func() { autograd.Add(nil, x) }, autograd.ErrArgument, isAutograd, "operand 0 is nil"},
		{"kernel", func() { kernels.Binary(kernels.BinAdd, make([]float32, 3), make([]float32, 2), make([]float32, 3)) },
			kernels.ErrShape, isKernels, "kernels: Binary(Add): dst has 3 elements, a 2, b 3"},
		{"wrapped kernel", func() {
			panic(fmt.Errorf("context: %w", &kernels.Error{Kernel: "K", Kind: kernels.ErrIndex, Msg: "m"}))
		}, autograd.ErrIndex, isKernels, "context: kernels: K: m"},
		{"other package", func() { panic(&testMisuse{"bad"}) }, nil, func(err error) bool {
			var m autograd.Misuse
			return errors.As(err, &m)
		}, "pkg: bad"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(c.f)
			if err == nil || !c.as(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one of the expected type containing %q", err, c.want)
			}
			if c.kind != nil && !errors.Is(err, c.kind) {
				t.Fatalf("error %v is not %v", err, c.kind)
			}
			for _, other := range []error{autograd.ErrShape, autograd.ErrDType, autograd.ErrIndex, autograd.ErrArgument, autograd.ErrGrad} {
				if other != c.kind && errors.Is(err, other) {
					t.Fatalf("error %v is also %v", err, other)
				}
			}
		})
	}
}

// TestTryPassesBugsOn checks that a panic that is not misuse (a plain string,
// an error of no misuse type) is not turned into an error.
func TestTryPassesBugsOn(t *testing.T) {
	for _, v := range []any{"boom", errors.New("plain")} {
		func() {
			defer func() {
				if r := recover(); r != v {
					t.Errorf("recovered %v, want %v passed on", r, v)
				}
			}()
			autograd.Try(func() { panic(v) })
			t.Errorf("Try swallowed %v", v)
		}()
	}
}

func isAutograd(err error) bool {
	var e *autograd.Error
	return errors.As(err, &e) && e.Op != ""
}

func isKernels(err error) bool {
	var e *kernels.Error
	return errors.As(err, &e) && e.Kernel != ""
}
