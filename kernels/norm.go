package kernels

import (
	"fmt"
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
		panic(fmt.Sprintf("kernels: %s: inconsistent shape %+v", op, s))
	}
	for name, l := range lens {
		if l[0] < l[1] {
			panic(fmt.Sprintf("kernels: %s: %s has %d elements, needs %d", op, name, l[0], l[1]))
		}
	}
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
// squared deviation) of x to mean and variance, accumulating in float64
// with two passes so that a large mean does not swamp the variance.
func BatchNormStats(s BatchNormShape, x []float32, mean, variance []float64) {
	n := s.Outer * s.C * s.Inner
	s.check("BatchNormStats", map[string][2]int{"x": {len(x), n}, "mean": {len(mean), s.C}, "variance": {len(variance), s.C}})
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

// bnApply writes out = p[c]·u + q[c]·v + r[c] elementwise in float64, where
// c is each element's channel; v and q may be nil.
func bnApply(s BatchNormShape, u, v []float32, p, q, r []float64, out []float32) {
	C, inner := s.C, s.Inner
	work := 2 * s.Outer * C * inner
	if work == 0 {
		return
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
func BatchNormForward(s BatchNormShape, x []float32, mean, invStd []float64, weight, bias []float32, y []float32) {
	n := s.Outer * s.C * s.Inner
	lens := map[string][2]int{"x": {len(x), n}, "y": {len(y), n}, "mean": {len(mean), s.C}, "invStd": {len(invStd), s.C}}
	if weight != nil {
		lens["weight"] = [2]int{len(weight), s.C}
	}
	if bias != nil {
		lens["bias"] = [2]int{len(bias), s.C}
	}
	s.check("BatchNormForward", lens)
	// One scale and shift per channel: y = x·alpha + beta.
	coef := make([]float64, 2*s.C)
	alpha, beta := coef[:s.C], coef[s.C:]
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
	bnApply(s, x, nil, alpha, nil, beta, y)
}

// BatchNormBackward computes the gradients of BatchNormForward for the
// output gradient dy. With batchStats the mean and invStd were computed
// from x itself (training), so dx carries the terms through the
// statistics; otherwise they were constants (evaluation) and dx is
// dy·weight·invStd. Any of dx, dweight, dbias may be nil when not wanted;
// the others are overwritten.
func BatchNormBackward(s BatchNormShape, x, dy []float32, mean, invStd []float64, weight []float32, batchStats bool, dx, dweight, dbias []float32) {
	n := s.Outer * s.C * s.Inner
	lens := map[string][2]int{"x": {len(x), n}, "dy": {len(dy), n}, "mean": {len(mean), s.C}, "invStd": {len(invStd), s.C}}
	if weight != nil {
		lens["weight"] = [2]int{len(weight), s.C}
	}
	if dx != nil {
		lens["dx"] = [2]int{len(dx), n}
	}
	if dweight != nil {
		lens["dweight"] = [2]int{len(dweight), s.C}
	}
	if dbias != nil {
		lens["dbias"] = [2]int{len(dbias), s.C}
	}
	s.check("BatchNormBackward", lens)
	C := s.C
	scratch := make([]float64, 5*C)
	sumDy, sumDyXmu := scratch[:C], scratch[C:2*C]
	if dweight != nil || dbias != nil || (dx != nil && batchStats) {
		bnChannelSums(s, bnSumGrad, x, dy, mean, sumDy, sumDyXmu)
	}
	for c := range C {
		if dweight != nil {
			dweight[c] = float32(sumDyXmu[c] * invStd[c])
		}
		if dbias != nil {
			dbias[c] = float32(sumDy[c])
		}
	}
	if dx == nil {
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
	if batchStats {
		bnApply(s, dy, x, p, q, r, dx)
	} else {
		bnApply(s, dy, nil, p, nil, r, dx)
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
		panic(fmt.Sprintf("kernels: %s: negative size rows=%d n=%d", op, rows, n))
	}
	for name, l := range lens {
		if l[0] < l[1] {
			panic(fmt.Sprintf("kernels: %s: %s has %d elements, needs %d", op, name, l[0], l[1]))
		}
	}
}

// LayerNormBackward computes the gradients of LayerNormForward for the
// output gradient dy from x and the saved mean and rstd. Any of dx,
// dweight, dbias may be nil when not wanted; the others are overwritten.
// Column sums for dweight and dbias run over rows in order in float64.
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
