package autograd_test

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

// TestQuantGolden checks the quantization ops bit for bit against
// testdata/golden/gen_quant_ops.py, whose cases describe themselves
// (kind, scales, zero points, axis, dtype). A 4-D case runs channels-last
// too: the result keeps that format and its logical values are PyTorch's.
func TestQuantGolden(t *testing.T) {
	set := golden.Load(t, "quant_ops.safetensors")
	cases := set.Cases()
	if len(cases) < 30 {
		t.Fatalf("%d cases in quant_ops.safetensors", len(cases))
	}
	for _, c := range cases {
		t.Run(c, func(t *testing.T) {
			get := func(name string) *autograd.Tensor { return set.Get(t, c+"."+name) }
			x := get("x")
			formats := []autograd.MemoryFormat{autograd.Contiguous}
			if x.NDim() == 4 {
				formats = append(formats, autograd.ChannelsLast)
			}
			for _, f := range formats {
				xf := x.To(f)
				switch kind := c[:strings.IndexByte(c, '.')]; kind {
				case "tensor":
					scale, zero := get("scale").Float32s()[0], int(get("zero").Int64s()[0])
					want := get("q")
					q := autograd.Quantize(xf, scale, zero, want.DType())
					quantSame(t, "q", q, want, f)
					quantSame(t, "dequantized", autograd.Dequantize(q, scale, zero), get("deq"), f)
				case "channel":
					scales, axis := get("scales"), int(get("axis").Int64s()[0])
					want := get("q")
					q := autograd.QuantizePerChannel(xf, scales, axis, want.DType())
					quantSame(t, "q", q, want, f)
					quantSame(t, "dequantized", autograd.DequantizePerChannel(q, scales, axis), get("deq"), f)
				case "fake", "fakepc":
					xl := xf.Detach().SetRequiresGrad(true)
					dtype := get("dtype_of").DType()
					var y *autograd.Tensor
					if kind == "fake" {
						y = autograd.FakeQuantize(xl, get("scale").Float32s()[0], int(get("zero").Int64s()[0]), dtype)
					} else {
						y = autograd.FakeQuantizePerChannel(xl, get("scales"), int(get("axis").Int64s()[0]), dtype)
					}
					y.Backward(get("gout"))
					quantSame(t, "out", y, get("out"), f)
					quantSame(t, "grad_x", xl.Grad(), get("grad_x"), f)
				default:
					t.Fatalf("unknown case kind %q", kind)
				}
			}
		})
	}
}
