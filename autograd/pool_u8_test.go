package autograd

import (
	"slices"
	"strings"
	"testing"
)

// TestPoolUint8 pools quantized activations: the maximum equals
// quantizing the float32 pool of their dequantized values, the adaptive
// mean lies within one step of it, and AvgPool2d, which the int8 graph
// does not run on uint8, refuses them.
func TestPoolUint8(t *testing.T) {
	const scale, zero = 0.05, 7
	for _, c := range []struct {
		cl bool
		dt DType
	}{{false, Uint8}, {true, Uint8}, {false, Int8}, {true, Int8}} {
		cl := c.cl
		x := Randn(NewGenerator(5), 2, 5, 9, 7)
		if cl {
			x = x.To(ChannelsLast)
		}
		q := Quantize(x, scale, zero, c.dt)
		dq := Dequantize(q, scale, zero)
		opt := PoolOptions{Kernel: []int{3, 3}, Stride: []int{2, 2}, Padding: []int{1, 1}}
		got := MaxPool2d(q, opt)
		want := Quantize(MaxPool2d(dq, opt), scale, zero, c.dt)
		if got.DType() != c.dt || got.Format() != q.Format() {
			t.Fatalf("channels-last %v: MaxPool2d of uint8 gave %v %v", cl, got.DType(), got.Format())
		}
		if g, w := eightBit(got), eightBit(want); !slices.Equal(g, w) {
			t.Errorf("channels-last %v: uint8 max pool differs from the dequantized one", cl)
		}
		got = AdaptiveAvgPool2d(q, 2, 3)
		want = Quantize(AdaptiveAvgPool2d(dq, 2, 3), scale, zero, c.dt)
		g, w := eightBit(got), eightBit(want)
		for i := range g {
			if d := g[i] - w[i]; d < -1 || d > 1 {
				t.Errorf("%v channels-last %v: adaptive mean %d is %d, the dequantized one quantizes to %d", c.dt, cl, i, g[i], w[i])
			}
		}
	}
	err := Try(func() {
		AvgPool2d(Quantize(Randn(NewGenerator(1), 1, 1, 4, 4), 0.1, 0, Uint8), PoolOptions{Kernel: []int{2}})
	})
	if err == nil || !strings.Contains(err.Error(), "uint8") {
		t.Errorf("AvgPool2d of uint8: %v", err)
	}
}

// eightBit returns the values of a uint8 or int8 tensor in logical order.
func eightBit(t *Tensor) []int {
	t = t.Contiguous()
	var out []int
	if t.DType() == Uint8 {
		for _, v := range t.Uint8s() {
			out = append(out, int(v))
		}
		return out
	}
	for _, v := range t.Int8s() {
		out = append(out, int(v))
	}
	return out
}
