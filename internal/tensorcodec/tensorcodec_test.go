package tensorcodec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/internal/shape"
)

// encode writes a decoded tensor back as safetensors bytes, the way
// nn.SaveTensors does for the dtypes Kiln holds.
func encode(t *testing.T, x *autograd.Tensor) (string, []byte) {
	t.Helper()
	le := binary.LittleEndian
	var b []byte
	switch d := x.Data().(type) {
	case []float32:
		for _, v := range d {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
		return "F32", b
	case []uint16:
		for _, v := range d {
			b = le.AppendUint16(b, v)
		}
		return "BF16", b
	case []int64:
		for _, v := range d {
			b = le.AppendUint64(b, uint64(v))
		}
		return "I64", b
	case []int32:
		for _, v := range d {
			b = le.AppendUint32(b, uint32(v))
		}
		return "I32", b
	case []int8:
		for _, v := range d {
			b = append(b, byte(v))
		}
		return "I8", b
	case []uint8:
		return "U8", slices.Clone(d)
	}
	t.Fatalf("no encoding for %v", x.DType())
	return "", nil
}

// TestRoundTrip decodes every dtype Kiln holds natively, including 0-d and
// empty shapes and extreme values, and checks that encoding the result
// gives back the same bytes.
func TestRoundTrip(t *testing.T) {
	le := binary.LittleEndian
	var f32, bf16, i64, i32 []byte
	for _, v := range []float32{0, float32(math.Copysign(0, -1)), 1.5, -3e38, 1e-45, float32(math.Inf(1)), float32(math.Inf(-1))} {
		f32 = le.AppendUint32(f32, math.Float32bits(v))
	}
	f32 = le.AppendUint32(f32, 0x7fc00001) // a NaN with payload
	for _, v := range []uint16{0x3f80, 0x8000, 0x7f80, 0xffc1, 0x0001, 0x7f7f} {
		bf16 = le.AppendUint16(bf16, v)
	}
	for _, v := range []int64{math.MinInt64, -1, 0, 1 << 53, math.MaxInt64} {
		i64 = le.AppendUint64(i64, uint64(v))
	}
	for _, v := range []int32{math.MinInt32, -7, 0, math.MaxInt32} {
		i32 = le.AppendUint32(i32, uint32(v))
	}
	cases := []struct {
		name  string
		e     safetensors.Tensor
		dtype autograd.DType
	}{
		{"F32", safetensors.Tensor{DType: "F32", Shape: []int{2, 4}, Data: f32}, autograd.Float32},
		{"BF16", safetensors.Tensor{DType: "BF16", Shape: []int{3, 2}, Data: bf16}, autograd.BFloat16},
		{"I64", safetensors.Tensor{DType: "I64", Shape: []int{5}, Data: i64}, autograd.Int64},
		{"I32", safetensors.Tensor{DType: "I32", Shape: []int{2, 1, 2}, Data: i32}, autograd.Int32},
		{"I8", safetensors.Tensor{DType: "I8", Shape: []int{4}, Data: []byte{0x80, 0xff, 0, 0x7f}}, autograd.Int8},
		{"U8", safetensors.Tensor{DType: "U8", Shape: []int{2, 2}, Data: []byte{0, 1, 128, 255}}, autograd.Uint8},
		{"0-d F32", safetensors.Tensor{DType: "F32", Shape: []int{}, Data: f32[8:12]}, autograd.Float32},
		{"0-d nil shape I64", safetensors.Tensor{DType: "I64", Data: i64[8:16]}, autograd.Int64},
		{"empty", safetensors.Tensor{DType: "F32", Shape: []int{0, 5}, Data: nil}, autograd.Float32},
		{"empty with a large dimension", safetensors.Tensor{DType: "I32", Shape: []int{1 << 40, 0}, Data: []byte{}}, autograd.Int32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, err := Decode(c.e)
			if err != nil {
				t.Fatal(err)
			}
			wantShape := c.e.Shape
			if wantShape == nil {
				wantShape = []int{}
			}
			if x.DType() != c.dtype || !slices.Equal(x.Shape(), wantShape) || x.Format() != autograd.Contiguous {
				t.Fatalf("decoded %v %v %v, want %v %v contiguous", x.DType(), x.Shape(), x.Format(), c.dtype, wantShape)
			}
			dtype, b := encode(t, x)
			if dtype != c.e.DType || !bytes.Equal(b, c.e.Data) {
				t.Fatalf("re-encoded as %s % x, want %s % x", dtype, b, c.e.DType, c.e.Data)
			}
			// The tensor owns its memory: the container's bytes may be reused.
			if len(c.e.Data) > 0 {
				saved := slices.Clone(c.e.Data)
				for i := range c.e.Data {
					c.e.Data[i] ^= 0xff
				}
				_, after := encode(t, x)
				copy(c.e.Data, saved)
				if !bytes.Equal(after, saved) {
					t.Error("the decoded tensor aliases the container's bytes")
				}
			}
		})
	}
}

// TestWidened decodes the dtypes Kiln has no equivalent of into the
// nearest one: F64 and F16 into Float32, BOOL into Uint8.
func TestWidened(t *testing.T) {
	le := binary.LittleEndian
	var f64 []byte
	for _, v := range []float64{0.1, -1e300, 1e-300, math.Inf(-1)} {
		f64 = le.AppendUint64(f64, math.Float64bits(v))
	}
	// Half precision: 1, -2, the smallest subnormal, the largest finite,
	// -0, +Inf and a NaN.
	var f16 []byte
	for _, v := range []uint16{0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000, 0x7c00, 0x7e00} {
		f16 = le.AppendUint16(f16, v)
	}
	cases := []struct {
		e     safetensors.Tensor
		dtype autograd.DType
		want  []float64
	}{
		{safetensors.Tensor{DType: "F64", Shape: []int{4}, Data: f64}, autograd.Float32,
			[]float64{float64(float32(0.1)), math.Inf(-1), 0, math.Inf(-1)}},
		{safetensors.Tensor{DType: "F16", Shape: []int{7}, Data: f16}, autograd.Float32,
			[]float64{1, -2, math.Ldexp(1, -24), 65504, 0, math.Inf(1), math.NaN()}},
		{safetensors.Tensor{DType: "BOOL", Shape: []int{3}, Data: []byte{1, 0, 1}}, autograd.Uint8, []float64{1, 0, 1}},
	}
	for _, c := range cases {
		x, err := Decode(c.e)
		if err != nil {
			t.Fatalf("%s: %v", c.e.DType, err)
		}
		if x.DType() != c.dtype {
			t.Errorf("%s decoded as %v, want %v", c.e.DType, x.DType(), c.dtype)
		}
		got := x.Values()
		for i, w := range c.want {
			if got[i] != w && !(math.IsNaN(w) && math.IsNaN(got[i])) {
				t.Errorf("%s element %d = %v, want %v", c.e.DType, i, got[i], w)
			}
		}
	}
	// The sign of a half-precision zero survives.
	x, _ := Decode(safetensors.Tensor{DType: "F16", Shape: []int{}, Data: []byte{0, 0x80}})
	if v := x.Item(); v != 0 || !math.Signbit(v) {
		t.Errorf("F16 -0 decoded as %v", v)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		e    safetensors.Tensor
		want string
		is   error // the sentinel the error wraps, if any
	}{
		{"unsupported U16", safetensors.Tensor{DType: "U16", Shape: []int{1}, Data: make([]byte, 2)}, "unsupported dtype U16", nil},
		{"unsupported F8", safetensors.Tensor{DType: "F8_E4M3", Shape: []int{1}, Data: make([]byte, 1)}, "unsupported dtype F8_E4M3", nil},
		{"unknown dtype", safetensors.Tensor{DType: "Q9", Shape: []int{1}, Data: make([]byte, 4)}, "unsupported dtype Q9", nil},
		{"empty dtype", safetensors.Tensor{Shape: []int{1}, Data: make([]byte, 4)}, "unsupported dtype ", nil},
		{"too few bytes", safetensors.Tensor{DType: "F32", Shape: []int{2}, Data: make([]byte, 4)}, "F32 [2] needs 8 bytes, has 4", nil},
		{"too many bytes", safetensors.Tensor{DType: "I64", Shape: []int{}, Data: make([]byte, 16)}, "I64 [] needs 8 bytes, has 16", nil},
		{"bytes for an empty shape", safetensors.Tensor{DType: "U8", Shape: []int{3, 0}, Data: make([]byte, 1)}, "U8 [3 0] needs 0 bytes, has 1", nil},
		{"odd half-precision bytes", safetensors.Tensor{DType: "BF16", Shape: []int{2}, Data: make([]byte, 3)}, "BF16 [2] needs 4 bytes, has 3", nil},
		{"negative dimension", safetensors.Tensor{DType: "F32", Shape: []int{2, -1}, Data: nil}, "F32 shape [2 -1]: negative dimension -1", shape.ErrNegative},
		// Without the checks before allocating, these would ask for
		// exabytes, or wrap around to a size that fits the data.
		{"huge shape", safetensors.Tensor{DType: "F32", Shape: []int{1 << 40, 1 << 22}, Data: make([]byte, 4)},
			"F32 shape [1099511627776 4194304]: element count overflows", shape.ErrOverflow},
		{"wrapping shape", safetensors.Tensor{DType: "F32", Shape: []int{1 << 62}, Data: nil}, "element count overflows", shape.ErrOverflow},
		// (2^60+1)·16 wraps around to the 16 elements the data holds.
		{"shape wrapping to the data", safetensors.Tensor{DType: "U8", Shape: []int{1<<60 + 1, 16}, Data: make([]byte, 16)},
			"U8 shape [1152921504606846977 16]: element count overflows", shape.ErrOverflow},
		{"big but countable shape", safetensors.Tensor{DType: "U8", Shape: []int{1 << 40}, Data: make([]byte, 8)}, "U8 [1099511627776] needs 1099511627776 bytes, has 8", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var x *autograd.Tensor
			var err error
			if perr := autograd.Try(func() { x, err = Decode(c.e) }); perr != nil {
				t.Fatalf("Decode panicked: %v", perr)
			}
			if err == nil || x != nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("Decode = %v, %v; want an error containing %q (wrapping %v)", x, err, c.want, c.is)
			}
		})
	}
}

// FuzzDecode decodes entries whose dtype, shape (rank up to 3) and data
// are arbitrary, as a corrupt or hostile file could hand them over. Decode
// must return an error or a tensor; a tensor has the entry's shape and
// exactly as many elements as the data held.
func FuzzDecode(f *testing.F) {
	f.Add("F32", 2, 2, 2, 0, make([]byte, 16))
	f.Add("F16", 2, 1, 2, 0, make([]byte, 4))
	f.Add("I64", 0, 0, 0, 0, make([]byte, 8))
	f.Add("U8", 2, 1<<60+1, 16, 0, make([]byte, 16))
	f.Add("BF16", 3, 0, 1<<62, 5, []byte{})
	f.Fuzz(func(t *testing.T, dtype string, rank, d0, d1, d2 int, data []byte) {
		dims := []int{d0, d1, d2}
		e := safetensors.Tensor{DType: dtype, Shape: dims[:min(max(rank, 0), 3)], Data: data}
		var x *autograd.Tensor
		var err error
		if perr := autograd.Try(func() { x, err = Decode(e) }); perr != nil {
			t.Fatalf("Decode(%s %v, %d bytes) panicked: %v", dtype, e.Shape, len(data), perr)
		}
		if err != nil {
			return
		}
		if !slices.Equal(x.Shape(), e.Shape) || x.Numel()*safetensors.ElemSize(dtype) != len(data) {
			t.Fatalf("Decode(%s %v, %d bytes) = %v tensor of shape %v with %d elements", dtype, e.Shape, len(data), x.DType(), x.Shape(), x.Numel())
		}
	})
}
