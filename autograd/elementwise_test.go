package autograd_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

func TestArithBadInputs(t *testing.T) {
	ops := []struct {
		name string
		f    func(a, b *autograd.Tensor) *autograd.Tensor
	}{{"Add", autograd.Add}, {"Sub", autograd.Sub}, {"Mul", autograd.Mul}, {"Div", autograd.Div}}
	x := autograd.Zeros(2, 3)
	// Two honest operands whose broadcast holds more than 2^48 elements.
	// Zeros leaves their pages untouched, so they cost no memory.
	col, row := autograd.Zeros(1<<24+1, 1), autograd.Zeros(1, 1<<24+1)
	for _, op := range ops {
		cases := []struct {
			name string
			a, b *autograd.Tensor
			want string
		}{
			{"nil first", nil, x, op.name + ": operand 0 is nil"},
			{"nil second", x, nil, op.name + ": operand 1 is nil"},
			{"int64", autograd.Empty(autograd.Int64, 2, 3), x, op.name + ": operand 0 has dtype int64; " + op.name + " supports float32"},
			{"bfloat16 shapes", x, autograd.Empty(autograd.BFloat16, 2), op.name + ": shapes [2 3] and [2] cannot be broadcast together"},
			{"shapes", x, autograd.Zeros(2), op.name + ": shapes [2 3] and [2] cannot be broadcast together (dimension 1: 3 vs 2)"},
			{"empty against non-empty", autograd.Zeros(0, 3), autograd.Zeros(2, 3), "shapes [0 3] and [2 3] cannot be broadcast together (dimension 0: 0 vs 2)"},
			{"channels-last against wrong channels", autograd.Zeros(2, 3, 2, 2).To(autograd.ChannelsLast), autograd.Zeros(1, 4, 1, 1), "shapes [2 3 2 2] and [1 4 1 1]"},
			{"broadcast overflowing", col, row, op.name + ": shape [16777217 16777217]: element count overflows"},
		}
		for _, c := range cases {
			t.Run(op.name+"/"+c.name, func(t *testing.T) {
				err := autograd.Try(func() { op.f(c.a, c.b) })
				var ae *autograd.Error
				if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want an *autograd.Error containing %q", err, c.want)
				}
			})
		}
		// Empty and 0-d operands are not errors: they broadcast as in
		// PyTorch.
		if s := op.f(autograd.Zeros(0, 3), autograd.Zeros(1, 3)).Shape(); len(s) != 2 || s[0] != 0 || s[1] != 3 {
			t.Errorf("%s of [0 3] and [1 3] has shape %v, want [0 3]", op.name, s)
		}
		if s := op.f(autograd.Scalar(2), autograd.Ones(4)).Shape(); len(s) != 1 || s[0] != 4 {
			t.Errorf("%s of a 0-d and a [4] tensor has shape %v, want [4]", op.name, s)
		}
	}
}

// Try turns only *autograd.Error panics into errors; anything else is a
// bug and keeps unwinding.
func TestTryPassesOtherPanics(t *testing.T) {
	defer func() {
		if r := recover(); r != "not misuse" {
			t.Errorf("recovered %v, want the original panic value", r)
		}
	}()
	autograd.Try(func() { panic("not misuse") })
	t.Error("Try swallowed a panic that is not an *autograd.Error")
}
