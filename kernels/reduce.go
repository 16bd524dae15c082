package kernels

// StridedSum sums src over the dimensions of shape whose destination
// stride is zero and writes float32(sum·scale) to dst, the sums accumulating
// in float64: dst[Σ i·dstStrides] = scale · Σ src[Σ i·srcStrides]. The
// dimensions with a non-zero destination stride (the kept ones) must lay dst
// out densely; every element of dst they reach is written, even when the
// summed dimensions are empty (giving 0·scale, so a mean over nothing is
// NaN as in PyTorch). src is read in its memory order. How the sums are
// split and grouped depends on the shape alone (stridedSumWorkers), so
// the results are the same bits at every thread count.
func StridedSum(dst, src []float32, shape, dstStrides, srcStrides []int, scale float64) {
	stridedCheck("StridedSum", shape, [][]int{dstStrides, srcStrides}, []int{len(dst), len(src)}, []string{"dst", "src"})
	outN, ext := 1, 1
	for i, n := range shape {
		if dstStrides[i] != 0 {
			outN *= n
			ext += (n - 1) * dstStrides[i]
		}
	}
	if outN == 0 {
		return
	}
	if ext != outN || len(dst) < outN {
		// The final pass writes all of dst[:outN], so the kept dimensions
		// must cover it exactly.
		fail(ErrShape, "StridedSum", "kept dimensions of shape %v with dst strides %v do not lay out %d dst elements densely", shape, dstStrides, len(dst))
	}
	stridedSum(dst, src, shape, dstStrides, srcStrides, outN, scale)
}

type stridedSumFunc func(dst, src []float32, shape, dstStrides, srcStrides []int, outN int, scale float64)

var stridedSumVariants = [levelCount]stridedSumFunc{
	Generic: stridedSumGeneric,
	AVX2: func(dst, src []float32, shape, dstStrides, srcStrides []int, outN int, scale float64) {
		stridedSumKit(kitAt(AVX2), dst, src, shape, dstStrides, srcStrides, outN, scale)
	},
}

var stridedSum = pick(level, stridedSumVariants)

// stridedSumGeneric is the reference.
func stridedSumGeneric(dst, src []float32, shape, dstStrides, srcStrides []int, outN int, scale float64) {
	acc := make([]float64, outN)
	dims, empty := stridedPlan(shape, srcStrides, dstStrides)
	if !empty {
		stridedSumInto(acc, src, dims, outN)
	}
	for i, v := range acc {
		dst[i] = float32(v * scale)
	}
}

// stridedSumInto adds the plan's elements of src into acc, dividing the
// walk among workers along a kept loop (disjoint outputs) or, when every
// kept loop is short and the output small, along a summed loop with a
// partial sum per worker combined in a fixed order.
func stridedSumInto(acc []float64, src []float32, dims []stridedDim, outN int) {
	in := dims[len(dims)-1]
	run := func(acc []float64) func(o0, o1, n int) {
		return func(o0, o1, n int) {
			switch {
			case in.s1 == 0 && in.s0 == 1:
				var s float64
				for _, v := range src[o0 : o0+n] {
					s += float64(v)
				}
				acc[o1] += s
			case in.s1 == 0:
				var s float64
				for k := range n {
					s += float64(src[o0+k*in.s0])
				}
				acc[o1] += s
			default:
				for k := range n {
					acc[o1+k*in.s1] += float64(src[o0+k*in.s0])
				}
			}
		}
	}
	total := 1
	for _, d := range dims {
		total *= d.n
	}
	if total < minParallelWork {
		stridedWalk(dims, -1, 0, 0, run(acc))
		return
	}
	kept := stridedSplit(dims, stridedSumWorkers, func(d stridedDim) bool { return d.s1 != 0 })
	if kept >= 0 && (dims[kept].n >= stridedSumWorkers || outN > stridedPartialMax) {
		Parallel(dims[kept].n, total, func(lo, hi int) { stridedWalk(dims, kept, lo, hi, run(acc)) })
		return
	}
	summed := stridedSplit(dims, stridedSumWorkers, func(d stridedDim) bool { return d.s1 == 0 })
	if summed < 0 || outN > stridedPartialMax {
		stridedWalk(dims, -1, 0, 0, run(acc))
		return
	}
	n := dims[summed].n
	parts := min(stridedSumWorkers, n)
	partial := make([]float64, parts*outN)
	Parallel(parts, total, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			stridedWalk(dims, summed, p*n/parts, (p+1)*n/parts, run(partial[p*outN:(p+1)*outN]))
		}
	})
	for p := range parts {
		for i, v := range partial[p*outN : (p+1)*outN] {
			acc[i] += v
		}
	}
}

// stridedSumWorkers is the worker count StridedSum plans for, whatever
// the pool's size: a kept loop at least this long is split (disjoint
// outputs), otherwise a summed loop is cut into this many parts, each
// with its own partial sums added in order. A plan for the pool's size
// grouped the sums differently at each thread count.
const stridedSumWorkers = 16

// stridedPartialMax bounds the output size for which StridedSum gives each
// part its own partial sums (stridedSumWorkers × outN float64s).
const stridedPartialMax = 1 << 14

// stridedSumKit is the reference's walk and split on the kit: contiguous
// runs summed by the kit's sum, runs that add a contiguous row into
// contiguous sums by accRow, and rows of such runs stacked one after
// another in memory (a channels-last spatial sum) folded into one colSum.
// The float64 sums come out as the reference's except where a run is
// summed to one value (several vector accumulators there).
func stridedSumKit(k *vecKit, dst, src []float32, shape, dstStrides, srcStrides []int, outN int, scale float64) {
	var a stridedArgs
	dims, empty := stridedPlanTo(a.dims[:0], shape, srcStrides, dstStrides)
	if len(dims) > stridedMaxDims {
		stridedSumGeneric(dst, src, shape, dstStrides, srcStrides, outN, scale)
		return
	}
	accBuf := getScratch64(outN)
	defer accBuf.put()
	acc := accBuf.s
	clear(acc)
	if !empty {
		a.k, a.nd, a.walk, a.src, a.acc, a.outN = k, len(dims), len(dims), src, acc, outN
		stridedSumKitInto(&a)
	}
	for i := 0; i < outN; i += vecChunk {
		j := min(i+vecChunk, outN)
		k.storeScaled(dst[i:j], acc[i:j], scale)
	}
}

func stridedSumKitInto(a *stridedArgs) {
	dims := a.dims[:a.nd]
	total := 1
	for _, d := range dims {
		total *= d.n
	}
	nd := a.nd
	fold := nd >= 2 && dims[nd-1].s0 == 1 && dims[nd-1].s1 == 1 && dims[nd-2].s1 == 0 && dims[nd-2].s0 == dims[nd-1].n
	a.split = -1
	if total >= minParallelWork {
		kept := stridedSplit(dims, stridedSumWorkers, func(d stridedDim) bool { return d.s1 != 0 })
		if kept >= 0 && (dims[kept].n >= stridedSumWorkers || a.outN > stridedPartialMax) {
			a.split = kept
			if fold && kept < nd-1 {
				a.walk = nd - 1
			}
			stridedJobs.run(dims[kept].n, total, *a, stridedSumWalk)
			return
		}
		summed := stridedSplit(dims, stridedSumWorkers, func(d stridedDim) bool { return d.s1 == 0 })
		if summed >= 0 && a.outN <= stridedPartialMax {
			n := dims[summed].n
			a.split, a.parts = summed, min(stridedSumWorkers, n)
			if fold && summed < nd-1 {
				a.walk = nd - 1
			}
			partial := getScratch64(a.parts * a.outN)
			defer partial.put()
			clear(partial.s)
			acc := a.acc
			a.acc = partial.s
			stridedJobs.run(a.parts, total, *a, stridedSumParts)
			for p := range a.parts {
				for i, v := range partial.s[p*a.outN : (p+1)*a.outN] {
					acc[i] += v
				}
			}
			return
		}
	}
	a.split = -1
	if fold {
		a.walk = nd - 1
	}
	stridedSumWalk(a, 0, 0)
}

// stridedSumParts sums parts [lo, hi) of the split loop into their own
// partial sums.
func stridedSumParts(a *stridedArgs, lo, hi int) {
	n := a.dims[a.split].n
	b := *a
	for p := lo; p < hi; p++ {
		b.acc = a.acc[p*a.outN : (p+1)*a.outN]
		stridedSumWalk(&b, p*n/a.parts, (p+1)*n/a.parts)
	}
}

// stridedSumWalk adds iterations [lo, hi) of loop a.split (all when the
// split is negative) into a.acc.
func stridedSumWalk(a *stridedArgs, lo, hi int) {
	dims := a.dims[:a.nd]
	in := dims[a.nd-1]
	k, src, acc := a.k, a.src, a.acc
	if a.walk < a.nd {
		// Each run of the walk is n rows of in.n contiguous values, all
		// added into the same in.n sums.
		rows := max(1, vecChunk/in.n)
		stridedWalk(dims[:a.walk], a.split, lo, hi, func(o0, o1, n int) {
			for r := 0; r < n; r += rows {
				nr := min(rows, n-r)
				k.colSum(acc[o1:o1+in.n], src[o0+r*in.n:o0+(r+nr)*in.n])
			}
		})
		return
	}
	stridedWalk(dims, a.split, lo, hi, func(o0, o1, n int) {
		switch {
		case in.s1 == 0 && in.s0 == 1:
			var s float64
			for i := 0; i < n; i += vecChunk {
				s += k.sum(src[o0+i : o0+min(i+vecChunk, n)])
			}
			acc[o1] += s
		case in.s1 == 0:
			var s float64
			for i := range n {
				s += float64(src[o0+i*in.s0])
			}
			acc[o1] += s
		case in.s0 == 1 && in.s1 == 1:
			for i := 0; i < n; i += vecChunk {
				j := min(i+vecChunk, n)
				k.accRow(acc[o1+i:o1+j], src[o0+i:o0+j])
			}
		default:
			for i := range n {
				acc[o1+i*in.s1] += float64(src[o0+i*in.s0])
			}
		}
	})
}
