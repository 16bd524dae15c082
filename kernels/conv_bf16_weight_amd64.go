//go:build amd64 && !noasm

package kernels

// The BF16 weight gradient without an im2col matrix: dw = dyᵀ·im2col(x) is
// one product over the output pixels (or one per fixed chunk of them, see
// backwardWeightInPlace) whose B panels are packed straight from the input
// (zero-bordered where the convolution pads; a 1×1 layer's input as it
// stands). A kernel row's columns of an im2col row (kw, c) are one run of
// the bordered input, and consecutive pixels of an output row are a fixed
// stride apart, so each panel is GemmBF16's pair packing of runs, masked
// to the columns of one kernel row. The im2col path wrote nine times a 3×3
// layer's input (49 times the stem's) to memory and read it back to pack
// it.

// weightFitsBF16 reports whether the weight gradient of s runs on the
// packed-in-place product.
func weightFitsBF16(s *ConvShape) bool {
	return sbgemmAsm() && s.Groups == 1 && s.In[0] == 1 && s.Kernel[0] == 1 &&
		s.Out[0] == 1 && s.Dil[2] == 1 && s.N > 0
}

// backwardWeightInPlace computes dw on the packed-in-place product and
// reports true, or reports false, doing nothing, where it does not apply.
func (c *convBF16) backwardWeightInPlace(x, dy []uint16, dw []float32) bool {
	s, d := &c.s, &c.direct
	if !weightFitsBF16(s) {
		return false
	}
	c.x = x
	d.cp2 = s.C // padRows's pixel stride: runs must be whole
	d.hp, d.wp = s.In[1]+2*s.Pad[1], s.In[2]+2*s.Pad[2]
	if s.Pad[1] == 0 && s.Pad[2] == 0 {
		d.xp = x
	} else {
		d.xp = growBuf(&c.xpBuf, s.N*d.hp*d.wp*s.C)
		Parallel(s.N*d.hp, s.N*d.hp*d.wp*s.C, c.padFn)
	}
	// Fixed chunks of pixels, each its own product into its own partial
	// sums, added in chunk order: the workers meet once per call rather
	// than three times per depth block (a 3×3 layer at 56² scaled 1.4×
	// on two threads against PyTorch's 1.85×), and the sums do not depend
	// on the thread count.
	n := (c.pix + weightChunk - 1) / weightChunk
	var part *[]float32
	switch t := weightWorkers(); {
	case n >= 8:
		d.chunks = growBuf(&d.chunkBuf, n)
		part = f32Scratch((n - 1) * len(dw))
		defer releaseF32Scratch(part)
		for i := range d.chunks {
			ch := &d.chunks[i]
			*ch = weightPart{c: c, p0: i * weightChunk, pix: min(weightChunk, c.pix-i*weightChunk), cols: c.k, dy: dy, dw: dw}
			if i > 0 {
				ch.dw = (*part)[(i-1)*len(dw) : i*len(dw)]
			}
		}
	case t > 1 && c.k >= 64*t:
		// Too few chunks to balance (4 kept one worker busy twice as
		// long as the other): each worker takes a slice of the columns
		// over every pixel instead, with the sums of one product. (One
		// product split inside every depth block scaled 1.0–1.6× on two
		// threads: the workers read B panels the other had just packed.)
		n = t
		d.chunks = growBuf(&d.chunkBuf, n)
		w := (c.k/t + 31) &^ 31
		for i := range d.chunks {
			col0 := min(i*w, c.k)
			d.chunks[i] = weightPart{c: c, pix: c.pix, col0: col0, cols: min(w, c.k-col0), dy: dy, dw: dw}
		}
	default:
		n = 1
		d.chunks = growBuf(&d.chunkBuf, 1)
		d.chunks[0] = weightPart{c: c, pix: c.pix, cols: c.k, dy: dy, dw: dw, inner: true}
	}
	if d.chunkFn == nil { // bound once per pooled call: a method value escapes
		d.chunkFn, d.sumFn = c.weightChunks, c.sumParts
	}
	// The workers take chunks as they finish (13 chunks split 7:6 left
	// one worker idle an eighth of the time); which worker sums a chunk
	// does not change its sums.
	d.next.Store(0)
	Parallel(min(n, Threads()), 2*c.pix*s.O*c.k, d.chunkFn)
	if part != nil {
		d.dw, d.parts = dw, (*part)[:(n-1)*len(dw)]
		Parallel((len(dw)+1023)/1024, n*len(dw), d.sumFn)
		d.dw, d.parts = nil, nil
	}
	d.xp = nil
	return true
}

// weightChunk is the pixels of one partial product of the weight
// gradient: two of GemmBF16's depth blocks.
const weightChunk = 2 * 2 * sbgemmKC

// weightPart is one part of the weight gradient: a product over pix
// pixels from p0 and cols columns from col0 (B from the bordered input:
// a bPanelPacker), summed into dw; inner where it is the only part and
// splits its product across the workers itself.
type weightPart struct {
	c                   *convBF16
	p0, pix, col0, cols int
	dy                  []uint16
	dw                  []float32
	inner               bool
}

func (w *weightPart) packBPanel(panel []uint32, p0, kp, j0 int) {
	w.c.packBPanel(panel, w.p0/2+p0, kp, w.col0+j0)
}

// weightChunks runs parts not yet taken until none is left.
func (c *convBF16) weightChunks(_, _ int) {
	s, d := &c.s, &c.direct
	for {
		i := int(d.next.Add(1)) - 1
		if i >= len(d.chunks) {
			return
		}
		ch := &d.chunks[i]
		if ch.cols == 0 {
			continue
		}
		g := sbgemmCalls.get()
		g.sbgemmArgs = sbgemmArgs{transA: true, m: s.O, n: ch.cols, k: ch.pix, alpha: 1, a: ch.dy[ch.p0*s.O:], lda: s.O,
			c: ch.dw[ch.col0:], ldc: c.k, bsrc: ch, serial: !ch.inner}
		g.blocked()
		g.sbgemmArgs = sbgemmArgs{}
		sbgemmCalls.put(g)
	}
}

// sumParts adds the partial sums onto dw for chunks [lo, hi) of 1024
// weights, in chunk order.
func (c *convBF16) sumParts(lo, hi int) {
	d := &c.direct
	n := len(d.dw)
	i0, i1 := lo*1024, min(hi*1024, n)
	for p := 0; p < len(d.parts); p += n {
		convOps.addTo(d.dw[i0:i1], d.parts[p+i0:p+i1])
	}
}

// packBPanel packs a panel of im2col(x) from the bordered input: see
// bPanelPacker.
func (c *convBF16) packBPanel(panel []uint32, p0, kp, j0 int) {
	s, d := &c.s, &c.direct
	C, n := s.C, c.k
	run := s.Kernel[2] * C // a kernel row's columns
	if j0+16 > n {
		clear(panel)
	}
	OW, sw := s.Out[2], s.Stride[2]
	end := min(2*(p0+kp), c.pix)
	for kh := j0 / run; kh*run < min(j0+16, n); kh++ {
		a, b := max(j0, kh*run), min(j0+16, (kh+1)*run, n)
		lane := a - j0
		mask := uint16((1<<(b-a) - 1) << lane)
		col := a - kh*run
		for p := 2 * p0; p < end; {
			src := c.pixelRun(p, kh) + col
			dst := &panel[(p/2-p0)*16]
			if m := (min((p/OW+1)*OW, end) - p) / 2; m > 0 {
				// Pairs within an output row: a fixed stride.
				sbPackPanelMask(dst, &d.xp[src], lane, sw*C, m, mask)
				p += 2 * m
				continue
			}
			// p ends an output row: its pair's other pixel starts the
			// next one, or there is none (zeros).
			if p+1 < c.pix {
				sbPackPanelMask(dst, &d.xp[src], lane, c.pixelRun(p+1, kh)+col-src, 1, mask)
			} else {
				w := panel[(p/2-p0)*16:][:16]
				for i := range b - a {
					w[lane+i] = uint32(d.xp[src+i])
				}
			}
			p += 2
		}
	}
}
