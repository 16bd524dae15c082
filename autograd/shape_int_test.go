package autograd_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// sharesStart reports whether a and b's data begin at one address.
func sharesStart(a, b *autograd.Tensor) bool {
	return a.Numel() > 0 && b.Numel() > 0 && reflect.ValueOf(a.Data()).Pointer() == reflect.ValueOf(b.Data()).Pointer()
}

// The shape ops move integer elements as they move float32 ones: for each
// integer dtype and layout, every op gives the float32 result's shape,
// format, values and sharing of memory, in the input's dtype.
func TestShapeOpsOnIntegers(t *testing.T) {
	ops := []struct {
		name string
		f    func(x *autograd.Tensor) []*autograd.Tensor
	}{
		{"Reshape", func(x *autograd.Tensor) []*autograd.Tensor { return []*autograd.Tensor{autograd.Reshape(x, 6, -1)} }},
		{"View", func(x *autograd.Tensor) []*autograd.Tensor {
			return []*autograd.Tensor{autograd.View(x.Contiguous(), 2, 60)}
		}},
		{"Flatten", func(x *autograd.Tensor) []*autograd.Tensor { return []*autograd.Tensor{autograd.Flatten(x, 1, -1)} }},
		{"Permute", func(x *autograd.Tensor) []*autograd.Tensor {
			return []*autograd.Tensor{autograd.Permute(x, 0, 2, 3, 1)}
		}},
		{"Transpose", func(x *autograd.Tensor) []*autograd.Tensor { return []*autograd.Tensor{autograd.Transpose(x, 1, 3)} }},
		{"Contiguous", func(x *autograd.Tensor) []*autograd.Tensor { return []*autograd.Tensor{x.Contiguous()} }},
		{"Cat", func(x *autograd.Tensor) []*autograd.Tensor {
			return []*autograd.Tensor{autograd.Cat([]*autograd.Tensor{x, x.Contiguous(), x}, 2), autograd.Cat([]*autograd.Tensor{x, x}, 1)}
		}},
		{"Split", func(x *autograd.Tensor) []*autograd.Tensor { return autograd.Split(x, 2, 1) }},
		{"Split dim 0", func(x *autograd.Tensor) []*autograd.Tensor { return autograd.Split(x, 1, 0) }},
		{"SplitSizes", func(x *autograd.Tensor) []*autograd.Tensor { return autograd.SplitSizes(x, []int{1, 3}, 2) }},
	}
	base := autograd.Reshape(autograd.Arange(-60, 60, 1, autograd.Float32), 2, 3, 4, 5)
	for _, dt := range []autograd.DType{autograd.Int8, autograd.Uint8, autograd.Int32, autograd.Int64} {
		for _, f := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
			xf := base.To(f)
			if dt == autograd.Uint8 {
				xf = autograd.AddScalar(xf, 60) // the values uint8 holds
			}
			xi := autograd.Cast(xf, dt)
			for _, op := range ops {
				name := fmt.Sprintf("%s/%v/%v", op.name, dt, f)
				wants, gots := op.f(xf), op.f(xi)
				if len(gots) != len(wants) {
					t.Fatalf("%s: %d results, want %d", name, len(gots), len(wants))
				}
				for i, got := range gots {
					want := wants[i]
					if got.DType() != dt || !slices.Equal(got.Shape(), want.Shape()) || got.Format() != want.Format() {
						t.Errorf("%s[%d]: %v %v %v, want %v %v %v", name, i, got.DType(), got.Shape(), got.Format(), dt, want.Shape(), want.Format())
						continue
					}
					if !slices.Equal(got.Values(), want.Values()) {
						t.Errorf("%s[%d]: values %v, want %v", name, i, got.Values(), want.Values())
					}
					if sharesStart(got, xi) != sharesStart(want, xf) {
						t.Errorf("%s[%d]: shares the input's memory %v, float32 %v", name, i, sharesStart(got, xi), sharesStart(want, xf))
					}
				}
			}
		}
	}
}
