//go:build amd64 && !noasm

package kernels

import "unsafe"

// The INT8 GEMM variants by level. VNNI is a feature beside the AVX-512
// levels rather than a level of its own, so the AVX512 slot (and the
// levels above it, through pick) holds the VNNI variant only on a CPU with
// AVX512_VNNI; elsewhere the AVX2 variant serves every level from AVX2 up.
var u8s8StripVariants = func() [levelCount]int8StripFunc {
	v := [levelCount]int8StripFunc{Generic: u8s8StripGeneric, AVX2: u8s8StripAVX2}
	if caps.vnni {
		v[AVX512] = u8s8StripVNNI
	}
	return v
}()

// Implemented in gemm_int8_amd64.s. Both micro-kernels read kg ≥ 1 groups
// of four depths of rows of A lda bytes apart, and weight panels in
// PackInt8's layout (groups 128 bytes apart), and walk right across tiles
// tiles of C, bStep bytes of weight and one tile's width of int32 C apart;
// they store the int32 sums into C (rows ldc int32 apart), or add them to
// it when add is 1.

// indTileFor is the indirect convolution's tile at level l: the VNNI
// kernels, none at the AVX2 levels (whose 6×8 kernel reads A at a fixed
// stride, so they keep im2col), the reference below AVX2.
func indTileFor(l Level) int8IndTileFunc {
	switch {
	case l >= AVX512 && caps.vnni:
		return u8s8IndTileVNNI
	case l >= AVX2:
		return nil
	}
	return u8s8IndTileGeneric
}

// u8s8IndTileVNNI is the int8IndTileFunc of the indirect VNNI kernels:
// pairs of panels in two halves of six rows, a last odd panel likewise in
// the 6×32 kernel.
func u8s8IndTileVNNI(pw *PackedInt8, a []uint8, segs []tapRun, rowOff *[int8MR]int, rows, p0, np int, acc []int32) {
	const half = int8MR / 2
	if len(segs) == 0 {
		return
	}
	ps := pw.kg * 4 * int8PanelWidth
	ld := np * int8PanelWidth
	for h := 0; h < rows; h += half {
		ro := &rowOff[h]
		c := acc[h*ld:]
		p := 0
		for ; p+2 <= np; p += 2 {
			u8s8KernelVNNI64Ind(&segs[0], len(segs), &a[0], ro, &pw.data[(p0+p)*ps], ps, &c[p*int8PanelWidth], ld)
		}
		if p < np {
			u8s8KernelVNNI32Ind(&segs[0], len(segs), &a[0], ro, &pw.data[(p0+p)*ps], &c[p*int8PanelWidth], ld)
		}
	}
}

// u8s8KernelVNNI64Ind is u8s8KernelVNNI64 over the segments segs, with
// row r of A at a + rows[r] (six offsets), storing the sums.
//
//go:noescape
func u8s8KernelVNNI64Ind(segs *tapRun, nseg int, a *uint8, rows *int, b *int8, ps int, c *int32, ldc int)

// u8s8KernelVNNI32Ind is the same for one panel of 32 channels.
//
//go:noescape
func u8s8KernelVNNI32Ind(segs *tapRun, nseg int, a *uint8, rows *int, b *int8, c *int32, ldc int)

// u8s8KernelVNNI multiplies tiles of 12 rows by 32 channels (a whole panel)
// with VPDPBUSD on ZMM registers.
//
//go:noescape
func u8s8KernelVNNI(kg int, a *uint8, lda int, b *int8, bStep int, c *int32, ldc int, tiles int, add int)

// u8s8KernelAVX2 multiplies tiles of 6 rows by 8 channels (a quarter
// panel): A already widened to 16 bits (lda in bytes), the weight bytes
// widened as they load, VPMADDWD and VPADDD, exact for every value.
//
//go:noescape
func u8s8KernelAVX2(kg int, a *uint16, lda int, b *int8, bStep int, c *int32, ldc int, tiles int, add int)

// u8s8StripVNNI is the int8StripFunc of the VNNI micro-kernels: pairs of
// panels in two halves of six rows (6×64 tiles need a broadcast of A per
// four VPDPBUSD rather than per two), a last odd panel in one 12×32 tile.
func u8s8StripVNNI(g *int8Call, s *int8Scratch, i, rows, p0, np, g0, gc int, add bool) {
	pw := g.pw
	a, lda := g.stripA(s, i, rows, int8MR, g0, gc)
	ps := pw.kg * 4 * int8PanelWidth
	ld := np * int8PanelWidth
	p := 0
	for ; p+2 <= np; p += 2 {
		b := &pw.data[(p0+p)*ps+g0*4*int8PanelWidth]
		u8s8KernelVNNI64(gc, a, lda, b, ps, &s.acc[p*int8PanelWidth], ld, b2i(add))
		if rows > int8MR/2 {
			u8s8KernelVNNI64(gc, (*uint8)(unsafe.Add(unsafe.Pointer(a), int8MR/2*lda)), lda, b, ps, &s.acc[int8MR/2*ld+p*int8PanelWidth], ld, b2i(add))
		}
	}
	if p < np {
		u8s8KernelVNNI(gc, a, lda, &pw.data[(p0+p)*ps+g0*4*int8PanelWidth], ps, &s.acc[p*int8PanelWidth], ld, 1, b2i(add))
	}
}

// u8s8StripAVX2 is the int8StripFunc of the AVX2 micro-kernel: two halves
// of six rows, each widened to 16 bits once and then read by every panel,
// each panel in four tiles of eight channels. Widening in the kernel
// would cost a shuffle per row and group, on the port VPMADDWD leaves
// free for little else.
func u8s8StripAVX2(g *int8Call, s *int8Scratch, i, rows, p0, np, g0, gc int, add bool) {
	const mr = int8MR / 2
	pw := g.pw
	ps := pw.kg * 4 * int8PanelWidth
	ld := np * int8PanelWidth
	for h := 0; h < rows; h += mr {
		a, lda := g.stripA16(s, i+h, min(mr, rows-h), mr, g0, gc)
		for p := 0; p < np; p++ {
			u8s8KernelAVX2(gc, a, lda, &pw.data[(p0+p)*ps+g0*4*int8PanelWidth], 32, &s.acc[h*ld+p*int8PanelWidth], ld, 4, b2i(add))
		}
	}
}

// stripA16 widens rows [i, i+rows) of A, depth groups [g0, g0+gc), to 16
// bits in s.a16 for a micro-kernel of mr rows, zero past the rows and past
// k, and returns it with its row stride in bytes.
func (g *int8Call) stripA16(s *int8Scratch, i, rows, mr, g0, gc int) (*uint16, int) {
	w := (4*gc + 15) &^ 15
	if cap(s.a16) < mr*w {
		s.a16 = make([]uint16, mr*w)
	}
	a16 := s.a16[:mr*w]
	q0, q1 := 4*g0, min(4*(g0+gc), g.pw.k)
	n := q1 - q0
	for r := range mr {
		d := a16[r*w : (r+1)*w]
		if r >= rows {
			clear(d)
			continue
		}
		src := g.a[(i+r)*g.lda+q0 : (i+r)*g.lda+q1]
		body := n &^ 15
		if body > 0 {
			widenU8(&d[0], &src[0], body)
		}
		for q := body; q < n; q++ {
			d[q] = uint16(src[q])
		}
		clear(d[n:])
	}
	return &a16[0], 2 * w
}

// widenU8 sets dst[i] = src[i] for n bytes, n a multiple of 16.
//
//go:noescape
func widenU8(dst *uint16, src *uint8, n int)

// stripA returns where a micro-kernel of mr rows reads rows [i, i+rows) of
// A, depth groups [g0, g0+gc), and their stride: A itself, or a copy in
// s.a, zero-padded, when the strip is short of mr rows or its last group
// would read past the end of A. (Reading a group past k but inside A is
// harmless: the packed weights there are zero.)
func (g *int8Call) stripA(s *int8Scratch, i, rows, mr, g0, gc int) (*uint8, int) {
	if rows == mr && (i+mr-1)*g.lda+4*(g0+gc) <= len(g.a) {
		return &g.a[i*g.lda+4*g0], g.lda
	}
	w := 4 * gc
	if cap(s.a) < mr*w {
		s.a = make([]uint8, mr*w)
	}
	s.a = s.a[:mr*w]
	clear(s.a)
	q0, q1 := 4*g0, min(4*(g0+gc), g.pw.k)
	for r := 0; r < rows; r++ {
		copy(s.a[r*w:], g.a[(i+r)*g.lda+q0:(i+r)*g.lda+q1])
	}
	return &s.a[0], w
}

// u8s8KernelVNNI64 multiplies one tile of 6 rows by 64 channels (two
// panels, ps bytes apart) with VPDPBUSD on ZMM registers.
//
//go:noescape
func u8s8KernelVNNI64(kg int, a *uint8, lda int, b *int8, ps int, c *int32, ldc int, add int)

// prefetchRows fetches the cache lines of rows rows of n ≥ 1 bytes, stride
// bytes apart from p, toward L2 (a hint: it reads nothing into Go).
//
//go:noescape
func prefetchRows(p unsafe.Pointer, n int, stride int, rows int)
