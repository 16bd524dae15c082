//go:build amd64 && !noasm

package kernels

// The channels-last forward convolution without an im2col matrix: the
// GEMM asks for A a 6-pixel panel at a time and convJob.packA gathers it
// straight from the input into the packed layout. Writing the im2col
// matrix and then packing it read and wrote every element twice; this
// reads the input once per kernel tap and writes the panel once.

// forwardImplicit computes y = conv(x, w) + bias for one group in
// channels-last layout through the implicit-A GEMM, with the bias in its
// epilogue. It reports false, doing nothing, where that path does not
// apply: several groups, no blocked GEMM at this level, or channels not a
// multiple of 8 (the first layer's 3), whose taps are too short for the
// vector packer and gather faster as whole im2col rows.
func (j *convJob) forwardImplicit() bool {
	s := &j.s
	if s.Groups != 1 || s.C%8 != 0 || level < AVX2 {
		return false
	}
	// The bias, residual and activation run in the GEMM's epilogue, on
	// each tile as it is finished.
	if !sgemmImplicitA(j, true, j.rows*j.ow, s.O, j.kc, j.w, j.kc, j.packed, j.y, s.O, j.ep.gemm(j.bias)) {
		return false
	}
	j.epDone = true
	return true
}

// packA packs pixels [i0, i0+rows) of the batch (the rows of the implicit
// im2col matrix) at depths [p0, p0+kc): depth p is channel p mod C of
// kernel tap p / C, zero where the tap reads padding. Where the six pixels
// of a full panel read their tap at a constant stride (one output row, no
// padding) a run of channels is one assembly pack straight from x;
// elsewhere the rows are copied together first.
func (j *convJob) packA(dst []float32, i0, rows, p0, kc int) {
	s := &j.s
	C := s.C
	// Each pixel's image and the input coordinates its tap (0, 0, 0)
	// reads, stepping along the output rather than dividing per pixel.
	var n, d0, h0, w0 [gemmMR]int
	OD, OH, OW := s.Out[0], s.Out[1], s.Out[2]
	ow, oh, od, img := i0%OW, i0/OW%OH, i0/(OW*OH)%OD, i0/(OW*OH*OD)
	for r := range rows {
		n[r] = img
		d0[r] = od*s.Stride[0] - s.Pad[0]
		h0[r] = oh*s.Stride[1] - s.Pad[1]
		w0[r] = ow*s.Stride[2] - s.Pad[2]
		if ow++; ow == OW {
			ow = 0
			if oh++; oh == OH {
				oh = 0
				if od++; od == OD {
					od, img = 0, img+1
				}
			}
		}
	}
	KH, KW := s.Kernel[1], s.Kernel[2]
	t := p0 / C
	kw, kh, kd := t%KW, t/KW%KH, t/(KW*KH)
	var src [gemmMR]int // input offset of each pixel's tap, −1 for padding
	for ; t*C < p0+kc; t++ {
		a, b := max(t*C, p0), min((t+1)*C, p0+kc)
		for r := range gemmMR {
			src[r] = -1
			if r >= rows {
				continue
			}
			id, ih, iw := d0[r]+kd*s.Dil[0], h0[r]+kh*s.Dil[1], w0[r]+kw*s.Dil[2]
			if id >= 0 && id < s.In[0] && ih >= 0 && ih < s.In[1] && iw >= 0 && iw < s.In[2] {
				src[r] = (((n[r]*s.In[0]+id)*s.In[1]+ih)*s.In[2] + iw) * C
			}
		}
		if kw++; kw == KW {
			kw = 0
			if kh++; kh == KH {
				kh, kd = 0, kd+1
			}
		}
		d := dst[(a-p0)*gemmMR:]
		if j.x16 != nil {
			packTap(j.x16, src, a-t*C, b-a, d, gemmPackAN6BF16, packRowsAN6BF16, F32FromBF16)
		} else {
			packTap(j.x, src, a-t*C, b-a, d, gemmPackAN6, packRowsAN6, func(v float32) float32 { return v })
		}
	}
}

// packTap packs cnt channels from c0 of one kernel tap, read at src[r]
// in x for each pixel r (zeros where src[r] < 0), into dst: pack and
// packRows are the panel packers for x's element type, widen its scalar
// form. src comes by value: a pointer handed on to a function value would
// send the caller's array to the heap on every call.
func packTap[T float32 | uint16](x []T, src [gemmMR]int, c0, cnt int, dst []float32,
	pack func(kc8 int, a *T, lda int, dst *float32), packRows func(x []T, src [gemmMR]int, c0, n int, dst []float32),
	widen func(T) float32) {
	if n8 := cnt &^ 7; n8 > 0 {
		if stride := src[1] - src[0]; src[0] >= 0 && stride > 0 && evenlySpaced(src[:], stride) {
			pack(n8, &x[src[0]+c0], stride, &dst[0])
		} else {
			packRows(x, src, c0, n8, dst)
		}
		c0 += n8
		dst = dst[n8*gemmMR:]
		cnt -= n8
	}
	for r, o := range src {
		if o < 0 {
			for p := range cnt {
				dst[p*gemmMR+r] = 0
			}
			continue
		}
		for p, v := range x[o+c0 : o+c0+cnt] {
			dst[p*gemmMR+r] = widen(v)
		}
	}
}

// packRowsAN6 packs n (a multiple of 8) floats from x at src[r]+c0 for
// each row r (zeros where src[r] < 0) into dst as gemmPackAN6 does: the
// rows are first copied side by side into a small buffer on the stack, so
// a panel whose pixels cross an output row or meet padding still packs
// with vector code.
func packRowsAN6(x []float32, src [gemmMR]int, c0, n int, dst []float32) {
	var buf [gemmMR * packRowsChunk]float32
	for c := 0; c < n; c += packRowsChunk {
		w := min(packRowsChunk, n-c)
		gatherRows(buf[:], x, &src, c0+c, w)
		gemmPackAN6(w, &buf[0], w, &dst[c*gemmMR])
	}
}

// packRowsAN6BF16 is packRowsAN6 for a bfloat16 x, widened as it packs.
func packRowsAN6BF16(x []uint16, src [gemmMR]int, c0, n int, dst []float32) {
	var buf [gemmMR * packRowsChunk]uint16
	for c := 0; c < n; c += packRowsChunk {
		w := min(packRowsChunk, n-c)
		gatherRows(buf[:], x, &src, c0+c, w)
		gemmPackAN6BF16(w, &buf[0], w, &dst[c*gemmMR])
	}
}

const packRowsChunk = 256

// gatherRows copies w elements from x at src[r]+c0 into row r of buf
// (rows w long), zeros where src[r] < 0.
func gatherRows[T float32 | uint16](buf, x []T, src *[gemmMR]int, c0, w int) {
	for r, o := range src {
		row := buf[r*w : (r+1)*w]
		if o < 0 {
			clear(row)
		} else {
			copy(row, x[o+c0:])
		}
	}
}

// evenlySpaced reports whether every offset is stride past the one before.
func evenlySpaced(o []int, stride int) bool {
	for r := 1; r < len(o); r++ {
		if o[r]-o[r-1] != stride {
			return false
		}
	}
	return true
}
