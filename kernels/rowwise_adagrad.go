package kernels

import "math"

// Row-wise Adagrad (dlrm's RWSAdagrad, --optimizer rwsadagrad) keeps one
// sum of squares per table row instead of one per element: 4 bytes a row.
// A touched row r with gradient g of length d is updated as
//
//	h[r] = h[r] + mean_j(g[j]²)
//	w_r  = w_r − lr · g / (√h[r] + eps)
//
// Rows must be unique (a coalesced gradient, which SparseRows promises),
// so each row's state and span belong to one worker, and the result does
// not depend on the thread count.

// rowWiseAdagradCost is the rough work per gradient element handed to
// Parallel: a square and a sum, then a division and a multiply-add on the
// row.
const rowWiseAdagradCost = 4

// RowWiseAdagradSparse applies row-wise Adagrad to the rows of the
// [num, dim] table param named by rows; h holds one float32 sum of squares
// per table row (len(h) == num). Each touched row follows dlrm's
// RWSAdagrad step on a float32 table with PyTorch's float32 roundings:
//
//	d    = ±grad                              (− when Maximize)
//	m    = (Σ_j float32(d[j]·d[j])) / dim      (float32, j ascending)
//	h[r] = h[r] + m
//	std  = √h[r] + Eps
//	p[j] = p[j] + NegLR·(d[j] / std)          (fused)
//
// dlrm computes m as grad_values.pow(2).mean(1), whose float32 sum PyTorch
// orders its own way; here the squares are added one by one in column
// order, the same for every thread count and CPU. c.WeightDecay must be 0
// (dlrm rejects it with sparse gradients). Rows not named, and their
// state, are left alone. A table with zero-length rows is left as it is.
func RowWiseAdagradSparse(param, h []float32, rows SparseRows, c AdagradConfig) {
	checkRowWise("RowWiseAdagradSparse", len(param), h, rows, c)
	if rows.Dim == 0 {
		return
	}
	rows.forRows(rowWiseAdagradCost, func(k int) {
		lo, hi, g := rows.span(k)
		std := rowWiseAccumulate(&c, &h[rows.Rows[k]], g)
		rowWiseApply(&c, param[lo:hi], g, std)
	}, f32Rows(param, rows.Dim))
}

// RowWiseAdagradSparseSplit is RowWiseAdagradSparse on a split parameter
// (see SGDSplitStep): the named rows of the FP32 master that top and
// bottom stand for, and h, come out bit for bit as RowWiseAdagradSparse
// would leave them.
func RowWiseAdagradSparseSplit(top, bottom []uint16, h []float32, rows SparseRows, c AdagradConfig) {
	checkRowWise("RowWiseAdagradSparseSplit", len(top), h, rows, c)
	if len(bottom) != len(top) {
		fail(ErrShape, "RowWiseAdagradSparseSplit", "top and bottom differ in length")
	}
	if rows.Dim == 0 {
		return
	}
	rows.forRows(rowWiseAdagradCost, func(k int) {
		lo, hi, g := rows.span(k)
		std := rowWiseAccumulate(&c, &h[rows.Rows[k]], g)
		sc := splitScratches.get()
		for a := lo; a < hi; a += splitSpan {
			b := min(a+splitSpan, hi)
			p := sc.p[:b-a]
			joinBF16Impl(p, top[a:b], bottom[a:b])
			rowWiseApply(&c, p, g[a-lo:b-lo], std)
			splitBF16Impl(top[a:b], bottom[a:b], p)
		}
		splitScratches.put(sc)
	}, u16Rows(top, rows.Dim), u16Rows(bottom, rows.Dim))
}

// checkRowWise panics unless rows fit a table of n elements with one state
// value per row in h, and c has no weight decay.
func checkRowWise(name string, n int, h []float32, rows SparseRows, c AdagradConfig) {
	rows.check(name, n)
	if rows.Dim > 0 && len(h) != n/rows.Dim {
		fail(ErrShape, name, "state does not hold one value per table row")
	}
	checkSparseAdagrad(name, c)
}

// rowWiseAccumulate adds the mean square of gradient row g (negated when
// Maximize, which does not change the squares) to the row's state *h and
// returns √h + Eps.
func rowWiseAccumulate(c *AdagradConfig, h *float32, g []float32) float32 {
	var s float32
	for _, v := range g {
		// The conversion rounds the square, as pow(2) does, so the
		// compiler cannot fuse it into the add.
		s += float32(v * v)
	}
	hr := *h + s/float32(len(g))
	*h = hr
	return float32(math.Sqrt(float64(hr))) + c.Eps
}

// rowWiseApply updates p from its gradient g and the row's std.
func rowWiseApply(c *AdagradConfig, p, g []float32, std float32) {
	g = g[:len(p)]
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	negLR := float64(c.NegLR)
	for j := range p {
		q := (sign * g[j]) / std
		p[j] = float32(float64(p[j]) + negLR*float64(q))
	}
}
