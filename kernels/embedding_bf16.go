package kernels

import "slices"

// The bfloat16 embedding kernels read a bfloat16 table and do the float32
// kernels' arithmetic on its widened rows, in the reference's order: sums
// in float64, maxima compared as float32. Each result is the float32
// kernel's on the widened table, rounded to bfloat16 (nearest even) once
// at the store, so a split table computes what its FP32 master's top half
// would. Rows are widened one element at a time as they are read: DLRM
// tables are far too large to widen whole. Gradients arrive as float32
// (callers widen a bfloat16 one, which is activation-sized); table
// gradients leave as bfloat16, per-sample weight gradients as float32.
// Every kernel runs through pooled jobs and scratch.

type embBF16Args struct {
	num, dim     int
	idx, offsets []int64
	weight, out  []uint16
	src, psw     []float32
	dpsw         []float32
	argmax       []int64
	mean         bool
	end, order   []int32
	skip         int64
}

var embBF16Jobs parPool[embBF16Args]

// EmbeddingForwardBF16 is EmbeddingForward on a bfloat16 table: row idx[i]
// of weight is copied, bits unchanged, to row i of out.
func EmbeddingForwardBF16(dim int, idx []int64, weight, out []uint16) {
	embCheck("EmbeddingForwardBF16", map[string][2]int{"out": {len(out), len(idx) * dim}})
	embBF16Jobs.run(len(idx), len(idx)*dim, embBF16Args{dim: dim, idx: idx, weight: weight, out: out}, embBF16Gather)
}

func embBF16Gather(a *embBF16Args, lo, hi int) {
	dim := a.dim
	for i := lo; i < hi; i++ {
		r := int(a.idx[i])
		copy(a.out[i*dim:(i+1)*dim], a.weight[r*dim:(r+1)*dim])
	}
}

// EmbeddingBackwardBF16 is EmbeddingBackward writing a bfloat16 table
// gradient: each row is summed in float64 in position order, rounded to
// float32 and then to bfloat16, EmbeddingBackward's result rounded once.
func EmbeddingBackwardBF16(num, dim int, idx []int64, dy []float32, skip int64, dw []uint16) {
	embCheck("EmbeddingBackwardBF16", map[string][2]int{"dy": {len(dy), len(idx) * dim}, "dw": {len(dw), num * dim}})
	embScatterBF16(embBF16Args{num: num, dim: dim, idx: idx, src: dy, skip: skip, out: dw})
}

// embScatterBF16 is embScatter into a bfloat16 gradient a.out: every
// position p adds a source row, scaled by a coefficient, into the table
// row a.idx[p]. Without a.offsets the source is a.src row p with
// coefficient 1 (a.skip is the row left zero); with them it is the output
// gradient of p's bag, scaled by a.psw[p], or by the reciprocal of the
// bag's size with a.mean, else 1. Multiplying by 1 is exact, so every
// position goes through one product, and the sums are the reference's.
func embScatterBF16(a embBF16Args) {
	endBuf := getScratch32(a.num + 1)
	defer endBuf.put()
	orderBuf := getScratch32(len(a.idx))
	defer orderBuf.put()
	a.end = embRowOrderInto(a.num, a.idx, endBuf.s, orderBuf.s)
	a.order = orderBuf.s
	embBF16Jobs.run(a.num, len(a.idx)*a.dim+a.num*a.dim, a, embBF16ScatterRows)
}

// source returns the source row and coefficient of position p.
func (a *embBF16Args) source(p int) ([]float32, float64) {
	dim := a.dim
	if a.offsets == nil {
		return a.src[p*dim : (p+1)*dim], 1
	}
	// The bag holding p is the last to start at or before it (empty bags
	// start where the next one does).
	b, _ := slices.BinarySearch(a.offsets, int64(p)+1)
	b--
	k := 1.0
	switch {
	case a.psw != nil:
		k = float64(a.psw[p])
	case a.mean:
		k = 1 / float64(bagEnd(a.offsets, b, len(a.idx))-int(a.offsets[b]))
	}
	return a.src[b*dim : (b+1)*dim], k
}

func embBF16ScatterRows(a *embBF16Args, lo, hi int) {
	dim := a.dim
	var buf *scratch[float64]
	for r := lo; r < hi; r++ {
		row := a.out[r*dim : (r+1)*dim]
		start := int32(0)
		if r > 0 {
			start = a.end[r-1]
		}
		if start == a.end[r] || int64(r) == a.skip {
			clear(row)
			continue
		}
		if buf == nil {
			buf = getScratch64(dim)
		}
		acc := buf.s
		clear(acc)
		for _, p := range a.order[start:a.end[r]] {
			sr, k := a.source(int(p))
			for j, v := range sr {
				acc[j] += k * float64(v)
			}
		}
		storeBF16(row, acc, 1)
	}
	if buf != nil {
		buf.put()
	}
}

// storeBF16 writes float32(acc[j]·scale) rounded to bfloat16 to dst[j].
func storeBF16(dst []uint16, acc []float64, scale float64) {
	for j, v := range acc {
		dst[j] = BF16FromF32(float32(v * scale))
	}
}

// EmbeddingBagSumBF16 is EmbeddingBagSum on a bfloat16 table with a
// bfloat16 result: each bag's widened rows (scaled by psw, float32, when
// non-nil) are summed in float64, divided by the bag's size with mean, and
// rounded to float32 and then bfloat16.
func EmbeddingBagSumBF16(dim int, idx, offsets []int64, weight []uint16, psw []float32, mean bool, out []uint16) {
	bags := len(offsets)
	embCheckBag("EmbeddingBagSumBF16", map[string][2]int{"out": {len(out), bags * dim}}, psw, len(idx))
	a := embBF16Args{dim: dim, idx: idx, offsets: offsets, weight: weight, psw: psw, mean: mean, out: out}
	embBF16Jobs.run(bags, len(idx)*dim+bags*dim, a, embBF16SumBags)
}

// embCheckBag is embCheck with the per-sample weights, when there are
// any, needing one per index of n.
func embCheckBag(op string, lens map[string][2]int, psw []float32, n int) {
	if psw != nil {
		lens["psw"] = [2]int{len(psw), n}
	}
	embCheck(op, lens)
}

func embBF16SumBags(a *embBF16Args, lo, hi int) {
	buf := getScratch64(a.dim)
	defer buf.put()
	for b := lo; b < hi; b++ {
		storeBF16(a.out[b*a.dim:(b+1)*a.dim], buf.s, a.sumBag(b, buf.s))
	}
}

// sumBag overwrites acc (dim long) with the sum in float64 of bag b's
// widened rows, each scaled by its per-sample weight when a.psw is set,
// and returns the factor to store the sum with: the reciprocal of the
// bag's size for a non-empty bag with a.mean, else 1.
func (a *embBF16Args) sumBag(b int, acc []float64) float64 {
	dim := a.dim
	s, e := int(a.offsets[b]), bagEnd(a.offsets, b, len(a.idx))
	clear(acc)
	for i := s; i < e; i++ {
		r := int(a.idx[i])
		wr := a.weight[r*dim : (r+1)*dim]
		if a.psw == nil {
			for j, v := range wr {
				acc[j] += float64(F32FromBF16(v))
			}
		} else {
			k := float64(a.psw[i])
			for j, v := range wr {
				acc[j] += k * float64(F32FromBF16(v))
			}
		}
	}
	if a.mean && e > s {
		return 1 / float64(e-s)
	}
	return 1
}

// EmbeddingBagMaxBF16 is EmbeddingBagMax on a bfloat16 table: the maxima
// are table elements, so out holds their bits; ties and NaNs behave as
// there.
func EmbeddingBagMaxBF16(dim int, idx, offsets []int64, weight, out []uint16, argmax []int64) {
	bags := len(offsets)
	embCheck("EmbeddingBagMaxBF16", map[string][2]int{"out": {len(out), bags * dim}, "argmax": {len(argmax), bags * dim}})
	a := embBF16Args{dim: dim, idx: idx, offsets: offsets, weight: weight, out: out, argmax: argmax}
	embBF16Jobs.run(bags, len(idx)*dim+bags*dim, a, embBF16MaxBags)
}

func embBF16MaxBags(a *embBF16Args, lo, hi int) {
	dim := a.dim
	for b := lo; b < hi; b++ {
		s, e := int(a.offsets[b]), bagEnd(a.offsets, b, len(a.idx))
		row, am := a.out[b*dim:(b+1)*dim], a.argmax[b*dim:(b+1)*dim]
		if s == e { // zero, routing no gradient
			clear(row)
			fillNeg(am)
			continue
		}
		// The first row sets the maximum; a later one replaces it only
		// when strictly greater.
		for i := s; i < e; i++ {
			r := a.idx[i]
			for j, v := range a.weight[int(r)*dim : (int(r)+1)*dim] {
				if i == s || F32FromBF16(v) > F32FromBF16(row[j]) {
					row[j], am[j] = v, r
				}
			}
		}
	}
}

// EmbeddingBagBackwardBF16 is EmbeddingBagBackward writing a bfloat16
// table gradient, each row summed as EmbeddingBackwardBF16 sums.
func EmbeddingBagBackwardBF16(num, dim int, idx, offsets []int64, dy, psw []float32, mean bool, dw []uint16) {
	embCheckBag("EmbeddingBagBackwardBF16", map[string][2]int{"dy": {len(dy), len(offsets) * dim}, "dw": {len(dw), num * dim}}, psw, len(idx))
	embScatterBF16(embBF16Args{num: num, dim: dim, idx: idx, offsets: offsets, psw: psw, mean: mean, src: dy, skip: -1, out: dw})
}

// EmbeddingBagMaxBackwardBF16 is EmbeddingBagMaxBackward writing a
// bfloat16 table gradient: the elements routed to a table element are
// added in float32 in bag order by EmbeddingBagMaxBackward itself, into
// float32 rows kept only for the table rows some maximum came from, and
// rounded once.
func EmbeddingBagMaxBackwardBF16(num, dim int, argmax []int64, dy []float32, dw []uint16) {
	embCheck("EmbeddingBagMaxBackwardBF16", map[string][2]int{"dy": {len(dy), len(argmax)}, "dw": {len(dw), num * dim}})
	clear(dw[:num*dim])
	if dim == 0 {
		return
	}
	slotBuf := getScratch32(num)
	defer slotBuf.put()
	slot := slotBuf.s
	fillNeg(slot)
	rowsBuf := getScratch32(min(num, len(argmax)))
	defer rowsBuf.put()
	rows := rowsBuf.s[:0]
	// The argmax of the compact rows: slot[r] stands for table row r.
	compact := getScratch[int64](&scratchI64Pool, len(argmax))
	defer compact.put()
	for i, r := range argmax {
		compact.s[i] = -1
		if r < 0 {
			continue
		}
		if slot[r] < 0 {
			slot[r] = int32(len(rows))
			rows = append(rows, int32(r))
		}
		compact.s[i] = int64(slot[r])
	}
	acc := getScratchF32(len(rows) * dim)
	defer acc.put()
	bagMaxBackward(len(rows), dim, compact.s, dy, acc.s)
	for k, r := range rows {
		row := dw[int(r)*dim : (int(r)+1)*dim]
		for j, v := range acc.s[k*dim : (k+1)*dim] {
			row[j] = BF16FromF32(v)
		}
	}
}

var scratchI64Pool freeList[scratch[int64]]

// EmbeddingBagWeightsGradBF16 is EmbeddingBagWeightsGrad on a bfloat16
// table: dpsw[i] is the float64 dot product, in feature order, of i's
// bag's output gradient with the widened row idx[i], rounded to float32.
func EmbeddingBagWeightsGradBF16(dim int, idx, offsets []int64, weight []uint16, dy, dpsw []float32) {
	bags := len(offsets)
	embCheck("EmbeddingBagWeightsGradBF16", map[string][2]int{"dy": {len(dy), bags * dim}, "dpsw": {len(dpsw), len(idx)}})
	a := embBF16Args{dim: dim, idx: idx, offsets: offsets, weight: weight, src: dy, dpsw: dpsw}
	embBF16Jobs.run(bags, len(idx)*dim, a, embBF16WeightsGradBags)
}

func embBF16WeightsGradBags(a *embBF16Args, lo, hi int) {
	dim := a.dim
	for b := lo; b < hi; b++ {
		g := a.src[b*dim : (b+1)*dim]
		for i := int(a.offsets[b]); i < bagEnd(a.offsets, b, len(a.idx)); i++ {
			r := int(a.idx[i])
			s := 0.0
			for j, v := range a.weight[r*dim : (r+1)*dim] {
				s += float64(g[j]) * float64(F32FromBF16(v))
			}
			a.dpsw[i] = float32(s)
		}
	}
}

// fillNeg sets every element of s to -1, the mark of "no row".
func fillNeg[T int32 | int64](s []T) {
	for i := range s {
		s[i] = -1
	}
}
