package kernels

import (
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
		fail(ErrShape, op, "negative size in %+v", s)
	}
	want := s.Outer * s.N * s.Inner
	if bad := firstShort(lens, func(l int) bool { return l < want }); bad != "" {
		fail(ErrShape, op, "%s has %d elements, shape %+v needs %d", bad, lens[bad], s, want)
	}
}

// softmaxTile is the most neighbouring softmaxes (when Inner > 1) handled
// together: each pass over the N rows then reads whole cache lines, while
// the per-column accumulators stay small enough for L1.
const softmaxTile = 256

// smKernels are one level's softmax building blocks. Row kernels work on a
// softmax whose N elements are contiguous (Inner = 1); column kernels
// apply one row of a tile of neighbouring softmaxes to their float64
// per-column accumulators. Every reduction is in float64, as in the
// reference.
type smKernels struct {
	rowMax     func(x []float32) float32                 // max, NaN if any is NaN
	rowExpSum  func(x, e []float32, mx float32) float64  // Σ exp(x−mx), e = exp(x−mx) unless nil
	rowScale   func(y []float32, s float64)              // y·s
	rowSub     func(y, x []float32, lse float64)         // y = x − lse
	rowDot     func(y, dy []float32) float64             // Σ y·dy
	rowSum     func(x []float32) float64                 // Σ x
	rowSoftBwd func(dx, y, dy []float32, dot float64)    // y·(dy − dot)
	rowLogBwd  func(dx, y, dy []float32, sum float64)    // dy − exp(y)·sum
	colMax     func(mx []float64, row []float32)         // mx = row where larger or NaN
	colExpSum  func(sum, mx []float64, row, e []float32) // sum += exp(row−mx), e = it unless nil
	colScale   func(row []float32, s []float64)          // row·s
	colSub     func(y, x []float32, lse []float64)       // y = x − lse
	colDot     func(dot []float64, y, dy []float32)      // dot += y·dy
	colSum     func(sum []float64, x []float32)          // sum += x
	colSoftBwd func(dx, y, dy []float32, dot []float64)  // y·(dy − dot)
	colLogBwd  func(dx, y, dy []float32, sum []float64)  // dy − exp(y)·sum

	// rows, where a level has it, is the whole forward softmax of the
	// rows of n elements in x, into y: rowMax, rowExpSum and rowScale in
	// one call for many rows.
	rows func(x, y []float32, n int)
}

// smKernelsFor returns level l's softmax kernels; the Generic ones are the
// reference loops below.
func smKernelsFor(l Level) *smKernels {
	return pick(l, [levelCount]*smKernels{Generic: &smGeneric, AVX2: smAVX2, AVX512: smAVX512})
}

var smImpl = smKernelsFor(level)

var smGeneric = smKernels{
	rowMax: smRowMax, rowExpSum: smRowExpSum, rowScale: smRowScale, rowSub: smRowSub,
	rowDot: smRowDot, rowSum: smRowSum, rowSoftBwd: smRowSoftBwd, rowLogBwd: smRowLogBwd,
	colMax: smColMax, colExpSum: smColExpSum, colScale: smColScale, colSub: smColSub,
	colDot: smColDot, colSum: smColSum, colSoftBwd: smColSoftBwd, colLogBwd: smColLogBwd,
}

// The kinds of softmax job.
const (
	smForward = iota
	smLogForward
	smBackward
	smLogBackward
)

// smCost is the rough work per element of each kind, handed to Parallel.
var smCost = [...]int{smForward: 16, smLogForward: 16, smBackward: 4, smLogBackward: 12}

// smJob holds one call's operands for the worker pool. Jobs are pooled and
// their span methods bound once, so a call allocates nothing; the tiles'
// accumulators come from smScratch.
type smJob struct {
	kind        int
	s           SoftmaxShape
	x, y, g, dx []float32 // forward: x → y; backward: y, g (= dy) → dx
	rows, tiles func(lo, hi int)
}

var smJobs = freeList[smJob]{New: func() *smJob {
	j := new(smJob)
	j.rows, j.tiles = j.runRows, j.runTiles
	return j
}}

// smScratch holds the float64 accumulators of one chunk of tiles: two per
// column.
var smScratch = freeList[[2 * softmaxTile]float64]{New: newOf[[2 * softmaxTile]float64]}

// run splits the job's softmaxes across the worker pool: whole rows when
// Inner = 1, tiles of up to softmaxTile neighbouring softmaxes otherwise.
func (j *smJob) run() {
	s := j.s
	if s.Outer*s.N*s.Inner == 0 {
		return
	}
	work := s.Outer * s.N * s.Inner * smCost[j.kind]
	if s.Inner == 1 {
		Parallel(s.Outer, work, j.rows)
		return
	}
	w := min(s.Inner, softmaxTile)
	per := (s.Inner + w - 1) / w
	Parallel(s.Outer*per, work, j.tiles)
}

func (j *smJob) release() {
	j.x, j.y, j.g, j.dx = nil, nil, nil, nil
	smJobs.put(j)
}

// runRows computes the softmaxes of rows [lo, hi) (Inner = 1).
func (j *smJob) runRows(lo, hi int) {
	k, n := smImpl, j.s.N
	if j.kind == smForward && k.rows != nil {
		k.rows(j.x[lo*n:hi*n], j.y[lo*n:hi*n], n)
		return
	}
	for o := lo; o < hi; o++ {
		r := o * n
		switch j.kind {
		case smForward:
			x, y := j.x[r:r+n], j.y[r:r+n]
			// y holds the exponentials until they are normalised.
			sum := k.rowExpSum(x, y, k.rowMax(x))
			k.rowScale(y, 1/sum)
		case smLogForward:
			x := j.x[r : r+n]
			mx := k.rowMax(x)
			sum := k.rowExpSum(x, nil, mx)
			k.rowSub(j.y[r:r+n], x, float64(mx)+math.Log(sum))
		case smBackward:
			y, g := j.y[r:r+n], j.g[r:r+n]
			k.rowSoftBwd(j.dx[r:r+n], y, g, k.rowDot(y, g))
		case smLogBackward:
			g := j.g[r : r+n]
			k.rowLogBwd(j.dx[r:r+n], j.y[r:r+n], g, k.rowSum(g))
		}
	}
}

// runTiles computes tiles [lo, hi): tile t is outer index t/per and
// columns from (t%per)·w.
func (j *smJob) runTiles(lo, hi int) {
	k, s := smImpl, j.s
	n, st := s.N, s.Inner
	w := min(st, softmaxTile)
	per := (st + w - 1) / w
	buf := smScratch.get()
	defer smScratch.put(buf)
	for t := lo; t < hi; t++ {
		o, i0 := t/per, (t%per)*w
		cw := min(w, st-i0)
		base := o*n*st + i0
		a, b := buf[:cw], buf[softmaxTile:softmaxTile+cw]
		row := func(v []float32, k int) []float32 { return v[base+k*st : base+k*st+cw] }
		switch j.kind {
		case smForward, smLogForward:
			for c := range a {
				a[c], b[c] = math.Inf(-1), 0 // maximum, sum
			}
			for r := 0; r < n; r++ {
				k.colMax(a, row(j.x, r))
			}
			var e []float32
			for r := 0; r < n; r++ {
				if j.kind == smForward {
					e = row(j.y, r) // the exponentials until normalised
				}
				k.colExpSum(b, a, row(j.x, r), e)
			}
			if j.kind == smForward {
				for c := range b {
					b[c] = 1 / b[c]
				}
				for r := 0; r < n; r++ {
					k.colScale(row(j.y, r), b)
				}
				continue
			}
			for c := range a {
				a[c] += math.Log(b[c]) // log-sum-exp
			}
			for r := 0; r < n; r++ {
				k.colSub(row(j.y, r), row(j.x, r), a)
			}
		case smBackward:
			clear(a)
			for r := 0; r < n; r++ {
				k.colDot(a, row(j.y, r), row(j.g, r))
			}
			for r := 0; r < n; r++ {
				k.colSoftBwd(row(j.dx, r), row(j.y, r), row(j.g, r), a)
			}
		case smLogBackward:
			clear(a)
			for r := 0; r < n; r++ {
				k.colSum(a, row(j.g, r))
			}
			for r := 0; r < n; r++ {
				k.colLogBwd(row(j.dx, r), row(j.y, r), row(j.g, r), a)
			}
		}
	}
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

// softmaxTiles (used by the cross-entropy kernels) calls fn for every tile of up to softmaxTile neighbouring
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
// row-major tensor. A NaN anywhere makes its whole softmax NaN, as in
// PyTorch. It allocates nothing.
func Softmax(sp *SoftmaxShape, x, y []float32) {
	s := *sp
	s.check("Softmax", map[string]int{"x": len(x), "y": len(y)})
	smRun(smForward, s, x, y, nil, nil)
}

// LogSoftmax writes x − log Σexp(x) along N to y, with the log-sum-exp
// computed stably in float64; like torch.log_softmax on a row-major tensor.
func LogSoftmax(sp *SoftmaxShape, x, y []float32) {
	s := *sp
	s.check("LogSoftmax", map[string]int{"x": len(x), "y": len(y)})
	smRun(smLogForward, s, x, y, nil, nil)
}

// SoftmaxBackward writes the input gradient of Softmax, dx = y·(dy − Σ dy·y)
// along N, given its output y and output gradient dy. dx is overwritten.
func SoftmaxBackward(sp *SoftmaxShape, y, dy, dx []float32) {
	s := *sp
	s.check("SoftmaxBackward", map[string]int{"y": len(y), "dy": len(dy), "dx": len(dx)})
	smRun(smBackward, s, nil, y, dy, dx)
}

// LogSoftmaxBackward writes the input gradient of LogSoftmax,
// dx = dy − exp(y)·Σ dy along N, given its output y and output gradient dy.
// dx is overwritten.
func LogSoftmaxBackward(sp *SoftmaxShape, y, dy, dx []float32) {
	s := *sp
	s.check("LogSoftmaxBackward", map[string]int{"y": len(y), "dy": len(dy), "dx": len(dx)})
	smRun(smLogBackward, s, nil, y, dy, dx)
}

func smRun(kind int, s SoftmaxShape, x, y, g, dx []float32) {
	j := smJobs.get()
	j.kind, j.s, j.x, j.y, j.g, j.dx = kind, s, x, y, g, dx
	j.run()
	j.release()
}

// The reference kernels. The row ones are the column ones for a single
// column, so a softmax gets the same bits whether Inner is 1 or not.

func smRowMax(x []float32) float32 {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v > mx || v != v {
			mx = v
		}
	}
	return mx
}

// smRowExpSum computes each e^(x−mx) as PyTorch does, the difference and
// the exponential in float32, and sums them in float64.
func smRowExpSum(x, e []float32, mx float32) float64 {
	sum := 0.0
	if e == nil {
		for _, v := range x {
			sum += float64(expf32(v - mx))
		}
		return sum
	}
	e = e[:len(x)]
	for i, v := range x {
		ev := expf32(v - mx)
		sum += float64(ev)
		e[i] = ev
	}
	return sum
}

func smRowScale(y []float32, s float64) {
	for i, v := range y {
		y[i] = float32(float64(v) * s)
	}
}

func smRowSub(y, x []float32, lse float64) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] = float32(float64(v) - lse)
	}
}

func smRowDot(y, dy []float32) float64 {
	dy = dy[:len(y)]
	dot := 0.0
	for i, v := range y {
		dot += float64(v) * float64(dy[i])
	}
	return dot
}

func smRowSum(x []float32) float64 {
	sum := 0.0
	for _, v := range x {
		sum += float64(v)
	}
	return sum
}

func smRowSoftBwd(dx, y, dy []float32, dot float64) {
	y, dy = y[:len(dx)], dy[:len(dx)]
	for i, v := range y {
		dx[i] = float32(float64(v) * (float64(dy[i]) - dot))
	}
}

func smRowLogBwd(dx, y, dy []float32, sum float64) {
	y, dy = y[:len(dx)], dy[:len(dx)]
	for i, v := range y {
		dx[i] = float32(float64(dy[i]) - float64(expf32(v))*sum)
	}
}

func smColMax(mx []float64, row []float32) {
	mx = mx[:len(row)]
	for c, v := range row {
		if f := float64(v); f > mx[c] || f != f {
			mx[c] = f
		}
	}
}

func smColExpSum(sum, mx []float64, row, e []float32) {
	sum, mx = sum[:len(row)], mx[:len(row)]
	if e == nil {
		for c, v := range row {
			sum[c] += float64(expf32(v - float32(mx[c])))
		}
		return
	}
	e = e[:len(row)]
	for c, v := range row {
		ev := expf32(v - float32(mx[c]))
		sum[c] += float64(ev)
		e[c] = ev
	}
}

func smColScale(row []float32, s []float64) {
	s = s[:len(row)]
	for c, v := range row {
		row[c] = float32(float64(v) * s[c])
	}
}

func smColSub(y, x []float32, lse []float64) {
	x, lse = x[:len(y)], lse[:len(y)]
	for c, v := range x {
		y[c] = float32(float64(v) - lse[c])
	}
}

func smColDot(dot []float64, y, dy []float32) {
	dot, dy = dot[:len(y)], dy[:len(y)]
	for c, v := range y {
		dot[c] += float64(v) * float64(dy[c])
	}
}

func smColSum(sum []float64, x []float32) {
	sum = sum[:len(x)]
	for c, v := range x {
		sum[c] += float64(v)
	}
}

func smColSoftBwd(dx, y, dy []float32, dot []float64) {
	y, dy, dot = y[:len(dx)], dy[:len(dx)], dot[:len(dx)]
	for c, v := range y {
		dx[c] = float32(float64(v) * (float64(dy[c]) - dot[c]))
	}
}

func smColLogBwd(dx, y, dy []float32, sum []float64) {
	y, dy, sum = y[:len(dx)], dy[:len(dx)], sum[:len(dx)]
	for c, v := range y {
		dx[c] = float32(float64(dy[c]) - float64(expf32(v))*sum[c])
	}
}
