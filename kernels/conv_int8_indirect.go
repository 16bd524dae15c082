package kernels

import "encoding/binary"

// The indirect INT8 convolution skips im2col. The input is copied once
// into a padded buffer: the padding filled with z_x, each pixel's channels
// padded with z_x to a multiple of four, so that every tap of every output
// pixel lies inside the buffer and each kernel row's taps (KW·Cp bytes,
// without horizontal dilation) are whole groups of four depths. A strip's
// twelve output pixels are then read in place: row r of A is the buffer
// from its pixel's first tap on, one kernel row (a segment) at a time, and
// the micro-kernel takes each row's address from a table rather than a
// fixed stride. Pixels of a strip may thus lie in different output rows or
// images. Padding reads z_x exactly as im2col writes it, and the padded
// channels meet zero weights, so the int32 sums, and every result, are the
// im2col path's bit for bit.
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
// input a (dimensions dp×hp×wp per image, cp channels a pixel), the
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
// for s, or nil where it does not apply: several groups, or a padded depth
// too long for exact int32 sums.
func (cw *ConvWeightsInt8) indirectPack() *PackedInt8 {
	if cw.groups != 1 {
		return nil
	}
	if cw.c%4 == 0 {
		return cw.packs[0]
	}
	return cw.padded
}

// packPadded packs the channels-last weight wl ([O][ks][C]) with each
// tap's channels padded with zeros to a multiple of four, for the
// indirect convolution of an input whose channels are so padded.
func packPadded(o, c, ks int, wl []int8) *PackedInt8 {
	cp := (c + 3) &^ 3
	if ks*cp > Int8MaxK {
		return nil
	}
	w := make([]int8, o*ks*cp)
	for i := range o * ks {
		copy(w[i*cp:i*cp+c], wl[i*c:(i+1)*c])
	}
	return PackInt8(o, ks*cp, w, ks*cp)
}

// forwardIndirect convolves the channels-last x into out with the
// indirect method, using the packed weights pw.
func (j *convInt8Job) forwardIndirect(x []uint8, pw *PackedInt8, out int8Out, ep *Int8Epilogue) {
	s := &j.s
	c := &j.ind
	c.cp = (s.C + 3) &^ 3
	c.dp, c.hp, c.wp = s.In[0]+2*s.Pad[0], s.In[1]+2*s.Pad[1], s.In[2]+2*s.Pad[2]
	c.od, c.oh, c.ow = s.Out[0], s.Out[1], s.Out[2]
	c.stride = s.Stride
	c.tile = j.tile
	if s.Pad == [3]int{} && c.cp == s.C {
		c.a = x
	} else {
		j.x = x
		c.a = growBuf(&j.xpBuf, s.N*c.dp*c.hp*c.wp*c.cp)
		j.zrow = growBuf(&j.zrowBuf, c.wp*c.cp)
		for i := range j.zrow {
			j.zrow[i] = uint8(j.zX)
		}
		rows := s.N * c.dp * c.hp
		Parallel(rows, len(c.a), j.padFn)
	}
	c.segs = c.segs[:0]
	KD, KH, KW := s.Kernel[0], s.Kernel[1], s.Kernel[2]
	rowBytes := c.wp * c.cp
	for kd := range KD {
		for kh := range KH {
			off := (kd*s.Dil[0]*c.hp + kh*s.Dil[1]) * rowBytes
			g0 := (kd*KH + kh) * KW * c.cp / 4
			if s.Dil[2] == 1 {
				c.segs = append(c.segs, tapRun{off: off, g0: g0, gc: KW * c.cp / 4})
				continue
			}
			for kw := range KW {
				c.segs = append(c.segs, tapRun{off: off + kw*s.Dil[2]*c.cp, g0: g0 + kw*c.cp/4, gc: c.cp / 4})
			}
		}
	}
	out.ldc = s.O
	runInt8(j.op, s.N*s.outSize(), nil, 0, j.zX, pw, out, ep, nil, c)
	c.a, j.x, j.zrow = nil, nil, nil
}

// padRows writes rows [lo, hi) of the padded input (image n, depth d,
// row h of the padded dimensions): the input's pixels with their channels
// padded, z_x everywhere else (copied from j.zrow, a padded row of z_x).
func (j *convInt8Job) padRows(lo, hi int) {
	s, c := &j.s, &j.ind
	C, W, cp := s.C, s.In[2], c.cp
	rowBytes := c.wp * cp
	left := s.Pad[2] * cp
	for r := lo; r < hi; r++ {
		dst := c.a[r*rowBytes : (r+1)*rowBytes]
		h := r%c.hp - s.Pad[1]
		d := r/c.hp%c.dp - s.Pad[0]
		n := r / (c.hp * c.dp)
		if d < 0 || d >= s.In[0] || h < 0 || h >= s.In[1] {
			copy(dst, j.zrow)
			continue
		}
		src := j.x[((n*s.In[0]+d)*s.In[1]+h)*W*C:][:W*C]
		if cp == C {
			copy(dst[:left], j.zrow)
			copy(dst[left:], src)
			copy(dst[left+W*C:], j.zrow)
			continue
		}
		// A few channels a pixel (the stem's three): bytes over z_x, not
		// a copy call each.
		copy(dst, j.zrow)
		px := dst[left : left+W*cp]
		if C == 3 {
			zhi := uint32(j.zX) << 24
			for w := range W {
				q := src[3*w : 3*w+3]
				binary.LittleEndian.PutUint32(px[4*w:], uint32(q[0])|uint32(q[1])<<8|uint32(q[2])<<16|zhi)
			}
			continue
		}
		for w := range W {
			p, q := px[w*cp:w*cp+C], src[w*C:(w+1)*C]
			for k := range p {
				p[k] = q[k]
			}
		}
	}
}
