package kernels

import "unsafe"

// The blocked GEMM works on packed copies of its operands, so the
// micro-kernel reads both sequentially whatever the transpositions and
// leading dimensions (a row stride that is a multiple of 4 KiB otherwise
// makes rows alias in the L1 cache and halves the speed).
//
// B is cut into blocks of kc rows (the K blocking); within a block, each
// gemmNR columns form a panel of kc rows of gemmNR floats, panels back to
// back. A panel narrower than gemmNR (the last one) is zero-padded, so the
// micro-kernel always reads whole panels. A is packed a block of rows at a
// time, in panels of gemmMR rows: element p of row r of a panel at
// [p·gemmMR + r], rows past the edge zero, panels back to back.
const (
	gemmMR = 6    // rows of C per micro-kernel tile
	gemmNR = 16   // columns of C per micro-kernel tile (two AVX2 vectors)
	gemmKC = 384  // K block: an MR×KC A panel (9 KiB) and a KC×NR B panel (24 KiB) fit L1
	gemmNC = 256  // column block: KC×NC of packed B (384 KiB) stays in the 512 KiB L2
	gemmMC = 1020 // row block: MC×KC of packed A (1.5 MiB) stays in L3

	gemmKCWhole = 512 // the deepest K left in one block
)

// gemmKBlock returns the K block for depth k: at most gemmKC, with the
// blocks balanced so the last one is not a sliver; a depth of up to
// gemmKCWhole is one block, so C is read and written once (DLRM's
// 2048×512×415 Linear ran 6% faster than in two blocks of 208).
func gemmKBlock(k int) int {
	if k <= gemmKCWhole {
		return max(k, 1)
	}
	nb := (k + gemmKC - 1) / gemmKC
	return (k + nb - 1) / nb
}

// packBGo packs rows [pFrom, kc) of the panels of op(B)'s block at rows
// [p0, p0+kc), columns [j0, j0+cols) into dst (panel q at q·kc·gemmNR),
// zero-padding the columns of the last panel past cols. It is the Generic
// packer and the edge case of the assembly one.
func packBGo(transB bool, b []float32, ldb, p0, kc, pFrom, j0, cols int, dst []float32) {
	for q := 0; q*gemmNR < cols; q++ {
		w := min(gemmNR, cols-q*gemmNR)
		pan := dst[q*kc*gemmNR+pFrom*gemmNR : (q+1)*kc*gemmNR]
		if w < gemmNR {
			clear(pan)
		}
		jq := j0 + q*gemmNR
		if transB {
			// Stored row jq+jj of B is column jj of the panel.
			for jj := 0; jj < w; jj++ {
				src := b[(jq+jj)*ldb+p0+pFrom : (jq+jj)*ldb+p0+kc]
				for p, v := range src {
					pan[p*gemmNR+jj] = v
				}
			}
			continue
		}
		for p := 0; p < kc-pFrom; p++ {
			copy(pan[p*gemmNR:p*gemmNR+w], b[(p0+pFrom+p)*ldb+jq:])
		}
	}
}

// packAGo packs rows [i0, i0+rows) (rows ≤ gemmMR) and depths
// [p0+pFrom, p0+kc) of op(A) into dst[p·gemmMR + r], zero for r ≥ rows.
func packAGo(transA bool, a []float32, lda, i0, rows, p0, kc, pFrom int, dst []float32) {
	d := dst[pFrom*gemmMR : kc*gemmMR]
	if rows < gemmMR {
		clear(d)
	}
	for r := 0; r < rows; r++ {
		if transA {
			for p := range kc - pFrom {
				d[p*gemmMR+r] = a[(p0+pFrom+p)*lda+i0+r]
			}
			continue
		}
		src := a[(i0+r)*lda+p0+pFrom : (i0+r)*lda+p0+kc]
		for p, v := range src {
			d[p*gemmMR+r] = v
		}
	}
}

// alignedFloats returns n zeroed float32s starting on a 64-byte boundary:
// Go only guarantees 8, and a vector load split across cache lines costs
// a third of the kernel's speed.
func alignedFloats(n int) []float32 {
	buf := make([]float32, n+16)
	off := 0
	if r := uintptr(unsafe.Pointer(&buf[0])) & 63; r != 0 {
		off = int(64-r) / 4
	}
	return buf[off : off+n : off+n]
}
