package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// mergedCase is the tables of a merged lookup: a float32 or bfloat16
// table each (with its widened float32 copy), different row counts, bags
// of up to a dozen rows with repeats and empty ones.
type mergedCase struct {
	dim, bags int
	cases     []embCase
	bf16      [][]uint16 // nil for a float32 table
	wide      [][]float32
}

func newMergedCase(r *rand.Rand, dim, bags int, rows []int, bf16 []bool) mergedCase {
	m := mergedCase{dim: dim, bags: bags}
	for t, num := range rows {
		c := newEmbCase(r, num, dim, bags*6, bags)
		m.cases = append(m.cases, c)
		if bf16[t] {
			bf, wide := bf16Table(c)
			m.bf16, m.wide = append(m.bf16, bf), append(m.wide, wide)
		} else {
			m.bf16, m.wide = append(m.bf16, nil), append(m.wide, c.weight)
		}
	}
	return m
}

// tables returns the call's tables writing into outs.
func (m mergedCase) tables(outs [][]float32) []MergedBagTable {
	tables := make([]MergedBagTable, len(m.cases))
	for t, c := range m.cases {
		tables[t] = MergedBagTable{Weight: c.weight, WeightBF16: m.bf16[t], Idx: c.idx, Offsets: c.offsets, Out: outs[t]}
	}
	return tables
}

// checkBF16Out runs the merged lookup of m with bfloat16 outputs
// (OutBF16) and checks each against want, its float32 bags, rounded to
// bfloat16; nothing outside the outputs may be written.
func checkBF16Out(t *testing.T, name string, l Level, m mergedCase, mean bool, threads int, want [][]float32) {
	t.Helper()
	const pad, guard = 19, 0xdead
	tables := m.tables(make([][]float32, len(m.cases)))
	bufs := make([][]uint16, len(tables))
	for k := range tables {
		bufs[k] = make([]uint16, m.bags*m.dim+2*pad)
		for i := range bufs[k] {
			bufs[k][i] = guard
		}
		tables[k].OutBF16 = bufs[k][pad : len(bufs[k])-pad]
	}
	withThreads(threads, func() { mergedBagSum(l, m.dim, tables, mean, 1<<20) })
	for k, b := range bufs {
		sameBits16(t, fmt.Sprintf("%s table %d bfloat16 out", name, k), tables[k].OutBF16, rounded16(want[k]))
		for i := range pad {
			if b[i] != guard || b[len(b)-1-i] != guard {
				t.Fatalf("%s table %d: bfloat16 out written outside its bounds", name, k)
			}
		}
	}
}

// withThreads runs f with the worker pool splitting work n ways.
func withThreads(n int, f func()) {
	workers.start()
	saved := workers.threads
	workers.threads = n
	defer func() { workers.threads = saved }()
	f()
}

// TestMergedEmbeddingBag checks the merged kernel against one
// single-table kernel per table, bit for bit, at every level and 1, 2 and
// 3 threads: float32 tables against EmbeddingBagSum, bfloat16 ones
// against EmbeddingBagSum on the widened table and, rounded, against
// EmbeddingBagSumBF16.
func TestMergedEmbeddingBag(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(91, 92))
		sum := pick(l, bagSumVariants)
		for _, dim := range []int{1, 8, 33} {
			m := newMergedCase(r, dim, 64, []int{7, 50, 300, 1000, 1}, []bool{false, true, false, true, true})
			for _, mean := range []bool{false, true} {
				want := make([][]float32, len(m.cases))
				for k, c := range m.cases {
					want[k] = make([]float32, m.bags*dim)
					sum(dim, c.idx, c.offsets, m.wide[k], nil, mean, want[k])
					if m.bf16[k] != nil {
						got := make([]uint16, m.bags*dim)
						EmbeddingBagSumBF16(dim, c.idx, c.offsets, m.bf16[k], nil, mean, got)
						sameBits16(t, fmt.Sprintf("table %d bfloat16", k), got, rounded16(want[k]))
					}
				}
				for _, threads := range []int{1, 2, 3} {
					name := fmt.Sprintf("dim=%d mean=%v threads=%d", dim, mean, threads)
					outs := make([][]float32, len(m.cases))
					oks := make([]func(), len(m.cases))
					for k := range outs {
						outs[k], oks[k] = guarded(t, m.bags*dim)
						poolGarbage(outs[k])
					}
					work := 1 << 20 // always worth splitting
					withThreads(threads, func() { mergedBagSum(l, dim, m.tables(outs), mean, work) })
					for k := range outs {
						oks[k]()
						sameBits32(t, fmt.Sprintf("%s table %d", name, k), outs[k], want[k])
					}
					checkBF16Out(t, name, l, m, mean, threads, want)
				}
			}
		}
	})
}

// TestMergedEmbeddingBagOneHot checks DLRM's layout, every bag one row,
// where runs of bags go through the gathers, against the reference
// EmbeddingBagSum bit for bit: tables of either type, widths with vector
// tails, bag counts that end mid-chunk, a table whose one-row runs are
// broken by empty and longer bags (so that EmbeddingBagSum's bag loop
// takes that chunk), and rows with negative zeros (which the bags make
// +0).
func TestMergedEmbeddingBagOneHot(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(95, 96))
		for _, dim := range []int{1, 2, 7, 16, 17, 33, 64, 100} {
			const bags = 75
			m := newMergedCase(r, dim, bags, []int{40, 300, 1, 90}, []bool{false, true, true, false})
			for k := range m.cases {
				c := &m.cases[k]
				c.idx = c.idx[:bags]
				for b := range c.offsets {
					c.offsets[b] = int64(b)
				}
				for i := range c.weight {
					if r.IntN(8) == 0 {
						c.weight[i] = F32FromBF16(0x8000)
					}
				}
				if m.bf16[k] != nil {
					m.bf16[k], m.wide[k] = bf16Table(*c)
				}
			}
			// Table 3: bag 40 empty, bag 41 of two rows.
			c := &m.cases[3]
			c.offsets[41] = 40
			for _, mean := range []bool{false, true} {
				for _, threads := range []int{1, 2, 3} {
					outs := make([][]float32, len(m.cases))
					oks := make([]func(), len(m.cases))
					for k := range outs {
						outs[k], oks[k] = guarded(t, bags*dim)
						poolGarbage(outs[k])
					}
					withThreads(threads, func() { mergedBagSum(l, dim, m.tables(outs), mean, 1<<20) })
					name := fmt.Sprintf("dim=%d mean=%v threads=%d", dim, mean, threads)
					want := make([][]float32, len(m.cases))
					for k, c := range m.cases {
						want[k] = make([]float32, bags*dim)
						bagSumGeneric(dim, c.idx, c.offsets, m.wide[k], nil, mean, want[k])
						oks[k]()
						sameBits32(t, fmt.Sprintf("%s table %d", name, k), outs[k], want[k])
					}
					checkBF16Out(t, name, l, m, mean, threads, want)
				}
			}
		}
	})
}

// TestBagGather checks each level's gathers against the references on
// widths with every kind of vector tail, with guards around the output,
// while they prefetch fewer, as many or more rows than they copy.
func TestBagGather(t *testing.T) {
	r := rand.New(rand.NewPCG(97, 98))
	forEachLevel(t, func(t *testing.T, l Level) {
		f32, bf16 := pick(l, bagGatherF32Variants), pick(l, bagGatherBF16Variants)
		for _, dim := range []int{1, 3, 8, 15, 16, 31, 32, 33, 63, 64, 65, 79, 130} {
			c := newEmbCase(r, 50, dim, 0, 0)
			for i := range c.weight {
				if r.IntN(6) == 0 {
					c.weight[i] = F32FromBF16(0x8000)
				}
			}
			bf, wide := bf16Table(c)
			pf := normRandom(r, 40*16, 0)
			for _, n := range []int{0, 1, 5, 13} {
				idx := make([]int64, n)
				for i := range idx {
					idx[i] = int64(r.IntN(50))
				}
				for _, pfn := range []int{0, n / 2, n, n + 3} {
					pfIdx := make([]int64, pfn)
					for i := range pfIdx {
						pfIdx[i] = int64(r.IntN(40))
					}
					name := fmt.Sprintf("dim=%d rows=%d prefetched=%d", dim, n, pfn)
					want := make([]float32, n*dim)
					bagGatherF32Go(want, c.weight, idx, dim, nil, nil, 0)
					got, ok := guarded(t, n*dim)
					f32(got, c.weight, idx, dim, pf, pfIdx, 16)
					ok()
					sameBits32(t, name+" float32", got, want)
					bagGatherBF16Go(want, bf, idx, dim, nil, nil, 0)
					got, ok = guarded(t, n*dim)
					bf16(got, bf, idx, dim, pf, pfIdx, 16)
					ok()
					sameBits32(t, name+" bfloat16", got, want)
					bagGatherF32Go(got, wide, idx, dim, nil, nil, 0)
					sameBits32(t, name+" widened", got, want)
					for i, v := range want {
						if v == 0 && math.Signbit(float64(v)) {
							t.Fatalf("%s: element %d is -0", name, i)
						}
					}
				}
			}
		}
	})
}

func TestMergedEmbeddingBagEdges(t *testing.T) {
	// No tables, and tables of no bags: nothing to do.
	MergedEmbeddingBag(4, nil, false)
	MergedEmbeddingBag(4, []MergedBagTable{{Weight: make([]float32, 8)}, {WeightBF16: make([]uint16, 4)}}, true)
	// An empty bag is zeros in either mode.
	out := []float32{9, 9, 9, 9}
	MergedEmbeddingBag(2, []MergedBagTable{{Weight: []float32{1, 2, 3, 4}, Idx: []int64{1, 1}, Offsets: []int64{0, 2}, Out: out}}, true)
	if fmt.Sprint(out) != "[3 4 0 0]" {
		t.Errorf("mean with an empty last bag: %v, want [3 4 0 0]", out)
	}
	// A bag of one bfloat16 row is that row widened, as a float32 table's
	// is, down to the sign of a zero.
	negZero := F32FromBF16(0x8000)
	f32Out, bf16Out := make([]float32, 4), make([]float32, 4)
	MergedEmbeddingBag(2, []MergedBagTable{
		{Weight: []float32{negZero, 1.5, -2, negZero}, Idx: []int64{0, 1}, Offsets: []int64{0, 1}, Out: f32Out},
		{WeightBF16: []uint16{0x8000, 0x3fc0, 0xc000, 0x8000}, Idx: []int64{0, 1}, Offsets: []int64{0, 1}, Out: bf16Out},
	}, false)
	sameBits32(t, "one-row bags of a bfloat16 table", bf16Out, f32Out)
	sameBits32(t, "one-row bags of a float32 table", f32Out, []float32{0, 1.5, -2, 0})
	w := make([]float32, 6)
	checkMisuse(t, []misuseCase{
		{"bag counts differ", ErrShape, func() {
			MergedEmbeddingBag(2, []MergedBagTable{{Weight: w, Offsets: []int64{0}, Out: w}, {Weight: w, Offsets: []int64{0, 0}, Out: w}}, false)
		}},
		{"short out", ErrShape, func() {
			MergedEmbeddingBag(2, []MergedBagTable{{Weight: w, Offsets: []int64{0, 0}, Out: w[:3]}}, false)
		}},
		{"index outside", ErrIndex, func() {
			MergedEmbeddingBag(2, []MergedBagTable{{Weight: w, Idx: []int64{3}, Offsets: []int64{0}, Out: w[:2]}}, false)
		}},
		{"index outside a bfloat16 table", ErrIndex, func() {
			MergedEmbeddingBag(2, []MergedBagTable{{WeightBF16: make([]uint16, 6), Idx: []int64{3}, Offsets: []int64{0}, Out: w[:2]}}, false)
		}},
	})
}

func TestMergedEmbeddingBagDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	r := rand.New(rand.NewPCG(93, 94))
	m := newMergedCase(r, 64, 512, []int{5000, 300, 2000}, []bool{false, true, false})
	outs := [][]float32{make([]float32, 512*64), make([]float32, 512*64), make([]float32, 512*64)}
	tables := m.tables(outs)
	f := func() { MergedEmbeddingBag(64, tables, true) }
	f()
	if a := testing.AllocsPerRun(5, f); a != 0 {
		t.Errorf("MergedEmbeddingBag allocates %v times per call", a)
	}
}
