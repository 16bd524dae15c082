package kernels

import (
	"fmt"
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
					withThreads(threads, func() { mergedBagSum(kitAt(l), dim, m.tables(outs), mean, work) })
					for k := range outs {
						oks[k]()
						sameBits32(t, fmt.Sprintf("%s table %d", name, k), outs[k], want[k])
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
