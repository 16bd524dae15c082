package kernels

import "math"

// Row primitives shared by the memory-bound kernels (norms, pooling,
// embedding bags, strided reductions). Each works on one row, one run or
// one block of rows, long enough that a call's overhead is small beside
// its work, and short enough (the callers keep calls to well under 0.1 ms)
// that an assembly variant, which cannot be preempted, never stalls the
// garbage collector.
//
// The pure-Go functions below are the reference each assembly variant is
// checked against. Where a primitive accumulates, it does so in float64,
// so a variant that sums in a different order (several vector
// accumulators) stays within a few float64 roundings of the reference:
// far inside the float32 tolerances of the kernels built on them.
//
// A vecKit holds one implementation of every primitive; kitAt picks the
// kit for a level. Kernels built on primitives take the kit as an argument
// so the conformance suites can run them with every kit.

// vecKit is one set of row primitives. Slices are trusted to have the
// lengths each primitive documents; only the pure-Go variants check them
// (by Go's bounds checks).
type vecKit struct {
	// sum returns Σ x[i].
	sum func(x []float32) float64
	// sqDev returns Σ (x[i] − m)².
	sqDev func(x []float32, m float64) float64
	// gradSums returns Σ g[i] and Σ g[i]·(x[i] − m); len(x) ≥ len(g).
	gradSums func(g, x []float32, m float64) (sg, sgx float64)
	// gradSumsW is gradSums for g[i] = dy[i]·w[i] (exact in float64).
	gradSumsW func(dy, w, x []float32, m float64) (sg, sgx float64)
	// dot returns Σ a[i]·b[i]; len(b) ≥ len(a).
	dot func(a, b []float32) float64

	// The col* primitives treat x as rows of len(s) channels (len(x) a
	// multiple of len(s)) and add each channel's sum over the rows to s.

	// colSum: s[c] += Σ_r x[r][c].
	colSum func(s []float64, x []float32)
	// colSqDev: s[c] += Σ_r (x[r][c] − m[c])².
	colSqDev func(s []float64, x []float32, m []float64)
	// colGradSums: s1[c] += Σ_r g[r][c]; s2[c] += Σ_r g[r][c]·(x[r][c] − m[c]).
	colGradSums func(s1, s2 []float64, g, x []float32, m []float64)

	// The *H primitives are their namesakes on bfloat16 rows (x, g, u,
	// v and y): each value is widened exactly and the arithmetic is the
	// float32 primitive's of the same kit, so the results are, bit for
	// bit, those of widening the rows, running the float32 primitive and
	// rounding its float32 outputs (rectified first when relu) to
	// nearest even as F32ToBF16 does. The batch norms run on them without
	// widened copies of their operands.

	colSumH      func(s []float64, x []uint16)
	colSqDevH    func(s []float64, x []uint16, m []float64)
	colGradSumsH func(s1, s2 []float64, g, x []uint16, m []float64)
	colAffineH   func(y, x []uint16, a, b []float64, relu bool)
	colAffine2H  func(y, u, v []uint16, p, q, r []float64)

	// The maps below, like accRowScaled and lnColAcc, round every float64
	// operation separately, as the kernels' original Go code does when
	// compiled without fused multiply-add (the default on amd64); the
	// explicit conversions in the references pin that, and every variant
	// gives the same bits.

	// affine: y[i] = float32(a·x[i] + b), computed in float64.
	affine func(y, x []float32, a, b float64)
	// affine2: y[i] = float32(p·u[i] + q·v[i] + r), computed in float64.
	affine2 func(y, u, v []float32, p, q, r float64)
	// colAffine: for rows of len(a) channels, y[r][c] = float32(a[c]·x[r][c] + b[c]).
	colAffine func(y, x []float32, a, b []float64)
	// colAffine2: y[r][c] = float32(p[c]·u[r][c] + q[c]·v[r][c] + r[c]).
	colAffine2 func(y, u, v []float32, p, q, r []float64)

	// lnNorm: y[i] = float32((x[i] − m)·rs), in float64.
	lnNorm func(y, x []float32, m, rs float64)
	// lnApply: y[i] = float32((x[i] − m)·rs·w[i] + b[i]), in float64.
	lnApply func(y, x, w, b []float32, m, rs float64)
	// lnBackward: dx[i] = float32(rs·(g − s1 − (x[i] − m)·rs·s2)) with
	// g = dy[i]·w[i], in float64.
	lnBackward func(dx, dy, w, x []float32, m, rs, s1, s2 float64)
	// lnColAcc: aw[j] += dy[j]·((x[j] − m)·rs); ab[j] += dy[j].
	lnColAcc func(aw, ab []float64, dy, x []float32, m, rs float64)
	// lnBackwardAcc is lnBackward and lnColAcc in one pass over the row.
	lnBackwardAcc func(dx, dy, w, x []float32, m, rs, s1, s2 float64, aw, ab []float64)

	// accRow: acc[i] += x[i].
	accRow func(acc []float64, x []float32)
	// accRowScaled: acc[i] += k·x[i].
	accRowScaled func(acc []float64, x []float32, k float64)
	// accRows: acc[j] += table[idx[i]·dim + j] for every i in order, j <
	// len(acc) (table may start at a column offset).
	accRows func(acc []float64, table []float32, idx []int64, dim int)
	// accRowsScaled: acc[j] += float64(w[i])·table[idx[i]·dim + j].
	accRowsScaled func(acc []float64, table []float32, idx []int64, w []float32, dim int)
	// storeScaled: y[i] = float32(acc[i]·k).
	storeScaled func(y []float32, acc []float64, k float64)
	// maxRowArg: where x[i] > y[i] (strictly; a NaN never wins),
	// y[i] = x[i] and am[i] = r.
	maxRowArg func(y []float32, am []int64, x []float32, r int64)

	// transpose: dst[j·ldd + i] = src[i·lds + j] for i < rows, j < cols.
	transpose func(dst []float32, ldd int, src []float32, lds int, rows, cols int)

	// prefetchRows hints that rows idx[i] (of dim floats) of table will
	// be read soon; it has no effect on results, and the reference does
	// nothing. Indices must be valid rows.
	prefetchRows func(table []float32, idx []int64, dim int)

	// The window primitives visit, for channels c < len(y), the taps
	// x[i·sh + j·sw + c] for i < nh, j < nw, i outer.

	// maxWindow: y[c] is the largest tap (starting from −Inf) and idx[c]
	// the position pos0 + i·ph + j·pw of the tap that set it (pos0 when
	// none did). A tap replaces the best when greater or NaN, so the last
	// NaN wins, as in PyTorch.
	maxWindow func(y []float32, idx []int32, x []float32, nh, nw, sh, sw int, pos0, ph, pw int32)
	// sumWindow: y[c] = (0 + Σ taps, in float32 in tap order) / div.
	sumWindow func(y, x []float32, nh, nw, sh, sw int, div float32)
	// addWindow: every tap x[i·sh + j·sw + c] += g[c] / div (in float32).
	addWindow func(x []float32, nh, nw, sh, sw int, g []float32, div float32)
}

// vecGo is the pure-Go reference kit.
var vecGo = vecKit{
	sum:           sumGo,
	sqDev:         sqDevGo,
	gradSums:      gradSumsGo,
	gradSumsW:     gradSumsWGo,
	dot:           dotGo,
	colSum:        colSumGo,
	colSqDev:      colSqDevGo,
	colGradSums:   colGradSumsGo,
	affine:        affineGo,
	affine2:       affine2Go,
	colAffine:     colAffineGo,
	colAffine2:    colAffine2Go,
	colSumH:       colSumHGo,
	colSqDevH:     colSqDevHGo,
	colGradSumsH:  colGradSumsHGo,
	colAffineH:    colAffineHGo,
	colAffine2H:   colAffine2HGo,
	lnNorm:        lnNormGo,
	lnApply:       lnApplyGo,
	lnBackward:    lnBackwardGo,
	lnColAcc:      lnColAccGo,
	lnBackwardAcc: lnBackwardAccGo,
	accRow:        accRowGo,
	accRowScaled:  accRowScaledGo,
	storeScaled:   storeScaledGo,
	accRows:       accRowsGo,
	accRowsScaled: accRowsScaledGo,
	maxRowArg:     maxRowArgGo,
	transpose:     transposeGo,
	prefetchRows:  func([]float32, []int64, int) {},
	maxWindow:     maxWindowGo,
	sumWindow:     sumWindowGo,
	addWindow:     addWindowGo,
}

// vecKits lists the kit of each level; vecAVX2 and vecAVX512 are nil
// where assembly is not built, so pick falls back to the reference. The
// AVX-512 kit is the AVX2 one with AVX-512 bfloat16 column primitives.
var vecKits = [levelCount]*vecKit{Generic: &vecGo, AVX2: vecAVX2, AVX512: vecAVX512}

// kitAt returns the primitives for level l.
func kitAt(l Level) *vecKit { return pick(l, vecKits) }

func sumGo(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s
}

func sqDevGo(x []float32, m float64) float64 {
	var s float64
	for _, v := range x {
		d := float64(v) - m
		s += d * d
	}
	return s
}

func gradSumsGo(g, x []float32, m float64) (sg, sgx float64) {
	x = x[:len(g)]
	for i, v := range g {
		d := float64(v)
		sg += d
		sgx += d * (float64(x[i]) - m)
	}
	return sg, sgx
}

func gradSumsWGo(dy, w, x []float32, m float64) (sg, sgx float64) {
	w, x = w[:len(dy)], x[:len(dy)]
	for i, v := range dy {
		d := float64(v) * float64(w[i])
		sg += d
		sgx += d * (float64(x[i]) - m)
	}
	return sg, sgx
}

func dotGo(a, b []float32) float64 {
	b = b[:len(a)]
	var s float64
	for i, v := range a {
		s += float64(v) * float64(b[i])
	}
	return s
}

func colSumGo(s []float64, x []float32) {
	C := len(s)
	if C == 0 {
		return
	}
	for o := 0; o+C <= len(x); o += C {
		for c, v := range x[o : o+C] {
			s[c] += float64(v)
		}
	}
}

func colSqDevGo(s []float64, x []float32, m []float64) {
	C := len(s)
	if C == 0 {
		return
	}
	m = m[:C]
	for o := 0; o+C <= len(x); o += C {
		for c, v := range x[o : o+C] {
			d := float64(v) - m[c]
			s[c] += d * d
		}
	}
}

func colGradSumsGo(s1, s2 []float64, g, x []float32, m []float64) {
	C := len(s1)
	if C == 0 {
		return
	}
	s2, m = s2[:C], m[:C]
	for o := 0; o+C <= len(g); o += C {
		xr := x[o : o+C]
		for c, v := range g[o : o+C] {
			d := float64(v)
			s1[c] += d
			s2[c] += d * (float64(xr[c]) - m[c])
		}
	}
}

// The *HGo references widen each value with F32FromBF16 and round each
// result with BF16FromF32, around the float32 references' arithmetic.

func colSumHGo(s []float64, x []uint16) {
	C := len(s)
	for o := 0; C > 0 && o+C <= len(x); o += C {
		for c, v := range x[o : o+C] {
			s[c] += float64(F32FromBF16(v))
		}
	}
}

func colSqDevHGo(s []float64, x []uint16, m []float64) {
	C := len(s)
	m = m[:C]
	for o := 0; C > 0 && o+C <= len(x); o += C {
		for c, v := range x[o : o+C] {
			d := float64(F32FromBF16(v)) - m[c]
			s[c] += d * d
		}
	}
}

func colGradSumsHGo(s1, s2 []float64, g, x []uint16, m []float64) {
	C := len(s1)
	s2, m = s2[:C], m[:C]
	for o := 0; C > 0 && o+C <= len(g); o += C {
		xr := x[o : o+C]
		for c, v := range g[o : o+C] {
			d := float64(F32FromBF16(v))
			s1[c] += d
			s2[c] += d * (float64(F32FromBF16(xr[c])) - m[c])
		}
	}
}

func colAffineHGo(y, x []uint16, a, b []float64, relu bool) {
	C := len(a)
	b = b[:C]
	for o := 0; C > 0 && o+C <= len(y); o += C {
		yr, xr := y[o:o+C], x[o:o+C]
		for c := range yr {
			v := float32(float64(a[c]*float64(F32FromBF16(xr[c]))) + b[c])
			if relu && v < 0 {
				v = 0
			}
			yr[c] = BF16FromF32(v)
		}
	}
}

func colAffine2HGo(y, u, v []uint16, p, q, r []float64) {
	C := len(p)
	q, r = q[:C], r[:C]
	for o := 0; C > 0 && o+C <= len(y); o += C {
		yr, ur, vr := y[o:o+C], u[o:o+C], v[o:o+C]
		for c := range yr {
			yr[c] = BF16FromF32(float32(float64(p[c]*float64(F32FromBF16(ur[c]))) + float64(q[c]*float64(F32FromBF16(vr[c]))) + r[c]))
		}
	}
}

func affineGo(y, x []float32, a, b float64) {
	x = x[:len(y)]
	for i := range y {
		y[i] = float32(float64(a*float64(x[i])) + b)
	}
}

func affine2Go(y, u, v []float32, p, q, r float64) {
	u, v = u[:len(y)], v[:len(y)]
	for i := range y {
		y[i] = float32(float64(p*float64(u[i])) + float64(q*float64(v[i])) + r)
	}
}

func colAffineGo(y, x []float32, a, b []float64) {
	C := len(a)
	if C == 0 {
		return
	}
	b = b[:C]
	for o := 0; o+C <= len(y); o += C {
		yr, xr := y[o:o+C], x[o:o+C]
		for c := range yr {
			yr[c] = float32(float64(a[c]*float64(xr[c])) + b[c])
		}
	}
}

func colAffine2Go(y, u, v []float32, p, q, r []float64) {
	C := len(p)
	if C == 0 {
		return
	}
	q, r = q[:C], r[:C]
	for o := 0; o+C <= len(y); o += C {
		yr, ur, vr := y[o:o+C], u[o:o+C], v[o:o+C]
		for c := range yr {
			yr[c] = float32(float64(p[c]*float64(ur[c])) + float64(q[c]*float64(vr[c])) + r[c])
		}
	}
}

func lnNormGo(y, x []float32, m, rs float64) {
	x = x[:len(y)]
	for i := range y {
		y[i] = float32((float64(x[i]) - m) * rs)
	}
}

func lnApplyGo(y, x, w, b []float32, m, rs float64) {
	x, w, b = x[:len(y)], w[:len(y)], b[:len(y)]
	for i := range y {
		y[i] = float32(float64((float64(x[i])-m)*rs*float64(w[i])) + float64(b[i]))
	}
}

func lnBackwardGo(dx, dy, w, x []float32, m, rs, s1, s2 float64) {
	dy, w, x = dy[:len(dx)], w[:len(dx)], x[:len(dx)]
	for i := range dx {
		g := float64(float64(dy[i]) * float64(w[i]))
		dx[i] = float32(rs * (g - s1 - float64((float64(x[i])-m)*rs*s2)))
	}
}

func lnColAccGo(aw, ab []float64, dy, x []float32, m, rs float64) {
	ab, dy, x = ab[:len(aw)], dy[:len(aw)], x[:len(aw)]
	for j := range aw {
		g := float64(dy[j])
		aw[j] += float64(g * float64((float64(x[j])-m)*rs))
		ab[j] += g
	}
}

func lnBackwardAccGo(dx, dy, w, x []float32, m, rs, s1, s2 float64, aw, ab []float64) {
	dy, w, x, aw, ab = dy[:len(dx)], w[:len(dx)], x[:len(dx)], aw[:len(dx)], ab[:len(dx)]
	for i := range dx {
		d := float64(dy[i])
		g := float64(d * float64(w[i]))
		t := float64((float64(x[i]) - m) * rs)
		dx[i] = float32(rs * (g - s1 - float64(t*s2)))
		aw[i] += float64(d * t)
		ab[i] += d
	}
}

func accRowGo(acc []float64, x []float32) {
	x = x[:len(acc)]
	for i := range acc {
		acc[i] += float64(x[i])
	}
}

func accRowScaledGo(acc []float64, x []float32, k float64) {
	x = x[:len(acc)]
	for i := range acc {
		acc[i] += float64(k * float64(x[i]))
	}
}

func accRowsGo(acc []float64, table []float32, idx []int64, dim int) {
	for _, r := range idx {
		accRowGo(acc, table[int(r)*dim:])
	}
}

func accRowsScaledGo(acc []float64, table []float32, idx []int64, w []float32, dim int) {
	w = w[:len(idx)]
	for i, r := range idx {
		accRowScaledGo(acc, table[int(r)*dim:], float64(w[i]))
	}
}

func storeScaledGo(y []float32, acc []float64, k float64) {
	acc = acc[:len(y)]
	for i := range y {
		y[i] = float32(acc[i] * k)
	}
}

func maxRowArgGo(y []float32, am []int64, x []float32, r int64) {
	am, x = am[:len(y)], x[:len(y)]
	for i, v := range x {
		if v > y[i] {
			y[i], am[i] = v, r
		}
	}
}

// transposeTile is the side of the square tiles transposeGo walks, so
// both the rows it reads and the rows it writes stay in L1.
const transposeTile = 32

func transposeGo(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	for i0 := 0; i0 < rows; i0 += transposeTile {
		i1 := min(i0+transposeTile, rows)
		for j0 := 0; j0 < cols; j0 += transposeTile {
			j1 := min(j0+transposeTile, cols)
			for i := i0; i < i1; i++ {
				row := src[i*lds+j0 : i*lds+j1]
				for j, v := range row {
					dst[(j0+j)*ldd+i] = v
				}
			}
		}
	}
}

func maxWindowGo(y []float32, idx []int32, x []float32, nh, nw, sh, sw int, pos0, ph, pw int32) {
	idx = idx[:len(y)]
	for c := range y {
		y[c], idx[c] = float32(math.Inf(-1)), pos0
	}
	for i := range nh {
		for j := range nw {
			pos := pos0 + int32(i)*ph + int32(j)*pw
			xr := x[i*sh+j*sw:][:len(y)]
			for c, v := range xr {
				if v > y[c] || v != v {
					y[c], idx[c] = v, pos
				}
			}
		}
	}
}

func sumWindowGo(y, x []float32, nh, nw, sh, sw int, div float32) {
	for c := range y {
		var s float32
		for i := range nh {
			for j := range nw {
				s += x[i*sh+j*sw+c]
			}
		}
		y[c] = s / div
	}
}

func addWindowGo(x []float32, nh, nw, sh, sw int, g []float32, div float32) {
	for c, v := range g {
		d := v / div
		for i := range nh {
			for j := range nw {
				x[i*sh+j*sw+c] += d
			}
		}
	}
}

// vecChunk is the most elements a kernel hands one primitive call, so an
// assembly call runs for microseconds, never long enough to delay a
// garbage collection.
const vecChunk = 1 << 14

// parJob carries one Parallel call's arguments without a closure: the
// body is a plain function of the arguments, and fn, bound once when the
// job is first made, calls it. Jobs are pooled, so a kernel that runs
// through one allocates nothing per call.
type parJob[A any] struct {
	args A
	body func(a *A, lo, hi int)
	fn   func(lo, hi int)
}

// parPool is a pool of jobs for one argument type.
type parPool[A any] struct{ free freeList[parJob[A]] }

// run calls body(&args, lo, hi) over [0, n) through Parallel.
func (pp *parPool[A]) run(n, work int, args A, body func(a *A, lo, hi int)) {
	j := pp.free.get()
	if j == nil {
		j = new(parJob[A])
		j.fn = func(lo, hi int) { j.body(&j.args, lo, hi) }
	}
	j.args, j.body = args, body
	Parallel(n, work, j.fn)
	var zero A
	j.args, j.body = zero, nil // drop the caller's slices
	pp.free.put(j)
}

// scratch is a pooled buffer for per-call temporaries; the pointer
// travels back to its free list, so returning one allocates nothing (and,
// unlike with a sync.Pool, a garbage collection does not undo that).
type scratch[T any] struct {
	s    []T
	pool *freeList[scratch[T]]
}

var (
	scratch64Pool  freeList[scratch[float64]]
	scratchF32Pool freeList[scratch[float32]]
	scratch32Pool  freeList[scratch[int32]]
)

func getScratch[T any](pool *freeList[scratch[T]], n int) *scratch[T] {
	b := pool.get()
	if b == nil {
		b = &scratch[T]{pool: pool}
	}
	if cap(b.s) < n {
		b.s = make([]T, n)
	}
	b.s = b.s[:n]
	return b
}

func (b *scratch[T]) put() { b.pool.put(b) }

// getScratch64 returns a buffer of n float64s with unspecified contents.
func getScratch64(n int) *scratch[float64] { return getScratch[float64](&scratch64Pool, n) }

// getScratchF32 returns a buffer of n float32s with unspecified contents.
func getScratchF32(n int) *scratch[float32] { return getScratch[float32](&scratchF32Pool, n) }

// getScratch32 returns a buffer of n int32s with unspecified contents.
func getScratch32(n int) *scratch[int32] { return getScratch[int32](&scratch32Pool, n) }
