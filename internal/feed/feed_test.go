package feed

import (
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
)

func TestConform(t *testing.T) {
	gen := autograd.NewGenerator(1)
	x := autograd.Randn(gen, 2, 3, 4, 4)
	value := func(d autograd.DType, f autograd.MemoryFormat, shape ...int) graph.Value {
		return graph.Value{Name: "input0", Shape: shape, DType: d, Format: f}
	}
	cases := []struct {
		name   string
		x      *autograd.Tensor
		v      graph.Value
		dtype  autograd.DType
		format autograd.MemoryFormat
		err    string
	}{
		{"same", x, value(autograd.Float32, autograd.Contiguous, 1, 3, 4, 4), autograd.Float32, autograd.Contiguous, ""},
		{"float32 feeds bfloat16", x, value(autograd.BFloat16, autograd.Contiguous, 1, 3, 4, 4), autograd.BFloat16, autograd.Contiguous, ""},
		{"channels-last input", x, value(autograd.Float32, autograd.ChannelsLast, 1, 3, 4, 4), autograd.Float32, autograd.ChannelsLast, ""},
		{"int64 for float32", autograd.FromInt64([]int64{1}, 1), value(autograd.Float32, autograd.Contiguous, 1), 0, 0, "array is int64"},
		{"int32 feeds int64", autograd.FromInt32([]int32{3, -1, 1 << 30}, 3), value(autograd.Int64, autograd.Contiguous, 5), autograd.Int64, autograd.Contiguous, ""},
		{"int64 for int32", autograd.FromInt64([]int64{1}, 1), value(autograd.Int32, autograd.Contiguous, 1), 0, 0, "array is int64"},
		{"rank", x, value(autograd.Float32, autograd.Contiguous, 1, 48), 0, 0, "has 2 dimensions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Conform(c.x, c.v)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.DType() != c.dtype || got.Format() != c.format || !slices.Equal(got.Shape(), c.x.Shape()) {
				t.Fatalf("got %v %v %v", got.DType(), got.Format(), got.Shape())
			}
			want := autograd.Cast(c.x, c.dtype).Contiguous().Values()
			if !slices.Equal(got.Contiguous().Values(), want) {
				t.Errorf("values changed")
			}
		})
	}
}
