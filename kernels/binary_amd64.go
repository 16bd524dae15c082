//go:build amd64 && !noasm

package kernels

import "math"

// The AVX2 kernels of binary_amd64.s. The same-length ones need
// len(a) = len(b) = len(dst); the scalar ones len(a) = len(dst); the gather
// ones read a[i·as] and b[i·bs] for i < len(dst).

//go:noescape
func binAddAVX2(dst, a, b []float32)

//go:noescape
func binSubAVX2(dst, a, b []float32)

//go:noescape
func binMulAVX2(dst, a, b []float32)

//go:noescape
func binDivAVX2(dst, a, b []float32)

//go:noescape
func binAddScalarAVX2(dst, a []float32, s float32)

//go:noescape
func binSubScalarAVX2(dst, a []float32, s float32)

//go:noescape
func binMulScalarAVX2(dst, a []float32, s float32)

//go:noescape
func binDivScalarAVX2(dst, a []float32, s float32)

//go:noescape
func binRSubScalarAVX2(dst, a []float32, s float32)

//go:noescape
func binRDivScalarAVX2(dst, a []float32, s float32)

//go:noescape
func binAddGatherAVX2(dst, a, b []float32, as, bs int)

//go:noescape
func binSubGatherAVX2(dst, a, b []float32, as, bs int)

//go:noescape
func binMulGatherAVX2(dst, a, b []float32, as, bs int)

//go:noescape
func binDivGatherAVX2(dst, a, b []float32, as, bs int)

// binChunk is the most elements one assembly call handles (about 20 µs
// from memory), so no call holds up the garbage collector for long.
const binChunk = 1 << 15

var (
	binarySameAVX2    = binarySameAsm
	binaryScalarAVX2  = binaryScalarAsm
	binaryStridedAVX2 = binaryStridedAsm
)

func binarySameAsm(op BinOp, dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	lo := 0
	if len(dst) >= streamMinElems {
		// See stream_amd64.go.
		buf := getScratchF32(streamBlock) // pooled, as actRun's
		lo = streamHead(dst)
		binSameSpan(op, dst[:lo], a[:lo], b[:lo])
		for ; lo+streamBlock <= len(dst); lo += streamBlock {
			binSameSpan(op, buf.s, a[lo:lo+streamBlock], b[lo:lo+streamBlock])
			streamStore(dst[lo:lo+streamBlock], buf.s)
		}
		storeFence()
		buf.put()
	}
	for ; lo < len(dst); lo += binChunk {
		hi := min(lo+binChunk, len(dst))
		binSameSpan(op, dst[lo:hi], a[lo:hi], b[lo:hi])
	}
}

// binSameSpan runs the assembly kernel of op on one span.
func binSameSpan(op BinOp, d, x, y []float32) {
	switch op {
	case BinAdd:
		binAddAVX2(d, x, y)
	case BinSub:
		binSubAVX2(d, x, y)
	case BinMul:
		binMulAVX2(d, x, y)
	case BinDiv:
		binDivAVX2(d, x, y)
	}
}

func binaryScalarAsm(op BinOp, dst, a []float32, s float32, left bool) {
	a = a[:len(dst)]
	for lo := 0; lo < len(dst); lo += binChunk {
		hi := min(lo+binChunk, len(dst))
		d, x := dst[lo:hi], a[lo:hi]
		switch {
		case op == BinAdd:
			binAddScalarAVX2(d, x, s)
		case op == BinMul:
			binMulScalarAVX2(d, x, s)
		case op == BinSub && !left:
			binSubScalarAVX2(d, x, s)
		case op == BinSub:
			binRSubScalarAVX2(d, x, s)
		case op == BinDiv && !left:
			binDivScalarAVX2(d, x, s)
		case op == BinDiv:
			binRDivScalarAVX2(d, x, s)
		}
	}
}

// binaryStridedAsm gathers a and b when dst is contiguous and the lanes'
// offsets fit the gather's int32 indices; other runs take the reference.
func binaryStridedAsm(op BinOp, n int, dst []float32, ds int, a []float32, as int, b []float32, bs int) {
	if ds != 1 || 7*max(as, bs) > math.MaxInt32 {
		binaryStrided(op, n, dst, ds, a, as, b, bs)
		return
	}
	for lo := 0; lo < n; lo += binChunk {
		hi := min(lo+binChunk, n)
		d, x, y := dst[lo:hi], a[lo*as:], b[lo*bs:]
		switch op {
		case BinAdd:
			binAddGatherAVX2(d, x, y, as, bs)
		case BinSub:
			binSubGatherAVX2(d, x, y, as, bs)
		case BinMul:
			binMulGatherAVX2(d, x, y, as, bs)
		case BinDiv:
			binDivGatherAVX2(d, x, y, as, bs)
		}
	}
}
