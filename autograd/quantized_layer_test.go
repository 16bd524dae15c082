package autograd

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestQuantizedLayersMatchFakeQuant checks each int8 layer against its
// decomposition on the same quantized operands: Dequantize, the float32
// layer on the dequantized weight, the residual and activation, and
// Quantize. Float32 results agree to 1e-4 relative to the output's
// scale, 8-bit ones to one step.
func TestQuantizedLayersMatchFakeQuant(t *testing.T) {
	type layer struct {
		op     string
		x, w   []int
		attrs  QuantizedLayerAttrs
		format MemoryFormat
	}
	conv := func(stride, pad, groups int) QuantizedLayerAttrs {
		return QuantizedLayerAttrs{Stride: []int{stride, stride}, Padding: []int{pad, pad}, Dilation: []int{1, 1}, Groups: groups}
	}
	layers := []layer{
		{"QuantizedConv2d", []int{2, 6, 9, 7}, []int{10, 6, 3, 3}, conv(1, 1, 1), ChannelsLast},
		{"QuantizedConv2d", []int{2, 6, 9, 7}, []int{10, 6, 3, 3}, conv(2, 1, 1), Contiguous},
		{"QuantizedConv2d", []int{1, 6, 8, 8}, []int{9, 2, 3, 3}, conv(1, 1, 3), ChannelsLast},
		{"QuantizedConv2d", []int{2, 5, 6, 6}, []int{7, 5, 1, 1}, conv(2, 0, 1), ChannelsLast},
		{"QuantizedLinear", []int{5, 19}, []int{11, 19}, QuantizedLayerAttrs{}, Contiguous},
	}
	gen := NewGenerator(11)
	for _, l := range layers {
		for _, xdt := range []DType{Uint8, Int8} {
			for _, residual := range []string{"", "float32", "quantized"} {
				for _, act := range []string{"", "ReLU", "GELU", "Sigmoid"} {
					for _, out := range []string{"float32", "uint8", "int8"} {
						name := fmt.Sprintf("%s%v/%v/%q/%q/%s", l.op, l.x, xdt, residual, act, out)
						a := l.attrs
						a.Scale, a.ZeroPoint = 0.02, 3
						if xdt == Int8 {
							a.ZeroPoint = -5
						}
						a.Act, a.Approximate, a.OutDType = act, "none", out
						a.OutScale, a.OutZeroPoint = 0.05, 0
						if out == "uint8" {
							a.OutZeroPoint = 120
						}
						x := Quantize(Randn(gen, l.x...), float32(a.Scale), a.ZeroPoint, xdt)
						wf := Randn(gen, l.w...)
						ws := FromFloat32(make([]float32, l.w[0]), l.w[0])
						for c := range ws.Float32s() {
							ws.Float32s()[c] = 0.01 + 0.002*float32(c)
						}
						w := QuantizePerChannel(wf, ws, 0, Int8)
						b := Randn(gen, l.w[0])
						if l.format == ChannelsLast {
							x, w = x.To(ChannelsLast), w.To(ChannelsLast)
						}
						xf, wdq := Dequantize(x, float32(a.Scale), a.ZeroPoint), DequantizePerChannel(w, ws, 0)
						var want *Tensor
						if l.op == "QuantizedLinear" {
							want = Linear(xf, wdq, b)
						} else {
							want = Conv2d(xf, wdq, b, ConvOptions{Stride: a.Stride, Padding: a.Padding, Dilation: a.Dilation, Groups: a.Groups})
						}
						var r *Tensor
						a.Residual = residual
						switch residual {
						case "float32":
							r = Randn(gen, want.Shape()...).To(want.Format())
							want = Add(want, r)
						case "quantized":
							a.ResidualScale, a.ResidualZeroPoint = 0.03, 7
							r = Quantize(Randn(gen, want.Shape()...).To(want.Format()), 0.03, 7, Uint8)
							want = Add(want, Dequantize(r, 0.03, 7))
						}
						switch act {
						case "ReLU":
							want = ReLU(want)
						case "GELU":
							want = GELU(want, "none")
						case "Sigmoid":
							want = Sigmoid(want)
						}
						var got *Tensor
						if l.op == "QuantizedLinear" {
							got = QuantizedLinear(x, w, ws, b, r, a)
						} else {
							got = QuantizedConv2d(x, w, ws, b, r, a)
						}
						if got.Format() != want.Format() || fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
							t.Fatalf("%s: result %v %v, the decomposition %v %v", name, got.Shape(), got.Format(), want.Shape(), want.Format())
						}
						checkDecomposition(t, name, got, want, out, a.OutScale, a.OutZeroPoint)
					}
				}
			}
		}
	}
}

func TestQuantizedLayerBadInputs(t *testing.T) {
	x := Quantize(Randn(NewGenerator(1), 1, 4, 5, 5), 0.1, 0, Uint8)
	w := QuantizePerChannel(Randn(NewGenerator(2), 3, 4, 3, 3), FromFloat32([]float32{0.1, 0.1, 0.1}, 3), 0, Int8)
	ws := FromFloat32([]float32{0.1, 0.1, 0.1}, 3)
	ok := QuantizedLayerAttrs{Stride: []int{1, 1}, Padding: []int{1, 1}, Dilation: []int{1, 1}, Groups: 1, Scale: 0.1, OutDType: "float32"}
	cases := []struct {
		name string
		run  func()
		want string
	}{
		{"float input", func() { QuantizedConv2d(Dequantize(x, 0.1, 0), w, ws, nil, nil, ok) }, "input has dtype float32"},
		{"uint8 weight", func() { QuantizedConv2d(x, x, ws, nil, nil, ok) }, "weight has dtype uint8"},
		{"short scales", func() { QuantizedConv2d(x, w, FromFloat32([]float32{1}, 1), nil, nil, ok) }, "weight scales"},
		{"bad out dtype", func() { a := ok; a.OutDType = "int4"; QuantizedConv2d(x, w, ws, nil, nil, a) }, "int4"},
		{"zero scale", func() { a := ok; a.Scale = 0; QuantizedConv2d(x, w, ws, nil, nil, a) }, "scale"},
		{"missing residual", func() { a := ok; a.Residual = "float32"; QuantizedConv2d(x, w, ws, nil, nil, a) }, "residual operand is missing"},
		{"unknown act", func() { a := ok; a.Act = "Tanh"; QuantizedConv2d(x, w, ws, nil, nil, a) }, "unknown activation"},
		{"linear mismatch", func() { QuantizedLinear(x, w, ws, nil, nil, ok) }, "do not multiply"},
	}
	for _, c := range cases {
		err := Try(c.run)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// checkDecomposition compares an int8 op's result got with want, its
// decomposition's float32 result: to 1e-4 relative for a float32 result,
// to one step of want quantized like got (out, scale, zero) for an 8-bit
// one.
func checkDecomposition(t *testing.T, name string, got, want *Tensor, out string, scale float64, zero int) {
	t.Helper()
	if out == "float32" {
		g, w := got.ContiguousFloat32s(), want.ContiguousFloat32s()
		for i := range g {
			if d := math.Abs(float64(g[i] - w[i])); d > 1e-4*math.Max(1, math.Abs(float64(w[i]))) {
				t.Fatalf("%s: element %d is %v, the decomposition gives %v", name, i, g[i], w[i])
			}
		}
		return
	}
	wq := Quantize(want, float32(scale), zero, parseQuantDType("test", out))
	g, w8 := eightBit(got), eightBit(wq)
	for i := range g {
		if d := g[i] - w8[i]; d < -1 || d > 1 {
			t.Fatalf("%s: element %d is %d, the decomposition quantizes to %d", name, i, g[i], w8[i])
		}
	}
}
