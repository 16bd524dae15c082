//go:build !noasm

package kernels

import (
	"unsafe"
)

// sbgemmKernel12x32 is the BF16 GEMM micro-kernel (gemm_bf16_amd64.s).
//
//go:noescape
func sbgemmKernel12x32(kp int, a, b *uint16, c *float32, ldc, tiles, rows int, alpha, beta float32)

// sbPackPanel packs one 16-column panel of B for pairs depth pairs, row
// 2p at src and row 2p+1 ldb elements further.
func sbPackPanel(dst *uint32, src *uint16, ldb, pairs int) {
	sbPackPanelMask(dst, src, 0, ldb, pairs, 0xffff)
}

// sbPackPanelMask is sbPackPanel for the columns set in mask, src
// addressing column lane (gemm_bf16_amd64.s).
//
//go:noescape
func sbPackPanelMask(dst *uint32, src *uint16, lane, ldb, pairs int, mask uint16)

// sbPackATrans packs pairs depth pairs of a full 12-row panel of a
// transposed A (gemm_bf16_amd64.s).
//
//go:noescape
func sbPackATrans(dst *uint32, src *uint16, lda, pairs, kp int)

// sbgemmAsm reports whether the assembly BF16 GEMM runs on this CPU.
func sbgemmAsm() bool { return level >= AVX512BF16 }

// Blocking of the assembly path, in depth pairs and columns: a 12-row A
// panel of sbgemmKC pairs is 24 KiB and a 32-column B tile 64 KiB, so the
// tile spills from L1 to L2, but fewer passes over C and fewer packing
// calls measured faster than blocks that fit L1 (256 pairs: ~350 against
// ~390–430 GFLOP/s at 1024³–2048³ on one core); a B block of sbgemmNC
// columns (512 KiB) stays in L2.
const (
	sbgemmKC = 512
	sbgemmNC = 256
	sbgemmMR = 12
)

func (g *sbgemmCall) bindBlocked() {
	g.packAFn, g.packBFn, g.rowsFn, g.colsFn = g.packAPanels, g.packBPanels, g.rowPanels, g.columnBlocks
}

// sbBlocking returns the blocked loop's depth block, in pairs, and
// column block for a product of depth k and n columns.
func sbBlocking(k, n int) (kcp, nc int) {
	return gemmBalance((k+1)/2, sbgemmKC, 1), gemmBalance(n, sbgemmNC, 32)
}

// packSbgemmB packs B (k×n, transposed when transB) for every block of
// GemmBF16's blocked loop.
func packSbgemmB(transB bool, k, n int, b []uint16, ldb int) *sbPackedB {
	g := sbgemmCalls.get()
	defer sbgemmCalls.put(g)
	g.sbgemmArgs = sbgemmArgs{transB: transB, k: k, n: n, b: b, ldb: ldb}
	pb := &sbPackedB{k: k, n: n}
	kcp, nc := sbBlocking(k, n)
	for p0 := 0; p0 < (k+1)/2; p0 += kcp {
		g.p0, g.kp = p0, min(kcp, (k+1)/2-p0)
		for j0 := 0; j0 < n; j0 += nc {
			g.j0, g.nc = j0, min(nc, n-j0)
			g.bp = make([]uint16, g.kp*((g.nc+31)&^31)*2)
			g.packB()
			pb.blocks = append(pb.blocks, g.bp)
		}
	}
	g.sbgemmArgs = sbgemmArgs{}
	return pb
}

func (g *sbgemmCall) blocked() {
	pairs := (g.k + 1) / 2
	kcp, nc := sbBlocking(g.k, g.n)
	panels := (g.m + sbgemmMR - 1) / sbgemmMR
	buf := sbgemmBufPool.get()
	defer sbgemmBufPool.put(buf)
	if g.pre == nil {
		g.bp = growBuf(&buf.b, kcp*((nc+31)&^31)*2)
	}
	// With one column block each A panel is read once: the workers pack
	// their chunks as they go, into scratch that stays in cache, rather
	// than all of A going to memory packed and coming back.
	g.packInRows = g.n <= nc
	if !g.packInRows {
		g.ap = growBuf(&buf.a, panels*(kcp*2*sbgemmMR+4))
	}
	block := 0
	// Where the column blocks divide evenly among the workers, each
	// worker takes whole column blocks, packing its own B block into its
	// own cache, and one call covers the depth block: splitting every
	// block's rows instead waited for every worker twice per block and
	// measured 0.5–1% slower at 1024³–2048³ on two Zen 4 cores.
	cols := (g.n + nc - 1) / nc
	byColumns := !g.packInRows && !g.serial && Threads() > 1 && cols%Threads() == 0
	for p0 := 0; p0 < pairs; p0 += kcp {
		g.p0, g.kp = p0, min(kcp, pairs-p0)
		// Otherwise A's panels for this depth block are packed once, for
		// every column block.
		if !g.packInRows {
			g.parallel(panels, g.m*g.kp*2, g.packAFn)
		}
		g.beta2 = g.beta
		if p0 > 0 {
			g.beta2 = 1
		}
		if byColumns {
			g.ncStep, g.block0 = nc, block
			g.parallel(cols, g.m*g.n*2*g.kp, g.colsFn)
			block += cols
			continue
		}
		for j0 := 0; j0 < g.n; j0 += nc {
			g.j0, g.nc = j0, min(nc, g.n-j0)
			if g.pre != nil {
				g.bp = g.pre.blocks[block]
				block++
			} else {
				g.packB()
			}
			g.parallel(panels, g.m*g.nc*2*g.kp, g.rowsFn)
		}
	}
	g.ap, g.bp = nil, nil
}

// columnBlocks runs column blocks [lo, hi) of the current depth block
// whole: each packs its B block and multiplies every row panel by it.
func (g *sbgemmCall) columnBlocks(lo, hi int) {
	w := sbgemmColumnCalls.get()
	defer sbgemmColumnCalls.put(w)
	w.sbgemmArgs = g.sbgemmArgs
	buf := sbgemmBufPool.get()
	defer sbgemmBufPool.put(buf)
	panels := (g.m + sbgemmMR - 1) / sbgemmMR
	for blk := lo; blk < hi; blk++ {
		w.j0 = blk * g.ncStep
		w.nc = min(g.ncStep, g.n-w.j0)
		ncPad := (w.nc + 31) &^ 31
		if w.pre != nil {
			w.bp = w.pre.blocks[g.block0+blk]
		} else {
			w.bp = growBuf(&buf.b, w.kp*ncPad*2)
			w.packBPanels(0, ncPad/16)
		}
		w.rowPanels(0, panels)
	}
	w.sbgemmArgs = sbgemmArgs{}
}

// apStride is the length of a packed A panel: 12 rows of kp pairs and two
// words of slack that gemmPackAN6 may write past the second half.
func (g *sbgemmCall) apStride() int { return g.kp*2*sbgemmMR + 4 }

// sbgemmBufs are a call's packed A (every row panel of a depth block) and
// packed B block.
type sbgemmBufs struct{ a, b []uint16 }

var (
	// sbgemmColumnCalls are a worker's copies of a call's arguments for
	// columnBlocks (their methods unbound).
	sbgemmColumnCalls = freeList[sbgemmCall]{New: newOf[sbgemmCall]}
	sbgemmChunkPool   = freeList[[]uint16]{New: newOf[[]uint16]}
	sbgemmBufPool     = freeList[sbgemmBufs]{New: newOf[sbgemmBufs]}
	sbgemmTilePool    = freeList[[sbgemmMR * 32]float32]{New: newOf[[sbgemmMR * 32]float32]}
)

// packB packs B's current block: per 16-column panel, per depth pair, the
// pair of each column side by side as one 32-bit word (zeros past K and
// past the last column, whose tile is padded to 32).
func (g *sbgemmCall) packB() {
	ncPad := (g.nc + 31) &^ 31
	g.parallel(ncPad/16, ncPad*g.kp*2, g.packBFn)
}

// packBPanels packs B's 16-column panels [lo, hi) of the current block.
func (g *sbgemmCall) packBPanels(lo, hi int) {
	ncPad := (g.nc + 31) &^ 31
	out := words(g.bp[:ncPad*g.kp*2])
	if g.bsrc != nil {
		for q := lo; q < hi; q++ {
			g.bsrc.packBPanel(out[q*g.kp*16:(q+1)*g.kp*16], g.p0, g.kp, g.j0+q*16)
		}
		return
	}
	for q := lo; q < hi; q++ {
		p := 0
		if j0 := g.j0 + q*16; g.transB && g.ldb%2 == 0 {
			// B's stored rows are its columns, each pair already a word:
			// the panel is those words transposed.
			whole := min(g.kp, g.k/2-g.p0)
			w := max(0, min(16, g.j0+g.nc-j0))
			panel := out[q*g.kp*16 : (q+1)*g.kp*16]
			for col := range w {
				src := words(g.b[(j0+col)*g.ldb+2*g.p0 : (j0+col)*g.ldb+2*(g.p0+whole)])
				for i, v := range src {
					panel[i*16+col] = v
				}
			}
			if w < 16 {
				for i := range whole {
					clear(panel[i*16+w : i*16+16])
				}
			}
			p = whole
		} else if !g.transB && j0+16 <= g.j0+g.nc {
			// Whole pairs of a full panel in assembly; the rest below.
			whole := min(g.kp, g.k/2-g.p0)
			if whole > 0 {
				sbPackPanel(&out[q*g.kp*16], &g.b[2*g.p0*g.ldb+j0], g.ldb, whole)
				p = whole
			}
		}
		for ; p < g.kp; p++ {
			k0 := 2 * (g.p0 + p)
			dst := out[q*g.kp*16+p*16 : q*g.kp*16+p*16+16]
			j0 := g.j0 + q*16
			w := max(0, min(16, g.j0+g.nc-j0))
			if w > 0 && !g.transB && k0+1 < g.k {
				// Two rows of B, interleaved.
				r0 := g.b[k0*g.ldb+j0 : k0*g.ldb+j0+w]
				r1 := g.b[(k0+1)*g.ldb+j0 : (k0+1)*g.ldb+j0+w]
				d := dst[:len(r0)]
				for col, v := range r0 {
					d[col] = uint32(v) | uint32(r1[col])<<16
				}
			} else {
				for col := range w {
					lo, hi := g.bAt(k0, j0+col), uint16(0)
					if k0+1 < g.k {
						hi = g.bAt(k0+1, j0+col)
					}
					dst[col] = uint32(lo) | uint32(hi)<<16
				}
			}
			clear(dst[w:])
		}
	}
}

// packAPanels packs row panels [lo, hi) of A's current depth block as
// the kernel reads them: two halves of 6 rows, each per depth pair the 6
// rows' pairs side by side as 32-bit words (zeros past the rows and past
// K). A row-major A with an even leading dimension already holds its
// pairs as words, so gemmPackAN6 packs whole runs of them.
func (g *sbgemmCall) packAPanels(lo, hi int) {
	stride := g.apStride()
	for pn := lo; pn < hi; pn++ {
		g.packPanel(words(g.ap[pn*stride:(pn+1)*stride]), pn)
	}
}

// packPanel packs row panel pn of A's current depth block into dst.
func (g *sbgemmCall) packPanel(dst []uint32, pn int) {
	full := g.kp
	if g.k%2 == 1 && g.p0+g.kp == (g.k+1)/2 {
		full-- // the last pair has no second element
	}
	fast := !g.transA && g.lda%2 == 0
	i0 := pn * sbgemmMR
	rows := min(sbgemmMR, g.m-i0)
	// A transposed (a weight gradient's dy, pixels along the depth) is
	// interleaved row pair by row pair in assembly.
	doneT := 0
	if g.transA && rows == sbgemmMR && full > 0 {
		sbPackATrans(&dst[0], &g.a[2*g.p0*g.lda+i0], g.lda, full, g.kp)
		doneT = full
	}
	for h := range 2 {
		half := dst[h*6*g.kp : (h+1)*6*g.kp]
		r0 := i0 + 6*h
		n := max(0, min(6, rows-6*h))
		done := doneT
		if fast && n == 6 {
			if done = full &^ 7; done > 0 {
				aw := words(g.a[r0*g.lda+2*g.p0:])
				gemmPackAN6(done, (*float32)(unsafe.Pointer(&aw[0])), g.lda/2, (*float32)(unsafe.Pointer(&half[0])))
			}
		}
		for p := done; p < g.kp; p++ {
			k0 := 2 * (g.p0 + p)
			for r := range 6 {
				var w uint32
				if r < n {
					w = uint32(g.aAt(r0+r, k0))
					if k0+1 < g.k {
						w |= uint32(g.aAt(r0+r, k0+1)) << 16
					}
				}
				half[p*6+r] = w
			}
		}
	}
}

// rowPanels multiplies row panels [lo, hi) by the packed B block, a
// 32-column tile at a time over a chunk of panels: the tile (32 KiB) stays
// in L1 while the chunk's A panels stream from L2.
func (g *sbgemmCall) rowPanels(lo, hi int) {
	full := g.nc / 32
	stride := g.apStride()
	chunk := max(1, (sbgemmChunkBytes/2)/stride)
	ap, base := g.ap, 0
	if g.packInRows {
		buf := sbgemmChunkPool.get()
		defer sbgemmChunkPool.put(buf)
		ap = growBuf(buf, min(chunk, hi-lo)*stride)
	}
	for c0 := lo; c0 < hi; c0 += chunk {
		c1 := min(c0+chunk, hi)
		if g.packInRows {
			base = c0
			for pn := c0; pn < c1; pn++ {
				g.packPanel(words(ap[(pn-base)*stride:(pn-base+1)*stride]), pn)
			}
		}
		for t := range full {
			for pn := c0; pn < c1; pn++ {
				i0 := pn * sbgemmMR
				sbgemmKernel12x32(g.kp, &ap[(pn-base)*stride], &g.bp[t*g.kp*64], &g.c[i0*g.ldc+g.j0+32*t], g.ldc, 1,
					min(sbgemmMR, g.m-i0), g.alpha, g.beta2)
			}
		}
		if w := g.nc - 32*full; w > 0 {
			for pn := c0; pn < c1; pn++ {
				g.edgeTile(&ap[(pn-base)*stride], pn, full, w)
			}
		}
		if g.ep != nil && g.p0+g.kp == (g.k+1)/2 {
			g.finishRows(c0*sbgemmMR, min(c1*sbgemmMR, g.m))
		}
	}
}

// finishRows runs the row epilogue on rows [i0, i1) of the current column
// block.
func (g *sbgemmCall) finishRows(i0, i1 int) {
	tmp := g.ep.stage.scratch()
	for i := i0; i < i1; i++ {
		idx := i*g.ldc + g.j0
		g.ep.finish(g.c[idx:idx+g.nc], g.j0, idx, tmp)
	}
	g.ep.stage.release(tmp)
}

// sbgemmChunkBytes bounds the A panels a worker runs one B tile over.
const sbgemmChunkBytes = 384 << 10

// edgeTile computes the last, partial tile (w < 32 columns from tile full)
// of row panel pn, packed at ap, through a scratch tile.
func (g *sbgemmCall) edgeTile(ap *uint16, pn, full, w int) {
	i0 := pn * sbgemmMR
	rows := min(sbgemmMR, g.m-i0)
	tile := sbgemmTilePool.get()
	defer sbgemmTilePool.put(tile)
	sbgemmKernel12x32(g.kp, ap, &g.bp[full*g.kp*64], &tile[0], 32, 1, rows, g.alpha, 0)
	c := g.c[i0*g.ldc+g.j0+32*full:]
	for r := range rows {
		dst := c[r*g.ldc : r*g.ldc+w]
		for j, v := range tile[r*32 : r*32+w] {
			if g.beta2 == 0 {
				dst[j] = v
			} else {
				dst[j] = v + g.beta2*dst[j]
			}
		}
	}
}

// bf16RowsA is a row-major bfloat16 A for sgemmImplicitA, widened (exactly)
// as the GEMM packs it: the float32 kernels multiply a BF16 operand
// without a widened copy of it ever going through memory.
type bf16RowsA struct {
	a   []uint16
	lda int
}

var bf16RowsAs = freeList[bf16RowsA]{New: newOf[bf16RowsA]}

func (p *bf16RowsA) packA(dst []float32, i0, rows, p0, kc int) {
	from := 0
	if rows == gemmMR {
		from = kc &^ 7
		if from > 0 {
			gemmPackAN6BF16(from, &p.a[i0*p.lda+p0], p.lda, &dst[0])
		}
	} else {
		clear(dst[:kc*gemmMR])
	}
	for r := range rows {
		src := p.a[(i0+r)*p.lda+p0+from : (i0+r)*p.lda+p0+kc]
		for q, h := range src {
			dst[(from+q)*gemmMR+r] = F32FromBF16(h)
		}
	}
}

// sgemmBF16A is sgemmImplicitA with A (m×k) a row-major bfloat16 matrix
// of row stride lda. It reports false, doing nothing, at a level without
// a blocked GEMM.
func sgemmBF16A(m, n, k int, a []uint16, lda int, transB bool, b []float32, ldb int, pb *PackedB, c []float32, ldc int, ep Epilogue) bool {
	if m > 0 && k > 0 && (lda < k || len(a) < (m-1)*lda+k) {
		fail(ErrShape, "sgemmBF16A", "a has %d elements with row stride %d, want %d rows of %d", len(a), lda, m, k)
	}
	p := bf16RowsAs.get()
	p.a, p.lda = a, lda
	ok := sgemmImplicitA(p, transB, m, n, k, b, ldb, pb, c, ldc, ep)
	p.a = nil
	bf16RowsAs.put(p)
	return ok
}
