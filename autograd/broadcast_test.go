package autograd

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestBinaryPaths checks Add, Sub, Mul and Div against a per-element
// reference in logical order on operands that take each of binaryF32's
// paths: same layout (one vector call), a one-element operand on either
// side (the scalar kernel), and broadcast or mixed layouts (the walk and the
// strided kernel), with runs long enough for whole vectors and tails.
func TestBinaryPaths(t *testing.T) {
	g := NewGenerator(7)
	cl := func(x *Tensor) *Tensor { return x.To(ChannelsLast) }
	cases := []struct {
		name string
		a, b *Tensor
	}{
		{"same", Randn(g, 3, 37), Randn(g, 3, 37)},
		{"scalar right", Randn(g, 5, 19), Scalar(1.75)},
		{"one right", Randn(g, 5, 19), Full(-0.5, 1, 1)},
		{"scalar left", Scalar(2.5), Randn(g, 4, 29)},
		{"one left", Full(3, 1, 1, 1, 1), cl(Randn(g, 2, 11, 3, 3))},
		{"row", Randn(g, 6, 23), Randn(g, 23)},
		{"column", Randn(g, 6, 23), Randn(g, 6, 1)},
		{"outer", Randn(g, 17, 1), Randn(g, 1, 13)},
		{"cl bias", cl(Randn(g, 2, 19, 3, 5)), Randn(g, 1, 19, 1, 1)},
		{"cl cl", cl(Randn(g, 2, 9, 4, 3)), cl(Randn(g, 2, 9, 4, 3))},
		{"cl contig", cl(Randn(g, 2, 9, 4, 3)), Randn(g, 2, 9, 4, 3)},
		{"contig cl", Randn(g, 2, 9, 4, 3), cl(Randn(g, 2, 9, 4, 3))},
	}
	ops := []struct {
		name string
		fn   func(a, b *Tensor) *Tensor
		ref  func(x, y float32) float32
	}{
		{"Add", Add, func(x, y float32) float32 { return x + y }},
		{"Sub", Sub, func(x, y float32) float32 { return x - y }},
		{"Mul", Mul, func(x, y float32) float32 { return x * y }},
		{"Div", Div, func(x, y float32) float32 { return x / y }},
	}
	for _, c := range cases {
		for _, op := range ops {
			t.Run(fmt.Sprintf("%s/%s", c.name, op.name), func(t *testing.T) {
				out := op.fn(c.a, c.b)
				shape := out.Shape()
				av, bv, ov := c.a.Values(), c.b.Values(), out.Values()
				idx := make([]int, len(shape))
				for i := range ov {
					want := op.ref(float32(av[bcastIndex(idx, shape, c.a.Shape())]), float32(bv[bcastIndex(idx, shape, c.b.Shape())]))
					if math.Float32bits(float32(ov[i])) != math.Float32bits(want) {
						t.Fatalf("element %v = %v, want %v", idx, ov[i], want)
					}
					for d := len(idx) - 1; d >= 0; d-- {
						if idx[d]++; idx[d] < shape[d] {
							break
						}
						idx[d] = 0
					}
				}
			})
		}
	}
}

// bcastIndex is the row-major offset in an operand of shape s of the
// element that broadcasts to logical index idx of out.
func bcastIndex(idx, out, s []int) int {
	off, stride := 0, 1
	for d := len(s) - 1; d >= 0; d-- {
		i := idx[len(out)-len(s)+d]
		if s[d] == 1 {
			i = 0
		}
		off += i * stride
		stride *= s[d]
	}
	return off
}

func TestBroadcastShapes(t *testing.T) {
	for _, tc := range []struct {
		a, b, want []int
	}{
		{[]int{}, []int{}, []int{}},
		{[]int{3}, []int{}, []int{3}},
		{[]int{2, 1, 4}, []int{3, 1}, []int{2, 3, 4}},
		{[]int{0, 1}, []int{5}, []int{0, 5}},
		{[]int{2, 3}, []int{4, 3}, nil},
	} {
		got, err := BroadcastShapes(tc.a, tc.b)
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), "dimension 0: 2 vs 4") {
				t.Errorf("BroadcastShapes(%v, %v) = %v, %v; want an error naming dimension 0", tc.a, tc.b, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("BroadcastShapes(%v, %v) = %v, %v; want %v", tc.a, tc.b, got, err, tc.want)
		}
	}
}
