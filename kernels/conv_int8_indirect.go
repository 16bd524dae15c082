package kernels

// The indirect INT8 convolution skips im2col. The input is copied once
// into a buffer padded with z_x (unless it needs no padding), so that
// every tap of every output pixel lies inside it. A strip's twelve output
// pixels are then read in place: row r of A is the buffer from its pixel's
// first tap on, one kernel row (a segment of KW·C bytes without
// horizontal dilation) at a time, and the micro-kernel takes each row's
// address from a table rather than a fixed stride. Pixels of a strip may
// thus lie in different output rows or images. Padding reads z_x exactly
// as im2col writes it, so the int32 sums, and every result, are the
// im2col path's bit for bit.
//
// The micro-kernels read whole groups of four depths. With C a multiple
// of four, so is every segment; otherwise the weights are packed with
// each kernel row padded with zeros to whole groups, and a segment reads
// up to three bytes past its row (the next pixel's, or slack past the
// buffer) against those zeros. (Dilated kernel rows of such channels keep
// im2col.)
//
// It serves convolutions with one group; grouped ones keep im2col.

// tapRun is one run of a pixel's taps: off bytes from the pixel's first
// tap in the padded input, gc ≥ 1 groups of four depths starting at group
// g0 of the packed weights. The assembly reads its three fields by offset.
type tapRun struct {
	off, g0, gc int
}

// int8IndTileFunc computes the int32 sums of a strip of the indirect
// convolution: rows (≤ int8MR) pixels whose first taps are rowOff[r]
// bytes into a, over all the segments segs, times the panels [p0, p0+np)
// of pw, into acc (rows np·32 apart). rowOff holds int8MR offsets, those
// past rows repeating a valid pixel: a micro-kernel may compute those rows
// too, and the caller ignores them.
type int8IndTileFunc func(pw *PackedInt8, a []uint8, segs []tapRun, rowOff *[int8MR]int, rows, p0, np int, acc []int32)

var u8s8IndTileImpl = indTileFor(level)

// u8s8IndTileGeneric is the reference: plain loops over the strip's rows,
// the segments' depths and each panel's 32 channels.
func u8s8IndTileGeneric(pw *PackedInt8, a []uint8, segs []tapRun, rowOff *[int8MR]int, rows, p0, np int, acc []int32) {
	ld := np * int8PanelWidth
	ps := pw.kg * 4 * int8PanelWidth
	for r := range rows {
		for p := range np {
			sums := acc[r*ld+p*int8PanelWidth:][:int8PanelWidth]
			clear(sums)
			for _, seg := range segs {
				row := a[seg.off+rowOff[r]:][:4*seg.gc]
				panel := pw.data[(p0+p)*ps+seg.g0*4*int8PanelWidth:]
				for q, x := range row {
					grp := panel[q/4*4*int8PanelWidth+q%4:]
					for c := range sums {
						sums[c] += int32(x) * int32(grp[4*c])
					}
				}
			}
		}
	}
}

// convIndirect is the geometry of one indirect convolution: the padded
// input a (dimensions dp×hp×wp per image, cp = C bytes a pixel), the
// segments of a pixel's taps, and the output's dimensions and strides
// that place each output pixel's first tap.
type convIndirect struct {
	a              []uint8
	segs           []tapRun
	tile           int8IndTileFunc
	dp, hp, wp, cp int
	od, oh, ow     int
	stride         [3]int
}

// strip computes the sums of output pixels [i, i+rows) for the panels
// [p0, p0+np) into s.acc, segment after segment.
func (c *convIndirect) strip(g *int8Call, s *int8Scratch, i, rows, p0, np int) {
	// Divide once, then step: a strip's pixels mostly follow each other
	// along a row of the output, and divisions would cost as much as
	// the products of a small convolution.
	ow, t := i%c.ow, i/c.ow
	oh, t := t%c.oh, t/c.oh
	od, n := t%c.od, t/c.od
	ro := &s.rowOff
	for r := range ro {
		if r >= rows {
			ro[r] = ro[rows-1]
			continue
		}
		ro[r] = (((n*c.dp+od*c.stride[0])*c.hp+oh*c.stride[1])*c.wp + ow*c.stride[2]) * c.cp
		if ow++; ow == c.ow {
			ow = 0
			if oh++; oh == c.oh {
				oh = 0
				if od++; od == c.od {
					od, n = 0, n+1
				}
			}
		}
	}
	c.tile(g.pw, c.a, c.segs, ro, rows, p0, np, s.acc)
}

// indirectPack returns the packed weights the indirect convolution reads
// for s, or nil where it does not apply: several groups, or channels not
// a multiple of four with a dilated kernel row or a padded depth too long
// for exact int32 sums.
func (cw *ConvWeightsInt8) indirectPack(s *ConvShape) *PackedInt8 {
	switch {
	case cw.groups != 1:
		return nil
	case cw.c%4 == 0:
		return cw.packs[0]
	case s.Dil[2] != 1:
		return nil
	}
	return cw.padded
}

// packRuns packs the channels-last weight wl ([O][kd][kh][kw·C]) with
// each kernel row's KW·C values padded with zeros to a multiple of four,
// for the indirect convolution of channels not a multiple of four: its
// segments then read whole groups, the bytes past a kernel row (the next
// pixel's, or slack) meeting zero weights.
func packRuns(o, c, rows, kw int, wl []int8) *PackedInt8 {
	run := kw * c
	run4 := (run + 3) &^ 3
	if rows*run4 > Int8MaxK {
		return nil
	}
	w := make([]int8, o*rows*run4)
	for i := range o * rows {
		copy(w[i*run4:i*run4+run], wl[i*run:(i+1)*run])
	}
	return PackInt8(o, rows*run4, w, rows*run4)
}

// indirectSlack is the bytes past the padded input a segment may read: a
// kernel row rounded up to whole groups.
const indirectSlack = 3

// forwardIndirect convolves the channels-last x into out with the
// indirect method, using the packed weights pw.
func (j *convInt8Job) forwardIndirect(x []uint8, pw *PackedInt8, out int8Out, ep *Int8Epilogue) {
	s := &j.s
	c := &j.ind
	C := s.C
	c.cp = C
	c.dp, c.hp, c.wp = s.In[0]+2*s.Pad[0], s.In[1]+2*s.Pad[1], s.In[2]+2*s.Pad[2]
	c.od, c.oh, c.ow = s.Out[0], s.Out[1], s.Out[2]
	c.stride = s.Stride
	c.tile = j.tile
	if s.Pad == [3]int{} && C%4 == 0 {
		c.a = x
	} else {
		j.x = x
		size := s.N * c.dp * c.hp * c.wp * C
		c.a = growBuf(&j.xpBuf, size+indirectSlack)
		clear(c.a[size:])
		j.zrow = growBuf(&j.zrowBuf, c.wp*C)
		for i := range j.zrow {
			j.zrow[i] = uint8(j.zX)
		}
		Parallel(s.N*c.dp*c.hp, size, j.padFn)
	}
	c.segs = c.segs[:0]
	KD, KH, KW := s.Kernel[0], s.Kernel[1], s.Kernel[2]
	rowBytes := c.wp * C
	for kd := range KD {
		for kh := range KH {
			off := (kd*s.Dil[0]*c.hp + kh*s.Dil[1]) * rowBytes
			if s.Dil[2] == 1 {
				run4 := (KW*C + 3) &^ 3
				c.segs = append(c.segs, tapRun{off: off, g0: (kd*KH + kh) * run4 / 4, gc: run4 / 4})
				continue
			}
			g0 := (kd*KH + kh) * KW * C / 4
			for kw := range KW {
				c.segs = append(c.segs, tapRun{off: off + kw*s.Dil[2]*C, g0: g0 + kw*C/4, gc: C / 4})
			}
		}
	}
	out.ldc = s.O
	runInt8(j.op, s.N*s.outSize(), nil, 0, j.zX, pw, out, ep, nil, c)
	c.a, j.x, j.zrow = nil, nil, nil
}

// padRows writes rows [lo, hi) of the padded input (image n, depth d,
// row h of the padded dimensions): the input's rows with z_x either side,
// or z_x alone (copied from j.zrow, a padded row of z_x).
func (j *convInt8Job) padRows(lo, hi int) {
	s, c := &j.s, &j.ind
	C, W := s.C, s.In[2]
	rowBytes := c.wp * C
	left := s.Pad[2] * C
	for r := lo; r < hi; r++ {
		dst := c.a[r*rowBytes : (r+1)*rowBytes]
		h := r%c.hp - s.Pad[1]
		d := r/c.hp%c.dp - s.Pad[0]
		n := r / (c.hp * c.dp)
		if d < 0 || d >= s.In[0] || h < 0 || h >= s.In[1] {
			copy(dst, j.zrow)
			continue
		}
		copy(dst[:left], j.zrow)
		copy(dst[left:], j.x[((n*s.In[0]+d)*s.In[1]+h)*W*C:][:W*C])
		copy(dst[left+W*C:], j.zrow)
	}
}
