package kernels

// DLRM looks up one bag per sample in each of its 26 or so tables. Done as
// one EmbeddingBagSum per table, each call splits a single table's bags
// across the workers and waits for them: with a batch of a few thousand
// bags of one row each, a table's share is too small to keep the workers
// busy, and the waits add up. MergedEmbeddingBag hands the workers the
// bags of all the tables as one range instead.

// MergedBagTable is one table of a MergedEmbeddingBag call: its weights,
// its indices with the start of each bag, and where its bags' results go.
type MergedBagTable struct {
	// Weight is a float32 table of rows of dim; WeightBF16 a bfloat16 one,
	// used instead when non-nil.
	Weight     []float32
	WeightBF16 []uint16
	// Idx are the rows looked up; Offsets the start of each bag in Idx, as
	// EmbeddingBagSum takes them (bag b runs to Offsets[b+1], the last to
	// the end of Idx).
	Idx, Offsets []int64
	// Out receives the bags, [len(Offsets), dim].
	Out []float32
}

// MergedEmbeddingBag writes to row b of each table's Out what
// EmbeddingBagSum writes for that table's bag b: the sum (or with mean
// the average) of the table rows the bag names, accumulated in float64,
// zeros for an empty bag. A bfloat16 table's rows are widened as they are
// read and summed alike, so its float32 result is bit for bit that of the
// float32 kernel on the widened table (EmbeddingBagSumBF16's before its
// rounding to bfloat16). Every table has the same number of bags and the
// same dim.
//
// Each bag is summed by one worker with the same code whatever the
// thread count, so the bits do not depend on it. Nothing is allocated.
func MergedEmbeddingBag(dim int, tables []MergedBagTable, mean bool) {
	const op = "MergedEmbeddingBag"
	if len(tables) == 0 {
		return
	}
	bags := len(tables[0].Offsets)
	work := 0
	for t := range tables {
		tb := &tables[t]
		if len(tb.Offsets) != bags {
			fail(ErrShape, op, "table %d has %d bags, table 0 has %d", t, len(tb.Offsets), bags)
		}
		if len(tb.Out) < bags*dim {
			fail(ErrShape, op, "table %d: out has %d elements, needs %d", t, len(tb.Out), bags*dim)
		}
		if tb.WeightBF16 == nil && dim > 0 {
			// The vector kits read float32 rows without Go's bounds checks.
			checkRows(op, tb.Idx, len(tb.Weight)/dim)
		}
		work += (len(tb.Idx) + bags) * dim
	}
	mergedBagSum(kitAt(level), dim, tables, mean, work)
}

// checkRows fails unless every index lies in [0, rows).
func checkRows(op string, idx []int64, rows int) {
	for _, r := range idx {
		if uint64(r) >= uint64(rows) {
			fail(ErrIndex, op, "index %d outside a table of %d rows", r, rows)
		}
	}
}

type mergedArgs struct {
	k      *vecKit
	dim    int
	bags   int
	mean   bool
	tables []MergedBagTable
}

var mergedJobs parPool[mergedArgs]

// mergedBagSum is MergedEmbeddingBag on kit k: the workers split the
// range of (table, bag) pairs, table-major.
func mergedBagSum(k *vecKit, dim int, tables []MergedBagTable, mean bool, work int) {
	bags := len(tables[0].Offsets)
	a := mergedArgs{k: k, dim: dim, bags: bags, mean: mean, tables: tables}
	mergedJobs.run(len(tables)*bags, work, a, mergedBags)
}

// mergedBags sums the pairs [lo, hi), each table's run of them through
// the single-table kernels' bag loops.
func mergedBags(a *mergedArgs, lo, hi int) {
	for t := lo / a.bags; t*a.bags < hi; t++ {
		b0, b1 := max(lo-t*a.bags, 0), min(hi-t*a.bags, a.bags)
		tb := &a.tables[t]
		if tb.WeightBF16 == nil {
			e := embArgs{k: a.k, dim: a.dim, idx: tb.Idx, offsets: tb.Offsets, weight: tb.Weight, mean: a.mean, out: tb.Out}
			bagSumBags(&e, b0, b1)
			continue
		}
		e := embBF16Args{dim: a.dim, idx: tb.Idx, offsets: tb.Offsets, weight: tb.WeightBF16, mean: a.mean}
		buf := getScratch64(a.dim)
		pf := u16Rows(tb.WeightBF16, a.dim)
		next, limit := int(tb.Offsets[b0]), bagEnd(tb.Offsets, b1-1, len(tb.Idx))
		for b := b0; b < b1; b++ {
			s, end := int(tb.Offsets[b]), bagEnd(tb.Offsets, b, len(tb.Idx))
			// The rows are scattered over a table far larger than the
			// caches: fetch those of the next lookups while this one sums.
			if to := min(end+embPrefetch, limit); pf.dim > 0 && (to-next >= 8 || (to == limit && to > next)) {
				prefetchRowsImpl(pf.f32, tb.Idx[next:to], pf.dim)
				next = to
			}
			out := tb.Out[b*a.dim : (b+1)*a.dim]
			if end-s == 1 {
				// One row, summed or averaged, is the row itself, but
				// for the sign of a zero: sums start from +0.
				r := int(tb.Idx[s])
				bf16ToF32Impl(out, tb.WeightBF16[r*a.dim:(r+1)*a.dim])
				for j := range out {
					out[j] += 0
				}
				continue
			}
			a.k.storeScaled(out, buf.s, e.sumBag(b, buf.s))
		}
		buf.put()
	}
}
