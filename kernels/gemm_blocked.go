//go:build amd64 && !noasm

package kernels

import (
	"math"
)

// The assembly GEMMs: blocking around a micro-kernel of mr-row tiles, the
// AVX2 one of 6×16 (sgemmKernel6x16) or the AVX-512 ones of 12 rows (two
// packed A panels per tile) by 32 columns (sgemmKernel12x32, two B
// panels) or, at an odd or narrow last panel, 16 (sgemmKernel12x16).
//
//	for each K block pc of KC
//	  for each row block ic of MC rows (of this thread's share)   pack A[ic, pc] → L3
//	    for each column block jc of NC columns                     pack B[pc, jc] → L2
//	      for each mr-row tile strip ir of the block               (A panels stay in L1)
//	        for each 16- or 32-column tile jr of the block         micro-kernel (asm loop)
//
// Each operand is packed about once (B once per row block, and MC is
// large). The kernel walks right along an mr-row strip of C, so C is read
// and written a row segment at a time, sequentially, once per K block; the
// epilogue runs on the last K block, on each strip while it is in cache.
// (Walking down a column of tiles instead, with the A block in L2 and the
// B panel in L1, measured the same on square products and 4-6% slower on
// wide ones.)
//
// A stored, untransposed A is not packed: sgemmKernel12x32S,
// sgemmKernel12x16S and sgemmKernel6x16S (the last two also for a
// narrow last tile, under the column mask) broadcast from its rows in
// place, and the strip stays in L1 while the kernel walks right. Packing cost
// 8-10% of DLRM's Linear layers (2048 rows, K 256-512); reading in place
// was 10-25% faster there. Rows a multiple of 4 KiB apart would share the
// L1's sets (12 rows in 8 ways: 1024³ ran 15% slower), so those are packed.
// The products are the packed kernel's, in the same order: same bits.

// gemmNegZero is the "no bias" operand of the assembly epilogue: adding −0
// leaves every value, zeros' signs included, as it was. The widest tile
// reads two panels' worth.
var gemmNegZero = func() (z [2 * gemmNR]float32) {
	for i := range z {
		z[i] = float32(math.Copysign(0, -1))
	}
	return z
}()

// gemmScratch is one thread's packing space, pooled so calls do not
// allocate; every slice starts on a cache line and grows to the largest
// blocks seen.
type gemmScratch struct {
	b    []float32       // a packed KC×NC block of B
	a    []float32       // a packed MC×KC block of A and the two floats gemmPackAN6 writes past it
	bias [gemmNR]float32 // the column bias of a narrow panel, padded
	// A ragged 12×32 tile of C and its column bias (raggedTile).
	tile   [2 * gemmMR * 2 * gemmNR]float32
	bias32 [2 * gemmNR]float32
}

var gemmScratchPool = freeList[gemmScratch]{New: newOf[gemmScratch]}

func growAligned(s []float32, n int) []float32 {
	if len(s) < n {
		return alignedFloats(n)
	}
	return s
}

// gemmCall is one GEMM's arguments, pooled: Parallel takes its part method
// through a func value bound once, so a call allocates nothing.
type gemmCall struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a              []float32
	lda            int
	b              []float32
	ldb            int
	c              []float32
	ldc            int
	ep             Epilogue
	pb             *PackedB    // B already packed, or nil
	ap             gemmAPacker // packs an implicit A, or nil for a stored one
	mr             int         // rows of a micro-kernel tile: 6 (AVX2) or 12 (AVX-512)
	kc             int         // K block
	splitN         bool        // threads share columns (else rows)
	grid           gemmGrid    // the cells Parallel's units stand for
	run            func(lo, hi int)
}

var gemmCallPool = freeList[gemmCall]{New: func() *gemmCall {
	g := new(gemmCall)
	g.run = g.part
	return g
}}

func sgemmAVX2(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
	sgemmBlocked(gemmMR, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep)
}

func sgemmAVX512(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
	sgemmBlocked(2*gemmMR, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep)
}

func sgemmBlocked(mr int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
	if k == 0 || alpha == 0 {
		gemmScaleC(m, n, beta, c, ldc, &ep)
		return
	}
	if parts := gemmSplitK(m, n, k); parts > 1 {
		sgemmSplitK(parts, mr, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep)
		return
	}
	g := gemmCallPool.get()
	*g = gemmCall{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc, ep: ep, kc: gemmKBlock(k), mr: mr, run: g.run}
	g.start()
	*g = gemmCall{run: g.run} // drop the references to the caller's memory
	gemmCallPool.put(g)
}

// gemmAPacker produces the A operand of a product that is never stored
// whole, such as a convolution's im2col matrix: packA writes rows
// [i0, i0+rows) (rows ≤ gemmMR) and depths [p0, p0+kc) in packAGo's
// layout, zero past rows; dst has two floats of room past 6·kc. Calls for
// different rows may run concurrently.
type gemmAPacker interface {
	packA(dst []float32, i0, rows, p0, kc int)
}

// sgemmImplicitA computes C = A·op(B) + epilogue, beta 0, with A (m×k)
// produced panel by panel by ap, on the level's blocked GEMM; B is read
// from pb when it is non-nil (packed by PackB), else packed from b. It
// reports false, doing nothing, at a level without a blocked GEMM.
func sgemmImplicitA(ap gemmAPacker, transB bool, m, n, k int, b []float32, ldb int, pb *PackedB, c []float32, ldc int, ep Epilogue) bool {
	mr := gemmMR
	switch {
	case level >= AVX512:
		mr = 2 * gemmMR
	case level < AVX2:
		return false
	}
	checkGemm(false, transB, 0, n, k, 0, 0, len(b), ldb, 0, 0)
	checkGemm(false, false, m, n, 0, 0, 0, 0, 0, len(c), ldc)
	ep.check(m, n, ldc)
	if m == 0 || n == 0 {
		return true
	}
	if k == 0 {
		gemmScaleC(m, n, 0, c, ldc, &ep)
		return true
	}
	g := gemmCallPool.get()
	*g = gemmCall{transB: transB, m: m, n: n, k: k, alpha: 1, b: b, ldb: ldb, c: c, ldc: ldc, ep: ep, ap: ap, pb: pb,
		kc: gemmKBlock(k), mr: mr, run: g.run}
	g.start()
	*g = gemmCall{run: g.run}
	gemmCallPool.put(g)
	return true
}

func packedMatchesSgemm(m, n, k int) bool { return level >= AVX2 && gemmSplitK(m, n, k) == 1 }

// gemmSplit is one K-split product's arguments, pooled like gemmCall so a
// call allocates nothing once the pool is warm.
type gemmSplit struct {
	whole   gemmCall  // the product; its c and beta go to the first part
	step    int       // K per part
	cells   gemmGrid  // C's cells: a unit is one part's cell
	partial []float32 // the other parts' C, m×n each, grown as needed
	run     func(lo, hi int)
	sum     func(lo, hi int)
}

var gemmSplitPool = freeList[gemmSplit]{New: func() *gemmSplit {
	sp := new(gemmSplit)
	sp.run, sp.sum = sp.units, sp.addRows
	return sp
}}

// sgemmSplitK computes the product as parts products over slices of K:
// the first into C with beta, the others into partials added to C after,
// in part order; the epilogue runs last. Where the parts do not share
// evenly among the threads, each part's C is cut into cells too
// (splitKCells); cells, like threads, never change an element's sums.
func sgemmSplitK(parts, mr int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
	sp := gemmSplitPool.get()
	sp.whole = gemmCall{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc, mr: mr}
	sp.step = (k + parts - 1) / parts
	sp.cells = splitKCells(m, n, k, sp.step, mr, parts, Threads())
	sp.partial = growAligned(sp.partial, (parts-1)*m*n)
	Parallel(parts*sp.cells.cells(), m*n*k, sp.run)
	Parallel(m, (parts-1)*m*n, sp.sum)
	sp.whole = gemmCall{}
	gemmSplitPool.put(sp)
	ep.apply(c, ldc, 0, m, 0, n)
}

// addRows adds the partials to rows [lo, hi) of C, in part order.
func (sp *gemmSplit) addRows(lo, hi int) {
	w := &sp.whole
	for p := 1; p*sp.step < w.k; p++ {
		part := sp.partial[(p-1)*w.m*w.n : p*w.m*w.n]
		for i := lo; i < hi; i++ {
			convOps.addTo(w.c[i*w.ldc:i*w.ldc+w.n], part[i*w.n:(i+1)*w.n])
		}
	}
}

// units computes the units [lo, hi) of the split, each on this thread:
// unit u is part u/cells' cell u%cells.
func (sp *gemmSplit) units(lo, hi int) {
	w := &sp.whole
	cells := sp.cells.cells()
	for u := lo; u < hi; u++ {
		p := u / cells
		k0 := p * sp.step
		kp := min(sp.step, w.k-k0)
		// Element p of K is column p of a stored A and row p of a stored
		// B, and the other way round when transposed.
		ap, bp := w.a[k0:], w.b[k0:]
		if w.transA {
			ap = w.a[k0*w.lda:]
		}
		if !w.transB {
			bp = w.b[k0*w.ldb:]
		}
		cp, ldc, beta := w.c, w.ldc, w.beta
		if p > 0 {
			cp, ldc, beta = sp.partial[(p-1)*w.m*w.n:p*w.m*w.n], w.n, 0
		}
		g := gemmCallPool.get()
		*g = gemmCall{transA: w.transA, transB: w.transB, m: w.m, n: w.n, k: kp, alpha: w.alpha, beta: beta,
			a: ap, lda: w.lda, b: bp, ldb: w.ldb, c: cp, ldc: ldc, kc: gemmKBlock(kp), mr: w.mr, grid: sp.cells, run: g.run}
		g.part(u%cells, u%cells+1)
		*g = gemmCall{run: g.run}
		gemmCallPool.put(g)
	}
}

func sgemmPackedAVX2(transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, ep Epilogue) {
	sgemmPackedBlocked(gemmMR, transA, m, alpha, a, lda, pb, beta, c, ldc, ep)
}

func sgemmPackedAVX512(transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, ep Epilogue) {
	sgemmPackedBlocked(2*gemmMR, transA, m, alpha, a, lda, pb, beta, c, ldc, ep)
}

func sgemmPackedBlocked(mr int, transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, ep Epilogue) {
	if pb.nr != gemmNR {
		sgemmPackedGeneric(transA, m, alpha, a, lda, pb, beta, c, ldc, ep)
		return
	}
	if pb.k == 0 || alpha == 0 {
		gemmScaleC(m, pb.n, beta, c, ldc, &ep)
		return
	}
	g := gemmCallPool.get()
	*g = gemmCall{transA: transA, m: m, n: pb.n, k: pb.k, alpha: alpha, beta: beta,
		a: a, lda: lda, c: c, ldc: ldc, ep: ep, pb: pb, kc: pb.kc, mr: mr, run: g.run}
	g.start()
	*g = gemmCall{run: g.run}
	gemmCallPool.put(g)
}

// kernel runs the micro-kernel of the call's tile height; the arguments
// are sgemmKernel6x16's.
func (g *gemmCall) kernel(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32) {
	if g.mr == gemmMR {
		sgemmKernel6x16(kc, a, b, c, ldc, tiles, rows, alpha, beta, lo, colBias, rowBias, aStep, bStep, cStep, colBiasStep, rowBiasStep, mask)
		return
	}
	sgemmKernel12x16(kc, a, b, c, ldc, tiles, rows, alpha, beta, lo, colBias, rowBias, aStep, bStep, cStep, colBiasStep, rowBiasStep, mask)
}

// kernelS is kernel reading A in place (in): the 16-column kernels' S
// forms, tiles moving only along B and C.
func (g *gemmCall) kernelS(kc int, in stripA, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, bStep, cStep, colBiasStep int, mask *int32) {
	a := &in.a[in.off]
	if g.mr == gemmMR {
		sgemmKernel6x16S(kc, a, b, c, ldc, tiles, rows, alpha, beta, lo, colBias, rowBias, 0, bStep, cStep, colBiasStep, 0, mask, in.lda)
		return
	}
	sgemmKernel12x16S(kc, a, b, c, ldc, tiles, rows, alpha, beta, lo, colBias, rowBias, 0, bStep, cStep, colBiasStep, 0, mask, in.lda)
}

// gemmBalance returns the block for a share of n: at most max, a multiple
// of unit, the blocks balanced so the last one is not a sliver.
func gemmBalance(n, max, unit int) int {
	nb := (n + max - 1) / max
	w := (n + nb - 1) / nb
	return (w + unit - 1) / unit * unit
}

// start splits the product across the worker pool. Each share packs its
// own operands, so the split is the one that packs less per thread:
// sharing columns packs all of A in every share, sharing rows packs all
// of B in every share (once per row block).
func (g *gemmCall) start() {
	np := (g.n + gemmNR - 1) / gemmNR
	mp := (g.m + g.mr - 1) / g.mr
	t := gemmWorkers(g.m, g.n, g.k, g.mr, Threads())
	g.splitN = gemmSplitCols(g.m, g.n, g.k, g.mr, g.pb != nil, t)
	if t == 1 {
		g.serial()
		return
	}
	g.grid = gemmPlan(mp, np, t, g.splitN)
	parallelIn(g.grid.cells(), t, g.run)
}

// serial computes the whole product on the calling thread.
func (g *gemmCall) serial() {
	mp := (g.m + g.mr - 1) / g.mr
	g.grid = gemmGrid{mp, (g.n + gemmNR - 1) / gemmNR, mp, 1}
	g.run(0, mp)
}

// gemmRowsSpread reports whether rows rows lda floats apart spread over
// the L1's sets: at most half of them start in the same set of its 64.
func gemmRowsSpread(lda, rows int) bool {
	var n [64]int
	for r := range rows {
		s := (r * lda * 4 / 64) % 64
		if n[s]++; 2*n[s] > rows {
			return false
		}
	}
	return true
}

// part computes the grid's cells [lo, hi) as few blocks as it can, each
// packing its operands once: cells of one column group (the row split)
// as one block, otherwise each run of cells in one row group.
func (g *gemmCall) part(lo, hi int) {
	s := gemmScratchPool.get()
	gn := g.grid.gn
	for u := lo; u < hi; {
		end := min(hi, (u/gn+1)*gn)
		if gn == 1 {
			end = hi
		}
		p0, _, q0, _ := g.grid.cell(u)
		_, p1, _, q1 := g.grid.cell(end - 1)
		g.block(s, p0*g.mr, min(p1*g.mr, g.m), q0*gemmNR, min(q1*gemmNR, g.n))
		u = end
	}
	gemmScratchPool.put(s)
}

// block computes C[i0:i1, j0:j1]; j0 is a multiple of gemmNR.
func (g *gemmCall) block(s *gemmScratch, i0, i1, j0, j1 int) {
	// Blocks of whole tiles of the widest kernel: 32 columns at AVX-512,
	// 16 at AVX2.
	tw := gemmNR * g.mr / gemmMR
	nc := gemmBalance(j1-j0, gemmNC, tw)
	mc := gemmBalance(i1-i0, gemmMC, g.mr) // whole tiles, so a tile's second A panel is inside s.a
	kcMax := min(g.kc, g.k)
	if g.pb == nil {
		s.b = growAligned(s.b, kcMax*nc)
	}
	// A is read in place whatever the last tile's width: full tiles and
	// (AVX-512) a ragged one of 17 to 31 columns on the 12×32 kernel, a
	// narrower one on the 16-column kernel under the column mask.
	direct := g.ap == nil && !g.transA && gemmRowsSpread(g.lda, g.mr)
	if direct {
		// A stays where it is, so one row block takes the whole share and
		// each block of B is packed once; s.a holds the last strip only.
		mc = (i1 - i0 + g.mr - 1) / g.mr * g.mr
		s.a = growAligned(s.a, g.mr*kcMax+8)
	} else {
		s.a = growAligned(s.a, mc*kcMax+8)
	}
	var npad int
	if g.pb != nil {
		npad = g.pb.npad()
	}
	for pc := 0; pc < g.k; pc += g.kc {
		kc := min(g.kc, g.k-pc)
		beta := g.beta
		if pc > 0 {
			beta = 1
		}
		last := pc+kc == g.k
		for ic := i0; ic < i1; ic += mc {
			mcw := min(mc, i1-ic)
			// Strips from row a0 of the block are packed, at s.a[0:]; a
			// last partial strip read in place would run past A, so its rows
			// are copied there instead (row-major, kc apart) where that
			// spacing does not alias in L1.
			a0 := 0
			if direct {
				a0 = mcw / g.mr * g.mr
			}
			copied := direct && a0 < mcw && gemmRowsSpread(kc, g.mr)
			for r := a0; copied && r < mcw; r++ {
				copy(s.a[(r-a0)*kc:(r-a0+1)*kc], g.a[(ic+r)*g.lda+pc:])
			}
			for ir := a0; !copied && ir < mcw; ir += gemmMR {
				if g.ap != nil {
					g.ap.packA(s.a[(ir-a0)*kc:], ic+ir, min(gemmMR, mcw-ir), pc, kc)
					continue
				}
				packAAVX2(g.transA, g.a, g.lda, ic+ir, min(gemmMR, mcw-ir), pc, kc, s.a[(ir-a0)*kc:])
			}
			for jc := j0; jc < j1; jc += nc {
				ncw := min(nc, j1-jc)
				bp := s.b
				if g.pb != nil {
					bp = g.pb.data[pc*npad+jc*kc:]
				} else {
					packBAVX2(g.transB, g.b, g.ldb, pc, kc, jc, ncw, bp)
				}
				// (A read in place has no packed block for colStrip.)
				if ncw <= gemmNR && !direct {
					g.colStrip(s, bp, kc, ic, mcw, jc, ncw, beta, last)
					continue
				}
				for ir := 0; ir < mcw; ir += g.mr {
					i, rows, ap := ic+ir, min(g.mr, mcw-ir), s.a[max(ir-a0, 0)*kc:]
					var in stripA
					switch {
					case ir < a0:
						in = stripA{g.a, i*g.lda + pc, g.lda}
					case copied:
						in = stripA{s.a, 0, kc}
					}
					g.rowStrip(s, bp, kc, i, rows, ap, in, jc, ncw, beta, last)
				}
			}
		}
	}
}

// stripA is a row strip's A read in place: its rows lda floats apart from
// a[off]. The zero value means the strip is packed.
type stripA struct {
	a        []float32
	off, lda int
}

func (in stripA) ok() bool { return in.a != nil }

// rowStrip multiplies one A strip, packed at ap or in place (in), (rows
// of C from i) by the packed B block (ncw columns from jc) into C, walking
// right along the rows.
func (g *gemmCall) rowStrip(s *gemmScratch, bp []float32, kc, i, rows int, ap []float32, in stripA, jc, ncw int, beta float32, last bool) {
	ep := &g.ep
	relu := last && ep.inAsmReLU()
	lo := negInf
	if relu {
		lo = 0
	}
	rowBias := &gemmNegZero[0]
	colBias, colStep := &gemmNegZero[0], 0
	if last && ep.Bias != nil {
		if ep.BiasPerRow {
			rowBias = &ep.Bias[i]
		} else {
			colBias, colStep = &ep.Bias[jc], 4*gemmNR
		}
	}
	c, ldc := g.c, g.ldc
	full := ncw / gemmNR
	done := 0
	if g.mr == 2*gemmMR && full >= 2 {
		// AVX-512: two panels per tile where they come in pairs.
		done = full &^ 1
		if in.ok() {
			sgemmKernel12x32S(kc, &in.a[in.off], &bp[0], &c[i*ldc+jc], ldc, done/2, rows, g.alpha, beta, lo,
				colBias, rowBias, 0, 8*kc*gemmNR, 8*gemmNR, 2*colStep, 0, in.lda)
		} else {
			sgemmKernel12x32(kc, &ap[0], &bp[0], &c[i*ldc+jc], ldc, done/2, rows, g.alpha, beta, lo,
				colBias, rowBias, 0, 8*kc*gemmNR, 8*gemmNR, 2*colStep, 0)
		}
	}
	if g.mr == 2*gemmMR && full-done == 1 && ncw > full*gemmNR {
		// A last whole panel and a part of one: one 32-column tile.
		g.raggedTile(s, kc, bp[done*kc*gemmNR:], ap, in, i, rows, jc+done*gemmNR, ncw-done*gemmNR, beta, lo, rowBias, colStep != 0)
		done, full = full+1, full+1
	}
	if full > done {
		j := jc + done*gemmNR
		cb := colBias
		if colStep != 0 {
			cb = &ep.Bias[j]
		}
		if in.ok() {
			g.kernelS(kc, in, &bp[done*kc*gemmNR], &c[i*ldc+j], ldc, full-done, rows, g.alpha, beta, lo,
				cb, rowBias, 4*kc*gemmNR, 4*gemmNR, colStep, nil)
		} else {
			g.kernel(kc, &ap[0], &bp[done*kc*gemmNR], &c[i*ldc+j], ldc, full-done, rows, g.alpha, beta, lo,
				cb, rowBias, 0, 4*kc*gemmNR, 4*gemmNR, colStep, 0, nil)
		}
	}
	if w := ncw - full*gemmNR; w > 0 {
		j := jc + full*gemmNR
		cb := &gemmNegZero[0]
		if colStep != 0 {
			s.bias = [gemmNR]float32(gemmNegZero[:gemmNR])
			copy(s.bias[:], ep.Bias[j:j+w])
			cb = &s.bias[0]
		}
		if in.ok() {
			g.kernelS(kc, in, &bp[full*kc*gemmNR], &c[i*ldc+j], ldc, 1, rows, g.alpha, beta, lo,
				cb, rowBias, 0, 0, 0, &gemmMasks[gemmNR-w])
		} else {
			g.kernel(kc, &ap[0], &bp[full*kc*gemmNR], &c[i*ldc+j], ldc, 1, rows, g.alpha, beta, lo,
				cb, rowBias, 0, 0, 0, 0, 0, &gemmMasks[gemmNR-w])
		}
	}
	if last && ep.inGo(relu) {
		ep.finishRows(c, ldc, i, rows, jc, ncw, relu)
	}
}

// raggedTile computes the 12×w tile of C at row i, column j, 16 < w <
// 32, with the 12×32 kernel on a scratch tile: the two B panels at bp
// (the second zero past w) by the packed A panel ap, or A in place (in).
// The 12×16 kernel twice, the second call masked,
// ran at about half the speed; the bits are the same.
func (g *gemmCall) raggedTile(s *gemmScratch, kc int, bp, ap []float32, in stripA, i, rows, j, w int, beta, lo float32, rowBias *float32, colBias bool) {
	t := &s.tile
	if beta != 0 {
		for r := range rows {
			copy(t[r*2*gemmNR:r*2*gemmNR+w], g.c[(i+r)*g.ldc+j:])
		}
	}
	cb := &gemmNegZero[0]
	if colBias {
		s.bias32 = gemmNegZero
		copy(s.bias32[:w], g.ep.Bias[j:j+w])
		cb = &s.bias32[0]
	}
	if in.ok() {
		sgemmKernel12x32S(kc, &in.a[in.off], &bp[0], &t[0], 2*gemmNR, 1, rows, g.alpha, beta, lo, cb, rowBias, 0, 0, 0, 0, 0, in.lda)
	} else {
		sgemmKernel12x32(kc, &ap[0], &bp[0], &t[0], 2*gemmNR, 1, rows, g.alpha, beta, lo, cb, rowBias, 0, 0, 0, 0, 0)
	}
	for r := range rows {
		copy(g.c[(i+r)*g.ldc+j:(i+r)*g.ldc+j+w], t[r*2*gemmNR:])
	}
}

// colStrip multiplies the packed A block (mcw rows of C from ic) by a
// B block of one panel (w ≤ 16 columns from j), walking down C: for a
// narrow C this takes one kernel call instead of one per A panel.
func (g *gemmCall) colStrip(s *gemmScratch, bp []float32, kc, ic, mcw, j, w int, beta float32, last bool) {
	ep := &g.ep
	relu := last && ep.inAsmReLU()
	lo := negInf
	if relu {
		lo = 0
	}
	rowBias, rowStep := &gemmNegZero[0], 0
	colBias := &gemmNegZero[0]
	if last && ep.Bias != nil {
		if ep.BiasPerRow {
			rowBias, rowStep = &ep.Bias[ic], 4*g.mr
		} else {
			s.bias = [gemmNR]float32(gemmNegZero[:gemmNR])
			copy(s.bias[:], ep.Bias[j:j+w])
			colBias = &s.bias[0]
		}
	}
	var mask *int32
	if w < gemmNR {
		mask = &gemmMasks[gemmNR-w]
	}
	c, ldc := g.c, g.ldc
	// At most gemmTileChunk tiles per call, so no call runs long unpreempted.
	full, rem := mcw/g.mr, mcw%g.mr
	for t := 0; t < full; t += gemmTileChunk {
		i := t * g.mr
		rb := rowBias
		if rowStep != 0 {
			rb = &ep.Bias[ic+i]
		}
		g.kernel(kc, &s.a[i*kc], &bp[0], &c[(ic+i)*ldc+j], ldc, min(gemmTileChunk, full-t), g.mr, g.alpha, beta, lo,
			colBias, rb, 4*g.mr*kc, 0, 4*g.mr*ldc, 0, rowStep, mask)
	}
	if rem > 0 {
		i := full * g.mr
		if rowStep != 0 {
			rowBias = &ep.Bias[ic+i]
		}
		g.kernel(kc, &s.a[i*kc], &bp[0], &c[(ic+i)*ldc+j], ldc, 1, rem, g.alpha, beta, lo,
			colBias, rowBias, 0, 0, 0, 0, 0, mask)
	}
	if last && ep.inGo(relu) {
		ep.finishRows(c, ldc, ic, mcw, j, w, relu)
	}
}

// gemmTileChunk is the most tiles one kernel call walks down C: about
// 30 µs at the largest K block.
const gemmTileChunk = 64

// gemmPackChunk is the most B panels one packing call handles: about
// 25 µs of copying at the largest K block.
const gemmPackChunk = 64

// gemmMasks[16−w:] is the VMASKMOVPS mask of a tile w columns wide.
var gemmMasks = [2 * gemmNR]int32{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}

// packBAVX2 packs like packBGo, whole panels in assembly, at most
// gemmPackChunk panels per call so no call runs long unpreempted.
func packBAVX2(transB bool, b []float32, ldb, p0, kc, j0, cols int, dst []float32) {
	full := cols / gemmNR
	for q := 0; q < full; q += gemmPackChunk {
		np := min(gemmPackChunk, full-q)
		j, d := j0+q*gemmNR, dst[q*kc*gemmNR:]
		if !transB {
			gemmPackBN16(kc, &b[p0*ldb+j], ldb, &d[0], np)
			continue
		}
		kc8 := kc &^ 7
		if kc8 > 0 {
			gemmPackBT16(kc8, &b[j*ldb+p0], ldb, &d[0], kc*gemmNR, np)
		}
		if kc8 < kc {
			packBGo(true, b, ldb, p0, kc, kc8, j, np*gemmNR, d)
		}
	}
	if j := full * gemmNR; j < cols {
		if transB {
			packBGo(true, b, ldb, p0, kc, 0, j0+j, cols-j, dst[full*kc*gemmNR:])
		} else {
			gemmPackBN16Mask(kc, &b[p0*ldb+j0+j], ldb, &dst[full*kc*gemmNR], &gemmMasks[gemmNR-(cols-j)])
		}
	}
}

// packAAVX2 packs like packAGo, whole panels in assembly. dst needs two
// floats of slack past gemmMR·kc.
func packAAVX2(transA bool, a []float32, lda, i0, rows, p0, kc int, dst []float32) {
	if rows < gemmMR {
		packAGo(transA, a, lda, i0, rows, p0, kc, 0, dst)
		return
	}
	if transA {
		gemmPackAT6(kc, &a[p0*lda+i0], lda, &dst[0])
		return
	}
	kc8 := kc &^ 7
	if kc8 > 0 {
		gemmPackAN6(kc8, &a[i0*lda+p0], lda, &dst[0])
	}
	if kc8 < kc {
		packAGo(false, a, lda, i0, rows, p0, kc, kc8, dst)
	}
}
