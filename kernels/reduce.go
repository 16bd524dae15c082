package kernels

import "fmt"

// StridedSum sums src over the dimensions of shape whose destination
// stride is zero and writes float32(sum·scale) to dst, the sums accumulating
// in float64: dst[Σ i·dstStrides] = scale · Σ src[Σ i·srcStrides]. The
// dimensions with a non-zero destination stride (the kept ones) must lay dst
// out densely; every element of dst they reach is written, even when the
// summed dimensions are empty (giving 0·scale, so a mean over nothing is
// NaN as in PyTorch). src is read in its memory order. Results are
// deterministic for a given number of workers (Threads).
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
		panic(fmt.Sprintf("kernels: StridedSum: kept dimensions of shape %v with dst strides %v do not lay out %d dst elements densely", shape, dstStrides, len(dst)))
	}
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
	threads := Threads()
	kept := stridedSplit(dims, func(d stridedDim) bool { return d.s1 != 0 })
	if kept >= 0 && (dims[kept].n >= threads || outN > stridedPartialMax) {
		Parallel(dims[kept].n, total, func(lo, hi int) { stridedWalk(dims, kept, lo, hi, run(acc)) })
		return
	}
	summed := stridedSplit(dims, func(d stridedDim) bool { return d.s1 == 0 })
	if summed < 0 || outN > stridedPartialMax {
		stridedWalk(dims, -1, 0, 0, run(acc))
		return
	}
	n := dims[summed].n
	parts := min(threads, n)
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

// stridedPartialMax bounds the output size for which StridedSum gives each
// worker its own partial sums (threads × outN float64s).
const stridedPartialMax = 1 << 14
