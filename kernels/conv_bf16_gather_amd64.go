//go:build amd64 && !noasm

package kernels

import "unsafe"

// The gathered BF16 forward, for the convolutions the direct kernel's
// in-place read fits badly: output rows shorter than a few panels of
// twelve pixels (ResNet-50's 3×3 layers at 28² and below waste up to a
// third of the kernel on a row's last panel) and strided 1×1 layers.
// Panels of twelve output pixels run on across rows and images; a panel's
// im2col rows for one tap block are gathered into a small buffer that
// stays in L1 while every column tile of the block's weights reads it,
// and the tap blocks sum in a float32 tile of the panel's outputs. The
// weights stream from L2 or L3 once per panel: the kernel's 128 bytes of
// B per 24 VDPBF16PS leave room for that (measured on Zen 4, B of 4.5 MB:
// 225 GFLOP/s a core against 232 with B in L2). Against an im2col
// product, the im2col matrix (nine times the input for a 3×3 layer) is
// never written to memory nor packed again.
//
// Where the convolution pads, the pixels are sorted by the taps that fall
// inside the input (one class for the interior, one per edge and corner)
// and a panel takes twelve pixels of one class: it gathers and multiplies
// only those taps, as oneDNN's kernels skip the border's. At 7×7 with a
// 3×3 kernel that is 18% of the products; the scattered output rows are
// summed in the tile and stored row by row.

// gatherFitsBF16 reports whether the gathered BF16 forward takes s.
func gatherFitsBF16(s *ConvShape) bool {
	return sbgemmAsm() && s.Groups == 1 && s.O%32 == 0 && s.C%2 == 0 && !s.pointwise() && s.N > 0
}

// gatherClass is a class of output pixels with the same taps inside the
// input: those taps as runs [runs[2i], runs[2i+1]) of tap indices, and
// the last tap block holding one (−1: none).
type gatherClass struct {
	runs      []int
	lastBlock int
}

// gatherPanel is a panel of the sorted gathered forward: rows pixels of
// class from order[start].
type gatherPanel struct {
	class, start, rows int32
}

// forwardGather runs the forward on the gathered path.
func (c *convBF16) forwardGather(w []uint16) {
	s, d := &c.s, &c.direct
	if c.pre != nil {
		d.blocks = c.pre.directB(s, w)
	} else {
		all := words(growBuf(&c.bpBuf, c.k*s.O))
		d.blocks = c.packDirectBlocks(w, d.blocksBuf[:0], func(n int) []uint32 {
			b := all[:n]
			all = all[n:]
			return b
		})
		d.blocksBuf = d.blocks
	}
	d.tb, d.nc = d.directBlocking(s.O) // packing left its last block's sizes there
	panels := (c.pix + 11) / 12
	if d.sorted = c.sortPixels(); d.sorted {
		panels = len(d.panels)
	}
	Parallel(panels, c.pix*2*s.O*c.k, c.gatherFn)
	d.blocks = nil
}

// sortPixels sorts the output pixels by class into d.order and lists the
// classes and panels, or reports false where too few taps fall outside the
// input to pay for it.
func (c *convBF16) sortPixels() bool {
	s, d := &c.s, &c.direct
	// Per dimension, each output coordinate's range of kernel positions
	// inside the input, numbered by distinct range.
	var ranges [3][][2]int
	var nr [3]int
	ids := growBuf(&d.idsBuf, s.Out[0]+s.Out[1]+s.Out[2])
	for dim, at := 0, 0; dim < 3; dim++ {
		ranges[dim] = d.rangeBuf[dim][:0]
		for o := range s.Out[dim] {
			k0, k1 := insideTaps(o*s.Stride[dim]-s.Pad[dim], s.Dil[dim], s.Kernel[dim], s.In[dim])
			id := 0
			for id < len(ranges[dim]) && ranges[dim][id] != [2]int{k0, k1} {
				id++
			}
			if id == len(ranges[dim]) {
				ranges[dim] = append(ranges[dim], [2]int{k0, k1})
			}
			ids[at+o] = id
		}
		d.rangeBuf[dim] = ranges[dim]
		nr[dim] = len(ranges[dim])
		at += s.Out[dim]
	}
	nc := nr[0] * nr[1] * nr[2]
	// Sorted panels store their rows from the tile rather than in the
	// kernel and end each class with a short panel: below about 4% of the
	// products skipped that costs more than it saves (Zen 4: a 3×3 layer at
	// 28² skips 4.7% and gains 1–2%; stride 2 from 56² skips 2.3% and
	// loses 2%). A pixel's taps inside are the product of its dimensions'.
	inside, at := s.N, 0
	for dim := range 3 {
		sum := 0
		for _, id := range ids[at : at+s.Out[dim]] {
			sum += ranges[dim][id][1] - ranges[dim][id][0]
		}
		inside *= sum
		at += s.Out[dim]
	}
	if nc == 1 || 25*inside > 24*c.pix*s.kSize() {
		return false
	}
	// Each pixel's class, then a counting sort, stable: each class's
	// pixels in order.
	OD, OH, OW := s.Out[0], s.Out[1], s.Out[2]
	cls := growBuf(&d.clsBuf, c.pix)
	p := 0
	for range s.N {
		for od := range OD {
			kd := ids[od] * nr[1]
			for oh := range OH {
				kdh := (kd + ids[OD+oh]) * nr[2]
				for ow := range OW {
					cls[p] = int32(kdh + ids[OD+OH+ow])
					p++
				}
			}
		}
	}
	start := growBuf(&d.startBuf, nc+1)
	clear(start)
	for _, k := range cls {
		start[k+1]++
	}
	for k := range nc {
		start[k+1] += start[k]
	}
	d.order = growBuf(&d.orderBuf, c.pix)
	next := growBuf(&d.nextBuf, nc)
	copy(next, start[:nc])
	for p, k := range cls {
		d.order[next[k]] = int32(p)
		next[k]++
	}
	d.classes = growBuf(&d.classBuf, nc)
	d.panels = d.panelBuf[:0]
	runs := d.runsBuf[:0]
	KH, KW := s.Kernel[1], s.Kernel[2]
	for k := range d.classes {
		rd, rh, rw := ranges[0][k/(nr[1]*nr[2])], ranges[1][k/nr[2]%nr[1]], ranges[2][k%nr[2]]
		first := len(runs)
		for kd := rd[0]; kd < rd[1]; kd++ {
			for kh := rh[0]; kh < rh[1]; kh++ {
				t0, t1 := (kd*KH+kh)*KW+rw[0], (kd*KH+kh)*KW+rw[1]
				if t0 == t1 {
					continue
				}
				if n := len(runs); n > first && runs[n-1] == t0 {
					runs[n-1] = t1 // adjoins the run before
				} else {
					runs = append(runs, t0, t1)
				}
			}
		}
		cl := &d.classes[k]
		cl.runs, cl.lastBlock = runs[first:len(runs):len(runs)], -1
		if n := len(runs); n > first {
			cl.lastBlock = (runs[n-1] - 1) / d.tb
		}
		for i := start[k]; i < start[k+1]; i += 12 {
			d.panels = append(d.panels, gatherPanel{int32(k), int32(i), int32(min(12, start[k+1]-i))})
		}
	}
	d.runsBuf, d.panelBuf = runs, d.panels
	return true
}

// insideTaps returns the kernel positions [k0, k1) of a dimension that
// fall inside the input (size in) for a window starting at start.
func insideTaps(start, dil, k, in int) (k0, k1 int) {
	for k0 < k && start+k0*dil < 0 {
		k0++
	}
	k1 = k
	for k1 > k0 && start+(k1-1)*dil >= in {
		k1--
	}
	return k0, k1
}

// gatherPanels runs the gathered forward over panels [lo, hi): of twelve
// consecutive output pixels, or d.panels where the pixels are sorted.
func (c *convBF16) gatherPanels(lo, hi int) {
	s, d := &c.s, &c.direct
	taps, C, O := s.kSize(), s.C, s.O
	tb, nc := d.tb, d.nc
	cp := C / 2
	st := &c.gemmEp.stage

	// The kernel reads twelve rows of A however many pixels a panel has:
	// a short panel's extra rows are whatever the buffer holds.
	abuf := f32Scratch(6 * tb * C)
	defer releaseF32Scratch(abuf)
	a := unsafe.Slice((*uint16)(unsafe.Pointer(&(*abuf)[0])), 12*tb*C)

	// Where the whole depth is one block, the pixels consecutive and the
	// stage one the kernel runs in registers, the kernel writes y;
	// elsewhere the panel sums in a tile of twelve output rows that is
	// then stored row by row, through the stage where there is one.
	mode := -1
	if c.staged && tb >= taps && !d.sorted {
		mode = st.kernelMode()
	}
	var tile *[]float32
	var tmp *[2][bf16Stretch]float32
	if mode < 0 && (c.staged || d.sorted) {
		tile = f32Scratch(12 * O)
		defer releaseF32Scratch(tile)
		tmp = st.scratch()
		defer st.release(tmp)
	}
	all := [2]int{0, taps}
	var px [12]int
	var off int
	for pn := lo; pn < hi; pn++ {
		// The panel's pixels and taps.
		var rows, lastBlock int
		runs := all[:]
		if d.sorted {
			pl := d.panels[pn]
			rows = int(pl.rows)
			for r := range rows {
				px[r] = int(d.order[int(pl.start)+r])
			}
			cl := &d.classes[pl.class]
			runs, lastBlock = cl.runs, cl.lastBlock
		} else {
			rows = min(12, c.pix-12*pn)
			for r := range rows {
				px[r] = 12*pn + r
			}
			lastBlock = (taps - 1) / tb
		}
		if lastBlock < 0 { // no tap inside the input: the bias alone
			clear((*tile)[:rows*O])
			if c.bias != nil {
				for r := range rows {
					copy((*tile)[r*O:(r+1)*O], c.bias)
				}
			}
		}
		block, started := 0, false
		for t0 := 0; t0 < taps; t0 += tb {
			nt := min(tb, taps-t0)
			// The panel's runs within this block, gathered one after
			// another into each pixel's row of A.
			depth := 0
			for i := 0; i < len(runs); i += 2 {
				depth += max(0, min(runs[i+1], t0+nt)-max(runs[i], t0)) * C
			}
			if depth == 0 {
				block += (O + nc - 1) / nc
				continue
			}
			for r := range rows {
				row := a[r*depth : (r+1)*depth]
				for i := 0; i < len(runs); i += 2 {
					if u0, u1 := max(runs[i], t0), min(runs[i+1], t0+nt); u0 < u1 {
						c.im2colRow(row[:(u1-u0)*C], px[r], u0, u1)
						row = row[(u1-u0)*C:]
					}
				}
			}
			last := t0/tb == lastBlock
			per := nt * cp * 16 // words of B per 16-column panel of the block
			for j0 := 0; j0 < O; j0 += nc {
				bp := d.blocks[block]
				block++
				for t := range min(nc, O-j0) / 32 {
					col := j0 + 32*t
					if mode >= 0 {
						var res *uint16
						if st.res != nil {
							res = &st.res[px[0]*O+col]
						}
						bias := &convBF16Zero[0]
						if c.bias != nil {
							bias = &c.bias[col]
						}
						convBF16Kernel12x32H(1, &off, depth/2, &a[0], 2*depth, &bp[2*t*per], &st.y[px[0]*O+col], O, rows, bias, res, mode, 8*depth, 16*depth)
						continue
					}
					var y *float32
					if tile != nil {
						y = &(*tile)[col]
					} else {
						y = &c.y[px[0]*O+col]
					}
					beta := 0
					aoff := 0
					for i := 0; i < len(runs); i += 2 {
						u0, u1 := max(runs[i], t0), min(runs[i+1], t0+nt)
						if u0 >= u1 {
							continue
						}
						bias := &convBF16Zero[0]
						if last && i+2 == len(runs) && c.bias != nil {
							bias = &c.bias[col] // the panel's last call
						}
						if started {
							beta = 1
						}
						convBF16Kernel12x32(1, &off, (u1-u0)*cp, &a[aoff], 2*depth, &bp[2*t*per+(u0-t0)*cp*16], y, O, rows, beta, bias, 4*per, 8*depth, 16*depth)
						aoff += (u1 - u0) * C
						beta = 1
					}
				}
			}
			started = true
		}
		if tile == nil {
			continue
		}
		for r := range rows {
			row := (*tile)[r*O : (r+1)*O]
			if c.staged {
				st.store(row, px[r]*O, tmp)
			} else {
				copy(c.y[px[r]*O:], row)
			}
		}
	}
}
