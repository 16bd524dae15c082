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
	// Out receives the bags, [len(Offsets), dim]; OutBF16, used instead
	// when non-nil, receives them rounded to bfloat16 as F32ToBF16
	// rounds.
	Out     []float32
	OutBF16 []uint16
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
// Each bag is summed by one worker, and a bag gives the same bits
// whichever worker and code path (see mergedBags) takes it, so they do not
// depend on the thread count. Nothing is allocated.
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
		if n := max(len(tb.Out), len(tb.OutBF16)); n < bags*dim || tb.OutBF16 != nil && len(tb.OutBF16) < bags*dim {
			fail(ErrShape, op, "table %d: out has %d elements, needs %d", t, n, bags*dim)
		}
		if dim > 0 {
			// The gathers and vector kits read rows without Go's bounds
			// checks.
			rows := len(tb.Weight) / dim
			if tb.WeightBF16 != nil {
				rows = len(tb.WeightBF16) / dim
			}
			checkRows(op, tb.Idx, rows)
		}
		work += (len(tb.Idx) + bags) * dim
	}
	mergedBagSum(level, dim, tables, mean, work)
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
	f32    gatherF32Func
	bf16   gatherBF16Func
	narrow func(dst []uint16, src []float32)
	dim    int
	bags   int
	mean   bool
	tables []MergedBagTable
}

var mergedJobs parPool[mergedArgs]

// mergedBagSum is MergedEmbeddingBag at level l: the workers split the
// range of (table, bag) pairs, table-major.
func mergedBagSum(l Level, dim int, tables []MergedBagTable, mean bool, work int) {
	bags := len(tables[0].Offsets)
	a := mergedArgs{k: kitAt(l), f32: pick(l, bagGatherF32Variants), bf16: pick(l, bagGatherBF16Variants),
		narrow: f32ToBF16For(l), dim: dim, bags: bags, mean: mean, tables: tables}
	mergedJobs.run(len(tables)*bags, work, a, mergedBags)
}

// A gatherF32Func copies one-row bags: row idx[i] of table (rows of dim)
// plus +0 (a sum starts from +0) to row i of out, for every i. Meanwhile
// it prefetches rows pfIdx of pf (rows of pfDim), the next call's: the
// assembly interleaves the two, so that a steady stream of the random
// rows' cache and TLB misses is in flight while it copies.
type gatherF32Func func(out, table []float32, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)

// A gatherBF16Func is a gatherF32Func for a bfloat16 table, whose rows
// are widened.
type gatherBF16Func func(out []float32, table []uint16, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)

var (
	bagGatherF32Variants  = [levelCount]gatherF32Func{Generic: bagGatherF32Go, AVX2: bagGatherF32AVX2Impl, AVX512: bagGatherF32AVX512Impl}
	bagGatherBF16Variants = [levelCount]gatherBF16Func{Generic: bagGatherBF16Go, AVX2: bagGatherBF16AVX2Impl, AVX512: bagGatherBF16AVX512Impl}
)

// bagGatherF32Go is the reference gatherF32Func; it prefetches nothing.
func bagGatherF32Go(out, table []float32, idx []int64, dim int, _ []float32, _ []int64, _ int) {
	for i, r := range idx {
		o := out[i*dim : (i+1)*dim]
		for j, v := range table[int(r)*dim : (int(r)+1)*dim] {
			o[j] = v + 0
		}
	}
}

// bagGatherBF16Go is the reference gatherBF16Func.
func bagGatherBF16Go(out []float32, table []uint16, idx []int64, dim int, _ []float32, _ []int64, _ int) {
	for i, r := range idx {
		o := out[i*dim : (i+1)*dim]
		for j, v := range table[int(r)*dim : (int(r)+1)*dim] {
			o[j] = F32FromBF16(v) + 0
		}
	}
}

// A bagChunk is the bags [b0, b1) of table t, whose lookups are idx; one
// when each bag has one row.
type bagChunk struct {
	t, b0, b1 int
	idx       []int64
	one       bool
}

// chunk returns the chunk of bags from pair p on (below pair hi, within
// p's table): as many bags as look up at most embPrefetch rows together,
// or one bag that looks up more.
func (a *mergedArgs) chunk(p, hi int) bagChunk {
	t, b0 := p/a.bags, p%a.bags
	tb := &a.tables[t]
	end := min(a.bags, hi-t*a.bags)
	s := int(tb.Offsets[b0])
	c := bagChunk{t: t, b0: b0, b1: b0, one: true}
	for c.b1 < end {
		n := bagEnd(tb.Offsets, c.b1, len(tb.Idx)) - s
		if c.b1 > b0 && n > embPrefetch {
			break
		}
		c.b1++
		// With every earlier bag of one row, this one has one row when
		// the chunk's lookups number its bags.
		c.one = c.one && n == c.b1-b0
		c.idx = tb.Idx[s : s+n]
	}
	return c
}

// rows returns the prefetch view of c's table and the lookups of c to
// prefetch (none where the view is empty).
func (a *mergedArgs) rows(c bagChunk) (rowTable, []int64) {
	tb := &a.tables[c.t]
	pf := f32Rows(tb.Weight, a.dim)
	if tb.WeightBF16 != nil {
		pf = u16Rows(tb.WeightBF16, a.dim)
	}
	if pf.dim == 0 {
		return pf, nil
	}
	return pf, c.idx[:min(len(c.idx), embPrefetch)]
}

// mergedBags sums the pairs [lo, hi) a chunk at a time, each chunk while
// the rows of the next are fetched: runs of one-row bags (DLRM's one-hot
// lookups) through the gathers, other bags through the single-table
// kernels' bag loops.
func mergedBags(a *mergedArgs, lo, hi int) {
	c := a.chunk(lo, hi)
	pf, pfIdx := a.rows(c)
	a.k.prefetchRows(pf.f32, pfIdx, pf.dim)
	for {
		p := c.t*a.bags + c.b1
		var next bagChunk
		pf, pfIdx = rowTable{}, nil
		if p < hi {
			next = a.chunk(p, hi)
			pf, pfIdx = a.rows(next)
		}
		tb := &a.tables[c.t]
		var out []float32
		var buf *scratch[float32]
		if tb.OutBF16 != nil {
			// Bfloat16 bags are summed in float32 a chunk at a time.
			buf = getScratchF32((c.b1 - c.b0) * a.dim)
			out = buf.s
		} else {
			out = tb.Out[c.b0*a.dim : c.b1*a.dim]
		}
		switch {
		case c.one && tb.WeightBF16 == nil:
			a.f32(out, tb.Weight, c.idx, a.dim, pf.f32, pfIdx, pf.dim)
		case c.one:
			a.bf16(out, tb.WeightBF16, c.idx, a.dim, pf.f32, pfIdx, pf.dim)
		default:
			a.k.prefetchRows(pf.f32, pfIdx, pf.dim)
			a.sumBags(c, out)
		}
		if buf != nil {
			a.narrow(tb.OutBF16[c.b0*a.dim:c.b1*a.dim], out)
			buf.put()
		}
		if p >= hi {
			return
		}
		c = next
	}
}

// sumBags sums chunk c's bags one at a time into out, which holds the
// chunk's bags.
func (a *mergedArgs) sumBags(c bagChunk, out []float32) {
	tb := &a.tables[c.t]
	if tb.WeightBF16 == nil {
		// The chunk's bags alone: their offsets (positions in Idx),
		// Idx up to the chunk's last lookup, and out.
		end := bagEnd(tb.Offsets, c.b1-1, len(tb.Idx))
		e := embArgs{k: a.k, gather: a.f32, dim: a.dim, idx: tb.Idx[:end], offsets: tb.Offsets[c.b0:c.b1], weight: tb.Weight, mean: a.mean, out: out}
		bagSumBags(&e, 0, c.b1-c.b0)
		return
	}
	e := embBF16Args{dim: a.dim, idx: tb.Idx, offsets: tb.Offsets, weight: tb.WeightBF16, mean: a.mean}
	buf := getScratch64(a.dim)
	defer buf.put()
	pf := u16Rows(tb.WeightBF16, a.dim)
	next, limit := int(tb.Offsets[c.b0]), bagEnd(tb.Offsets, c.b1-1, len(tb.Idx))
	for b := c.b0; b < c.b1; b++ {
		s, end := int(tb.Offsets[b]), bagEnd(tb.Offsets, b, len(tb.Idx))
		// A bag of many rows: fetch those of the next lookups while
		// this one sums.
		if to := min(end+embPrefetch, limit); pf.dim > 0 && (to-next >= 8 || (to == limit && to > next)) {
			a.k.prefetchRows(pf.f32, tb.Idx[next:to], pf.dim)
			next = to
		}
		out := out[(b-c.b0)*a.dim : (b-c.b0+1)*a.dim]
		if end-s == 1 {
			// One row, summed or averaged, is the row itself, but
			// for the sign of a zero.
			a.bf16(out, tb.WeightBF16, tb.Idx[s:end], a.dim, nil, nil, 0)
			continue
		}
		a.k.storeScaled(out, buf.s, e.sumBag(b, buf.s))
	}
}
