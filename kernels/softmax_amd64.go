//go:build amd64 && !noasm

package kernels

import "math"

// The AVX2 softmax kernels of softmax_amd64.s. Row kernels take any length;
// column kernels a multiple of 4 (the wrappers below finish the last few
// columns through the same kernel on a padded copy, so every column is
// computed alike).

//go:noescape
func smRowMaxAVX2(x []float32) float32

//go:noescape
func smRowExpSumAVX2(x, e []float32, mx float32, store int) float64

//go:noescape
func smRowScaleAVX2(y []float32, s float64)

//go:noescape
func smRowSubAVX2(y, x []float32, lse float64)

//go:noescape
func smRowDotAVX2(y, dy []float32) float64

//go:noescape
func smRowSumAVX2(x []float32) float64

//go:noescape
func smRowSoftBwdAVX2(dx, y, dy []float32, dot float64)

//go:noescape
func smRowLogBwdAVX2(dx, y, dy []float32, sum float64)

//go:noescape
func smColMaxAVX2(mx []float64, row []float32)

//go:noescape
func smColExpSumAVX2(sum, mx []float64, row, e []float32, store int)

//go:noescape
func smColScaleAVX2(row []float32, s []float64)

//go:noescape
func smColSubAVX2(y, x []float32, lse []float64)

//go:noescape
func smColDotAVX2(dot []float64, y, dy []float32)

//go:noescape
func smColSumAVX2(sum []float64, x []float32)

//go:noescape
func smColSoftBwdAVX2(dx, y, dy []float32, dot []float64)

//go:noescape
func smColLogBwdAVX2(dx, y, dy []float32, sum []float64)

//go:noescape
func smRowExpSumAVX512(x, e []float32, mx float32, store int) float64

//go:noescape
func smRowLogBwdAVX512(dx, y, dy []float32, sum float64)

//go:noescape
func smSoftmaxRowsAVX512(x, y []float32, n int)

var smAVX2 = &smKernels{
	rowMax:     smRowMaxAsm,
	rowExpSum:  smRowExpSumWith(smRowExpSumAVX2),
	rowScale:   smRowScaleWith(smRowScaleAVX2),
	rowSub:     smRowSubAsm,
	rowDot:     smRowDotAsm,
	rowSum:     smRowSumAsm,
	rowSoftBwd: smRowSoftBwdAsm,
	rowLogBwd:  smRowLogBwdWith(smRowLogBwdAVX2),
	colMax:     smColMaxAsm,
	colExpSum:  smColExpSumAsm,
	colScale:   smColScaleAsm,
	colSub:     smColSubAsm,
	colDot:     smColDotAsm,
	colSum:     smColSumAsm,
	colSoftBwd: smColSoftBwdAsm,
	colLogBwd:  smColLogBwdAsm,
}

// smChunk is the most elements one row-kernel call handles (about 20 µs of
// exponentials), so no call holds up the garbage collector for long; the
// float64 partial results of the chunks are combined in Go.
const smChunk = 1 << 14

func smRowMaxAsm(x []float32) float32 {
	mx := float32(math.Inf(-1))
	for lo := 0; lo < len(x); lo += smChunk {
		m := smRowMaxAVX2(x[lo:min(lo+smChunk, len(x))])
		if m > mx || m != m {
			mx = m
		}
		if mx != mx {
			break
		}
	}
	return mx
}

// smAVX512 is smAVX2 with the AVX-512 row kernels of
// softmax_avx512_amd64.s for the exponentials: the whole forward of rows
// (rows), log-softmax's sums and its backward.
var smAVX512 = func() *smKernels {
	k := *smAVX2
	k.rowExpSum = smRowExpSumWith(smRowExpSumAVX512)
	k.rowLogBwd = smRowLogBwdWith(smRowLogBwdAVX512)
	k.rows = smSoftmaxRowsAsm
	return &k
}()

// smSoftmaxRowsAsm runs smSoftmaxRowsAVX512 on whole rows, about smChunk
// elements a call.
func smSoftmaxRowsAsm(x, y []float32, n int) {
	step := max(1, smChunk/n) * n
	y = y[:len(x)]
	for lo := 0; lo < len(x); lo += step {
		hi := min(lo+step, len(x))
		smSoftmaxRowsAVX512(x[lo:hi], y[lo:hi], n)
	}
}

// smRowExpSumWith, smRowScaleWith and smRowLogBwdWith wrap an assembly
// row kernel of either level in the smChunk loop.
func smRowExpSumWith(k func(x, e []float32, mx float32, store int) float64) func(x, e []float32, mx float32) float64 {
	return func(x, e []float32, mx float32) float64 {
		sum := 0.0
		for lo := 0; lo < len(x); lo += smChunk {
			hi := min(lo+smChunk, len(x))
			if e == nil {
				sum += k(x[lo:hi], nil, mx, 0)
			} else {
				sum += k(x[lo:hi], e[lo:hi], mx, 1)
			}
		}
		return sum
	}
}

func smRowScaleWith(k func(y []float32, s float64)) func(y []float32, s float64) {
	return func(y []float32, s float64) {
		for lo := 0; lo < len(y); lo += smChunk {
			k(y[lo:min(lo+smChunk, len(y))], s)
		}
	}
}

func smRowSubAsm(y, x []float32, lse float64) {
	x = x[:len(y)]
	for lo := 0; lo < len(y); lo += smChunk {
		hi := min(lo+smChunk, len(y))
		smRowSubAVX2(y[lo:hi], x[lo:hi], lse)
	}
}

func smRowDotAsm(y, dy []float32) float64 {
	dy = dy[:len(y)]
	dot := 0.0
	for lo := 0; lo < len(y); lo += smChunk {
		hi := min(lo+smChunk, len(y))
		dot += smRowDotAVX2(y[lo:hi], dy[lo:hi])
	}
	return dot
}

func smRowSumAsm(x []float32) float64 {
	sum := 0.0
	for lo := 0; lo < len(x); lo += smChunk {
		sum += smRowSumAVX2(x[lo:min(lo+smChunk, len(x))])
	}
	return sum
}

func smRowSoftBwdAsm(dx, y, dy []float32, dot float64) {
	y, dy = y[:len(dx)], dy[:len(dx)]
	for lo := 0; lo < len(dx); lo += smChunk {
		hi := min(lo+smChunk, len(dx))
		smRowSoftBwdAVX2(dx[lo:hi], y[lo:hi], dy[lo:hi], dot)
	}
}

func smRowLogBwdWith(k func(dx, y, dy []float32, sum float64)) func(dx, y, dy []float32, sum float64) {
	return func(dx, y, dy []float32, sum float64) {
		y, dy = y[:len(dx)], dy[:len(dx)]
		for lo := 0; lo < len(dx); lo += smChunk {
			hi := min(lo+smChunk, len(dx))
			k(dx[lo:hi], y[lo:hi], dy[lo:hi], sum)
		}
	}
}

// The column wrappers: a tile row holds at most softmaxTile columns, so one
// call each; the last len%4 columns go through a padded copy. Padding is
// chosen so the padded lanes compute harmlessly (0 for sums, −Inf
// maxima: e^(0−(−Inf)) is +Inf in a lane nobody reads).

func smColMaxAsm(mx []float64, row []float32) {
	n := len(row) &^ 3
	smColMaxAVX2(mx[:n], row[:n])
	if n < len(row) {
		var m [4]float64
		var r [4]float32
		k := copy(m[:], mx[n:len(row)])
		copy(r[:], row[n:])
		smColMaxAVX2(m[:], r[:])
		copy(mx[n:], m[:k])
	}
}

func smColExpSumAsm(sum, mx []float64, row, e []float32) {
	n := len(row) &^ 3
	if e == nil {
		smColExpSumAVX2(sum[:n], mx[:n], row[:n], nil, 0)
	} else {
		smColExpSumAVX2(sum[:n], mx[:n], row[:n], e[:n], 1)
	}
	if n < len(row) {
		var s, m [4]float64
		var r, x [4]float32
		k := copy(s[:], sum[n:len(row)])
		copy(m[:], mx[n:len(row)])
		copy(r[:], row[n:])
		smColExpSumAVX2(s[:], m[:], r[:], x[:], 1)
		copy(sum[n:], s[:k])
		if e != nil {
			copy(e[n:], x[:k])
		}
	}
}

func smColScaleAsm(row []float32, s []float64) {
	n := len(row) &^ 3
	smColScaleAVX2(row[:n], s[:n])
	if n < len(row) {
		var r [4]float32
		var t [4]float64
		k := copy(r[:], row[n:])
		copy(t[:], s[n:len(row)])
		smColScaleAVX2(r[:], t[:])
		copy(row[n:], r[:k])
	}
}

func smColSubAsm(y, x []float32, lse []float64) {
	n := len(y) &^ 3
	smColSubAVX2(y[:n], x[:n], lse[:n])
	if n < len(y) {
		var r, v [4]float32
		var l [4]float64
		k := copy(v[:], x[n:len(y)])
		copy(l[:], lse[n:len(y)])
		smColSubAVX2(r[:], v[:], l[:])
		copy(y[n:], r[:k])
	}
}

func smColDotAsm(dot []float64, y, dy []float32) {
	n := len(y) &^ 3
	smColDotAVX2(dot[:n], y[:n], dy[:n])
	if n < len(y) {
		var d [4]float64
		var a, b [4]float32
		k := copy(d[:], dot[n:len(y)])
		copy(a[:], y[n:])
		copy(b[:], dy[n:len(y)])
		smColDotAVX2(d[:], a[:], b[:])
		copy(dot[n:], d[:k])
	}
}

func smColSumAsm(sum []float64, x []float32) {
	n := len(x) &^ 3
	smColSumAVX2(sum[:n], x[:n])
	if n < len(x) {
		var s [4]float64
		var a [4]float32
		k := copy(s[:], sum[n:len(x)])
		copy(a[:], x[n:])
		smColSumAVX2(s[:], a[:])
		copy(sum[n:], s[:k])
	}
}

func smColSoftBwdAsm(dx, y, dy []float32, dot []float64) {
	n := len(dx) &^ 3
	smColSoftBwdAVX2(dx[:n], y[:n], dy[:n], dot[:n])
	if n < len(dx) {
		var r, a, b [4]float32
		var d [4]float64
		k := copy(a[:], y[n:len(dx)])
		copy(b[:], dy[n:len(dx)])
		copy(d[:], dot[n:len(dx)])
		smColSoftBwdAVX2(r[:], a[:], b[:], d[:])
		copy(dx[n:], r[:k])
	}
}

func smColLogBwdAsm(dx, y, dy []float32, sum []float64) {
	n := len(dx) &^ 3
	smColLogBwdAVX2(dx[:n], y[:n], dy[:n], sum[:n])
	if n < len(dx) {
		var r, a, b [4]float32
		var s [4]float64
		k := copy(a[:], y[n:len(dx)])
		copy(b[:], dy[n:len(dx)])
		copy(s[:], sum[n:len(dx)])
		smColLogBwdAVX2(r[:], a[:], b[:], s[:])
		copy(dx[n:], r[:k])
	}
}
