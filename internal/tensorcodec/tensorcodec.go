// Package tensorcodec turns safetensors entries into Kiln tensors. The
// state-dict loader and the golden-test loader share it, so both read every
// dtype, and 0-d tensors such as num_batches_tracked, the same way.
package tensorcodec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/internal/shape"
)

// Decode returns e as a contiguous tensor with e's shape (an empty shape is
// 0-d). F64 and F16 widen or narrow to Float32 and BOOL reads as Uint8,
// since Kiln has no such dtypes; any other unknown dtype is an error naming
// it.
func Decode(e safetensors.Tensor) (*autograd.Tensor, error) {
	dtype, ok := map[string]autograd.DType{
		"F32": autograd.Float32, "F64": autograd.Float32, "F16": autograd.Float32,
		"BF16": autograd.BFloat16, "I64": autograd.Int64, "I32": autograd.Int32,
		"I8": autograd.Int8, "U8": autograd.Uint8, "BOOL": autograd.Uint8,
	}[e.DType]
	if !ok {
		return nil, fmt.Errorf("unsupported dtype %s", e.DType)
	}
	b := e.Data
	// The size is checked against the data before anything is allocated,
	// so a corrupt shape costs an error, not a huge allocation or a crash.
	need, err := shape.Bytes(e.Shape, safetensors.ElemSize(e.DType))
	if err != nil {
		return nil, fmt.Errorf("%s %w", e.DType, err)
	}
	if len(b) != need {
		return nil, fmt.Errorf("%s %v needs %d bytes, has %d", e.DType, e.Shape, need, len(b))
	}
	t := autograd.Empty(dtype, e.Shape...)
	le := binary.LittleEndian
	switch v := t.Data().(type) {
	case []float32:
		for i := range v {
			switch e.DType {
			case "F32":
				v[i] = math.Float32frombits(le.Uint32(b[4*i:]))
			case "F64":
				v[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
			case "F16":
				v[i] = f32FromF16(le.Uint16(b[2*i:]))
			}
		}
	case []uint16:
		for i := range v {
			v[i] = le.Uint16(b[2*i:])
		}
	case []int64:
		for i := range v {
			v[i] = int64(le.Uint64(b[8*i:]))
		}
	case []int32:
		for i := range v {
			v[i] = int32(le.Uint32(b[4*i:]))
		}
	case []int8:
		for i := range v {
			v[i] = int8(b[i])
		}
	case []uint8:
		copy(v, b)
	}
	return t, nil
}

// f32FromF16 widens an IEEE half-precision value.
func f32FromF16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: value is frac·2⁻²⁴
		v := float32(frac) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}
