package kernels

import (
	"math"
	"unsafe"
)

// Row-sparse forms of the SGD and Adagrad steps, for embedding tables whose
// gradient names a few rows (PyTorch's sparse=True). The table is a
// row-major [num, dim] matrix, so each touched row is a contiguous dim-long
// span: the update of a row is the dense step's span routine run on that
// span, and rows are shared out across the worker pool. Rows must be
// unique (a coalesced gradient), which is what makes them safe to update
// in parallel.

// SparseRows names the rows of a [num, dim] table that a sparse step
// updates, and their gradient.
type SparseRows struct {
	// Dim is the row length.
	Dim int
	// Rows are the row numbers, ascending, each at most once (a
	// coalesced gradient).
	Rows []int64
	// Values holds row Rows[k]'s gradient at [k·Dim, (k+1)·Dim).
	Values []float32
}

// check panics unless the rows fit a table of n elements and ascend.
func (r SparseRows) check(name string, n int) {
	if r.Dim < 0 || (r.Dim == 0 && n != 0) || (r.Dim > 0 && n%r.Dim != 0) {
		fail(ErrShape, name, "table length is not a multiple of the row length")
	}
	if len(r.Values) != len(r.Rows)*r.Dim {
		fail(ErrShape, name, "values do not hold one row per row index")
	}
	var num int64
	if r.Dim > 0 {
		num = int64(n / r.Dim)
	}
	prev := int64(-1)
	for _, i := range r.Rows {
		switch {
		case r.Dim == 0:
		case i < 0 || i >= num:
			fail(ErrIndex, name, "row index out of range")
		case i <= prev:
			// Unique rows are what lets workers update them in parallel.
			fail(ErrArgument, name, "row indices are not ascending and unique")
		}
		prev = i
	}
}

// span returns row k's element range in the table and its gradient.
func (r SparseRows) span(k int) (lo, hi int, g []float32) {
	lo = int(r.Rows[k]) * r.Dim
	return lo, lo + r.Dim, r.Values[k*r.Dim : (k+1)*r.Dim]
}

// forRows runs fn on every row across the worker pool; cost is the work
// per element. The rows of tables that fn will update are prefetched
// sparsePrefetch rows ahead: a table's touched rows are scattered over
// memory far larger than the caches (a DLRM table's 2048 rows of 100k),
// and fetching them one miss at a time left the update waiting on memory.
func (r SparseRows) forRows(cost int, fn func(k int), tables ...rowTable) {
	r.forRowsWith(cost, func() func(k int) { return fn }, tables...)
}

// forRowsWith is forRows for a row function with state of its own: each
// chunk of rows runs on a function newFn makes for it.
func (r SparseRows) forRowsWith(cost int, newFn func() func(k int), tables ...rowTable) {
	Parallel(len(r.Rows), len(r.Values)*cost, func(lo, hi int) {
		fn := newFn()
		next := lo
		for k := lo; k < hi; k++ {
			if to := min(k+sparsePrefetch, hi); to-next >= 8 || (to == hi && to > next) {
				for _, t := range tables {
					prefetchRowsImpl(t.f32, r.Rows[next:to], t.dim)
				}
				next = to
			}
			fn(k)
		}
	})
}

// sparsePrefetch is how many rows ahead of its update forRows prefetches.
const sparsePrefetch = 16

// prefetchRowsImpl is the vector kit's prefetchRows at the CPU's level
// (none in the reference).
var prefetchRowsImpl = kitAt(level).prefetchRows

// A rowTable is a table of rows viewed as float32s for prefetchRows: dim
// float32s to a row. The zero rowTable (no rows) prefetches nothing.
type rowTable struct {
	f32 []float32
	dim int
}

// f32Rows and u16Rows view tables of dim-element rows.
// Rows longer than a page are left to the hardware prefetcher.
func f32Rows(t []float32, dim int) rowTable {
	if dim*4 > 4096 {
		return rowTable{}
	}
	return rowTable{t, dim}
}

func u16Rows(t []uint16, dim int) rowTable {
	if len(t) == 0 || dim%2 != 0 || dim*2 > 4096 {
		return rowTable{} // rows that do not start on a float32, or long ones
	}
	return rowTable{unsafe.Slice((*float32)(unsafe.Pointer(&t[0])), len(t)/2), dim / 2}
}

// SGDSparse applies SGD without momentum to the rows of param named by
// rows: each row as SGDStep.Run would update it with the row's gradient.
// Rows not named are left alone, exactly what the dense step does with a
// zero gradient and no weight decay. c.Momentum must be 0: a momentum
// buffer decays every row, so it needs the dense step.
func SGDSparse(param []float32, rows SparseRows, c SGDConfig) {
	rows.check("SGDSparse", len(param))
	if c.Momentum != 0 {
		fail(ErrArgument, "SGDSparse", "momentum needs the dense step")
	}
	rows.forRows(sgdCost, func(k int) {
		lo, hi, g := rows.span(k)
		sgdSpanImpl(&c, false, param[lo:hi], g, nil)
	}, f32Rows(param, rows.Dim))
}

// AdagradSparse applies Adagrad to the rows of param and sum named by
// rows with the roundings of PyTorch 1.13's sparse branch of
// _single_tensor_adagrad, which differ from the dense step's: the square
// is rounded before it is added, and the learning rate multiplies the
// quotient,
//
//	d = ±grad                          (− when Maximize)
//	s = s + float32(d·d)
//	p = p + NegLR·(d / (√s + Eps))     (fused)
//
// c.WeightDecay must be 0 (PyTorch rejects it with sparse gradients).
func AdagradSparse(param, sum []float32, rows SparseRows, c AdagradConfig) {
	rows.check("AdagradSparse", len(param))
	if len(sum) != len(param) {
		fail(ErrShape, "AdagradSparse", "param and sum differ in length")
	}
	checkSparseAdagrad("AdagradSparse", c)
	rows.forRows(adagradCost, func(k int) {
		lo, hi, g := rows.span(k)
		adagradSparseSpanImpl(&c, param[lo:hi], g, sum[lo:hi])
	}, f32Rows(param, rows.Dim), f32Rows(sum, rows.Dim))
}

func checkSparseAdagrad(name string, c AdagradConfig) {
	if c.WeightDecay != 0 {
		fail(ErrArgument, name, "weight decay is not defined for sparse gradients")
	}
}

// adagradSparseSpanFor returns level l's sparse Adagrad row update; the
// Generic one, adagradSparseSpan, is the reference.
func adagradSparseSpanFor(l Level) func(c *AdagradConfig, p, g, s []float32) {
	return pick(l, [levelCount]func(*AdagradConfig, []float32, []float32, []float32){Generic: adagradSparseSpan, AVX2: adagradSparseSpanAVX2})
}

var adagradSparseSpanImpl = adagradSparseSpanFor(level)

// adagradSparseSpan is AdagradSparse's update of one row.
func adagradSparseSpan(c *AdagradConfig, p, g, s []float32) {
	g, s = g[:len(p)], s[:len(p)]
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	negLR := float64(c.NegLR)
	for i := range p {
		d := sign * g[i]
		// The conversion rounds the square, so the compiler cannot fuse
		// it into the add.
		si := s[i] + float32(d*d)
		s[i] = si
		q := d / (float32(math.Sqrt(float64(si))) + c.Eps)
		p[i] = float32(float64(p[i]) + negLR*float64(q))
	}
}

// SGDSparseSplit is SGDSparse on a split parameter (see SGDSplitStep): the
// named rows of the FP32 master that top and bottom stand for come out bit
// for bit as SGDSparse would leave them.
func SGDSparseSplit(top, bottom []uint16, rows SparseRows, c SGDConfig) {
	rows.check("SGDSparseSplit", len(top))
	if len(bottom) != len(top) {
		fail(ErrShape, "SGDSparseSplit", "top and bottom differ in length")
	}
	if c.Momentum != 0 {
		fail(ErrArgument, "SGDSparseSplit", "momentum needs the dense step")
	}
	// One step per chunk, not per row: the step escapes to the heap, and
	// a DLRM step's 53k rows each allocated one.
	rows.forRowsWith(sgdCost, func() func(k int) {
		s := &SGDSplitStep{SGDConfig: c}
		return func(k int) {
			lo, hi, g := rows.span(k)
			s.Top, s.Bottom, s.Grad = top[lo:hi], bottom[lo:hi], SplitGrad{F32: g}
			s.run(0, hi-lo)
		}
	}, u16Rows(top, rows.Dim), u16Rows(bottom, rows.Dim))
}

// AdagradSparseSplit is AdagradSparse on a split parameter, as
// SGDSparseSplit is SGDSparse.
func AdagradSparseSplit(top, bottom []uint16, sum []float32, rows SparseRows, c AdagradConfig) {
	rows.check("AdagradSparseSplit", len(top))
	if len(bottom) != len(top) || len(sum) != len(top) {
		fail(ErrShape, "AdagradSparseSplit", "top, bottom and sum differ in length")
	}
	checkSparseAdagrad("AdagradSparseSplit", c)
	rows.forRows(adagradCost, func(k int) {
		lo, hi, g := rows.span(k)
		sc := splitScratches.get()
		for a := lo; a < hi; a += splitSpan {
			b := min(a+splitSpan, hi)
			p := sc.p[:b-a]
			joinBF16Impl(p, top[a:b], bottom[a:b])
			adagradSparseSpanImpl(&c, p, g[a-lo:b-lo], sum[a:b])
			splitBF16Impl(top[a:b], bottom[a:b], p)
		}
		splitScratches.put(sc)
	}, u16Rows(top, rows.Dim), u16Rows(bottom, rows.Dim), f32Rows(sum, rows.Dim))
}
