package kernels

import (
	"math"
	"sync"
)

// A Chunk is a contiguous range [Lo, Hi) of a kernel call's work units
// that one worker computes.
type Chunk struct{ Lo, Hi int }

// Chunks returns how Parallel splits n units among workers: min(n,
// workers) contiguous chunks whose sizes differ by at most one, the
// larger first. (Chunks of ⌈n/workers⌉ left workers idle: 17 units on 16
// workers made 9 chunks of 2.)
func Chunks(n, workers int) []Chunk {
	parts := min(n, workers)
	if parts <= 0 {
		return nil
	}
	cs := make([]Chunk, parts)
	for i := range cs {
		cs[i].Lo, cs[i].Hi = chunkBounds(n, parts, i)
	}
	return cs
}

// chunkBounds returns chunk i of n units cut into parts balanced chunks.
func chunkBounds(n, parts, i int) (lo, hi int) {
	q, r := n/parts, n%parts
	lo = i*q + min(i, r)
	hi = lo + q
	if i < r {
		hi++
	}
	return lo, hi
}

// A gemmGrid cuts a product's C among workers: its mp row panels (of a
// micro-kernel tile's height) into gm balanced groups and its np column
// panels (gemmNR wide) into gn, and hands the gm·gn cells out row by row
// as Parallel's units. A worker's consecutive cells in one row group are
// computed as one block, so a grid of one row group is the column split
// (A packed once per worker) and one of one column group the row split.
// The grid changes which worker computes an element, never how: every
// element of C is the same sums in the same order at any grid.
type gemmGrid struct{ mp, np, gm, gn int }

// cells returns the number of units.
func (g gemmGrid) cells() int { return g.gm * g.gn }

// cell returns the row panels [p0, p1) and column panels [q0, q1) of
// cell u.
func (g gemmGrid) cell(u int) (p0, p1, q0, q1 int) {
	p0, p1 = chunkBounds(g.mp, g.gm, u/g.gn)
	q0, q1 = chunkBounds(g.np, g.gn, u%g.gn)
	return
}

// load returns the elements of C each worker computes under the grid,
// its largest and their mean.
func (g gemmGrid) load(workers int) (most, mean float64) {
	var total float64
	// chunkBounds, not Chunks: a plan is checked on every call it is
	// not cached for, and Chunks allocates.
	parts := min(g.cells(), workers)
	for c := range parts {
		lo, hi := chunkBounds(g.cells(), parts, c)
		var w float64
		for u := lo; u < hi; u++ {
			p0, p1, q0, q1 := g.cell(u)
			w += float64((p1 - p0) * (q1 - q0))
		}
		most, total = max(most, w), total+w
	}
	return most, total / float64(workers)
}

// gemmBalanced is the imbalance a partition may have: its busiest worker
// at most 1.25 times the mean (issue 23's bound).
const gemmBalanced = 1.25

// gemmPlanKey is a cached plan's question.
type gemmPlanKey struct{ mp, np, workers int }

var gemmPlans planCache[gemmPlanKey]

// gemmPlan returns the grid for mp row and np column panels on workers,
// given the one-dimensional split that packs least (splitN: columns).
// That split stands while it keeps every worker busy within what the
// tiles allow (gemmGoal), as it does for the shapes of two workers;
// otherwise (many workers, a short or narrow C) the grid with the fewest
// cells that does: the whole tiles, as one cell each, always do.
func gemmPlan(mp, np, workers int, splitN bool) gemmGrid {
	oneD := gemmGrid{mp, np, mp, 1}
	if splitN {
		oneD = gemmGrid{mp, np, 1, np}
	}
	if workers <= 2 || oneD.balanced(workers) {
		return oneD
	}
	k := gemmPlanKey{mp, np, workers}
	if g, ok := gemmPlans.load(k); ok {
		return g
	}
	best := gemmGrid{mp, np, mp, np}
	for gm := 1; gm <= mp; gm++ {
		for c := 1; c <= 8; c++ {
			gn := min(np, (c*workers+gm-1)/gm)
			if g := (gemmGrid{mp, np, gm, gn}); g.cells() < best.cells() && g.balanced(workers) {
				best = g
			}
		}
	}
	gemmPlans.store(k, best)
	return best
}

// gemmGoal is the busiest worker's share over the mean that a grid of
// mp×np tiles should reach on workers: gemmBalanced, or where the tiles
// are too few for that, what whole tiles allow (⌈T/W⌉ of them against a
// mean of T/W; finer shares need K split).
func gemmGoal(mp, np, workers int) float64 {
	t := float64(mp * np)
	return max(gemmBalanced, math.Ceil(t/float64(workers))/(t/float64(workers)))
}

// imbalance is the busiest worker's share over the mean.
func (g gemmGrid) imbalance(workers int) float64 {
	most, mean := g.load(workers)
	return most / mean
}

// balanced reports whether every worker gets a cell (where there are
// tiles enough) and the busiest is within gemmGoal of the mean.
func (g gemmGrid) balanced(workers int) bool {
	return g.cells() >= min(workers, g.mp*g.np) && g.imbalance(workers) <= gemmGoal(g.mp, g.np, workers)+1e-9
}

// gemmSplitCols reports whether t threads should share an m×n×k
// product's columns rather than its rows: the split that packs less per
// thread (B already packed, packedB, costs nothing to share).
func gemmSplitCols(m, n, k, mr int, packedB bool, t int) bool {
	np := (n + gemmNR - 1) / gemmNR
	mp := (m + mr - 1) / mr
	switch {
	case np < t:
		return false
	case mp < t:
		return true
	}
	blocks := func(rows int) int { return (rows + gemmMC - 1) / gemmMC }
	colsPer := (np + t - 1) / t * gemmNR
	rowsPer := (mp + t - 1) / t * mr
	costN := m * k
	costM := rowsPer * k
	if !packedB {
		costN += k * colsPer * blocks(m)
		costM += k * n * blocks(rowsPer)
	}
	return costN <= costM
}

// splitKCells returns the cells each part of an m×n×k product split into
// parts slices of K (step each) is cut into on t threads (partCells).
func splitKCells(m, n, k, step, mr, parts, t int) gemmGrid {
	w := (4*t + parts - 1) / parts
	return partCells((m+mr-1)/mr, (n+gemmNR-1)/gemmNR, k, step, parts, t, gemmSplitCols(m, n, step, mr, false, w))
}

// partCells returns the cells each of parts slices (step each) of a
// reduction of length k is cut into, their output being mp×np tiles, on t
// threads: none (one cell) where the parts share evenly, as at 1, 2, 4
// and 8 threads for a multiple of 8 parts; otherwise a plan for about 4
// units a thread (gemmPlan, splitN its one-dimensional choice), or, where
// that shares unevenly, the whole tiles.
func partCells(mp, np, k, step, parts, t int, splitN bool) gemmGrid {
	if parts%t == 0 {
		return gemmGrid{mp, np, 1, 1}
	}
	key := splitKKey{mp, np, k, step, parts, t, splitN}
	if g, ok := splitKPlans.load(key); ok {
		return g
	}
	g := gemmPlan(mp, np, (4*t+parts-1)/parts, splitN)
	if splitKImbalance(g, k, step, parts, t) > gemmBalanced {
		g = gemmGrid{mp, np, mp, np}
	}
	splitKPlans.store(key, g)
	return g
}

type splitKKey struct {
	mp, np, k, step, parts, t int
	splitN                    bool
}

var splitKPlans planCache[splitKKey]

// splitKImbalance is the busiest thread's share over the mean when
// parts × cells units (unit u: part u/cells' cell u%cells) go to t
// threads.
func splitKImbalance(cells gemmGrid, k, step, parts, t int) float64 {
	var most, total float64
	nc := cells.cells()
	chunks := min(parts*nc, t)
	for c := range chunks {
		lo, hi := chunkBounds(parts*nc, chunks, c)
		var load float64
		for u := lo; u < hi; u++ {
			p0, p1, q0, q1 := cells.cell(u % nc)
			load += float64(max(0, min(step, k-u/nc*step)) * (p1 - p0) * (q1 - q0))
		}
		most, total = max(most, load), total+load
	}
	return most / (total / float64(t))
}

// gemmSplitK returns how many parts to cut K into, or 1. A product with a
// small C and a long K (a convolution's weight gradient: channels ×
// kernel taps, summed over every pixel of the batch) splits badly by rows
// or columns: each thread would pack the whole of the long operand it
// shares. Cut along K instead, each part packs only its own slice of
// both; the cost is a partial C per extra part and one pass to add them.
//
// The parts depend on the shape alone, slabs of gemmKSlab, and a product
// that splits does so on one thread too: the sums, and so the bits, are
// the same at every thread count. (One part per thread made a weight
// gradient's bits depend on KILN_NUM_THREADS.)
func gemmSplitK(m, n, k int) int {
	if m*n > gemmSplitKMaxC || k < 4*max(m, n) || k < 2*gemmKSlab || m*n*k < gemmSerialWork {
		return 1
	}
	// A multiple of 8 parts shares evenly among 1, 2, 4 or 8 threads (9
	// parts on 2 threads left one with 5: 11% slower).
	parts := ((k+gemmKSlab-1)/gemmKSlab + 7) / 8 * 8
	return min(parts, (gemmSplitKMaxPartial/(m*n)+1)/8*8)
}

// gemmSplitKMaxC bounds the C of a K split (floats): 1 MiB.
const gemmSplitKMaxC = 1 << 18

// gemmKSlab is the most K of one part of a split, four K blocks (a part
// has at least one: k ≥ 2 slabs makes 8 parts of at least gemmKC);
// gemmSplitKMaxPartial bounds the partial Cs of a split, 16 MiB in all
// (at least 16 parts' worth for the largest C that splits).
const (
	gemmKSlab            = 4 * gemmKC
	gemmSplitKMaxPartial = 1 << 22
)

// gemmWorkers returns how many of threads workers an m×n×k product (on
// tiles mr rows high) is shared among: all of them for a large product,
// but none with less than gemmMinShare of it, and one below
// gemmSerialWork. (A 2M multiply-add DLRM layer on 64 workers is 0.3 µs
// of arithmetic each, less than the caller spends handing the shares
// out.) Where the tiles are too few for four a worker, only as many as
// the busiest worker's whole tiles need: 63 tiles on 62 workers leave one
// with two, and 32 workers finish as soon, with half the hand-overs and
// packing. At two threads every product that ran in parallel still does.
func gemmWorkers(m, n, k, mr, threads int) int {
	work := m * n * k
	if work < gemmSerialWork {
		return 1
	}
	t := max(1, min(threads, work/gemmMinShare))
	if tiles := ((m + mr - 1) / mr) * ((n + gemmNR - 1) / gemmNR); tiles < 4*t {
		per := (tiles + t - 1) / t
		t = (tiles + per - 1) / per
	}
	return t
}

// gemmMinShare is the least work (multiply-adds) a worker gets of a
// product: about 2.5 µs at one core's AVX-512 rate, ten times the cost of
// handing it over.
const gemmMinShare = gemmSerialWork / 2

// gemmSerialWork is the product size (multiply-adds) below which a GEMM
// runs on the calling thread: about 10 µs of work, where handing half to
// a worker costs as much as it saves.
const gemmSerialWork = 1 << 19

// planCache remembers the grids planned for a question. A sync.Map would
// box each key into an interface, an allocation on every kernel call that
// consults a plan (every GEMM on more than two workers).
type planCache[K comparable] struct {
	mu    sync.RWMutex
	grids map[K]gemmGrid
}

func (c *planCache[K]) load(k K) (gemmGrid, bool) {
	c.mu.RLock()
	g, ok := c.grids[k]
	c.mu.RUnlock()
	return g, ok
}

func (c *planCache[K]) store(k K, g gemmGrid) {
	c.mu.Lock()
	if c.grids == nil {
		c.grids = make(map[K]gemmGrid)
	}
	c.grids[k] = g
	c.mu.Unlock()
}
