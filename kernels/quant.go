package kernels

import "math"

// Affine INT8 quantization: a real value x is represented by the integer
// q = clamp(round-half-even(x·float32(1/s)) + z) of an 8-bit type, and
// read back as x̂ = float32(q − z)·s, with a float32 scale s and an integer
// zero point z. The reciprocal is taken once, in float32 (PyTorch's
// quantize_per_tensor multiplies by 1.0f/scale rather than dividing each
// element), and every step rounds as float32 arithmetic does, so that the
// assembly variants, which make the same IEEE roundings, agree with the Go
// reference bit for bit.
//
// A NaN quantizes to the zero point, as if it were 0: it has no nearest
// integer, and the zero point reads back as exactly 0, so one NaN cannot
// saturate a tensor's range. ±Inf and finite values beyond the range clamp
// to its ends.

// The ranges of the two 8-bit types.
const (
	u8Min, u8Max = 0, 255
	s8Min, s8Max = -128, 127
)

// QuantizeU8 sets dst[i] = clamp(round-half-even(x[i]·float32(1/scale)) +
// zero) to [0, 255]; a NaN gives zero. dst and x must have the same length,
// scale must be positive and finite with a finite reciprocal, and zero must
// lie in [0, 255]. Large slices are split across the worker pool.
func QuantizeU8(dst []uint8, x []float32, scale float32, zero int32) {
	inv := quantCheck("QuantizeU8", len(dst), len(x), scale, zero, u8Min, u8Max)
	j := quantJobs.get()
	j.qu, j.f32, j.scale, j.zero = dst, x, inv, zero
	j.run(len(x), j.spans.quantU8)
}

// QuantizeS8 is QuantizeU8 for int8: the range is [−128, 127], and zero
// must lie in it.
func QuantizeS8(dst []int8, x []float32, scale float32, zero int32) {
	inv := quantCheck("QuantizeS8", len(dst), len(x), scale, zero, s8Min, s8Max)
	j := quantJobs.get()
	j.qs, j.f32, j.scale, j.zero = dst, x, inv, zero
	j.run(len(x), j.spans.quantS8)
}

// DequantizeU8 sets dst[i] = float32(q[i] − zero)·scale, the float32 a
// quantized value stands for. dst and q must have the same length; scale
// and zero follow QuantizeU8's rules.
func DequantizeU8(dst []float32, q []uint8, scale float32, zero int32) {
	quantCheck("DequantizeU8", len(dst), len(q), scale, zero, u8Min, u8Max)
	j := quantJobs.get()
	j.f32, j.qu, j.scale, j.zero = dst, q, scale, zero
	j.run(len(dst), j.spans.dequantU8)
}

// DequantizeS8 is DequantizeU8 for int8.
func DequantizeS8(dst []float32, q []int8, scale float32, zero int32) {
	quantCheck("DequantizeS8", len(dst), len(q), scale, zero, s8Min, s8Max)
	j := quantJobs.get()
	j.f32, j.qs, j.scale, j.zero = dst, q, scale, zero
	j.run(len(dst), j.spans.dequantS8)
}

// quantCheck fails unless the lengths match and (scale, zero) is a valid
// quantization of [lo, hi]; it returns float32(1/scale).
func quantCheck(op string, ld, ls int, scale float32, zero, lo, hi int32) float32 {
	if ld != ls {
		fail(ErrShape, op, "dst has %d elements, src %d", ld, ls)
	}
	return quantParams(op, scale, zero, lo, hi)
}

// quantParams fails unless (scale, zero) quantizes to [lo, hi] and returns
// the reciprocal scale the quantizers multiply by. A scale whose reciprocal
// overflows (a subnormal) would turn 0·Inf into NaN, so it is refused too.
func quantParams(op string, scale float32, zero, lo, hi int32) float32 {
	inv := 1 / scale
	if !(scale > 0) || math.IsInf(float64(scale), 0) || math.IsInf(float64(inv), 0) {
		fail(ErrArgument, op, "scale %v is not a positive finite number with a finite reciprocal", scale)
	}
	if zero < lo || zero > hi {
		fail(ErrArgument, op, "zero point %d is outside [%d, %d]", zero, lo, hi)
	}
	return inv
}

// quantizeOne is the reference rounding of one value: the float32 product,
// rounded half to even (exactly, in float64, since every float32 is a
// float64), the zero point added and the result clamped to [lo, hi].
func quantizeOne(x, inv float32, zero, lo, hi int32) int32 {
	v := x * inv
	if v != v {
		return zero
	}
	r := math.RoundToEven(float64(v)) + float64(zero)
	switch {
	case r < float64(lo):
		return lo
	case r > float64(hi):
		return hi
	}
	return int32(r)
}

func quantizeU8Generic(dst []uint8, x []float32, inv float32, zero int32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = uint8(quantizeOne(v, inv, zero, u8Min, u8Max))
	}
}

func quantizeS8Generic(dst []int8, x []float32, inv float32, zero int32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = int8(quantizeOne(v, inv, zero, s8Min, s8Max))
	}
}

func dequantizeU8Generic(dst []float32, q []uint8, scale float32, zero int32) {
	q = q[:len(dst)]
	for i, v := range q {
		dst[i] = float32(int32(v)-zero) * scale
	}
}

func dequantizeS8Generic(dst []float32, q []int8, scale float32, zero int32) {
	q = q[:len(dst)]
	for i, v := range q {
		dst[i] = float32(int32(v)-zero) * scale
	}
}

type (
	quantizeU8Func   func(dst []uint8, x []float32, inv float32, zero int32)
	quantizeS8Func   func(dst []int8, x []float32, inv float32, zero int32)
	dequantizeU8Func func(dst []float32, q []uint8, scale float32, zero int32)
	dequantizeS8Func func(dst []float32, q []int8, scale float32, zero int32)
)

// The variants in use; the tables are in quant_amd64.go and
// quant_noasm.go.
var (
	quantU8Impl   = pick(level, quantizeU8Variants)
	quantS8Impl   = pick(level, quantizeS8Variants)
	dequantU8Impl = pick(level, dequantizeU8Variants)
	dequantS8Impl = pick(level, dequantizeS8Variants)
)

// quantJob is one call's operands for the worker pool. Jobs are pooled
// and their span functions made once, so a call allocates nothing.
type quantJob struct {
	f32   []float32
	qu    []uint8
	qs    []int8
	scale float32 // the scale, or its reciprocal when quantizing
	zero  int32
	spans quantSpans
}

// quantSpans are a job's span functions for Parallel, closures over the
// job made once by newQuantJob.
type quantSpans struct {
	quantU8, quantS8, dequantU8, dequantS8 func(lo, hi int)
}

var quantJobs = freeList[quantJob]{New: newQuantJob}

func newQuantJob() *quantJob {
	j := new(quantJob)
	j.spans = quantSpans{
		quantU8:   func(lo, hi int) { quantU8Impl(j.qu[lo:hi], j.f32[lo:hi], j.scale, j.zero) },
		quantS8:   func(lo, hi int) { quantS8Impl(j.qs[lo:hi], j.f32[lo:hi], j.scale, j.zero) },
		dequantU8: func(lo, hi int) { dequantU8Impl(j.f32[lo:hi], j.qu[lo:hi], j.scale, j.zero) },
		dequantS8: func(lo, hi int) { dequantS8Impl(j.f32[lo:hi], j.qs[lo:hi], j.scale, j.zero) },
	}
	return j
}

// run splits the job's n elements over the pool with span, then drops the
// references to the caller's memory and frees the job.
func (j *quantJob) run(n int, span func(lo, hi int)) {
	// About four operations an element: multiply, round, add, clamp.
	Parallel(n, 4*n, span)
	*j = quantJob{spans: j.spans}
	quantJobs.put(j)
}
