package kernels

import (
	"math"
)

// The embedding kernels read rows of a [num, dim] table by int64 index.
// They trust their indices and offsets: callers validate them (an index in
// [0, num), offsets non-decreasing within the input) before the call, so
// that a bad index is reported with the caller's context rather than as a
// slice bound panic here.

func embCheck(op string, lens map[string][2]int) {
	checkLens(op, lens)
}

// EmbeddingForward copies row idx[i] of the table weight (rows of dim) to
// row i of out.
func EmbeddingForward(dim int, idx []int64, weight, out []float32) {
	embCheck("EmbeddingForward", map[string][2]int{"out": {len(out), len(idx) * dim}})
	embForward(dim, idx, weight, out)
}

// embForwardGeneric is the reference.
func embForwardGeneric(dim int, idx []int64, weight, out []float32) {
	Parallel(len(idx), len(idx)*dim, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := int(idx[i])
			copy(out[i*dim:(i+1)*dim], weight[r*dim:(r+1)*dim])
		}
	})
}

// embRowOrder groups the positions of idx by the row they name, by a
// counting sort: the positions naming row r are order[end[r-1]:end[r]]
// (with end[-1] = 0), in increasing position order.
func embRowOrder(num int, idx []int64) (end, order []int32) {
	if len(idx) > math.MaxInt32 {
		fail(ErrArgument, "embedding", "%d indices exceed the int32 limit", len(idx))
	}
	end = make([]int32, num+1)
	for _, r := range idx {
		end[r+1]++
	}
	for r := 1; r <= num; r++ {
		end[r] += end[r-1]
	}
	order = make([]int32, len(idx))
	for i, r := range idx {
		order[end[r]] = int32(i)
		end[r]++
	}
	return end[:num], order
}

// embScatter overwrites the table gradient dw (num rows of dim) with, for
// every row r, the sum over the positions i naming r of coef(i)·src row
// srcRow(i). A nil srcRow means row i; a nil coef means 1. Row skip (or -1
// for none) stays zero. Each row is summed in float64 in position order by
// one worker, so the result is deterministic and needs no atomics.
func embScatter(num, dim int, idx []int64, srcRow []int32, coef []float64, src []float32, skip int64, dw []float32) {
	end, order := embRowOrder(num, idx)
	Parallel(num, len(idx)*dim+num*dim, func(lo, hi int) {
		var acc []float64
		for r := lo; r < hi; r++ {
			row := dw[r*dim : (r+1)*dim]
			start := int32(0)
			if r > 0 {
				start = end[r-1]
			}
			if start == end[r] || int64(r) == skip {
				clear(row)
				continue
			}
			if acc == nil {
				acc = make([]float64, dim)
			}
			clear(acc)
			for _, p := range order[start:end[r]] {
				s := int(p)
				if srcRow != nil {
					s = int(srcRow[p])
				}
				sr := src[s*dim : (s+1)*dim]
				if coef == nil {
					for j, v := range sr {
						acc[j] += float64(v)
					}
				} else {
					k := coef[p]
					for j, v := range sr {
						acc[j] += k * float64(v)
					}
				}
			}
			for j, v := range acc {
				row[j] = float32(v)
			}
		}
	})
}

// EmbeddingBackward overwrites dw, the gradient of a table of num rows of
// dim, with the rows of dy (one per index) summed into the rows idx names.
// Row skip receives no gradient (a padding index); -1 skips none.
func EmbeddingBackward(num, dim int, idx []int64, dy []float32, skip int64, dw []float32) {
	embCheck("EmbeddingBackward", map[string][2]int{"dy": {len(dy), len(idx) * dim}, "dw": {len(dw), num * dim}})
	embBackward(num, dim, idx, dy, skip, dw)
}

// bagEnd is the end of bag b: the next bag's offset, or n for the last.
func bagEnd(offsets []int64, b, n int) int {
	if b+1 < len(offsets) {
		return int(offsets[b+1])
	}
	return n
}

// EmbeddingBagSum writes to row b of out the sum of the table rows named by
// the positions of bag b, idx[offsets[b]:offsets[b+1]] (the last bag runs to
// the end of idx). Each row is scaled by psw[i] when psw is non-nil; with
// mean the sum is divided by the bag's size. Empty bags give zeros. Sums
// are accumulated in float64.
func EmbeddingBagSum(dim int, idx, offsets []int64, weight, psw []float32, mean bool, out []float32) {
	bags := len(offsets)
	lens := map[string][2]int{"out": {len(out), bags * dim}}
	if psw != nil {
		lens["psw"] = [2]int{len(psw), len(idx)}
	}
	embCheck("EmbeddingBagSum", lens)
	bagSum(dim, idx, offsets, weight, psw, mean, out)
}

// bagSumGeneric is the reference.
func bagSumGeneric(dim int, idx, offsets []int64, weight, psw []float32, mean bool, out []float32) {
	bags := len(offsets)
	Parallel(bags, len(idx)*dim+bags*dim, func(lo, hi int) {
		acc := make([]float64, dim)
		for b := lo; b < hi; b++ {
			s, e := int(offsets[b]), bagEnd(offsets, b, len(idx))
			clear(acc)
			for i := s; i < e; i++ {
				r := int(idx[i])
				wr := weight[r*dim : (r+1)*dim]
				if psw == nil {
					for j, v := range wr {
						acc[j] += float64(v)
					}
				} else {
					k := float64(psw[i])
					for j, v := range wr {
						acc[j] += k * float64(v)
					}
				}
			}
			if mean && e > s {
				inv := 1 / float64(e-s)
				for j := range acc {
					acc[j] *= inv
				}
			}
			row := out[b*dim : (b+1)*dim]
			for j, v := range acc {
				row[j] = float32(v)
			}
		}
	})
}

// EmbeddingBagMax writes to row b of out the featurewise maximum of the
// table rows of bag b and to argmax the table row each maximum came from
// (-1 for an empty bag, whose output is zero). As in PyTorch the first
// row of a bag sets the maximum and a later row replaces it only when
// strictly greater, so ties keep the first and a NaN counts only if first.
func EmbeddingBagMax(dim int, idx, offsets []int64, weight, out []float32, argmax []int64) {
	bags := len(offsets)
	embCheck("EmbeddingBagMax", map[string][2]int{"out": {len(out), bags * dim}, "argmax": {len(argmax), bags * dim}})
	bagMax(dim, idx, offsets, weight, out, argmax)
}

// bagMaxGeneric is the reference.
func bagMaxGeneric(dim int, idx, offsets []int64, weight, out []float32, argmax []int64) {
	bags := len(offsets)
	Parallel(bags, len(idx)*dim+bags*dim, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			s, e := int(offsets[b]), bagEnd(offsets, b, len(idx))
			row, am := out[b*dim:(b+1)*dim], argmax[b*dim:(b+1)*dim]
			if s == e {
				clear(row)
				for j := range am {
					am[j] = -1
				}
				continue
			}
			r := idx[s]
			copy(row, weight[int(r)*dim:(int(r)+1)*dim])
			for j := range am {
				am[j] = r
			}
			for i := s + 1; i < e; i++ {
				r := idx[i]
				wr := weight[int(r)*dim : (int(r)+1)*dim]
				for j, v := range wr {
					if v > row[j] {
						row[j], am[j] = v, r
					}
				}
			}
		}
	})
}

// EmbeddingBagBackward overwrites dw, the gradient of a table of num rows of
// dim, for EmbeddingBagSum's output gradient dy: every position i of bag b
// adds dy row b to table row idx[i], scaled by psw[i] when psw is non-nil
// or by 1/size of the bag with mean.
func EmbeddingBagBackward(num, dim int, idx, offsets []int64, dy, psw []float32, mean bool, dw []float32) {
	bags := len(offsets)
	lens := map[string][2]int{"dy": {len(dy), bags * dim}, "dw": {len(dw), num * dim}}
	if psw != nil {
		lens["psw"] = [2]int{len(psw), len(idx)}
	}
	embCheck("EmbeddingBagBackward", lens)
	bagBackward(num, dim, idx, offsets, dy, psw, mean, dw)
}

// bagBackwardGeneric is the reference.
func bagBackwardGeneric(num, dim int, idx, offsets []int64, dy, psw []float32, mean bool, dw []float32) {
	bags := len(offsets)
	bag := make([]int32, len(idx))
	var coef []float64
	if psw != nil || mean {
		coef = make([]float64, len(idx))
	}
	for b := range bags {
		s, e := int(offsets[b]), bagEnd(offsets, b, len(idx))
		for i := s; i < e; i++ {
			bag[i] = int32(b)
			switch {
			case psw != nil:
				coef[i] = float64(psw[i])
			case mean:
				coef[i] = 1 / float64(e-s)
			}
		}
	}
	embScatter(num, dim, idx, bag, coef, dy, -1, dw)
}

// EmbeddingBagMaxBackward overwrites dw, the gradient of a table of num
// rows of dim, routing each element of dy (bags rows of dim) to the table
// row argmax recorded for it; -1 entries (empty bags) route nowhere.
func EmbeddingBagMaxBackward(num, dim int, argmax []int64, dy, dw []float32) {
	embCheck("EmbeddingBagMaxBackward", map[string][2]int{"dy": {len(dy), len(argmax)}, "dw": {len(dw), num * dim}})
	bagMaxBackward(num, dim, argmax, dy, dw)
}

// bagMaxBackwardGeneric is the reference.
func bagMaxBackwardGeneric(num, dim int, argmax []int64, dy, dw []float32) {
	clear(dw[:num*dim])
	if dim == 0 {
		return
	}
	bags := len(argmax) / dim
	// Each worker owns a range of features, so no two write the same
	// element and the bags are added in order.
	Parallel(dim, bags*dim, func(lo, hi int) {
		for b := range bags {
			for j := lo; j < hi; j++ {
				if r := argmax[b*dim+j]; r >= 0 {
					dw[int(r)*dim+j] += dy[b*dim+j]
				}
			}
		}
	})
}

// EmbeddingBagWeightsGrad writes to dpsw[i] the gradient of
// EmbeddingBagSum's per-sample weight i: the dot product, in float64, of
// the output gradient of i's bag with the table row idx[i].
func EmbeddingBagWeightsGrad(dim int, idx, offsets []int64, weight, dy, dpsw []float32) {
	bags := len(offsets)
	embCheck("EmbeddingBagWeightsGrad", map[string][2]int{"dy": {len(dy), bags * dim}, "dpsw": {len(dpsw), len(idx)}})
	bagWeightsGrad(dim, idx, offsets, weight, dy, dpsw)
}

// bagWeightsGradGeneric is the reference.
func bagWeightsGradGeneric(dim int, idx, offsets []int64, weight, dy, dpsw []float32) {
	bags := len(offsets)
	Parallel(bags, len(idx)*dim, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			g := dy[b*dim : (b+1)*dim]
			for i := int(offsets[b]); i < bagEnd(offsets, b, len(idx)); i++ {
				r := int(idx[i])
				wr := weight[r*dim : (r+1)*dim]
				s := 0.0
				for j, v := range g {
					s += float64(v) * float64(wr[j])
				}
				dpsw[i] = float32(s)
			}
		}
	})
}

type (
	embForwardFunc  func(dim int, idx []int64, weight, out []float32)
	embBackwardFunc func(num, dim int, idx []int64, dy []float32, skip int64, dw []float32)
	bagSumFunc      func(dim int, idx, offsets []int64, weight, psw []float32, mean bool, out []float32)
	bagMaxFunc      func(dim int, idx, offsets []int64, weight, out []float32, argmax []int64)
	bagBackwardFunc func(num, dim int, idx, offsets []int64, dy, psw []float32, mean bool, dw []float32)
	bagMaxBackFunc  func(num, dim int, argmax []int64, dy, dw []float32)
	bagWGradFunc    func(dim int, idx, offsets []int64, weight, dy, dpsw []float32)
)

var (
	embForwardVariants = [levelCount]embForwardFunc{
		Generic: embForwardGeneric,
		AVX2: func(dim int, idx []int64, weight, out []float32) {
			embForwardKit(kitAt(AVX2), dim, idx, weight, out)
		},
	}
	embBackwardVariants = [levelCount]embBackwardFunc{
		Generic: func(num, dim int, idx []int64, dy []float32, skip int64, dw []float32) {
			embScatter(num, dim, idx, nil, nil, dy, skip, dw)
		},
		AVX2: func(num, dim int, idx []int64, dy []float32, skip int64, dw []float32) {
			embScatterKit(kitAt(AVX2), num, dim, idx, nil, nil, dy, skip, dw)
		},
	}
	bagSumVariants = [levelCount]bagSumFunc{
		Generic: bagSumGeneric,
		AVX2: func(dim int, idx, offsets []int64, weight, psw []float32, mean bool, out []float32) {
			bagSumKit(AVX2, dim, idx, offsets, weight, psw, mean, out)
		},
		AVX512: func(dim int, idx, offsets []int64, weight, psw []float32, mean bool, out []float32) {
			bagSumKit(AVX512, dim, idx, offsets, weight, psw, mean, out)
		},
	}
	bagMaxVariants = [levelCount]bagMaxFunc{
		Generic: bagMaxGeneric,
		AVX2: func(dim int, idx, offsets []int64, weight, out []float32, argmax []int64) {
			bagMaxKit(kitAt(AVX2), dim, idx, offsets, weight, out, argmax)
		},
	}
	bagBackwardVariants = [levelCount]bagBackwardFunc{
		Generic: bagBackwardGeneric,
		AVX2: func(num, dim int, idx, offsets []int64, dy, psw []float32, mean bool, dw []float32) {
			bagBackwardKit(kitAt(AVX2), num, dim, idx, offsets, dy, psw, mean, dw)
		},
	}
	bagMaxBackVariants = [levelCount]bagMaxBackFunc{
		Generic: bagMaxBackwardGeneric,
		AVX2:    bagMaxBackwardKit,
	}
	bagWGradVariants = [levelCount]bagWGradFunc{
		Generic: bagWeightsGradGeneric,
		AVX2: func(dim int, idx, offsets []int64, weight, dy, dpsw []float32) {
			bagWeightsGradKit(kitAt(AVX2), dim, idx, offsets, weight, dy, dpsw)
		},
	}

	embForward     = pick(level, embForwardVariants)
	embBackward    = pick(level, embBackwardVariants)
	bagSum         = pick(level, bagSumVariants)
	bagMax         = pick(level, bagMaxVariants)
	bagBackward    = pick(level, bagBackwardVariants)
	bagMaxBackward = pick(level, bagMaxBackVariants)
	bagWeightsGrad = pick(level, bagWGradVariants)
)

// The kit variants below do the reference's arithmetic, in its order, one
// table row at a time through the row primitives (so sums and maxima are
// the reference's bits; only the weights gradient's dot products add in
// another order). They run through pooled jobs and scratch and allocate
// nothing per call.

type embArgs struct {
	k            *vecKit
	gather       gatherF32Func // for bags of one row
	num, dim     int
	idx, offsets []int64
	weight, psw  []float32
	out, src     []float32
	argmax       []int64
	mean         bool
	end, order   []int32
	srcRow       []int32
	coef         []float64
	skip         int64
}

var embJobs parPool[embArgs]

func embForwardKit(k *vecKit, dim int, idx []int64, weight, out []float32) {
	embJobs.run(len(idx), len(idx)*dim, embArgs{k: k, dim: dim, idx: idx, weight: weight, out: out}, embCopyRows)
}

func embCopyRows(a *embArgs, lo, hi int) {
	dim := a.dim
	pf := embPrefetcher{a: a, next: lo, limit: hi}
	for i := lo; i < hi; i++ {
		pf.ahead(i + 1)
		r := int(a.idx[i])
		copy(a.out[i*dim:(i+1)*dim], a.weight[r*dim:(r+1)*dim])
	}
}

func bagSumKit(l Level, dim int, idx, offsets []int64, weight, psw []float32, mean bool, out []float32) {
	bags := len(offsets)
	if dim > 0 {
		// The whole-bag primitive reads rows without Go's bounds checks.
		checkRows("EmbeddingBagSum", idx, len(weight)/dim)
	}
	a := embArgs{k: kitAt(l), gather: pick(l, bagGatherF32Variants), dim: dim, idx: idx, offsets: offsets, weight: weight, psw: psw, mean: mean, out: out}
	embJobs.run(bags, len(idx)*dim+bags*dim, a, bagSumBags)
}

// bagSumBags sums bags [lo, hi) in float64, a block of at most vecChunk
// features at a time (one block for any usual width), each bag in one
// call that holds the sums in registers.
func bagSumBags(a *embArgs, lo, hi int) {
	k, dim := a.k, a.dim
	buf := getScratch64(min(dim, vecChunk))
	defer buf.put()
	pf := embPrefetcher{a: a, next: int(a.offsets[lo]), limit: bagEnd(a.offsets, hi-1, len(a.idx))}
	for b := lo; b < hi; b++ {
		s, e := int(a.offsets[b]), bagEnd(a.offsets, b, len(a.idx))
		pf.ahead(e)
		if e-s == 1 && a.psw == nil {
			// One row, summed or averaged, is the row itself, but for
			// the sign of a zero: sums start from +0. (DLRM's one-hot
			// lookups are all like this.)
			a.gather(a.out[b*dim:(b+1)*dim], a.weight, a.idx[s:e], dim, nil, nil, 0)
			continue
		}
		scale := 1.0
		if a.mean && e > s {
			scale = 1 / float64(e-s)
		}
		for j0 := 0; j0 < dim; j0 += vecChunk {
			j1 := min(j0+vecChunk, dim)
			acc := buf.s[:j1-j0]
			clear(acc)
			if a.psw == nil {
				k.accRows(acc, a.weight[j0:], a.idx[s:e], dim)
			} else {
				k.accRowsScaled(acc, a.weight[j0:], a.idx[s:e], a.psw[s:e], dim)
			}
			k.storeScaled(a.out[b*dim+j0:b*dim+j1], acc, scale)
		}
	}
}

// embPrefetch is how many lookups ahead of the one being summed the table
// rows are prefetched: random rows of a large table miss the caches and
// usually the TLB, and a few dozen misses in flight hide most of that.
const embPrefetch = 32

// embPrefetcher keeps the rows of the next embPrefetch lookups (up to
// limit) requested ahead of the work.
type embPrefetcher struct {
	a           *embArgs
	next, limit int
}

// ahead prefetches rows up to embPrefetch lookups beyond position i.
func (p *embPrefetcher) ahead(i int) {
	if p.a.k == nil || p.a.dim*4 > 4096 {
		return // the reference kit, or rows too long to be worth it
	}
	to := min(i+embPrefetch, p.limit)
	if to-p.next >= 8 || (to == p.limit && to > p.next) {
		p.a.k.prefetchRows(p.a.weight, p.a.idx[p.next:to], p.a.dim)
		p.next = to
	}
}

func bagMaxKit(k *vecKit, dim int, idx, offsets []int64, weight, out []float32, argmax []int64) {
	bags := len(offsets)
	a := embArgs{k: k, dim: dim, idx: idx, offsets: offsets, weight: weight, out: out, argmax: argmax}
	embJobs.run(bags, len(idx)*dim+bags*dim, a, bagMaxBags)
}

func bagMaxBags(a *embArgs, lo, hi int) {
	k, dim := a.k, a.dim
	pf := embPrefetcher{a: a, next: int(a.offsets[lo]), limit: bagEnd(a.offsets, hi-1, len(a.idx))}
	for b := lo; b < hi; b++ {
		s, e := int(a.offsets[b]), bagEnd(a.offsets, b, len(a.idx))
		pf.ahead(e)
		row, am := a.out[b*dim:(b+1)*dim], a.argmax[b*dim:(b+1)*dim]
		if s == e {
			clear(row)
			for j := range am {
				am[j] = -1
			}
			continue
		}
		r := a.idx[s]
		copy(row, a.weight[int(r)*dim:(int(r)+1)*dim])
		for j := range am {
			am[j] = r
		}
		for i := s + 1; i < e; i++ {
			r := a.idx[i]
			for j0 := 0; j0 < dim; j0 += vecChunk {
				j1 := min(j0+vecChunk, dim)
				k.maxRowArg(row[j0:j1], am[j0:j1], a.weight[int(r)*dim+j0:int(r)*dim+j1], r)
			}
		}
	}
}

// embRowOrderInto is embRowOrder into caller buffers: end has num+1
// elements, order len(idx); it returns end[:num].
func embRowOrderInto(num int, idx []int64, end, order []int32) []int32 {
	if len(idx) > math.MaxInt32 {
		fail(ErrArgument, "embedding", "%d indices exceed the int32 limit", len(idx))
	}
	clear(end)
	for _, r := range idx {
		end[r+1]++
	}
	for r := 1; r <= num; r++ {
		end[r] += end[r-1]
	}
	for i, r := range idx {
		order[end[r]] = int32(i)
		end[r]++
	}
	return end[:num]
}

// embScatterKit is embScatter on the kit with pooled index buffers; runs
// of rows that receive nothing are cleared in one call.
func embScatterKit(k *vecKit, num, dim int, idx []int64, srcRow []int32, coef []float64, src []float32, skip int64, dw []float32) {
	endBuf := getScratch32(num + 1)
	defer endBuf.put()
	orderBuf := getScratch32(len(idx))
	defer orderBuf.put()
	end := embRowOrderInto(num, idx, endBuf.s, orderBuf.s)
	a := embArgs{k: k, num: num, dim: dim, idx: idx, srcRow: srcRow, coef: coef, src: src, skip: skip, out: dw, end: end, order: orderBuf.s}
	embJobs.run(num, len(idx)*dim+num*dim, a, embScatterRows)
}

func embScatterRows(a *embArgs, lo, hi int) {
	k, dim := a.k, a.dim
	var buf *scratch[float64]
	empty := lo // start of the current run of rows with nothing to add
	for r := lo; r < hi; r++ {
		start := int32(0)
		if r > 0 {
			start = a.end[r-1]
		}
		if start == a.end[r] || int64(r) == a.skip {
			continue
		}
		clear(a.out[empty*dim : r*dim])
		empty = r + 1
		if buf == nil {
			buf = getScratch64(min(dim, vecChunk))
		}
		for j0 := 0; j0 < dim; j0 += vecChunk {
			j1 := min(j0+vecChunk, dim)
			acc := buf.s[:j1-j0]
			clear(acc)
			for _, p := range a.order[start:a.end[r]] {
				s := int(p)
				if a.srcRow != nil {
					s = int(a.srcRow[p])
				}
				sr := a.src[s*dim+j0 : s*dim+j1]
				if a.coef == nil {
					k.accRow(acc, sr)
				} else {
					k.accRowScaled(acc, sr, a.coef[p])
				}
			}
			k.storeScaled(a.out[r*dim+j0:r*dim+j1], acc, 1)
		}
	}
	clear(a.out[empty*dim : hi*dim])
	if buf != nil {
		buf.put()
	}
}

func bagBackwardKit(k *vecKit, num, dim int, idx, offsets []int64, dy, psw []float32, mean bool, dw []float32) {
	bags := len(offsets)
	bagBuf := getScratch32(len(idx))
	defer bagBuf.put()
	bag := bagBuf.s
	var coef []float64
	if psw != nil || mean {
		coefBuf := getScratch64(len(idx))
		defer coefBuf.put()
		coef = coefBuf.s
	}
	for b := range bags {
		s, e := int(offsets[b]), bagEnd(offsets, b, len(idx))
		for i := s; i < e; i++ {
			bag[i] = int32(b)
			switch {
			case psw != nil:
				coef[i] = float64(psw[i])
			case mean:
				coef[i] = 1 / float64(e-s)
			}
		}
	}
	embScatterKit(k, num, dim, idx, bag, coef, dy, -1, dw)
}

// bagMaxBackwardKit is the reference without its per-call closure: the
// workers own feature ranges and add the bags in order.
func bagMaxBackwardKit(num, dim int, argmax []int64, dy, dw []float32) {
	clear(dw[:num*dim])
	if dim == 0 {
		return
	}
	bags := len(argmax) / dim
	embJobs.run(dim, bags*dim, embArgs{num: bags, dim: dim, argmax: argmax, src: dy, out: dw}, bagMaxBackFeatures)
}

func bagMaxBackFeatures(a *embArgs, lo, hi int) {
	dim := a.dim
	for b := range a.num {
		am, g := a.argmax[b*dim+lo:b*dim+hi], a.src[b*dim+lo:b*dim+hi]
		for j, r := range am {
			if r >= 0 {
				a.out[int(r)*dim+lo+j] += g[j]
			}
		}
	}
}

func bagWeightsGradKit(k *vecKit, dim int, idx, offsets []int64, weight, dy, dpsw []float32) {
	bags := len(offsets)
	a := embArgs{k: k, dim: dim, idx: idx, offsets: offsets, weight: weight, src: dy, out: dpsw}
	embJobs.run(bags, len(idx)*dim, a, bagWeightsGradBags)
}

func bagWeightsGradBags(a *embArgs, lo, hi int) {
	k, dim := a.k, a.dim
	for b := lo; b < hi; b++ {
		g := a.src[b*dim : (b+1)*dim]
		for i := int(a.offsets[b]); i < bagEnd(a.offsets, b, len(a.idx)); i++ {
			r := int(a.idx[i])
			var s float64
			for j0 := 0; j0 < dim; j0 += vecChunk {
				j1 := min(j0+vecChunk, dim)
				s += k.dot(g[j0:j1], a.weight[r*dim+j0:r*dim+j1])
			}
			a.out[i] = float32(s)
		}
	}
}
