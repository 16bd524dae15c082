package kernels

// Strided kernels move or reduce the elements of an n-dimensional array
// described by a shape and per-operand strides (in elements). They are what
// the autograd layer's shape ops (permute, cat, split) and reductions run
// on: autograd works out the strides from a tensor's shape and memory
// format, and the kernels never see a tensor.

// stridedDim is one loop of a strided walk: n iterations advancing operand
// 0 by s0 and operand 1 by s1.
type stridedDim struct{ n, s0, s1 int }

// stridedPlan turns a shape and two stride sets into the loops of a walk,
// outermost first: size-1 dimensions are dropped, the rest are ordered by
// operand 0's strides (largest first, so operand 0 is walked in memory
// order) and neighbours that are contiguous in both operands are merged.
// empty reports a zero-size shape. The plan has at least one loop.
func stridedPlan(shape, s0, s1 []int) (dims []stridedDim, empty bool) {
	return stridedPlanTo(make([]stridedDim, 0, len(shape)), shape, s0, s1)
}

// stridedPlanTo is stridedPlan building the loops in dims[:0].
func stridedPlanTo(dims []stridedDim, shape, s0, s1 []int) ([]stridedDim, bool) {
	dims = dims[:0]
	for i, n := range shape {
		if n == 0 {
			return nil, true
		}
		if n > 1 {
			dims = append(dims, stridedDim{n, s0[i], s1[i]})
		}
	}
	// Insertion sort: shapes have a handful of dimensions.
	for i := 1; i < len(dims); i++ {
		for j := i; j > 0 && stridedOuter(dims[j], dims[j-1]); j-- {
			dims[j], dims[j-1] = dims[j-1], dims[j]
		}
	}
	merged := dims[:0]
	for _, d := range dims {
		if k := len(merged) - 1; k >= 0 {
			// The previous loop is outer to d; it folds into d when its
			// step is exactly d's extent in both operands.
			if p := merged[k]; p.s0 == d.s0*d.n && p.s1 == d.s1*d.n {
				merged[k] = stridedDim{p.n * d.n, d.s0, d.s1}
				continue
			}
		}
		merged = append(merged, d)
	}
	if len(merged) == 0 {
		merged = append(merged, stridedDim{1, 0, 0})
	}
	return merged, false
}

// stridedOuter reports whether a belongs outside b in the walk order.
func stridedOuter(a, b stridedDim) bool {
	if a.s0 != b.s0 {
		return a.s0 > b.s0
	}
	return a.s1 > b.s1
}

// stridedWalk calls run for every innermost run of the plan, with the
// starting offsets of both operands and the run's length. Loop split is
// limited to iterations [lo, hi) (split < 0: no limit), which is how a
// walk is divided among workers.
func stridedWalk(dims []stridedDim, split, lo, hi int, run func(o0, o1, n int)) {
	nd := len(dims)
	last := nd - 1
	var startBuf, endBuf, idxBuf [8]int
	start, end, idx := startBuf[:0], endBuf[:0], idxBuf[:0]
	if nd > len(startBuf) {
		start, end, idx = make([]int, 0, nd), make([]int, 0, nd), make([]int, 0, nd)
	}
	o0, o1 := 0, 0
	for i, d := range dims {
		s, e := 0, d.n
		if i == split {
			s, e = lo, hi
		}
		if s >= e {
			return
		}
		start, end, idx = append(start, s), append(end, e), append(idx, s)
		o0 += s * d.s0
		o1 += s * d.s1
	}
	n := end[last] - start[last]
	for {
		run(o0, o1, n)
		d := last - 1
		for ; d >= 0; d-- {
			idx[d]++
			o0 += dims[d].s0
			o1 += dims[d].s1
			if idx[d] < end[d] {
				break
			}
			o0 -= (idx[d] - start[d]) * dims[d].s0
			o1 -= (idx[d] - start[d]) * dims[d].s1
			idx[d] = start[d]
		}
		if d < 0 {
			return
		}
	}
}

// stridedExtent is one more than the largest offset the shape reaches with
// strides: the number of elements an operand must have.
func stridedExtent(shape, strides []int) int {
	e := 1
	for i, n := range shape {
		if n == 0 {
			return 0
		}
		e += (n - 1) * strides[i]
	}
	return e
}

func stridedCheck(kernel string, shape []int, strides [][]int, lens []int, names []string) {
	for k, st := range strides {
		if len(st) != len(shape) {
			fail(ErrShape, kernel, "%s has %d strides for %d dimensions", names[k], len(st), len(shape))
		}
		for i, s := range st {
			if s < 0 || shape[i] < 0 {
				fail(ErrShape, kernel, "negative size or stride (shape %v, %s strides %v)", shape, names[k], st)
			}
		}
		if need := stridedExtent(shape, st); lens[k] < need {
			fail(ErrShape, kernel, "%s has %d elements, shape %v with strides %v needs %d", names[k], lens[k], shape, st, need)
		}
	}
}

// stridedSplit picks the loop to divide among workers: the outermost one
// with at least one iteration per worker, else the longest.
func stridedSplit(dims []stridedDim, workers int, ok func(stridedDim) bool) int {
	best := -1
	for i, d := range dims {
		if !ok(d) || d.n < 2 {
			continue
		}
		if d.n >= workers {
			return i
		}
		if best < 0 || d.n > dims[best].n {
			best = i
		}
	}
	return best
}

// StridedCopy copies every element of shape from src, read with
// srcStrides, to dst, written with dstStrides: dst[Σ i·dstStrides] =
// src[Σ i·srcStrides]. A zero source stride repeats (broadcasts) the
// source along that dimension. Destination offsets must not repeat.
// Strides are in elements and non-negative; offset an operand by slicing it.
func StridedCopy(dst, src []float32, shape, dstStrides, srcStrides []int) {
	stridedCheck("StridedCopy", shape, [][]int{dstStrides, srcStrides}, []int{len(dst), len(src)}, []string{"dst", "src"})
	stridedCopy(dst, src, shape, dstStrides, srcStrides)
}

// StridedCopyBF16 is StridedCopy on bfloat16 bits (or any 16-bit
// elements): the same walk, moving 2-byte elements.
func StridedCopyBF16(dst, src []uint16, shape, dstStrides, srcStrides []int) {
	stridedCheck("StridedCopyBF16", shape, [][]int{dstStrides, srcStrides}, []int{len(dst), len(src)}, []string{"dst", "src"})
	var a stridedCopy16Args
	dims, ok := stridedCopyPlan(&a.dims, dst, src, shape, dstStrides, srcStrides)
	if !ok {
		return
	}
	a.nd, a.dst, a.src = len(dims), dst, src
	total := 1
	for _, d := range dims {
		total *= d.n
	}
	a.split = -1
	if total >= minParallelWork {
		a.split = stridedSplit(dims, Threads(), func(stridedDim) bool { return true })
	}
	if a.split < 0 {
		stridedCopyRuns(dims, -1, 0, 0, dst, src)
		return
	}
	stridedCopy16Jobs.run(dims[a.split].n, total, a, func(a *stridedCopy16Args, lo, hi int) {
		stridedCopyRuns(a.dims[:a.nd], a.split, lo, hi, a.dst, a.src)
	})
}

// stridedCopyPlan plans a copy in dims, for the variants that plan without
// allocating. ok is false when nothing is left to do: the shape is empty,
// or the plan was too long for dims and the reference made the copy.
func stridedCopyPlan[T any](dims *[stridedMaxDims]stridedDim, dst, src []T, shape, dstStrides, srcStrides []int) ([]stridedDim, bool) {
	d, empty := stridedPlanTo(dims[:0], shape, dstStrides, srcStrides)
	if empty {
		return nil, false
	}
	if len(d) > stridedMaxDims {
		stridedCopyGeneric(dst, src, shape, dstStrides, srcStrides)
		return nil, false
	}
	return d, true
}

// stridedCopy16Args carries a 16-bit copy's plan to its workers, by value
// so that a call allocates nothing.
type stridedCopy16Args struct {
	dims     [stridedMaxDims]stridedDim
	nd       int
	split    int
	dst, src []uint16
}

var stridedCopy16Jobs parPool[stridedCopy16Args]

type stridedCopyFunc func(dst, src []float32, shape, dstStrides, srcStrides []int)

var stridedCopyVariants = [levelCount]stridedCopyFunc{
	Generic: stridedCopyGeneric[float32],
	AVX2: func(dst, src []float32, shape, dstStrides, srcStrides []int) {
		stridedCopyKit(kitAt(AVX2), dst, src, shape, dstStrides, srcStrides)
	},
}

var stridedCopy = pick(level, stridedCopyVariants)

// stridedCopyGeneric is the reference, for elements of any type.
func stridedCopyGeneric[T any](dst, src []T, shape, dstStrides, srcStrides []int) {
	dims, empty := stridedPlan(shape, dstStrides, srcStrides)
	if empty {
		return
	}
	total := 1
	for _, d := range dims {
		total *= d.n
	}
	split := -1
	if total >= minParallelWork {
		split = stridedSplit(dims, Threads(), func(stridedDim) bool { return true })
	}
	if split < 0 {
		stridedCopyRuns(dims, -1, 0, 0, dst, src)
		return
	}
	Parallel(dims[split].n, total, func(lo, hi int) { stridedCopyRuns(dims, split, lo, hi, dst, src) })
}

// stridedCopyRuns copies the runs of a copy's plan, the loop split limited
// to [lo, hi) as in stridedWalk.
func stridedCopyRuns[T any](dims []stridedDim, split, lo, hi int, dst, src []T) {
	in := dims[len(dims)-1]
	stridedWalk(dims, split, lo, hi, func(o0, o1, n int) {
		switch {
		case in.s0 == 1 && in.s1 == 1:
			copy(dst[o0:o0+n], src[o1:o1+n])
		case in.s1 == 0:
			v := src[o1]
			for k := range n {
				dst[o0+k*in.s0] = v
			}
		case in.s0 == 1:
			d := dst[o0 : o0+n]
			for k := range d {
				d[k] = src[o1+k*in.s1]
			}
		default:
			for k := range n {
				dst[o0+k*in.s0] = src[o1+k*in.s1]
			}
		}
	})
}

// stridedArgs carries a strided kernel's plan (up to stridedMaxDims
// loops, held by value so a call allocates nothing) to its workers.
type stridedArgs struct {
	k          *vecKit
	dims       [stridedMaxDims]stridedDim
	nd         int // loops in dims
	walk       int // loops walked; the rest are folded into each run
	split      int
	dst, src   []float32
	acc        []float64
	outN       int
	parts      int // partial sums (summed-loop split)
	transposed bool
}

// stridedMaxDims is the most loops the vector variants plan without
// allocating; longer plans (after merging) take the reference path.
const stridedMaxDims = 8

var stridedJobs parPool[stridedArgs]

// stridedCopyKit is the reference walk, except that a pair of innermost
// loops that is contiguous in dst one way and in src the other (a
// transpose, as in a channels-last conversion) is done in 8×8 tiles by
// the kit's transpose.
func stridedCopyKit(k *vecKit, dst, src []float32, shape, dstStrides, srcStrides []int) {
	var a stridedArgs
	dims, ok := stridedCopyPlan(&a.dims, dst, src, shape, dstStrides, srcStrides)
	if !ok {
		return
	}
	a.k, a.nd, a.walk, a.dst, a.src = k, len(dims), len(dims), dst, src
	if nd := len(dims); nd >= 2 {
		in, out := dims[nd-1], dims[nd-2]
		if in.s0 == 1 && out.s1 == 1 && in.s1 != 0 && in.n >= 8 && out.n >= 8 {
			a.transposed, a.walk = true, nd-1
		}
	}
	total := 1
	for _, d := range dims {
		total *= d.n
	}
	a.split = -1
	if total >= minParallelWork {
		a.split = stridedSplit(dims[:a.walk], Threads(), func(stridedDim) bool { return true })
	}
	if a.split < 0 {
		stridedCopyWalk(&a, 0, 0)
		return
	}
	stridedJobs.run(dims[a.split].n, total, a, stridedCopyWalk)
}

func stridedCopyWalk(a *stridedArgs, lo, hi int) {
	dims := a.dims[:a.nd]
	in := dims[a.nd-1]
	dst, src, k := a.dst, a.src, a.k
	if a.transposed {
		out := dims[a.nd-2]
		stridedWalk(dims[:a.walk], a.split, lo, hi, func(o0, o1, n int) {
			// n values of the outer loop by in.n of the inner: src rows
			// run along the outer loop, dst rows along the inner one.
			rows := max(8, (vecChunk/max(n, 1))&^7)
			for b := 0; b < in.n; b += rows {
				nb := min(rows, in.n-b)
				k.transpose(dst[o0+b:], out.s0, src[o1+b*in.s1:], in.s1, nb, n)
			}
		})
		return
	}
	stridedCopyRuns(dims, a.split, lo, hi, dst, src)
}
