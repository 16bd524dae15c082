package kernels

import "unsafe"

// The AMX path of GemmBF16. A tile register holds 16 rows of 64 bytes; one
// TDPBF16PS adds to a 16×16 float32 tile the product of a 16×32 bfloat16 A
// tile and a B tile of 16 depth pairs × 16 columns, each pair of a column a
// 32-bit word (the odd depth high). The kernel keeps a 32×32 block of C in
// four tiles and streams A and B through the other four, so it reads both
// operands packed, a step of 32 depths at a time (2 KiB each):
//
//   - A as strips of 32 rows: per step, the 32 rows' 32 depths, row by row;
//   - B as blocks of 32 columns: per step, two 16-column panels of 16
//     pairs, pair by pair.
//
// Rows, columns and depths past the matrices are packed as zeros, so every
// tile is whole and the kernel has no edge cases.
const (
	amxStripRows  = 32
	amxBlockCols  = 32
	amxStepDepth  = 32
	amxStepElems  = amxStripRows * amxStepDepth // bfloat16 per packed A step
	amxStepWords  = amxBlockCols * amxStepDepth / 2
	amxBlockElems = amxStripRows * amxBlockCols // float32 per C block
	// amxGroupBlocks column blocks (256 columns) make a unit of work: the
	// A strip is packed once per unit and read from L1/L2 for each block,
	// while the group's packed B (256 columns × K) stays in L2. A product
	// of few strips (a small batch) takes smaller groups, down to one
	// block, until every worker has a unit (amxGroup).
	amxGroupBlocks = 8
	// amxCallSteps bounds the steps × blocks of one kernel call, about
	// 10 µs: the garbage collector cannot stop a goroutine inside
	// assembly, and every call reloads the tile configuration (~50 ns)
	// and ramps up (~0.3 µs), which this keeps to a few percent. A call
	// still takes one whole block, so depths past 8192 make longer calls.
	amxCallSteps = 256
)

// amxStripFunc multiplies a packed A strip of steps steps by blocks
// consecutive packed B blocks, writing each 32×32 float32 block of the
// product, row-major, to c (blocks·1024 floats): the AMX kernel
// (amxBF16Strip) or its Go model (amxStripGo).
type amxStripFunc func(cfg *amxTileConfig, a *uint16, b *uint32, c *float32, steps, blocks int)

// amxTileConfig is the 64-byte operand of LDTILECFG: palette 1, and every
// tile 16 rows of 64 bytes.
type amxTileConfig [64]byte

var amxTiles = func() (cfg amxTileConfig) {
	cfg[0] = 1
	for t := range 8 {
		cfg[16+2*t] = 64 // bytes per row
		cfg[48+t] = 16   // rows
	}
	return cfg
}()

// amxEmulate, set by tests only, sends GemmBF16 down the AMX path on any
// CPU, with the Go model of the kernel: the packing and the blocking are
// then tested wherever the tests run, the kernel itself where AMX is.
var amxEmulate bool

// amxKernel returns the kernel the AMX path runs on, or nil where GemmBF16
// takes another path.
func amxKernel() amxStripFunc {
	if amxEmulate {
		return amxStripGo
	}
	return amxAsmKernel()
}

// amxStripGo is the Go model of amxBF16Strip: per step, per depth pair,
// the even depth's product then the odd one's added in float32. The
// hardware's order within a step is its own and it flushes subnormals, so
// the two agree exactly only where the sums are exact.
func amxStripGo(_ *amxTileConfig, a *uint16, b *uint32, c *float32, steps, blocks int) {
	as := unsafe.Slice(a, steps*amxStepElems)
	bs := unsafe.Slice(b, blocks*steps*amxStepWords)
	cs := unsafe.Slice(c, blocks*amxBlockElems)
	for q := range blocks {
		out := cs[q*amxBlockElems : (q+1)*amxBlockElems]
		clear(out)
		for s := range steps {
			at := as[s*amxStepElems : (s+1)*amxStepElems]
			bt := bs[(q*steps+s)*amxStepWords : (q*steps+s+1)*amxStepWords]
			for r := range amxStripRows {
				arow := at[r*amxStepDepth : (r+1)*amxStepDepth]
				for j := range amxBlockCols {
					panel := bt[j/16*256:]
					acc := out[r*amxBlockCols+j]
					for p := range amxStepDepth / 2 {
						w := panel[p*16+j%16]
						acc += F32FromBF16(arow[2*p]) * F32FromBF16(uint16(w))
						acc += F32FromBF16(arow[2*p+1]) * F32FromBF16(uint16(w>>16))
					}
					out[r*amxBlockCols+j] = acc
				}
			}
		}
	}
}

// amxState is the AMX path's part of a GemmBF16 call.
type amxState struct {
	kernel         amxStripFunc
	steps, blocks  int      // depth steps and column blocks
	group          int      // column blocks per unit
	groups         int      // units of work per strip
	packed         []uint32 // B, packed whole
	packBFn, runFn func(lo, hi int)
}

// amxBufs are a call's packed B and a worker's packed A strip and C
// blocks.
type amxBufs struct {
	b []uint32
	a []uint16
	c []float32
}

var amxBufPool = freeList[amxBufs]{New: newOf[amxBufs]}

// amx computes the call's product on AMX tiles with kernel: B packed
// whole, then units of one A strip × a group of column blocks shared out
// among the workers. Every element is summed by one kernel call in the
// same order whatever the thread count.
func (g *sbgemmCall) amx(kernel amxStripFunc) {
	x := &g.amxState
	x.kernel = kernel
	x.steps = (g.k + amxStepDepth - 1) / amxStepDepth
	x.blocks = (g.n + amxBlockCols - 1) / amxBlockCols
	strips := (g.m + amxStripRows - 1) / amxStripRows
	workers := Threads()
	if g.serial {
		workers = 1
	}
	x.group = amxGroup(strips, x.blocks, workers)
	x.groups = (x.blocks + x.group - 1) / x.group
	buf := amxBufPool.get()
	x.packed = alignedGrow(&buf.b, x.blocks*x.steps*amxStepWords)
	g.parallel(x.blocks, x.blocks*x.steps*amxStepWords, x.packBFn)
	g.parallel(strips*x.groups, g.m*g.n*g.k, x.runFn)
	x.packed, x.kernel = nil, nil
	if cap(buf.b)*4 > amxKeepB {
		buf.b = nil // a one-off large product's B is not held for good
	}
	amxBufPool.put(buf)
}

// amxGroup returns the column blocks per unit for strips × blocks on
// workers: amxGroupBlocks, halved while the units are fewer than the
// workers (a batch of one on 16 cores had 4 units for 16 workers). The
// group changes which call sums an element, never how, so the bits do not
// depend on it.
func amxGroup(strips, blocks, workers int) int {
	g := amxGroupBlocks
	for g > 1 && strips*((blocks+g-1)/g) < workers {
		g /= 2
	}
	return g
}

// amxKeepB is the largest packed B, in bytes, whose buffer the pool keeps
// for the next call: a 4096×4096 B (32 MiB packed) and below.
var amxKeepB = 32 << 20

// amxPackB packs B's column blocks [lo, hi): each step's two 16-column
// panels, whole pairs by the AVX-512 packer (row-major B) or as words
// (a transposed B whose stored rows hold its pairs), the rest one by one.
func (g *sbgemmCall) amxPackB(lo, hi int) {
	x := &g.amxState
	for cb := lo; cb < hi; cb++ {
		for s := range x.steps {
			out := x.packed[(cb*x.steps+s)*amxStepWords : (cb*x.steps+s+1)*amxStepWords]
			k0 := s * amxStepDepth
			whole := max(0, min(16, (g.k-k0)/2)) // pairs with both depths in B
			for h := range 2 {
				j0 := cb*amxBlockCols + h*16
				w := max(0, min(16, g.n-j0))
				panel := out[h*256 : (h+1)*256]
				done := 0
				switch {
				case w == 0 || whole == 0:
				case !g.transB:
					if amxPackRows(panel, g.b[k0*g.ldb+j0:(k0+2*whole-1)*g.ldb+j0+w], g.ldb, whole, w) {
						done = whole
					}
				case g.ldb%2 == 0:
					for c := range w {
						col := words(g.b[(j0+c)*g.ldb+k0 : (j0+c)*g.ldb+k0+2*whole])
						for p, v := range col {
							panel[p*16+c] = v
						}
					}
					if w < 16 {
						for p := range whole {
							clear(panel[p*16+w : p*16+16])
						}
					}
					done = whole
				}
				for p := done; p < 16; p++ {
					d := k0 + 2*p
					dst := panel[p*16 : p*16+16]
					if w == 0 || d >= g.k {
						clear(dst)
						continue
					}
					for c := range w {
						v := uint32(g.bAt(d, j0+c))
						if d+1 < g.k {
							v |= uint32(g.bAt(d+1, j0+c)) << 16
						}
						dst[c] = v
					}
					clear(dst[w:])
				}
			}
		}
	}
}

// amxPackA packs A's row strip (rows from 32·strip) into dst.
func (g *sbgemmCall) amxPackA(dst []uint16, strip int) {
	x := &g.amxState
	i0 := strip * amxStripRows
	rows := min(amxStripRows, g.m-i0)
	if !g.transA {
		// Whole steps as fixed-size copies, which compile to a few vector
		// moves: a copy call for every 64 bytes cost more than the moves.
		whole := g.k / amxStepDepth
		for r := range amxStripRows {
			if r >= rows {
				for s := range x.steps {
					clear(dst[(s*amxStripRows+r)*amxStepDepth:][:amxStepDepth])
				}
				continue
			}
			row := g.a[(i0+r)*g.lda : (i0+r)*g.lda+g.k]
			for s := range whole {
				*(*[amxStepDepth]uint16)(dst[(s*amxStripRows+r)*amxStepDepth:]) = *(*[amxStepDepth]uint16)(row[s*amxStepDepth:])
			}
			if whole < x.steps {
				d := dst[(whole*amxStripRows+r)*amxStepDepth:][:amxStepDepth]
				n := copy(d, row[whole*amxStepDepth:])
				clear(d[n:])
			}
		}
		return
	}
	// A transposed: depth p's stored row holds the strip's rows side by
	// side.
	for s := range x.steps {
		step := dst[s*amxStepElems : (s+1)*amxStepElems]
		for d := range amxStepDepth {
			p := s*amxStepDepth + d
			if p >= g.k {
				for r := range amxStripRows {
					step[r*amxStepDepth+d] = 0
				}
				continue
			}
			src := g.a[p*g.lda+i0 : p*g.lda+i0+rows]
			for r, v := range src {
				step[r*amxStepDepth+d] = v
			}
			for r := rows; r < amxStripRows; r++ {
				step[r*amxStepDepth+d] = 0
			}
		}
	}
}

// amxRun computes units [lo, hi): unit u is strip u/groups times column
// group u%groups, each stored into C as soon as it is summed.
func (g *sbgemmCall) amxRun(lo, hi int) {
	x := &g.amxState
	buf := amxBufPool.get()
	defer amxBufPool.put(buf)
	a := alignedGrow(&buf.a, x.steps*amxStepElems)
	c := alignedGrow(&buf.c, x.group*amxBlockElems)
	perCall := max(1, amxCallSteps/x.steps)
	packed := -1
	for u := lo; u < hi; u++ {
		strip, b0 := u/x.groups, u%x.groups*x.group
		b1 := min(b0+x.group, x.blocks)
		if strip != packed {
			g.amxPackA(a, strip)
			packed = strip
		}
		for q := b0; q < b1; q += perCall {
			x.kernel(&amxTiles, &a[0], &x.packed[q*x.steps*amxStepWords], &c[(q-b0)*amxBlockElems], x.steps, min(perCall, b1-q))
		}
		g.amxFinish(c, strip, b0, b1)
	}
}

// amxFinish stores the summed blocks [b0, b1) of a strip, c, into C:
// alpha times the sum, plus beta times C where beta is not 0 (C is not
// read otherwise).
func (g *sbgemmCall) amxFinish(c []float32, strip, b0, b1 int) {
	i0, j0 := strip*amxStripRows, b0*amxBlockCols
	rows := min(amxStripRows, g.m-i0)
	width := min((b1-b0)*amxBlockCols, g.n-j0)
	for r := range rows {
		idx := (i0+r)*g.ldc + j0
		row := g.c[idx : idx+width]
		for jb := 0; jb < width; jb += amxBlockCols {
			dst := row[jb:min(jb+amxBlockCols, width)]
			src := c[jb/amxBlockCols*amxBlockElems+r*amxBlockCols:][:len(dst)]
			switch {
			case g.alpha == 1 && g.beta == 0 && len(dst) == amxBlockCols:
				*(*[amxBlockCols]float32)(dst) = *(*[amxBlockCols]float32)(src)
			case g.alpha == 1 && g.beta == 0:
				copy(dst, src)
			case g.beta == 0:
				for j, v := range src {
					dst[j] = g.alpha * v
				}
			default:
				for j, v := range src {
					dst[j] = g.alpha*v + g.beta*dst[j]
				}
			}
		}
	}
}

// alignedGrow is growBuf for buffers the tiles load from: they start on a
// 64-byte boundary, as a tile row is 64 bytes.
func alignedGrow[T uint16 | uint32 | float32](b *[]T, n int) []T {
	var z T
	size := int(unsafe.Sizeof(z))
	if cap(*b) < n+64/size {
		*b = make([]T, n+64/size)
	}
	s := (*b)[:cap(*b)]
	off := 0
	if r := int(uintptr(unsafe.Pointer(&s[0])) & 63); r != 0 {
		off = (64 - r) / size
	}
	return s[off : off+n]
}
