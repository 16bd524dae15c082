package kernels

import (
	"fmt"
	"math"
)

// SoftmaxShape views a tensor's memory as Outer × N × Inner: each softmax
// runs over N elements lying Inner apart, and there is one for each of the
// Outer·Inner starting points. A softmax along dimension d of a row-major
// tensor has Outer = the product of the sizes before d, N = the size of d
// and Inner = the product of the sizes after d.
type SoftmaxShape struct{ Outer, N, Inner int }

func (s SoftmaxShape) check(op string, lens map[string]int) {
	if s.Outer < 0 || s.N < 0 || s.Inner < 0 {
		panic(fmt.Sprintf("kernels: %s: negative size in %+v", op, s))
	}
	want := s.Outer * s.N * s.Inner
	for name, l := range lens {
		if l < want {
			panic(fmt.Sprintf("kernels: %s: %s has %d elements, shape %+v needs %d", op, name, l, s, want))
		}
	}
}

// softmaxTile is the most neighbouring softmaxes (when Inner > 1) handled
// together: each pass over the N rows then reads whole cache lines, while
// the per-column accumulators stay small enough for L1.
const softmaxTile = 256

// softmaxTiles calls fn for every tile of up to softmaxTile neighbouring
// softmaxes: outer index o, first column i0 and width w, with nacc·w
// float64s of scratch. Tiles are shared out across the worker pool; the
// scratch is allocated once per chunk of tiles, not per tile. cost is the
// rough work per element.
func softmaxTiles(s SoftmaxShape, cost, nacc int, fn func(o, i0, w int, acc []float64)) {
	if s.Outer*s.N*s.Inner == 0 {
		return
	}
	w := min(s.Inner, softmaxTile)
	per := (s.Inner + w - 1) / w
	Parallel(s.Outer*per, s.Outer*s.N*s.Inner*cost, func(lo, hi int) {
		acc := make([]float64, nacc*w)
		for t := lo; t < hi; t++ {
			o, i0 := t/per, (t%per)*w
			fn(o, i0, min(w, s.Inner-i0), acc)
		}
	})
}

// softmaxExp returns e^x within about 2e-12 relative error, far below
// float32's 6e-8, and faster than math.Exp, which would otherwise dominate
// softmax and cross-entropy. x = (32m + j)·ln2/32 + r with |r| ≤ ln2/64:
// e^x = 2^m · 2^(j/32) · e^r, the middle factor from a table and e^r from
// a degree-5 polynomial, short enough that its latency does not dominate.
// Below −708 (where e^x is subnormal in float64 and 0 in float32) it
// returns 0.
func softmaxExp(x float64) float64 {
	switch {
	case x != x:
		return x
	case x < -708:
		return 0
	case x > 709:
		return math.Exp(x) // overflows to +Inf, or nearly
	}
	const (
		inv   = 32 / math.Ln2
		ln2hi = 0.021660849393811077 // ln2/32 rounded to 33 bits, so k·ln2hi is exact
		ln2lo = math.Ln2/32 - ln2hi
		round = 0x1.8p52 // adding it rounds to an integer, kept in the low bits
	)
	t := x*inv + round
	k := t - round
	r := (x - k*ln2hi) - k*ln2lo
	r2 := r * r
	p := (1 + r) + r2*(0.5+r*(1.0/6)) + r2*r2*(1.0/24+r*(1.0/120))
	ki := int64(k)
	return math.Float64frombits(math.Float64bits(p*softmaxExp2Table[ki&31]) + uint64(ki>>5)<<52)
}

// softmaxExp2Table holds 2^(j/32) for j = 0…31.
var softmaxExp2Table = func() (t [32]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 32)
	}
	return
}()

// softmaxMaxSum fills mx with the maximum and sum with Σ exp(x−max) of the
// w softmaxes starting at base, accumulating in float64, and when e is not
// nil stores each exp(x−max) there. A NaN anywhere makes its softmax's
// maximum NaN, so the whole softmax comes out NaN, as in PyTorch.
func softmaxMaxSum(x, e []float32, base, n, stride, w int, mx, sum []float64) {
	mx, sum = mx[:w], sum[:w]
	for c := range mx {
		mx[c] = math.Inf(-1)
		sum[c] = 0
	}
	for k := 0; k < n; k++ {
		row := x[base+k*stride : base+k*stride+w]
		for c, v := range row {
			if f := float64(v); f > mx[c] || f != f {
				mx[c] = f
			}
		}
	}
	for k := 0; k < n; k++ {
		off := base + k*stride
		row := x[off : off+w]
		if e == nil {
			for c, v := range row {
				sum[c] += softmaxExp(float64(v) - mx[c])
			}
			continue
		}
		er := e[off : off+w]
		for c, v := range row {
			ev := softmaxExp(float64(v) - mx[c])
			sum[c] += ev
			er[c] = float32(ev)
		}
	}
}

// Softmax writes exp(x)/Σexp(x) along N to y, subtracting each softmax's
// maximum first so no exponential overflows; like torch.softmax on a
// row-major tensor.
func Softmax(s SoftmaxShape, x, y []float32) {
	s.check("Softmax", map[string]int{"x": len(x), "y": len(y)})
	n, st := s.N, s.Inner
	softmaxTiles(s, 16, 2, func(o, i0, w int, acc []float64) {
		base := o*n*st + i0
		mx, sum := acc[:w], acc[w:2*w]
		// y holds the exponentials until they are normalised.
		softmaxMaxSum(x, y, base, n, st, w, mx, sum)
		for c := range sum {
			sum[c] = 1 / sum[c]
		}
		for k := 0; k < n; k++ {
			yr := y[base+k*st : base+k*st+w]
			for c, v := range yr {
				yr[c] = float32(float64(v) * sum[c])
			}
		}
	})
}

// LogSoftmax writes x − log Σexp(x) along N to y, with the log-sum-exp
// computed stably in float64; like torch.log_softmax on a row-major tensor.
func LogSoftmax(s SoftmaxShape, x, y []float32) {
	s.check("LogSoftmax", map[string]int{"x": len(x), "y": len(y)})
	n, st := s.N, s.Inner
	softmaxTiles(s, 16, 2, func(o, i0, w int, acc []float64) {
		base := o*n*st + i0
		lse, sum := acc[:w], acc[w:2*w]
		softmaxMaxSum(x, nil, base, n, st, w, lse, sum)
		for c := range lse {
			lse[c] += math.Log(sum[c])
		}
		for k := 0; k < n; k++ {
			xr, yr := x[base+k*st:base+k*st+w], y[base+k*st:base+k*st+w]
			for c, v := range xr {
				yr[c] = float32(float64(v) - lse[c])
			}
		}
	})
}

// SoftmaxBackward writes the input gradient of Softmax, dx = y·(dy − Σ dy·y)
// along N, given its output y and output gradient dy. dx is overwritten.
func SoftmaxBackward(s SoftmaxShape, y, dy, dx []float32) {
	s.check("SoftmaxBackward", map[string]int{"y": len(y), "dy": len(dy), "dx": len(dx)})
	n, st := s.N, s.Inner
	softmaxTiles(s, 4, 1, func(o, i0, w int, acc []float64) {
		base := o*n*st + i0
		dot := acc[:w]
		clear(dot)
		for k := 0; k < n; k++ {
			yr, gr := y[base+k*st:base+k*st+w], dy[base+k*st:base+k*st+w]
			for c, v := range yr {
				dot[c] += float64(v) * float64(gr[c])
			}
		}
		for k := 0; k < n; k++ {
			off := base + k*st
			yr, gr, dr := y[off:off+w], dy[off:off+w], dx[off:off+w]
			for c, v := range yr {
				dr[c] = float32(float64(v) * (float64(gr[c]) - dot[c]))
			}
		}
	})
}

// LogSoftmaxBackward writes the input gradient of LogSoftmax,
// dx = dy − exp(y)·Σ dy along N, given its output y and output gradient dy.
// dx is overwritten.
func LogSoftmaxBackward(s SoftmaxShape, y, dy, dx []float32) {
	s.check("LogSoftmaxBackward", map[string]int{"y": len(y), "dy": len(dy), "dx": len(dx)})
	n, st := s.N, s.Inner
	softmaxTiles(s, 12, 1, func(o, i0, w int, acc []float64) {
		base := o*n*st + i0
		sum := acc[:w]
		clear(sum)
		for k := 0; k < n; k++ {
			for c, v := range dy[base+k*st : base+k*st+w] {
				sum[c] += float64(v)
			}
		}
		for k := 0; k < n; k++ {
			off := base + k*st
			yr, gr, dr := y[off:off+w], dy[off:off+w], dx[off:off+w]
			for c, v := range yr {
				dr[c] = float32(float64(gr[c]) - softmaxExp(float64(v))*sum[c])
			}
		}
	})
}
