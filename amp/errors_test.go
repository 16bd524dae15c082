package amp_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
)

// TestErrorKinds checks that amp's misuse panics are *amp.Error values that
// read "amp: Op: …", carry autograd's kinds and that autograd.Try converts.
func TestErrorKinds(t *testing.T) {
	s := amp.Split(autograd.Zeros(2, 3))
	cases := []struct {
		name string
		f    func()
		kind error
		want string
	}{
		{"argument", func() { amp.Split(nil) }, autograd.ErrArgument, "amp: Split: tensor is nil"},
		{"dtype", func() { amp.Split(autograd.Empty(autograd.Int64, 2)) }, autograd.ErrDType, "amp: Split: tensor is int64"},
		{"shape", func() { s.Step(autograd.Zeros(3, 2), func(int, []float32, []float32) {}) }, autograd.ErrShape, "amp: Step: gradient shape [3 2]"},
		{"slice", func() { s.JoinInto(make([]float32, 5)) }, autograd.ErrShape, "amp: JoinInto: slice of 5 elements"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(c.f)
			var ae *amp.Error
			if !errors.As(err, &ae) || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want an *amp.Error of kind %v containing %q", err, c.kind, c.want)
			}
		})
	}
}
