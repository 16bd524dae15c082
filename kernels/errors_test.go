package kernels

import (
	"errors"
	"strings"
	"testing"
)

// TestErrorKinds checks that kernels called with arguments that do not fit
// panic with an *Error of the right kind naming the kernel.
func TestErrorKinds(t *testing.T) {
	f := make([]float32, 4)
	cases := []struct {
		name string
		call func()
		kind error
		want string
	}{
		{"shape", func() { Binary(BinMul, f, f[:3], f) }, ErrShape, "kernels: Binary(Mul): dst has 4 elements, a 3, b 4"},
		{"shape descriptor", func() { Softmax(&SoftmaxShape{Outer: 2, N: 3, Inner: 1}, f, f) }, ErrShape, "kernels: Softmax: x has 4 elements"},
		{"index", func() {
			CrossEntropyForward(&CrossEntropyShape{Outer: 1, Classes: 4, Inner: 1}, f, []int64{7}, make([]float64, 1), make([]float64, 1))
		}, ErrIndex, "kernels: CrossEntropyForward: target 7 out of range for 4 classes"},
		{"argument", func() { Act{Fn: ActFunc(99)}.Forward(f, f) }, ErrArgument, "unknown function ActFunc(99)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				e, ok := r.(*Error)
				if !ok || !errors.Is(e, c.kind) || !strings.Contains(e.Error(), c.want) {
					t.Fatalf("panic %v, want an *Error of kind %v containing %q", r, c.kind, c.want)
				}
			}()
			c.call()
		})
	}
}
