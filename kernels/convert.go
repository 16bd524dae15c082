package kernels

import "math"

// BF16FromF32 converts one float32 to bfloat16 bits, rounding to nearest
// with ties to even. NaNs stay NaN (quiet) rather than rounding into an
// infinity; subnormals are kept, unlike the hardware instructions, which
// flush them to zero.
func BF16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F32FromBF16 widens bfloat16 bits to float32 exactly.
func F32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 converts src into dst with round-to-nearest-even. The slices
// must have the same length.
func F32ToBF16(dst []uint16, src []float32) {
	if len(dst) != len(src) {
		panic("kernels: F32ToBF16 length mismatch")
	}
	for i, f := range src {
		dst[i] = BF16FromF32(f)
	}
}

// BF16ToF32 widens src into dst exactly. The slices must have the same
// length.
func BF16ToF32(dst []float32, src []uint16) {
	if len(dst) != len(src) {
		panic("kernels: BF16ToF32 length mismatch")
	}
	for i, h := range src {
		dst[i] = F32FromBF16(h)
	}
}
