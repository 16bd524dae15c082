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

// gatherFitsBF16 reports whether the gathered BF16 forward takes s.
func gatherFitsBF16(s *ConvShape) bool {
	return sbgemmAsm() && s.Groups == 1 && s.O%32 == 0 && s.C%2 == 0 && !s.pointwise() && s.N > 0
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
	d.tb, d.nc = directBlocking(s) // packing left its last block's sizes there
	Parallel((c.pix+11)/12, c.pix*2*s.O*c.k, c.gatherFn)
	d.blocks = nil
}

// gatherPanels runs the gathered forward over panels [lo, hi) of twelve
// output pixels.
func (c *convBF16) gatherPanels(lo, hi int) {
	s, d := &c.s, &c.direct
	taps, C, O := s.kSize(), s.C, s.O
	tb, nc := d.tb, d.nc
	st := &c.gemmEp.stage

	// The kernel reads twelve rows of A however many pixels a panel has:
	// a short last panel's extra rows are whatever the buffer holds.
	abuf := f32Scratch(6 * tb * C)
	defer releaseF32Scratch(abuf)
	a := unsafe.Slice((*uint16)(unsafe.Pointer(&(*abuf)[0])), 12*tb*C)

	// Where the whole depth is one block and the stage runs in the
	// kernel's registers, the kernel writes y; elsewhere a staged forward
	// sums into a tile of twelve output rows and rounds it from there.
	mode := -1
	if c.staged && tb >= taps {
		mode = st.kernelMode()
	}
	var tile *[]float32
	var tmp *[2][bf16Stretch]float32
	if c.staged && mode < 0 {
		tile = f32Scratch(12 * O)
		defer releaseF32Scratch(tile)
		tmp = st.scratch()
		defer st.release(tmp)
	}
	var off int
	for pn := lo; pn < hi; pn++ {
		p0 := pn * 12
		rows := min(12, c.pix-p0)
		block := 0
		for t0 := 0; t0 < taps; t0 += tb {
			nt := min(tb, taps-t0)
			depth := nt * C
			for r := range rows {
				c.im2colRow(a[r*depth:(r+1)*depth], p0+r, t0, t0+nt)
			}
			beta, last := min(t0, 1), t0+nt == taps
			for j0 := 0; j0 < O; j0 += nc {
				bp := d.blocks[block]
				block++
				ptile := depth * 16 // words of B per tile of 32 columns
				for t := range min(nc, O-j0) / 32 {
					col := j0 + 32*t
					bias := &convBF16Zero[0]
					if last && c.bias != nil {
						bias = &c.bias[col]
					}
					b := &bp[t*ptile]
					switch {
					case mode >= 0:
						var res *uint16
						if st.res != nil {
							res = &st.res[p0*O+col]
						}
						convBF16Kernel12x32H(1, &off, depth/2, &a[0], 2*depth, b, &st.y[p0*O+col], O, rows, bias, res, mode)
					case tile != nil:
						convBF16Kernel12x32(1, &off, depth/2, &a[0], 2*depth, b, &(*tile)[col], O, rows, beta, bias)
					default:
						convBF16Kernel12x32(1, &off, depth/2, &a[0], 2*depth, b, &c.y[p0*O+col], O, rows, beta, bias)
					}
				}
			}
		}
		if tile != nil {
			for r := range rows {
				st.store((*tile)[r*O:(r+1)*O], (p0+r)*O, tmp)
			}
		}
	}
}
