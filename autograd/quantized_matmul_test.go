package autograd

import (
	"fmt"
	"strings"
	"testing"
)

// TestQuantizedMatmulMatchesFakeQuant checks the int8 product against its
// decomposition on the same operands: Dequantize both, the float32
// product, the division, Quantize. Float32 results agree to 1e-4
// relative, 8-bit ones to one step.
func TestQuantizedMatmulMatchesFakeQuant(t *testing.T) {
	gen := NewGenerator(13)
	shapes := []struct{ a, b []int }{
		{[]int{5, 19}, []int{19, 11}},
		{[]int{3, 4, 17}, []int{3, 17, 6}},
		{[]int{2, 3, 7, 9}, []int{9, 5}},
		{[]int{1, 1}, []int{1, 1}},
	}
	for _, sh := range shapes {
		for _, dts := range [][2]DType{{Uint8, Uint8}, {Uint8, Int8}, {Int8, Uint8}, {Int8, Int8}} {
			for _, div := range []float64{0, 2.5} {
				for _, out := range []string{"float32", "uint8", "int8"} {
					name := fmt.Sprintf("%v×%v/%v/div %v/%s", sh.a, sh.b, dts, div, out)
					at := QuantizedMatmulAttrs{Scale: 0.03, ZeroPoint: 120, OtherScale: 0.02, OtherZeroPoint: 90,
						Divisor: div, OutDType: out, OutScale: 0.05, OutZeroPoint: 0}
					if dts[0] == Int8 {
						at.ZeroPoint = -7
					}
					if dts[1] == Int8 {
						at.OtherZeroPoint = 11
					}
					if out == "uint8" {
						at.OutZeroPoint = 128
					}
					a := Quantize(Randn(gen, sh.a...), float32(at.Scale), at.ZeroPoint, dts[0])
					b := Quantize(Randn(gen, sh.b...), float32(at.OtherScale), at.OtherZeroPoint, dts[1])
					af, bf := Dequantize(a, float32(at.Scale), at.ZeroPoint), Dequantize(b, float32(at.OtherScale), at.OtherZeroPoint)
					want := Matmul(af, bf)
					if div != 0 {
						want = Div(want, Scalar(float32(div)))
					}
					got := QuantizedMatmul(a, b, at)
					if fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
						t.Fatalf("%s: shape %v, want %v", name, got.Shape(), want.Shape())
					}
					checkDecomposition(t, name, got, want, out, at.OutScale, at.OutZeroPoint)
				}
			}
		}
	}
}

func TestQuantizedMatmulBadInputs(t *testing.T) {
	a := Quantize(Randn(NewGenerator(1), 3, 4), 0.1, 0, Uint8)
	ok := QuantizedMatmulAttrs{Scale: 0.1, OtherScale: 0.1, OutDType: "float32"}
	cases := []struct {
		name string
		run  func()
		want string
	}{
		{"float operand", func() { QuantizedMatmul(a, Randn(NewGenerator(2), 4, 2), ok) }, "second operand has dtype float32"},
		{"inner mismatch", func() { QuantizedMatmul(a, a, ok) }, "do not multiply"},
		{"vector", func() { QuantizedMatmul(a, Quantize(Randn(NewGenerator(2), 4), 0.1, 0, Uint8), ok) }, "at least 2 dimensions"},
		{"zero scale", func() { at := ok; at.OtherScale = 0; QuantizedMatmul(a, Reshape(a, 4, 3), at) }, "scale"},
		{"bad out dtype", func() { at := ok; at.OutDType = "int4"; QuantizedMatmul(a, Reshape(a, 4, 3), at) }, "int4"},
	}
	for _, c := range cases {
		err := Try(c.run)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
