package kernels

import (
	"fmt"
	"math"
)

// The embedding kernels read rows of a [num, dim] table by int64 index.
// They trust their indices and offsets: callers validate them (an index in
// [0, num), offsets non-decreasing within the input) before the call, so
// that a bad index is reported with the caller's context rather than as a
// slice bound panic here.

func embCheck(op string, lens map[string][2]int) {
	for name, l := range lens {
		if l[0] < l[1] {
			panic(fmt.Sprintf("kernels: %s: %s has %d elements, needs %d", op, name, l[0], l[1]))
		}
	}
}

// EmbeddingForward copies row idx[i] of the table weight (rows of dim) to
// row i of out.
func EmbeddingForward(dim int, idx []int64, weight, out []float32) {
	embCheck("EmbeddingForward", map[string][2]int{"out": {len(out), len(idx) * dim}})
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
		panic(fmt.Sprintf("kernels: embedding: %d indices exceed the int32 limit", len(idx)))
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
	embScatter(num, dim, idx, nil, nil, dy, skip, dw)
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
