package kernels

import (
	"math"
)

// BatchNormShape describes per-channel data laid out as [Outer][C][Inner]:
// an NCHW tensor is Outer = N, Inner = H·W; a channels-last one is
// Outer = N·H·W, Inner = 1; an [N, C] matrix is Outer = N, Inner = 1.
type BatchNormShape struct {
	Outer, C, Inner int
}

// Count is the number of values per channel.
func (s BatchNormShape) Count() int { return s.Outer * s.Inner }

func (s BatchNormShape) check(op string, lens map[string][2]int) {
	if s.Outer < 0 || s.C < 0 || s.Inner < 0 {
		fail(ErrShape, op, "inconsistent shape %+v", s)
	}
	checkLens(op, lens)
}

// bnBlock is the number of elements one block of rows covers in the
// row-blocked reduction. It is fixed, not derived from the thread count, so
// sums come out the same whatever the number of workers, and large enough
// that the per-block partial sums stay a small fraction of the input.
const bnBlock = 1 << 15

// bnSumKind selects what bnChannelSums accumulates.
type bnSumKind int

const (
	bnSumX     bnSumKind = iota // s1 = Σx
	bnSumSqDev                  // s1 = Σ(x−m)²
	bnSumGrad                   // s1 = Σdy, s2 = Σdy·(x−m), with x in a and dy in b
)

// bnRun accumulates kind over one run of elements of a single channel with
// centre m.
func bnRun(kind bnSumKind, a, b []float32, m float64) (s1, s2 float64) {
	switch kind {
	case bnSumX:
		for _, v := range a {
			s1 += float64(v)
		}
	case bnSumSqDev:
		for _, v := range a {
			d := float64(v) - m
			s1 += d * d
		}
	case bnSumGrad:
		b = b[:len(a)]
		for i, v := range a {
			g := float64(b[i])
			s1 += g
			s2 += g * (float64(v) - m)
		}
	}
	return s1, s2
}

// bnRow accumulates kind over one row holding one value of every channel.
func bnRow(kind bnSumKind, a, b []float32, m, s1, s2 []float64) {
	s1 = s1[:len(a)]
	switch kind {
	case bnSumX:
		for c, v := range a {
			s1[c] += float64(v)
		}
	case bnSumSqDev:
		m = m[:len(a)]
		for c, v := range a {
			d := float64(v) - m[c]
			s1[c] += d * d
		}
	case bnSumGrad:
		b, m, s2 = b[:len(a)], m[:len(a)], s2[:len(a)]
		for c, v := range a {
			g := float64(b[c])
			s1[c] += g
			s2[c] += g * (float64(v) - m[c])
		}
	}
}

// bnChannelSums overwrites s1 (and s2 for bnSumGrad) with per-channel sums
// in float64. The order of additions depends only on the shape, so results
// are reproducible.
func bnChannelSums(s BatchNormShape, kind bnSumKind, a, b []float32, m, s1, s2 []float64) {
	C := s.C
	clear(s1[:C])
	if s2 != nil {
		clear(s2[:C])
	}
	work := s.Outer * C * s.Inner
	if work == 0 {
		return
	}
	if s.Inner > 1 {
		// Each channel is a set of contiguous runs: one worker per channel
		// range walks them in order.
		Parallel(C, work, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				mc := 0.0
				if m != nil {
					mc = m[c]
				}
				var t1, t2 float64
				for o := 0; o < s.Outer; o++ {
					off := (o*C + c) * s.Inner
					var bb []float32
					if b != nil {
						bb = b[off : off+s.Inner]
					}
					r1, r2 := bnRun(kind, a[off:off+s.Inner], bb, mc)
					t1 += r1
					t2 += r2
				}
				s1[c] = t1
				if s2 != nil {
					s2[c] = t2
				}
			}
		})
		return
	}
	// Channels are interleaved in every row: fixed blocks of rows each sum
	// into their own partials, which are then added in block order.
	rows := max(1, bnBlock/max(C, 1))
	nb := (s.Outer + rows - 1) / rows
	if nb <= 1 {
		for o := 0; o < s.Outer; o++ {
			var bb []float32
			if b != nil {
				bb = b[o*C : (o+1)*C]
			}
			bnRow(kind, a[o*C:(o+1)*C], bb, m, s1, s2)
		}
		return
	}
	width := C
	if s2 != nil {
		width = 2 * C
	}
	part := make([]float64, nb*width)
	Parallel(nb, work, func(lo, hi int) {
		for blk := lo; blk < hi; blk++ {
			p1 := part[blk*width : blk*width+C]
			var p2 []float64
			if s2 != nil {
				p2 = part[blk*width+C : (blk+1)*width]
			}
			for o := blk * rows; o < min((blk+1)*rows, s.Outer); o++ {
				var bb []float32
				if b != nil {
					bb = b[o*C : (o+1)*C]
				}
				bnRow(kind, a[o*C:(o+1)*C], bb, m, p1, p2)
			}
		}
	})
	for blk := 0; blk < nb; blk++ {
		p := part[blk*width:]
		for c := 0; c < C; c++ {
			s1[c] += p[c]
		}
		if s2 != nil {
			for c := 0; c < C; c++ {
				s2[c] += p[C+c]
			}
		}
	}
}

// BatchNormStats writes each channel's mean and biased variance (the mean
// squared deviation) of x to mean and variance, accumulating in float64.
// The variance is taken about the mean (never as E[x²] − mean²), so a
// large mean does not swamp it. The order of the additions depends only on
// the shape, so results do not change with the number of workers.
func BatchNormStats(sp *BatchNormShape, x []float32, mean, variance []float64) {
	s := *sp
	n := s.Outer * s.C * s.Inner
	s.check("BatchNormStats", map[string][2]int{"x": {len(x), n}, "mean": {len(mean), s.C}, "variance": {len(variance), s.C}})
	bnStats(s, x, mean, variance)
}

type bnStatsFunc func(s BatchNormShape, x []float32, mean, variance []float64)

var bnStatsVariants = [levelCount]bnStatsFunc{
	Generic: bnStatsGeneric,
	AVX2: func(s BatchNormShape, x []float32, mean, variance []float64) {
		bnStatsKit(kitAt(AVX2), s, x, mean, variance)
	},
	AVX512: func(s BatchNormShape, x []float32, mean, variance []float64) {
		bnStatsKit(kitAt(AVX512), s, x, mean, variance)
	},
}

var bnStats = pick(level, bnStatsVariants)

// bnStatsGeneric is the reference: two passes over x, the second summing
// squared deviations from the mean of the first.
func bnStatsGeneric(s BatchNormShape, x []float32, mean, variance []float64) {
	cnt := float64(s.Count())
	bnChannelSums(s, bnSumX, x, nil, nil, mean, nil)
	for c := range s.C {
		mean[c] /= cnt
	}
	bnChannelSums(s, bnSumSqDev, x, nil, mean, variance, nil)
	for c := range s.C {
		variance[c] /= cnt
	}
}

// bnGradSums overwrites s1 with each channel's Σdy and s2 with its
// Σdy·(x − mean), in float64 in an order fixed by the shape.
type bnGradSumsFunc func(s BatchNormShape, x, dy []float32, mean, s1, s2 []float64)

var bnGradSumsVariants = [levelCount]bnGradSumsFunc{
	Generic: func(s BatchNormShape, x, dy []float32, mean, s1, s2 []float64) {
		bnChannelSums(s, bnSumGrad, x, dy, mean, s1, s2)
	},
	AVX2: func(s BatchNormShape, x, dy []float32, mean, s1, s2 []float64) {
		bnGradSumsKit(kitAt(AVX2), s, x, dy, mean, s1, s2)
	},
	AVX512: func(s BatchNormShape, x, dy []float32, mean, s1, s2 []float64) {
		bnGradSumsKit(kitAt(AVX512), s, x, dy, mean, s1, s2)
	},
}

var bnGradSums = pick(level, bnGradSumsVariants)

// bnApply writes out = p[c]·u + q[c]·v + r[c] elementwise in float64, where
// c is each element's channel; v and q may be nil. With relu, negative
// results become 0 (NaN stays NaN), as a ReLU after the map would leave
// them.
type bnApplyFunc func(s BatchNormShape, u, v []float32, p, q, r []float64, out []float32, relu bool)

var bnApplyVariants = [levelCount]bnApplyFunc{
	Generic: bnApplyGeneric,
	AVX2: func(s BatchNormShape, u, v []float32, p, q, r []float64, out []float32, relu bool) {
		bnApplyKit(kitAt(AVX2), s, u, v, p, q, r, out, relu)
	},
	AVX512: func(s BatchNormShape, u, v []float32, p, q, r []float64, out []float32, relu bool) {
		bnApplyKit(kitAt(AVX512), s, u, v, p, q, r, out, relu)
	},
}

var bnApply = pick(level, bnApplyVariants)

func bnApplyGeneric(s BatchNormShape, u, v []float32, p, q, r []float64, out []float32, relu bool) {
	C, inner := s.C, s.Inner
	work := 2 * s.Outer * C * inner
	if work == 0 {
		return
	}
	if relu {
		defer Act{Fn: ActReLU}.forward(out, out)
	}
	if inner > 1 {
		Parallel(s.Outer*C, work, func(lo, hi int) {
			for pl := lo; pl < hi; pl++ {
				c := pl % C
				off := pl * inner
				uu, oo := u[off:off+inner], out[off:off+inner]
				pc, rc := p[c], r[c]
				if v == nil {
					for i, x := range uu {
						oo[i] = float32(pc*float64(x) + rc)
					}
					continue
				}
				vv, qc := v[off:off+inner], q[c]
				for i, x := range uu {
					oo[i] = float32(pc*float64(x) + qc*float64(vv[i]) + rc)
				}
			}
		})
		return
	}
	Parallel(s.Outer, work, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			uu, oo := u[o*C:(o+1)*C], out[o*C:(o+1)*C]
			pp, rr := p[:C], r[:C]
			if v == nil {
				for c, x := range uu {
					oo[c] = float32(pp[c]*float64(x) + rr[c])
				}
				continue
			}
			vv, qq := v[o*C:(o+1)*C], q[:C]
			for c, x := range uu {
				oo[c] = float32(pp[c]*float64(x) + qq[c]*float64(vv[c]) + rr[c])
			}
		}
	})
}

// BatchNormForward writes y = (x − mean)·invStd·weight + bias per channel.
// A nil weight means 1 and a nil bias 0.
func BatchNormForward(sp *BatchNormShape, x []float32, mean, invStd []float64, weight, bias []float32, y []float32) {
	s := *sp
	batchNormForward("BatchNormForward", s, x, mean, invStd, weight, bias, y, false)
}

// BatchNormReLUForward writes y = max(0, BatchNormForward's y), exactly
// what the two ops give one after the other, in one pass over memory: each
// block is rectified while it is still in cache.
func BatchNormReLUForward(sp *BatchNormShape, x []float32, mean, invStd []float64, weight, bias []float32, y []float32) {
	s := *sp
	batchNormForward("BatchNormReLUForward", s, x, mean, invStd, weight, bias, y, true)
}

func batchNormForward(op string, s BatchNormShape, x []float32, mean, invStd []float64, weight, bias []float32, y []float32, relu bool) {
	bnForwardCheck(op, s, len(x), len(y), mean, invStd, weight, bias)
	coef, alpha, beta := bnForwardCoef(s, mean, invStd, weight, bias)
	defer coef.put()
	bnApply(s, x, nil, alpha, nil, beta, y, relu)
}

func bnForwardCheck(op string, s BatchNormShape, nx, ny int, mean, invStd []float64, weight, bias []float32) {
	n := s.Outer * s.C * s.Inner
	lens := map[string][2]int{"x": {nx, n}, "y": {ny, n}, "mean": {len(mean), s.C}, "invStd": {len(invStd), s.C}}
	if weight != nil {
		lens["weight"] = [2]int{len(weight), s.C}
	}
	if bias != nil {
		lens["bias"] = [2]int{len(bias), s.C}
	}
	s.check(op, lens)
}

// bnForwardCoef returns, in pooled scratch, the one scale and shift per
// channel of the forward map y = x·alpha + beta.
func bnForwardCoef(s BatchNormShape, mean, invStd []float64, weight, bias []float32) (coef *scratch[float64], alpha, beta []float64) {
	coef = getScratch64(2 * s.C)
	alpha, beta = coef.s[:s.C], coef.s[s.C:]
	for c := range s.C {
		a := invStd[c]
		if weight != nil {
			a *= float64(weight[c])
		}
		alpha[c] = a
		beta[c] = -mean[c] * a
		if bias != nil {
			beta[c] += float64(bias[c])
		}
	}
	return coef, alpha, beta
}

// BatchNormBackward computes the gradients of BatchNormForward for the
// output gradient dy. With batchStats the mean and invStd were computed
// from x itself (training), so dx carries the terms through the
// statistics; otherwise they were constants (evaluation) and dx is
// dy·weight·invStd. Any of dx, dweight, dbias may be nil when not wanted;
// the others are overwritten.
func BatchNormBackward(sp *BatchNormShape, x, dy []float32, mean, invStd []float64, weight []float32, batchStats bool, dx, dweight, dbias []float32) {
	s := *sp
	bnBackwardCheck("BatchNormBackward", s, len(x), len(dy), len(dx), dx != nil, mean, invStd, weight, dweight, dbias)
	bnBackward(s, bnBackwardIO{x: x, dy: dy, dx: dx}, mean, invStd, weight, batchStats, dweight, dbias)
}

func bnBackwardCheck(op string, s BatchNormShape, nx, ndy, ndx int, hasDx bool, mean, invStd []float64, weight, dweight, dbias []float32) {
	n := s.Outer * s.C * s.Inner
	lens := map[string][2]int{"x": {nx, n}, "dy": {ndy, n}, "mean": {len(mean), s.C}, "invStd": {len(invStd), s.C}}
	if weight != nil {
		lens["weight"] = [2]int{len(weight), s.C}
	}
	if hasDx {
		lens["dx"] = [2]int{ndx, n}
	}
	if dweight != nil {
		lens["dweight"] = [2]int{len(dweight), s.C}
	}
	if dbias != nil {
		lens["dbias"] = [2]int{len(dbias), s.C}
	}
	s.check(op, lens)
}

// bnBackwardIO holds BatchNormBackward's tensors: float32 ones, which go
// to the dispatched kernels, or, with k set, bfloat16 ones, which go to
// the blocked kit path (see bnArgs). dx (dx16) nil: not wanted.
type bnBackwardIO struct {
	k               *vecKit
	x, dy, dx       []float32
	x16, dy16, dx16 []uint16
}

// bnBackward is BatchNormBackward after its checks.
func bnBackward(s BatchNormShape, io bnBackwardIO, mean, invStd []float64, weight []float32, batchStats bool, dweight, dbias []float32) {
	C := s.C
	wantDx := io.dx != nil || io.dx16 != nil
	buf := getScratch64(5 * C)
	defer buf.put()
	scratch := buf.s
	clear(scratch) // r stays 0 without batch statistics
	sumDy, sumDyXmu := scratch[:C], scratch[C:2*C]
	if dweight != nil || dbias != nil || (wantDx && batchStats) {
		if io.k == nil {
			bnGradSums(s, io.x, io.dy, mean, sumDy, sumDyXmu)
		} else {
			bnGradSumsOn(bnArgs{k: io.k, s: s, u16: io.x16, v16: io.dy16, mean: mean}, sumDy, sumDyXmu)
		}
	}
	for c := range C {
		if dweight != nil {
			dweight[c] = float32(sumDyXmu[c] * invStd[c])
		}
		if dbias != nil {
			dbias[c] = float32(sumDy[c])
		}
	}
	if !wantDx {
		return
	}
	p, q, r := scratch[2*C:3*C], scratch[3*C:4*C], scratch[4*C:]
	cnt := float64(s.Count())
	for c := range C {
		k := invStd[c]
		if weight != nil {
			k *= float64(weight[c])
		}
		p[c] = k
		if batchStats {
			// dx = k·(dy − Σdy/n − (x−mean)·invStd²·Σdy(x−mean)/n)
			t := invStd[c] * invStd[c] * sumDyXmu[c] / cnt
			q[c] = -k * t
			r[c] = k * (mean[c]*t - sumDy[c]/cnt)
		}
	}
	if io.k != nil {
		a := bnArgs{k: io.k, s: s, u16: io.dy16, out16: io.dx16, p: p, r: r}
		if batchStats {
			a.v16, a.q = io.x16, q
		}
		bnApplyOn(a)
		return
	}
	if batchStats {
		bnApply(s, io.dy, io.x, p, q, r, io.dx, false)
	} else {
		bnApply(s, io.dy, nil, p, nil, r, io.dx, false)
	}
}

// LayerNormForward normalises each of rows rows of n contiguous elements of
// x to zero mean and unit (biased) variance, then scales by weight and
// shifts by bias (each of n elements, or nil for 1 and 0), writing y. The
// per-row mean and reciprocal standard deviation, needed by the backward
// pass, go to mean and rstd. Statistics are accumulated in float64.
func LayerNormForward(rows, n int, x, weight, bias []float32, eps float64, y []float32, mean, rstd []float64) {
	lens := map[string][2]int{"x": {len(x), rows * n}, "y": {len(y), rows * n}, "mean": {len(mean), rows}, "rstd": {len(rstd), rows}}
	if weight != nil {
		lens["weight"] = [2]int{len(weight), n}
	}
	if bias != nil {
		lens["bias"] = [2]int{len(bias), n}
	}
	lnCheck("LayerNormForward", rows, n, lens)
	lnForward(rows, n, x, weight, bias, eps, y, mean, rstd)
}

type lnForwardFunc func(rows, n int, x, weight, bias []float32, eps float64, y []float32, mean, rstd []float64)

var lnForwardVariants = [levelCount]lnForwardFunc{
	Generic: lnForwardGeneric,
	AVX2: func(rows, n int, x, weight, bias []float32, eps float64, y []float32, mean, rstd []float64) {
		lnForwardKit(kitAt(AVX2), rows, n, x, weight, bias, eps, y, mean, rstd)
	},
}

var lnForward = pick(level, lnForwardVariants)

// lnForwardGeneric is the reference: two passes for the statistics, then
// the normalisation, all in float64.
func lnForwardGeneric(rows, n int, x, weight, bias []float32, eps float64, y []float32, mean, rstd []float64) {
	Parallel(rows, 3*rows*n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*n:(r+1)*n], y[r*n:(r+1)*n]
			s := 0.0
			for _, v := range xr {
				s += float64(v)
			}
			m := s / float64(n)
			ss := 0.0
			for _, v := range xr {
				d := float64(v) - m
				ss += d * d
			}
			rs := 1 / math.Sqrt(ss/float64(n)+eps)
			mean[r], rstd[r] = m, rs
			switch {
			case weight != nil && bias != nil:
				w, b := weight[:n], bias[:n]
				for j, v := range xr {
					yr[j] = float32((float64(v)-m)*rs*float64(w[j]) + float64(b[j]))
				}
			case weight != nil:
				w := weight[:n]
				for j, v := range xr {
					yr[j] = float32((float64(v) - m) * rs * float64(w[j]))
				}
			case bias != nil:
				b := bias[:n]
				for j, v := range xr {
					yr[j] = float32((float64(v)-m)*rs + float64(b[j]))
				}
			default:
				for j, v := range xr {
					yr[j] = float32((float64(v) - m) * rs)
				}
			}
		}
	})
}

func lnCheck(op string, rows, n int, lens map[string][2]int) {
	if rows < 0 || n < 0 {
		fail(ErrShape, op, "negative size rows=%d n=%d", rows, n)
	}
	checkLens(op, lens)
}

// LayerNormBackward computes the gradients of LayerNormForward for the
// output gradient dy from x and the saved mean and rstd. Any of dx,
// dweight, dbias may be nil when not wanted; the others are overwritten.
// Column sums for dweight and dbias are accumulated in float64 in an order
// that depends only on the shape (rows in order in the reference, fixed
// blocks of rows in order in the vector variants), so they do not change
// with the number of workers.
func LayerNormBackward(rows, n int, x, dy, weight []float32, mean, rstd []float64, dx, dweight, dbias []float32) {
	lens := map[string][2]int{"x": {len(x), rows * n}, "dy": {len(dy), rows * n}, "mean": {len(mean), rows}, "rstd": {len(rstd), rows}}
	if weight != nil {
		lens["weight"] = [2]int{len(weight), n}
	}
	if dx != nil {
		lens["dx"] = [2]int{len(dx), rows * n}
	}
	if dweight != nil {
		lens["dweight"] = [2]int{len(dweight), n}
	}
	if dbias != nil {
		lens["dbias"] = [2]int{len(dbias), n}
	}
	lnCheck("LayerNormBackward", rows, n, lens)
	lnBackward(rows, n, x, dy, weight, mean, rstd, dx, dweight, dbias)
}

type lnBackwardFunc func(rows, n int, x, dy, weight []float32, mean, rstd []float64, dx, dweight, dbias []float32)

var lnBackwardVariants = [levelCount]lnBackwardFunc{
	Generic: lnBackwardGeneric,
	AVX2: func(rows, n int, x, dy, weight []float32, mean, rstd []float64, dx, dweight, dbias []float32) {
		lnBackwardKit(kitAt(AVX2), rows, n, x, dy, weight, mean, rstd, dx, dweight, dbias)
	},
}

var lnBackward = pick(level, lnBackwardVariants)

// lnBackwardGeneric is the reference.
func lnBackwardGeneric(rows, n int, x, dy, weight []float32, mean, rstd []float64, dx, dweight, dbias []float32) {
	if dx != nil {
		Parallel(rows, 4*rows*n, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				xr, gr, dr := x[r*n:(r+1)*n], dy[r*n:(r+1)*n], dx[r*n:(r+1)*n]
				m, rs := mean[r], rstd[r]
				// With g = dy·weight and xhat the normalised input,
				// dx = rstd·(g − mean(g) − xhat·mean(g·xhat)).
				var s1, s2 float64
				for j, v := range xr {
					g := float64(gr[j])
					if weight != nil {
						g *= float64(weight[j])
					}
					s1 += g
					s2 += g * (float64(v) - m) * rs
				}
				s1 /= float64(n)
				s2 /= float64(n)
				for j, v := range xr {
					g := float64(gr[j])
					if weight != nil {
						g *= float64(weight[j])
					}
					dr[j] = float32(rs * (g - s1 - (float64(v)-m)*rs*s2))
				}
			}
		})
	}
	if dweight == nil && dbias == nil {
		return
	}
	acc := make([]float64, 2*n)
	aw, ab := acc[:n], acc[n:]
	Parallel(n, 2*rows*n, func(lo, hi int) {
		for r := 0; r < rows; r++ {
			xr, gr := x[r*n+lo:r*n+hi], dy[r*n+lo:r*n+hi]
			m, rs := mean[r], rstd[r]
			w, b := aw[lo:hi], ab[lo:hi]
			for j, v := range xr {
				g := float64(gr[j])
				w[j] += g * (float64(v) - m) * rs
				b[j] += g
			}
		}
		for j := lo; j < hi; j++ {
			if dweight != nil {
				dweight[j] = float32(aw[j])
			}
			if dbias != nil {
				dbias[j] = float32(ab[j])
			}
		}
	})
}

// The variants below build the kernels from a kit's row primitives. They
// keep the reference's arithmetic (float64 statistics and maps, per-channel
// coefficients) but walk memory the way the primitives want it: channels
// of a channels-last row side by side in vector lanes, every call bounded
// to vecChunk elements or one bnBlock.

type bnArgs struct {
	k         *vecKit
	s         BatchNormShape
	u, v, out []float32
	// u16, v16 and out16 stand for u, v and out when those are bfloat16:
	// the block functions widen each block they read into per-task
	// scratch and round each block they write from it, so the float32
	// arithmetic, and so every bit, is that of the float32 tensors while
	// memory sees only 16-bit data.
	u16, v16, out16 []uint16
	p, q, r         []float64
	mean, s1, s2    []float64
	part            []float64
	rows            int  // rows per block (channels-last)
	relu            bool // rectify each applied block
}

var bnJobs parPool[bnArgs]

// bnStatsKit computes the statistics with one read of x from memory: each
// run (a channel's contiguous stretch) or block of channels-last rows is
// summed and then, while still in cache, its squared deviations from its
// own mean are summed. The pieces are combined in a fixed order by the
// parallel-axis rule M2 = Σ M2ᵢ + nᵢ·(meanᵢ − mean)², which is as stable as
// the two-pass reference.
func bnStatsKit(k *vecKit, s BatchNormShape, x []float32, mean, variance []float64) {
	bnStatsOn(bnArgs{k: k, s: s, u: x}, mean, variance)
}

// bnStatsOn is bnStatsKit on a's kit, shape and x (u or u16).
func bnStatsOn(a bnArgs, mean, variance []float64) {
	s := a.s
	C := s.C
	cnt := float64(s.Count())
	if C == 0 {
		return
	}
	if s.Count() == 0 {
		for c := range C {
			mean[c], variance[c] = math.NaN(), math.NaN()
		}
		return
	}
	work := s.Outer * C * s.Inner
	if s.Inner > 1 {
		a.mean, a.s1 = mean, variance
		bnJobs.run(C, work, a, bnStatsRuns)
		return
	}
	rows := max(1, bnBlock/C)
	nb := (s.Outer + rows - 1) / rows
	part := getScratch64(3 * C * nb)
	defer part.put()
	a.part, a.rows = part.s, rows
	bnJobs.run(nb, work, a, bnStatsBlocks)
	clear(mean[:C])
	for b := range nb {
		for c, v := range part.s[3*C*b : 3*C*b+C] {
			mean[c] += v
		}
	}
	for c := range C {
		mean[c] /= cnt
	}
	m2 := variance[:C]
	clear(m2)
	for b := range nb {
		nr := float64(min((b+1)*rows, s.Outer) - b*rows)
		bm, bq := part.s[3*C*b+C:3*C*b+2*C], part.s[3*C*b+2*C:3*C*(b+1)]
		for c := range C {
			d := bm[c] - mean[c]
			m2[c] += bq[c] + nr*d*d
		}
	}
	for c := range C {
		m2[c] /= cnt
	}
}

// bnStatsRuns handles channels [lo, hi) of the planar layout, folding the
// runs in order into a running mean and M2 (Chan's update).
func bnStatsRuns(a *bnArgs, lo, hi int) {
	k, s := a.k, a.s
	inner := s.Inner
	buf := a.room(min(inner, vecChunk))
	defer buf.release()
	for c := lo; c < hi; c++ {
		var total, cm, m2, n float64
		for o := 0; o < s.Outer; o++ {
			run := (o*s.C + c) * inner
			for off := 0; off < inner; off += vecChunk {
				piece := buf.in(0, a.u, a.u16, run+off, run+min(off+vecChunk, inner))
				nb := float64(len(piece))
				sb := k.sum(piece)
				mb := sb / nb
				qb := k.sqDev(piece, mb)
				total += sb
				if n == 0 {
					cm, m2, n = mb, qb, nb
					continue
				}
				d := mb - cm
				nn := n + nb
				cm += d * nb / nn
				m2 += qb + d*d*n*nb/nn
				n = nn
			}
		}
		// The mean is the plain sum over the count, as in the reference;
		// M2 about the running mean differs from M2 about it by n·δ², where
		// δ is a few roundings of the mean: negligible.
		a.mean[c] = total / n
		a.s1[c] = m2 / n
	}
}

// bnStatsBlocks writes, for each block of channels-last rows, the
// channel sums, block means and squared deviations about them to its
// three C-wide slots in part.
func bnStatsBlocks(a *bnArgs, lo, hi int) {
	k, s := a.k, a.s
	C := s.C
	// bfloat16 rows go straight to the kit's H primitives, which give the
	// float32 ones' bits on the widened rows.
	for b := lo; b < hi; b++ {
		r0, r1 := b*a.rows, min((b+1)*a.rows, s.Outer)
		sum, bm, bq := a.part[3*C*b:3*C*b+C], a.part[3*C*b+C:3*C*b+2*C], a.part[3*C*b+2*C:3*C*(b+1)]
		clear(sum)
		clear(bq)
		if a.u16 != nil {
			xb := a.u16[r0*C : r1*C]
			k.colSumH(sum, xb)
			bnBlockMeans(bm, sum, r1-r0)
			k.colSqDevH(bq, xb, bm)
			continue
		}
		xb := a.u[r0*C : r1*C]
		k.colSum(sum, xb)
		bnBlockMeans(bm, sum, r1-r0)
		k.colSqDev(bq, xb, bm)
	}
}

// bnBlockMeans sets bm to the sums over rows rows.
func bnBlockMeans(bm, sum []float64, rows int) {
	inv := 1 / float64(rows)
	for c, v := range sum {
		bm[c] = v * inv
	}
}

// bnGradSumsKit is bnChannelSums(bnSumGrad) on the kit: per-channel runs
// in order for the planar layout, fixed row blocks with partial sums added
// in block order for channels-last.
func bnGradSumsKit(k *vecKit, s BatchNormShape, x, dy []float32, mean, s1, s2 []float64) {
	bnGradSumsOn(bnArgs{k: k, s: s, u: x, v: dy, mean: mean}, s1, s2)
}

// bnGradSumsOn is bnGradSumsKit on a's kit, shape, x (u or u16), dy (v or
// v16) and mean.
func bnGradSumsOn(a bnArgs, s1, s2 []float64) {
	s := a.s
	C := s.C
	clear(s1[:C])
	clear(s2[:C])
	work := s.Outer * C * s.Inner
	if work == 0 {
		return
	}
	if s.Inner > 1 {
		a.s1, a.s2 = s1, s2
		bnJobs.run(C, work, a, bnGradRuns)
		return
	}
	rows := max(1, bnBlock/C)
	nb := (s.Outer + rows - 1) / rows
	part := getScratch64(2 * C * nb)
	defer part.put()
	a.part, a.rows = part.s, rows
	bnJobs.run(nb, work, a, bnGradBlocks)
	for b := range nb {
		p := part.s[2*C*b:]
		for c := range C {
			s1[c] += p[c]
			s2[c] += p[C+c]
		}
	}
}

func bnGradRuns(a *bnArgs, lo, hi int) {
	k, s := a.k, a.s
	inner := s.Inner
	buf := a.room(min(inner, vecChunk))
	defer buf.release()
	for c := lo; c < hi; c++ {
		var t1, t2 float64
		for o := 0; o < s.Outer; o++ {
			off := (o*s.C + c) * inner
			for i := 0; i < inner; i += vecChunk {
				j := min(i+vecChunk, inner)
				xr, gr := buf.in(0, a.u, a.u16, off+i, off+j), buf.in(1, a.v, a.v16, off+i, off+j)
				r1, r2 := k.gradSums(gr, xr, a.mean[c])
				t1 += r1
				t2 += r2
			}
		}
		a.s1[c], a.s2[c] = t1, t2
	}
}

func bnGradBlocks(a *bnArgs, lo, hi int) {
	k, s := a.k, a.s
	C := s.C
	fused := a.u16 != nil && a.v16 != nil
	var buf *bnBuf
	if !fused {
		buf = a.room(a.rows * C)
		defer buf.release()
	}
	for b := lo; b < hi; b++ {
		r0, r1 := b*a.rows, min((b+1)*a.rows, s.Outer)
		p1, p2 := a.part[2*C*b:2*C*b+C], a.part[2*C*b+C:2*C*(b+1)]
		clear(p1)
		clear(p2)
		if fused {
			k.colGradSumsH(p1, p2, a.v16[r0*C:r1*C], a.u16[r0*C:r1*C], a.mean)
			continue
		}
		k.colGradSums(p1, p2, buf.in(1, a.v, a.v16, r0*C, r1*C), buf.in(0, a.u, a.u16, r0*C, r1*C), a.mean)
	}
}

// bnApplyKit is bnApply on the kit: one affine map per plane in the planar
// layout, per-channel coefficient vectors over blocks of rows otherwise.
func bnApplyKit(k *vecKit, s BatchNormShape, u, v []float32, p, q, r []float64, out []float32, relu bool) {
	bnApplyOn(bnArgs{k: k, s: s, u: u, v: v, p: p, q: q, r: r, out: out, relu: relu})
}

// bnApplyOn is bnApplyKit on a's kit, shape, operands (u or u16, v or v16
// or neither), coefficients, output (out or out16) and relu.
func bnApplyOn(a bnArgs) {
	s := a.s
	C, inner := s.C, s.Inner
	work := 2 * s.Outer * C * inner
	if work == 0 {
		return
	}
	if inner > 1 {
		bnJobs.run(s.Outer*C, work, a, bnApplyPlanes)
		return
	}
	a.rows = max(1, vecChunk/C)
	if bnStreams(a) {
		bnJobs.run((s.Outer+a.rows-1)/a.rows, work, a, bnStreamRows)
		return
	}
	bnJobs.run((s.Outer+a.rows-1)/a.rows, work, a, bnApplyRows)
}

// bnStreams reports whether a channels-last map writes its float32 output
// with non-temporal stores (see stream.go): a share of the output per
// thread too large for the caches to keep for its consumer anyway,
// channels that fill whole cache lines and an output starting on one.
func bnStreams(a bnArgs) bool {
	C := a.s.C
	return a.out != nil && a.u16 == nil && a.v16 == nil && C%32 == 0 && C <= streamBlock &&
		a.s.Outer*C >= streamMinElems*Threads() && streamHead(a.out) == 0
}

// bnStreamRows is bnApplyRows for an output bnStreams streams: a few rows
// at a time are mapped into a buffer in L1, then stored to memory with
// non-temporal stores, which skip reading every line of the output first.
// The arithmetic is bnApplyRows's.
func bnStreamRows(a *bnArgs, lo, hi int) {
	k, C := a.k, a.s.C
	buf := getScratchF32(streamBlock) // pooled: the kit's calls would move an array to the heap
	defer buf.put()
	step := streamBlock / C
	for b := lo; b < hi; b++ {
		end := min((b+1)*a.rows, a.s.Outer)
		for r := b * a.rows; r < end; r += step {
			i, j := r*C, min(r+step, end)*C
			t := buf.s[:j-i]
			if a.v == nil {
				k.colAffine(t, a.u[i:j], a.p[:C], a.r[:C])
			} else {
				k.colAffine2(t, a.u[i:j], a.v[i:j], a.p[:C], a.q[:C], a.r[:C])
			}
			if a.relu {
				actForwardImpl(Act{Fn: ActReLU}, t, t)
			}
			streamStore(a.out[i:j], t)
		}
	}
	storeFence()
}

func bnApplyPlanes(a *bnArgs, lo, hi int) {
	k, inner, C := a.k, a.s.Inner, a.s.C
	buf := a.room(min(inner, vecChunk))
	defer buf.release()
	for pl := lo; pl < hi; pl++ {
		c := pl % C
		for i := pl * inner; i < (pl+1)*inner; i += vecChunk {
			j := min(i+vecChunk, (pl+1)*inner)
			u, v, out := buf.in(0, a.u, a.u16, i, j), buf.in(1, a.v, a.v16, i, j), buf.to(a.out, a.out16, i, j)
			if v == nil {
				k.affine(out, u, a.p[c], a.r[c])
			} else {
				k.affine2(out, u, v, a.p[c], a.q[c], a.r[c])
			}
			if a.relu {
				actForwardImpl(Act{Fn: ActReLU}, out, out)
			}
			buf.store(a.out16, out, i)
		}
	}
}

func bnApplyRows(a *bnArgs, lo, hi int) {
	k, C := a.k, a.s.C
	if a.u16 != nil && a.out16 != nil && (a.v16 != nil || a.v == nil) {
		for b := lo; b < hi; b++ {
			i, j := b*a.rows*C, min((b+1)*a.rows, a.s.Outer)*C
			if a.v16 == nil {
				k.colAffineH(a.out16[i:j], a.u16[i:j], a.p[:C], a.r[:C], a.relu)
			} else {
				k.colAffine2H(a.out16[i:j], a.u16[i:j], a.v16[i:j], a.p[:C], a.q[:C], a.r[:C])
			}
		}
		return
	}
	buf := a.room(a.rows * C)
	defer buf.release()
	for b := lo; b < hi; b++ {
		i, j := b*a.rows*C, min((b+1)*a.rows, a.s.Outer)*C
		u, v, out := buf.in(0, a.u, a.u16, i, j), buf.in(1, a.v, a.v16, i, j), buf.to(a.out, a.out16, i, j)
		if v == nil {
			k.colAffine(out, u, a.p[:C], a.r[:C])
		} else {
			k.colAffine2(out, u, v, a.p[:C], a.q[:C], a.r[:C])
		}
		if a.relu {
			actForwardImpl(Act{Fn: ActReLU}, out, out)
		}
		buf.store(a.out16, out, i)
	}
}

type lnArgs struct {
	k                  *vecKit
	rows, n, block     int
	x, dy, w, b, y, dx []float32
	eps                float64
	mean, rstd, acc    []float64
	dweight, dbias     []float32
}

var lnJobs parPool[lnArgs]

// lnColMin is the fewest columns a worker takes when adding up the row
// blocks' weight and bias gradients.
const lnColMin = 64

// lnForwardKit is the reference's arithmetic on the kit. A missing weight
// or bias alone is supplied as ones or zeros from pooled scratch (the
// products and sums with them are exact).
func lnForwardKit(k *vecKit, rows, n int, x, weight, bias []float32, eps float64, y []float32, mean, rstd []float64) {
	if rows == 0 {
		return
	}
	if (weight == nil) != (bias == nil) {
		fill := getScratchF32(n)
		defer fill.put()
		if weight == nil {
			weight = lnFill(fill.s, 1)
		} else {
			bias = lnFill(fill.s, 0)
		}
	}
	lnJobs.run(rows, 3*rows*n, lnArgs{k: k, rows: rows, n: n, x: x, w: weight, b: bias, y: y, eps: eps, mean: mean, rstd: rstd}, lnForwardRows)
}

func lnFill(f []float32, v float32) []float32 {
	for i := range f {
		f[i] = v
	}
	return f
}

func lnForwardRows(a *lnArgs, lo, hi int) {
	k, n := a.k, a.n
	for r := lo; r < hi; r++ {
		xr, yr := a.x[r*n:(r+1)*n], a.y[r*n:(r+1)*n]
		var s float64
		for i := 0; i < n; i += vecChunk {
			s += k.sum(xr[i:min(i+vecChunk, n)])
		}
		m := s / float64(n)
		var ss float64
		for i := 0; i < n; i += vecChunk {
			ss += k.sqDev(xr[i:min(i+vecChunk, n)], m)
		}
		rs := 1 / math.Sqrt(ss/float64(n)+a.eps)
		a.mean[r], a.rstd[r] = m, rs
		for i := 0; i < n; i += vecChunk {
			j := min(i+vecChunk, n)
			if a.w == nil {
				k.lnNorm(yr[i:j], xr[i:j], m, rs)
			} else {
				k.lnApply(yr[i:j], xr[i:j], a.w[i:j], a.b[i:j], m, rs)
			}
		}
	}
}

// lnBackwardKit is the reference's arithmetic on the kit, in one pass over
// x and dy: each fixed block of lnBlockRows rows computes its rows' dx and,
// while they are in cache, adds them into its own weight and bias column
// sums; the blocks' sums are then added in block order. The order depends
// only on the shape, so the gradients do not change with the number of
// workers. A missing weight is supplied as ones.
func lnBackwardKit(k *vecKit, rows, n int, x, dy, weight []float32, mean, rstd []float64, dx, dweight, dbias []float32) {
	if rows == 0 || n == 0 {
		lnBackwardGeneric(rows, n, x, dy, weight, mean, rstd, dx, dweight, dbias)
		return
	}
	a := lnArgs{k: k, rows: rows, n: n, x: x, dy: dy, w: weight, dx: dx, mean: mean, rstd: rstd, dweight: dweight, dbias: dbias}
	if dx != nil && weight == nil {
		fill := getScratchF32(n)
		defer fill.put()
		a.w = lnFill(fill.s, 1)
	}
	a.block = lnBlockRows(rows, n)
	nb := (rows + a.block - 1) / a.block
	if dweight != nil || dbias != nil {
		part := getScratch64(nb * 2 * n)
		defer part.put()
		a.acc = part.s
	}
	lnJobs.run(nb, 4*rows*n, a, lnBackwardBlocks)
	if a.acc != nil {
		lnJobs.run((n+lnColMin-1)/lnColMin, nb*2*n, a, lnReduceColumns)
	}
}

// lnBlockRows is the number of rows whose column sums one block keeps: at
// least 64, more when the partial sums of all blocks would pass 16 MiB.
func lnBlockRows(rows, n int) int {
	const maxPartial = 1 << 21 // float64s
	return max(64, (rows*2*n+maxPartial-1)/maxPartial)
}

func lnBackwardBlocks(a *lnArgs, lo, hi int) {
	k, n := a.k, a.n
	for blk := lo; blk < hi; blk++ {
		r0, r1 := blk*a.block, min((blk+1)*a.block, a.rows)
		var p []float64
		if a.acc != nil {
			p = a.acc[blk*2*n : (blk+1)*2*n]
			clear(p)
		}
		for r := r0; r < r1; r++ {
			xr, gr := a.x[r*n:(r+1)*n], a.dy[r*n:(r+1)*n]
			m, rs := a.mean[r], a.rstd[r]
			if a.dx == nil {
				for i := 0; i < n; i += vecChunk {
					j := min(i+vecChunk, n)
					k.lnColAcc(p[i:j], p[n+i:n+j], gr[i:j], xr[i:j], m, rs)
				}
				continue
			}
			// s1 = mean(g), s2 = mean(g·xhat) with g = dy·w, xhat = (x − m)·rs.
			var s1, s2 float64
			for i := 0; i < n; i += vecChunk {
				j := min(i+vecChunk, n)
				t1, t2 := k.gradSumsW(gr[i:j], a.w[i:j], xr[i:j], m)
				s1 += t1
				s2 += t2
			}
			s1 /= float64(n)
			s2 *= rs / float64(n)
			dr := a.dx[r*n : (r+1)*n]
			for i := 0; i < n; i += vecChunk {
				j := min(i+vecChunk, n)
				if p == nil {
					k.lnBackward(dr[i:j], gr[i:j], a.w[i:j], xr[i:j], m, rs, s1, s2)
				} else {
					k.lnBackwardAcc(dr[i:j], gr[i:j], a.w[i:j], xr[i:j], m, rs, s1, s2, p[i:j], p[n+i:n+j])
				}
			}
		}
	}
}

// lnReduceColumns adds the blocks' column sums in block order for column
// groups [lo, hi) and stores the gradients.
func lnReduceColumns(a *lnArgs, lo, hi int) {
	n := a.n
	nb := len(a.acc) / (2 * n)
	for j := lo * lnColMin; j < min(hi*lnColMin, n); j++ {
		var sw, sb float64
		for blk := range nb {
			sw += a.acc[blk*2*n+j]
			sb += a.acc[blk*2*n+n+j]
		}
		if a.dweight != nil {
			a.dweight[j] = float32(sw)
		}
		if a.dbias != nil {
			a.dbias[j] = float32(sb)
		}
	}
}
