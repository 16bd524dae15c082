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
	for _, c := range Chunks(g.cells(), workers) {
		var w float64
		for u := c.Lo; u < c.Hi; u++ {
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

var gemmPlans sync.Map // gemmPlanKey → gemmGrid

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
	if g, ok := gemmPlans.Load(k); ok {
		return g.(gemmGrid)
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
	gemmPlans.Store(k, best)
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
