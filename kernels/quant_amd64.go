//go:build amd64 && !noasm

package kernels

import "unsafe"

// The quantizers by level: AVX-512 variants, sixteen lanes with masked
// tails; AVX2 runs the Go loops.
var (
	quantizeU8Variants   = [levelCount]quantizeU8Func{Generic: quantizeU8Generic, AVX512: quantizeU8AVX512}
	quantizeS8Variants   = [levelCount]quantizeS8Func{Generic: quantizeS8Generic, AVX512: quantizeS8AVX512}
	dequantizeU8Variants = [levelCount]dequantizeU8Func{Generic: dequantizeU8Generic, AVX512: dequantizeU8AVX512}
	dequantizeS8Variants = [levelCount]dequantizeS8Func{Generic: dequantizeS8Generic, AVX512: dequantizeS8AVX512}
)

// Implemented in quant_amd64.s.

// quantizeAVX512 quantizes n floats of x into n bytes of dst as
// quantizeOne does with [lo, hi], storing each result's low byte.
//
//go:noescape
func quantizeAVX512(dst *uint8, x *float32, n int, inv float32, zero, lo, hi int32)

// dequantizeAVX512 sets n floats of dst from n bytes of q, read as uint8,
// or as int8 when signed is 1.
//
//go:noescape
func dequantizeAVX512(dst *float32, q *uint8, n int, scale float32, zero int32, signed int)

// int8DequantAVX512 is int8Dequant on n elements, bias nil or n long.
//
//go:noescape
func int8DequantAVX512(y *float32, acc, corr *int32, cs, bias *float32, n int)

// int8DequantVariants are the INT8 GEMM's first epilogue step by level.
var int8DequantVariants = [levelCount]func(y []float32, acc, corr []int32, cs, bias []float32){
	Generic: int8Dequant, AVX512: int8DequantRowAVX512}

func int8DequantRowAVX512(y []float32, acc, corr []int32, cs, bias []float32) {
	if len(y) == 0 {
		return
	}
	acc, corr, cs = acc[:len(y)], corr[:len(y)], cs[:len(y)]
	var b *float32
	if bias != nil {
		b = &bias[:len(y)][0]
	}
	int8DequantAVX512(&y[0], &acc[0], &corr[0], &cs[0], b, len(y))
}

// quantChunk bounds the elements one assembly call handles, so that no
// call runs long unpreempted.
const quantChunk = 1 << 16

func quantizeU8AVX512(dst []uint8, x []float32, inv float32, zero int32) {
	x = x[:len(dst)]
	for i := 0; i < len(dst); i += quantChunk {
		quantizeAVX512(&dst[i], &x[i], min(quantChunk, len(dst)-i), inv, zero, u8Min, u8Max)
	}
}

func quantizeS8AVX512(dst []int8, x []float32, inv float32, zero int32) {
	x = x[:len(dst)]
	for i := 0; i < len(dst); i += quantChunk {
		quantizeAVX512((*uint8)(unsafe.Pointer(&dst[i])), &x[i], min(quantChunk, len(dst)-i), inv, zero, s8Min, s8Max)
	}
}

func dequantizeU8AVX512(dst []float32, q []uint8, scale float32, zero int32) {
	q = q[:len(dst)]
	for i := 0; i < len(dst); i += quantChunk {
		dequantizeAVX512(&dst[i], &q[i], min(quantChunk, len(dst)-i), scale, zero, 0)
	}
}

func dequantizeS8AVX512(dst []float32, q []int8, scale float32, zero int32) {
	q = q[:len(dst)]
	for i := 0; i < len(dst); i += quantChunk {
		dequantizeAVX512(&dst[i], (*uint8)(unsafe.Pointer(&q[i])), min(quantChunk, len(dst)-i), scale, zero, 1)
	}
}

// int8FinishArgs are int8FinishAVX512's operands; the assembly reads the
// fields at their offsets (8 bytes a pointer or int, 4 a float32 or
// int32), so their order is fixed.
type int8FinishArgs struct {
	dst, acc, corr, cs, bias, rq unsafe.Pointer
	n                            int
	sr                           float32
	zr                           int32
	inv                          float32
	zo, lo, hi                   int32
	rows, accLd, ld              int // ldAcc in bytes, ld in bytes
	fast                         int // 1: int8Finish.fast
}

//go:noescape
func int8FinishAVX512(p *int8FinishArgs)

// int8FinishRowsAVX512 is int8FinishGo in one assembly call.
func int8FinishRowsAVX512(dst []uint8, f *int8Finish) {
	f.check(dst)
	if f.rows <= 0 || f.n <= 0 {
		return
	}
	a := f.args(dst, f.n)
	int8FinishAVX512(&a)
}

// args are the assembly's operands for f's first n columns, into dst.
func (f *int8Finish) args(dst []uint8, n int) int8FinishArgs {
	a := int8FinishArgs{dst: unsafe.Pointer(&dst[0]), acc: unsafe.Pointer(&f.acc[0]), corr: unsafe.Pointer(&f.corr[0]),
		cs: unsafe.Pointer(&f.cs[0]), n: n, sr: f.sr, zr: f.zr, inv: f.inv, zo: f.zo, lo: f.lo, hi: f.hi,
		rows: f.rows, accLd: 4 * f.accLd, ld: f.ld, fast: b2i(f.fast)}
	if f.bias != nil {
		a.bias = unsafe.Pointer(&f.bias[0])
	}
	if f.rq != nil {
		a.rq = unsafe.Pointer(&f.rq[0])
	}
	return a
}

//go:noescape
func int8FinishAVX2(p *int8FinishArgs)

// int8FinishRowsAVX2 is int8FinishGo with the columns in whole eights in
// one assembly call and the rest in Go.
func int8FinishRowsAVX2(dst []uint8, f *int8Finish) {
	f.check(dst)
	if f.rows <= 0 || f.n <= 0 {
		return
	}
	n8 := f.n &^ 7
	if n8 > 0 {
		a := f.args(dst, n8)
		int8FinishAVX2(&a)
	}
	if n8 < f.n {
		t := *f
		t.n -= n8
		t.acc, t.corr, t.cs = f.acc[n8:], f.corr[n8:], f.cs[n8:]
		if f.bias != nil {
			t.bias = f.bias[n8:]
		}
		if f.rq != nil {
			t.rq = f.rq[n8:]
		}
		int8FinishGo(dst[n8:], &t)
	}
}

// int8FinishVariants are the one-pass epilogue of a quantized INT8 GEMM
// result by level.
var int8FinishVariants = [levelCount]func(dst []uint8, f *int8Finish){Generic: int8FinishGo, AVX2: int8FinishRowsAVX2, AVX512: int8FinishRowsAVX512}
