//go:build amd64 && !noasm

package kernels

import (
	"math"
	"sync"
)

// The AVX2 GEMM: BLIS-style blocking around the 6×16 assembly micro-kernel.
//
//	for each column block jc of NC columns         (one per thread share)
//	  for each K block pc of KC                     pack B[pc, jc] → L2
//	    for each 6-row panel ir of A                pack A[ir, pc] → L1
//	      for each 16-column panel jr in the block  micro-kernel (asm loop)
//
// The A panel stays in L1 while the B block streams from L2; C is read
// and written once per K block, and the epilogue runs on the last one.

// gemmNegZero is the "no bias" operand of the assembly epilogue: adding −0
// leaves every value, zeros' signs included, as it was.
var gemmNegZero = func() (z [gemmNR]float32) {
	for i := range z {
		z[i] = float32(math.Copysign(0, -1))
	}
	return z
}()

// gemmScratch is one thread's packing space, pooled so calls do not
// allocate; every slice starts on a cache line.
type gemmScratch struct {
	b    []float32 // a packed KC×NC block of B
	a    []float32 // one packed A panel and the two floats gemmPackAN6 writes past it
	tile []float32 // one C tile, for edge tiles narrower than gemmNR
}

var gemmScratchPool = sync.Pool{New: func() any {
	return &gemmScratch{
		b:    alignedFloats(gemmKC * gemmNC),
		a:    alignedFloats(gemmMR*gemmKC + 8),
		tile: alignedFloats(gemmMR * gemmNR),
	}
}}

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
	pb             *PackedB // B already packed, or nil
	kc             int      // K block
	splitN         bool     // threads share columns (else rows)
	run            func(lo, hi int)
}

var gemmCallPool = sync.Pool{New: func() any {
	g := new(gemmCall)
	g.run = g.part
	return g
}}

func sgemmAVX2(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
	if k == 0 || alpha == 0 {
		gemmScaleC(m, n, beta, c, ldc, &ep)
		return
	}
	g := gemmCallPool.Get().(*gemmCall)
	*g = gemmCall{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc, ep: ep, kc: gemmKBlock(k), run: g.run}
	g.start()
	*g = gemmCall{run: g.run} // drop the references to the caller's memory
	gemmCallPool.Put(g)
}

func sgemmPackedAVX2(transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, ep Epilogue) {
	if pb.nr != gemmNR {
		sgemmPackedGeneric(transA, m, alpha, a, lda, pb, beta, c, ldc, ep)
		return
	}
	if pb.k == 0 || alpha == 0 {
		gemmScaleC(m, pb.n, beta, c, ldc, &ep)
		return
	}
	g := gemmCallPool.Get().(*gemmCall)
	*g = gemmCall{transA: transA, m: m, n: pb.n, k: pb.k, alpha: alpha, beta: beta,
		a: a, lda: lda, c: c, ldc: ldc, ep: ep, pb: pb, kc: pb.kc, run: g.run}
	g.start()
	*g = gemmCall{run: g.run}
	gemmCallPool.Put(g)
}

// gemmColBlock returns the column block for a share of cols columns: at
// most gemmNC, whole panels, balanced.
func gemmColBlock(cols int) int {
	nb := (cols + gemmNC - 1) / gemmNC
	w := (cols + nb - 1) / nb
	return (w + gemmNR - 1) / gemmNR * gemmNR
}

// start splits the product across the worker pool. Each share packs its
// own operands, so the split is the one that packs less per thread:
// sharing columns repacks A once per column block of the share, sharing
// rows packs the whole of B in every share.
func (g *gemmCall) start() {
	np := (g.n + gemmNR - 1) / gemmNR
	mp := (g.m + gemmMR - 1) / gemmMR
	t := Threads()
	switch {
	case np < t:
		g.splitN = false
	case mp < t:
		g.splitN = true
	default:
		blocks := func(cols int) int { return (cols + gemmNC - 1) / gemmNC }
		colsPer := (np + t - 1) / t * gemmNR
		rowsPer := (mp + t - 1) / t * gemmMR
		costN := g.m * g.k * blocks(colsPer)
		costM := rowsPer * g.k * blocks(g.n)
		if g.pb == nil {
			costN += g.k * colsPer
			costM += g.k * g.n
		}
		g.splitN = costN <= costM
	}
	units := mp
	if g.splitN {
		units = np
	}
	Parallel(units, g.m*g.n*g.k, g.run)
}

// part computes the share [lo, hi) of column panels or row panels.
func (g *gemmCall) part(lo, hi int) {
	i0, i1, j0, j1 := 0, g.m, 0, g.n
	if g.splitN {
		j0, j1 = lo*gemmNR, min(hi*gemmNR, g.n)
	} else {
		i0, i1 = lo*gemmMR, min(hi*gemmMR, g.m)
	}
	s := gemmScratchPool.Get().(*gemmScratch)
	g.block(s, i0, i1, j0, j1)
	gemmScratchPool.Put(s)
}

// block computes C[i0:i1, j0:j1]; j0 is a multiple of gemmNR.
func (g *gemmCall) block(s *gemmScratch, i0, i1, j0, j1 int) {
	nc := gemmColBlock(j1 - j0)
	var npad int
	if g.pb != nil {
		npad = g.pb.npad()
	}
	for jc := j0; jc < j1; jc += nc {
		ncw := min(nc, j1-jc)
		for pc := 0; pc < g.k; pc += g.kc {
			kc := min(g.kc, g.k-pc)
			bp := s.b
			if g.pb != nil {
				bp = g.pb.data[pc*npad+jc*kc:]
			} else {
				packBAVX2(g.transB, g.b, g.ldb, pc, kc, jc, ncw, bp)
			}
			beta := g.beta
			if pc > 0 {
				beta = 1
			}
			last := pc+kc == g.k
			for ir := i0; ir < i1; ir += gemmMR {
				rows := min(gemmMR, i1-ir)
				packAAVX2(g.transA, g.a, g.lda, ir, rows, pc, kc, s.a)
				g.strip(s, bp, kc, ir, rows, jc, ncw, beta, last)
			}
		}
	}
}

// strip multiplies the packed A panel (rows of C from ir) by the packed
// B block (ncw columns from jc) into C.
func (g *gemmCall) strip(s *gemmScratch, bp []float32, kc, ir, rows, jc, ncw int, beta float32, last bool) {
	ep := &g.ep
	lo := negInf
	colBias, colStride, rowBias := &gemmNegZero[0], 0, &gemmNegZero[0]
	relu := last && ep.Activate && ep.Act.Fn == ActReLU
	if last {
		if ep.Bias != nil {
			if ep.BiasPerRow {
				rowBias = &ep.Bias[ir]
			} else {
				colBias, colStride = &ep.Bias[jc], 4*gemmNR
			}
		}
		if relu {
			lo = 0
		}
	}
	c, ldc := g.c, g.ldc
	full := ncw / gemmNR
	if full > 0 {
		sgemmKernel6x16(kc, &s.a[0], &bp[0], &c[ir*ldc+jc], ldc, full, rows, g.alpha, beta, lo, colBias, colStride, rowBias)
	}
	if j := full * gemmNR; j < ncw {
		// The last panel is narrower than the kernel's tile: compute the
		// whole tile into scratch and finish the valid part here.
		t := s.tile
		sgemmKernel6x16(kc, &s.a[0], &bp[full*kc*gemmNR], &t[0], gemmNR, 1, rows, g.alpha, 0, negInf, &gemmNegZero[0], 0, &gemmNegZero[0])
		for r := 0; r < rows; r++ {
			crow := c[(ir+r)*ldc+jc+j : (ir+r)*ldc+jc+ncw]
			for jj := range crow {
				v := t[r*gemmNR+jj]
				if beta != 0 {
					v += beta * crow[jj]
				}
				if last && ep.Bias != nil {
					if ep.BiasPerRow {
						v += ep.Bias[ir+r]
					} else {
						v += ep.Bias[jc+j+jj]
					}
				}
				if relu && v < 0 {
					v = 0
				}
				crow[jj] = v
			}
		}
	}
	if last && ep.Activate && !relu {
		for r := 0; r < rows; r++ {
			crow := c[(ir+r)*ldc+jc : (ir+r)*ldc+jc+ncw]
			ep.Act.forward(crow, crow)
		}
	}
}

// packBAVX2 packs like packBGo, whole panels in assembly.
func packBAVX2(transB bool, b []float32, ldb, p0, kc, j0, cols int, dst []float32) {
	full := cols / gemmNR
	if full > 0 {
		if !transB {
			gemmPackBN16(kc, &b[p0*ldb+j0], ldb, &dst[0], full)
		} else {
			kc8 := kc &^ 7
			if kc8 > 0 {
				gemmPackBT16(kc8, &b[j0*ldb+p0], ldb, &dst[0], kc*gemmNR, full)
			}
			if kc8 < kc {
				packBGo(true, b, ldb, p0, kc, kc8, j0, full*gemmNR, dst)
			}
		}
	}
	if j := full * gemmNR; j < cols {
		packBGo(transB, b, ldb, p0, kc, 0, j0+j, cols-j, dst[full*kc*gemmNR:])
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
