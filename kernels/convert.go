package kernels

import (
	"math"
)

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

// cvtCost is the rough work per element handed to Parallel.
const cvtCost = 1

// F32ToBF16 converts src into dst with round-to-nearest-even, exactly as
// BF16FromF32 does element by element. The slices must have the same
// length. Large slices are split across the worker pool.
func F32ToBF16(dst []uint16, src []float32) {
	if len(dst) != len(src) {
		fail(ErrShape, "F32ToBF16", "length mismatch")
	}
	j := cvtJobs.get()
	j.f32, j.bf16 = src, dst
	Parallel(len(src), len(src)*cvtCost, j.narrow)
	j.release()
}

// BF16ToF32 widens src into dst exactly. The slices must have the same
// length. Large slices are split across the worker pool.
func BF16ToF32(dst []float32, src []uint16) {
	if len(dst) != len(src) {
		fail(ErrShape, "BF16ToF32", "length mismatch")
	}
	j := cvtJobs.get()
	j.f32, j.bf16 = dst, src
	Parallel(len(src), len(src)*cvtCost, j.widen)
	j.release()
}

// The variants by level: the Generic ones are the reference loops.
func f32ToBF16For(l Level) func(dst []uint16, src []float32) {
	return pick(l, [levelCount]func([]uint16, []float32){Generic: f32ToBF16Span, AVX2: f32ToBF16AVX2Span, AVX512: f32ToBF16AVX512Span})
}

func bf16ToF32For(l Level) func(dst []float32, src []uint16) {
	return pick(l, [levelCount]func([]float32, []uint16){Generic: bf16ToF32Span, AVX2: bf16ToF32AVX2Span, AVX512: bf16ToF32AVX512Span})
}

func roundBF16For(l Level) func(x []float32) {
	return pick(l, [levelCount]func([]float32){Generic: roundBF16Span, AVX2: roundBF16AVX2Span, AVX512: roundBF16AVX512Span})
}

var (
	f32ToBF16Impl = f32ToBF16For(level)
	bf16ToF32Impl = bf16ToF32For(level)
	roundBF16Impl = roundBF16For(level)
)

// cvtJob holds one conversion's slices for the worker pool; pooled, with
// its span methods bound once, so a call allocates nothing.
type cvtJob struct {
	f32           []float32
	bf16          []uint16
	narrow, widen func(lo, hi int)
}

var cvtJobs = freeList[cvtJob]{New: func() *cvtJob {
	j := new(cvtJob)
	j.narrow, j.widen = j.runNarrow, j.runWiden
	return j
}}

func (j *cvtJob) runNarrow(lo, hi int) { f32ToBF16Impl(j.bf16[lo:hi], j.f32[lo:hi]) }
func (j *cvtJob) runWiden(lo, hi int)  { bf16ToF32Impl(j.f32[lo:hi], j.bf16[lo:hi]) }

func (j *cvtJob) release() {
	j.f32, j.bf16 = nil, nil
	cvtJobs.put(j)
}

// f32ToBF16Span is the reference narrowing loop.
func f32ToBF16Span(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = BF16FromF32(f)
	}
}

// roundBF16Span is the reference rounding loop: each value becomes the
// float32 of its bfloat16 rounding, a narrowing and widening in one.
func roundBF16Span(x []float32) {
	for i, f := range x {
		x[i] = F32FromBF16(BF16FromF32(f))
	}
}

// bf16ToF32Span is the reference widening loop.
func bf16ToF32Span(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = F32FromBF16(h)
	}
}
