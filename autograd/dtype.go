package autograd

import (
	"fmt"
	"slices"
	"strings"
)

// DType is the element type of a tensor.
type DType int

// The element types a Tensor can hold. BFloat16 is stored as the upper 16
// bits of an IEEE float32, in a []uint16.
const (
	Float32 DType = iota
	BFloat16
	Int8
	Uint8
	Int32
	Int64
)

var dtypeNames = [...]string{"float32", "bfloat16", "int8", "uint8", "int32", "int64"}

func (d DType) String() string {
	if d >= 0 && int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// ParseDType returns the dtype String names s ("float32", "bfloat16", …).
func ParseDType(s string) (DType, error) {
	if d := slices.Index(dtypeNames[:], s); d >= 0 {
		return DType(d), nil
	}
	return 0, fmt.Errorf("unknown dtype %q (want one of %s)", s, strings.Join(dtypeNames[:], ", "))
}

// Size is the number of bytes one element occupies.
func (d DType) Size() int {
	switch d {
	case Float32, Int32:
		return 4
	case BFloat16:
		return 2
	case Int8, Uint8:
		return 1
	case Int64:
		return 8
	}
	failDType("Size", "unknown dtype %v", d)
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == Float32 || d == BFloat16 }

// MemoryFormat is the physical order of a tensor's elements behind its
// logical shape.
type MemoryFormat int

const (
	// Contiguous is row-major order of the logical shape.
	Contiguous MemoryFormat = iota
	// ChannelsLast stores a 4-D NCHW tensor in NHWC order.
	ChannelsLast
	// ChannelsLast3d stores a 5-D NCDHW tensor in NDHWC order.
	ChannelsLast3d
)

func (f MemoryFormat) String() string {
	switch f {
	case Contiguous:
		return "contiguous"
	case ChannelsLast:
		return "channels_last"
	case ChannelsLast3d:
		return "channels_last_3d"
	}
	return fmt.Sprintf("MemoryFormat(%d)", int(f))
}

// ParseFormat returns the memory format String names s ("contiguous",
// "channels_last", "channels_last_3d").
func ParseFormat(s string) (MemoryFormat, error) {
	names := []string{Contiguous.String(), ChannelsLast.String(), ChannelsLast3d.String()}
	if f := slices.Index(names, s); f >= 0 {
		return MemoryFormat(f), nil
	}
	return 0, fmt.Errorf("unknown memory format %q (want one of %s)", s, strings.Join(names, ", "))
}

// checkFormat panics unless f is one of the three layouts; an unknown
// value would otherwise be carried along as if it were contiguous.
func checkFormat(op string, f MemoryFormat) {
	if f < Contiguous || f > ChannelsLast3d {
		Fail(op, "unknown memory format %v", f)
	}
}

// rank is the number of dimensions a format applies to, or 0 for any.
func (f MemoryFormat) rank() int {
	switch f {
	case ChannelsLast:
		return 4
	case ChannelsLast3d:
		return 5
	}
	return 0
}
