package autograd

import (
	"cmp"
	"math/bits"
	"slices"
	"sync"
)

// SparseGrad is a row-sparse gradient of a 2-D [num, dim] tensor, what
// PyTorch keeps for an embedding table looked up with sparse=True: only the
// rows that were read carry a gradient. It is always coalesced: Indices are
// sorted and unique, and Values holds row k's gradient for row Indices[k],
// duplicates already summed.
//
// A tensor holding a SparseGrad has no dense Grad (Grad returns nil);
// SparseGrad returns it, and Dense turns it into the [num, dim] tensor a
// dense gradient would have been. Make one with NewSparseGrad, which also
// records num.
type SparseGrad struct {
	// Indices are the rows that have a gradient, ascending, each once.
	Indices []int64
	// Values is a contiguous float32 [len(Indices), dim] tensor.
	Values *Tensor

	num int // rows of the dense tensor
}

// NewSparseGrad returns the coalesced row-sparse gradient of a [num, dim]
// tensor whose row indices[k] receives values' row k: indices may repeat
// and come in any order; rows of a repeated index are summed in float32 in
// the order they appear, as PyTorch's coalesce() sums them. values must be
// a float32 [len(indices), dim] tensor and every index must lie in
// [0, num).
func NewSparseGrad(num int, indices []int64, values *Tensor) *SparseGrad {
	const op = "NewSparseGrad"
	checkF32(op, "values", values)
	if values.NDim() != 2 || values.shape[0] != len(indices) {
		failShape(op, "values have shape %v, want [%d, dim] (one row per index)", values.shape, len(indices))
	}
	numel(op, []int{num, values.shape[1]}) // the dense shape Dense will allocate
	for i, v := range indices {
		if v < 0 || v >= int64(num) {
			failIndex(op, "index %d (at position %d) is out of range for a tensor of %d rows", v, i, num)
		}
	}
	dim := values.shape[1]
	src := values.ContiguousFloat32s()
	return coalesceRows(num, dim, indices, func(i int) []float32 { return src[i*dim : (i+1)*dim] })
}

// coalesceRows builds the SparseGrad of a [num, dim] tensor in which
// position i of idx adds row(i) into row idx[i], in order, in memory of
// its own.
func coalesceRows(num, dim int, idx []int64, row func(i int) []float32) *SparseGrad {
	c := coalescers.Get().(*coalescer)
	rows, vals := c.rows, c.vals
	c.rows, c.vals = nil, nil
	g := c.coalesce(num, dim, idx, row)
	c.rows, c.vals = rows, vals // g keeps its own
	coalescers.Put(c)
	g.Indices = slices.Clip(g.Indices)
	return g
}

// coalescers hold the memory of coalescing: scratch for coalesceRows, and
// the gradients that sparse updates take, one lookup's at a time. Reusing
// one coalescer for every table keeps its values in the cache from the
// sums to the update that reads them; a coalescer per table left 26 DLRM
// tables' values to be fetched from memory again each step.
var coalescers = sync.Pool{New: func() any { return new(coalescer) }}

// A coalescer holds the memory of the SparseGrads it builds, which the
// next build reuses: a fused table's update takes one per lookup, every
// step, and fresh buffers of that size cost more in page faults and
// zeroing than the sums do.
type coalescer struct {
	keys, tmp []uint64
	slots     []int
	rows      []int64
	vals      []float32
}

// Keys pack a row and a position when both fit: the row above keyPosBits
// bits, the position below.
const keyPosBits = 24

// coalesce is coalesceRows into c's memory: the result is valid until the
// next call. It sorts the positions by row (and position) to number the
// rows in order, then walks the positions in order, copying each row's
// first value and adding the others: every sum in the lookup's order, each
// written once, the rows read in the order they lie in memory (a gradient
// too large for the caches streams in, where reading it in row order
// missed on every row).
func (c *coalescer) coalesce(num, dim int, idx []int64, row func(i int) []float32) *SparseGrad {
	n := len(idx)
	keys := c.keys[:0]
	packed := n < 1<<keyPosBits && uint64(num) < 1<<(64-keyPosBits)
	if packed {
		for i, r := range idx {
			keys = append(keys, uint64(r)<<keyPosBits|uint64(i))
		}
		keys, c.tmp = sortRowKeys(keys, slices.Grow(c.tmp[:0], n)[:n], bits.Len64(uint64(num-1)))
	} else { // positions, sorted stably by row
		for i := range idx {
			keys = append(keys, uint64(i))
		}
		slices.SortStableFunc(keys, func(a, b uint64) int { return cmp.Compare(idx[a], idx[b]) })
	}
	// slots[i] is the number of position i's row among the rows, its
	// complement where i is the row's first position.
	rows, slots := slices.Grow(c.rows[:0], n), slices.Grow(c.slots[:0], n)[:n]
	for _, key := range keys {
		i := int(key)
		if packed {
			i = int(key & (1<<keyPosBits - 1))
		}
		if r := idx[i]; len(rows) == 0 || rows[len(rows)-1] != r {
			rows = append(rows, r)
			slots[i] = ^(len(rows) - 1)
		} else {
			slots[i] = len(rows) - 1
		}
	}
	vals := c.vals[:0]
	if nv := len(rows) * dim; cap(vals) >= nv {
		vals = vals[:nv]
	} else {
		vals = uninitF32(nv) // every element is written below
	}
	for i, k := range slots {
		if k < 0 {
			copy(vals[^k*dim:(^k+1)*dim], row(i))
			continue
		}
		dst := vals[k*dim : (k+1)*dim]
		for j, x := range row(i) {
			dst[j] += x
		}
	}
	c.keys, c.slots, c.rows, c.vals = keys, slots, rows, vals
	return &SparseGrad{Indices: rows, Values: FromFloat32(vals, len(rows), dim), num: num}
}

// radixBits bounds the digit of sortRowKeys: 2¹¹ counters stay in L1.
const radixBits = 11

// sortRowKeys sorts packed keys whose rows have rowBits bits by row,
// stably, so positions ascend within a row: what slices.Sort gives on the
// whole keys. A least-significant-digit radix sort does it in a few passes
// of the row bits (two for 100k rows) where a comparison sort mispredicts
// a branch on most of its log₂ n compares, three to seven times slower on
// a DLRM table's 2048 keys. Short slices, where the counters would cost
// more than the keys, take the comparison sort. tmp, as long as keys, is
// scratch: the sorted keys are in one of the two, returned first, and the
// other is returned as spare.
func sortRowKeys(keys, tmp []uint64, rowBits int) (sorted, spare []uint64) {
	if len(keys) < 256 {
		slices.Sort(keys)
		return keys, tmp
	}
	passes := max(1, (rowBits+radixBits-1)/radixBits)
	digit := (rowBits + passes - 1) / passes
	mask := uint64(1)<<digit - 1
	var count [1 << radixBits]int
	for shift := keyPosBits; shift < keyPosBits+rowBits; shift += digit {
		clear(count[:mask+1])
		for _, k := range keys {
			count[k>>shift&mask]++
		}
		sum := 0
		for d, c := range count[:mask+1] {
			count[d], sum = sum, sum+c
		}
		for _, k := range keys {
			d := k >> shift & mask
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys, tmp
}

// Shape returns the shape of the dense tensor the gradient belongs to,
// [num, dim].
func (s *SparseGrad) Shape() []int { return []int{s.num, s.Values.shape[1]} }

// Dense returns the gradient as a float32 [num, dim] tensor, zero in the
// rows without a gradient.
func (s *SparseGrad) Dense() *Tensor {
	dim := s.Values.shape[1]
	d := Zeros(s.num, dim)
	dd, vd := d.Float32s(), s.Values.Float32s()
	for k, r := range s.Indices {
		copy(dd[int(r)*dim:(int(r)+1)*dim], vd[k*dim:(k+1)*dim])
	}
	return d
}

// sparseEntries is a leaf's sparse gradient as Backward accumulates it:
// row idx[k] receives vals[k·dim:(k+1)·dim], rows repeating, in the order
// the lookups produced them (PyTorch's uncoalesced gradient). Coalescing
// once, when the gradient is read, sums each row's entries in that order,
// as PyTorch's coalesce() does for one lookup. (For several, PyTorch first
// adds the uncoalesced gradients with a merge meant for sorted indices,
// which reorders those sums; Kiln keeps lookup order.)
type sparseEntries struct {
	num, dim int
	idx      []int64
	vals     []float32
	// coalesced caches the coalesced gradient; nil when entries were
	// added since. Its memory is then also idx and vals.
	coalesced *SparseGrad
}

func (e *sparseEntries) coalesce() *SparseGrad {
	if e.coalesced == nil {
		dim := e.dim
		e.coalesced = coalesceRows(e.num, dim, e.idx, func(i int) []float32 { return e.vals[i*dim : (i+1)*dim] })
		e.idx, e.vals = e.coalesced.Indices, e.coalesced.Values.Float32s()
	}
	return e.coalesced
}

// SparseGrad returns the row-sparse gradient accumulated into a leaf by
// Backward through sparse embedding lookups (EmbeddingSparse,
// EmbeddingBagSparse), or nil. The result is coalesced and is t's own
// gradient, not a copy.
func (t *Tensor) SparseGrad() *SparseGrad {
	if t.sparseGrad == nil {
		return nil
	}
	return t.sparseGrad.coalesce()
}

// SetSparseUpdate makes Backward hand each sparse gradient a lookup gives
// t (a table read by EmbeddingSparse, EmbeddingBagSparse or a sparse
// MergedEmbeddingBag) to f, coalesced, instead of accumulating it: the
// hook of optimizers that update a table inside the backward pass (see
// optim.FuseSparse), so that no gradient waits for Step. f runs inside
// the op's backward, once per lookup of t; the SparseGrad is valid until
// f returns (later lookups, of any table, reuse its memory), so f must
// copy what it keeps.
// nil restores accumulation. Dense gradients accumulate as always.
func (t *Tensor) SetSparseUpdate(f func(g *SparseGrad)) { t.sparseUpdate = f }

// SetSparseGrad replaces t's gradient with g, which must have t's shape;
// nil clears it. t must be a 2-D float32 or bfloat16 tensor (a split
// parameter's Top is bfloat16; its gradient rows stay float32). Setting a
// sparse gradient drops a dense one.
func (t *Tensor) SetSparseGrad(g *SparseGrad) {
	if g == nil {
		t.sparseGrad = nil
		return
	}
	checkSparseTarget("SetSparseGrad", t, g.Shape())
	t.grad = nil
	t.sparseGrad = coalescedEntries(g)
}

// coalescedEntries returns the entries that are g.
func coalescedEntries(g *SparseGrad) *sparseEntries {
	return &sparseEntries{num: g.num, dim: g.Values.shape[1], idx: g.Indices, vals: g.Values.Float32s(), coalesced: g}
}

// checkSparseTarget panics unless a sparse gradient of shape can be the
// gradient of t.
func checkSparseTarget(op string, t *Tensor, shape []int) {
	if t.dtype != Float32 && t.dtype != BFloat16 {
		failDType(op, "a sparse gradient needs a float32 or bfloat16 tensor, not %v", t.dtype)
	}
	if !sameShape(shape, t.shape) {
		failShape(op, "sparse gradient of shape %v does not match tensor %v", shape, t.shape)
	}
}

// accumulateSparse appends to leaf t's sparse gradient, t being a float32
// or bfloat16 [num, dim] table (the values are float32 either way), the
// entries of a lookup: position i of idx sends
// row(i) to row idx[i], positions whose index is skip (padding_idx) none.
// The rows are copied: they may live in a gradient buffer the tape reuses.
//
// A leaf holds one kind of gradient: PyTorch would densify a mix, but a
// dense [num, dim] gradient is what a sparse lookup exists to avoid, so a
// mix is an error naming the op that caused it.
func accumulateSparse(op string, t *Tensor, idx []int64, skip int64, row func(i int) []float32) {
	if t.grad != nil {
		failGrad(op, "tensor %v already has a dense gradient; it cannot also receive a sparse one (use one kind of lookup per parameter, or call ZeroGrad between them)", t.shape)
	}
	idx, row = dropSkipped(idx, skip, row)
	switch {
	case t.sparseUpdate != nil:
		// This lookup's gradient alone, coalesced as SparseGrad would
		// coalesce it had it accumulated into an empty gradient, but
		// straight from the rows: no copy of them waits for the sums.
		c := coalescers.Get().(*coalescer)
		t.sparseUpdate(c.coalesce(t.shape[0], t.shape[1], idx, row))
		coalescers.Put(c)
	case t.sparseGrad == nil:
		// The same for the first lookup since ZeroGrad: gathering its
		// rows as entries only to coalesce them when read copied each
		// row twice more, into memory zeroed for it. Coalesced entries
		// are entries too: a later lookup's rows add to the same sums
		// in the same order.
		t.sparseGrad = coalescedEntries(coalesceRows(t.shape[0], t.shape[1], idx, row))
	default:
		t.sparseGrad.add(idx, row)
	}
}

// dropSkipped returns a lookup's indices without the positions whose
// index is skip, and the rows of those kept.
func dropSkipped(idx []int64, skip int64, row func(i int) []float32) ([]int64, func(k int) []float32) {
	if !slices.Contains(idx, skip) {
		return idx, row
	}
	var at []int
	kept := make([]int64, 0, len(idx))
	for i, r := range idx {
		if r != skip {
			at, kept = append(at, i), append(kept, r)
		}
	}
	return kept, func(k int) []float32 { return row(at[k]) }
}

// add appends the entries of one lookup: position i of idx sends row(i)
// to row idx[i].
func (e *sparseEntries) add(idx []int64, row func(i int) []float32) {
	e.coalesced = nil
	e.idx, e.vals = slices.Clip(e.idx), slices.Clip(e.vals) // never write into a returned SparseGrad
	// Room for every entry at once: growing by appends copied the rows
	// over and over (a DLRM table's 2048 rows of 64 took a tenth of a
	// training step).
	e.idx, e.vals = slices.Grow(e.idx, len(idx)), slices.Grow(e.vals, len(idx)*e.dim)
	for i, r := range idx {
		e.idx = append(e.idx, r)
		e.vals = append(e.vals, row(i)...)
	}
}

// errMixedDense is the panic of accumulateLeaf for a leaf that holds a
// sparse gradient.
func errMixedDense(t *Tensor) {
	failGrad("Backward", "tensor %v has a sparse gradient (from a sparse embedding lookup); it cannot also receive a dense one (use one kind of lookup per parameter, or call ZeroGrad between them)", t.shape)
}
