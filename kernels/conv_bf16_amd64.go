//go:build amd64 && !noasm

package kernels

import (
	"sync/atomic"
	"unsafe"
)

// The direct channels-last BF16 forward, on the model of forwardDirect:
// the input is copied once into a zero-bordered buffer (channels padded to
// an even count, so every tap's channels are whole pairs, or for an odd
// count and a finite input, a whole kernel row one tap: directGeometry),
// and twelve output pixels read their channel pairs in place for every
// kernel tap (convBF16Kernel12x32). No im2col matrix is written.

// convBF16Kernel12x32 is the direct BF16 micro-kernel (conv_bf16_amd64.s).
//
//go:noescape
func convBF16Kernel12x32(taps int, offs *int, cp int, a *uint16, lda int, b *uint32, c *float32, ldc, rows, beta int, bias *float32, bstride, g2, g3 int)

// convBF16Kernel12x32H is convBF16Kernel12x32 writing bfloat16 through the
// common bfloat16 stages in registers (conv_bf16_amd64.s); mode is a
// stageMode.
//
//go:noescape
func convBF16Kernel12x32H(taps int, offs *int, cp int, a *uint16, lda int, b *uint32, y *uint16, ldy, rows int, bias *float32, res *uint16, mode, g2, g3 int)

// Blocking of the direct BF16 path: at most convBF16KP channel pairs of
// depth per block of B, and convBF16B words in a packed block, which
// stays in L2 while every output row streams past it.
const (
	convBF16KP = 512
	convBF16B  = 1 << 17
)

// directBF16 is the direct path's state.
type directBF16 struct {
	xp   []uint16 // the zero-bordered input, cp2 channels per pixel
	bp   []uint32 // the packed block of B
	w    []uint16
	offs []int
	cp2  int // channels per bordered pixel (C rounded up to even)

	// The depth's geometry (directGeometry): taps of the kernel, weights
	// per tap and channel pairs per tap, the bordered input's tap rows
	// being whole kernel rows where rowRun is set.
	taps, tapC, cpt int
	rowRun          bool
	hp, wp          int
	t0, tb          int // the block's taps
	j0, nc          int // the block's output channels
	beta            int
	last            bool
	pointwise       bool     // a 1×1 stride-1 product read in place
	tail            []uint16 // the last, partial panel's pixels, with slack

	// The gathered path's blocks of B, and where it sorts the pixels by
	// class (sorted) the classes, the pixels in class order and the
	// panels, with their buffers.
	blocks, blocksBuf [][]uint32
	sorted            bool
	classes, classBuf []gatherClass
	order, orderBuf   []int32
	clsBuf            []int32
	panels, panelBuf  []gatherPanel
	runsBuf, idsBuf   []int
	startBuf, nextBuf []int
	rangeBuf          [3][][2]int

	// The weight gradient's chunks of pixels, the output and the other
	// chunks' partial sums, and the workers' functions.
	chunks, chunkBuf []weightPart
	next             atomic.Int32 // the next chunk to take
	dw, parts        []float32
	chunkFn, sumFn   func(lo, hi int)
}

var convBF16Zero [32]float32

// directFitsBF16 reports whether the direct BF16 forward takes s.
func directFitsBF16(s *ConvShape) bool {
	if !sbgemmAsm() || s.Groups != 1 || s.O%32 != 0 || s.pointwise() ||
		s.In[0] != 1 || s.Kernel[0] != 1 || s.Out[0] != 1 || s.N == 0 {
		return false
	}
	OW := s.Out[2]
	return 10*OW >= 9*12*((OW+11)/12)
}

// forwardDirect runs the forward on the direct path and reports true, or
// reports false, doing nothing, where the path does not apply.
func (c *convBF16) forwardDirect(w []uint16) bool {
	s := &c.s
	d := &c.direct
	C, O := s.C, s.O
	KW := s.Kernel[2]
	c.directGeometry()
	if d.rowRun && !bf16Finite(c.x) {
		return false // the im2col product: nothing read past a run
	}
	d.cp2 = (C + 1) &^ 1
	if d.rowRun {
		d.cp2 = C
	}
	d.pointwise = pointwiseFitsBF16(s)
	switch {
	case d.pointwise:
		// The input itself: every pixel a row of the product, panels of 12
		// running on across rows and images; the last, partial panel reads
		// a copy with slack.
		d.xp = c.x
		d.hp, d.wp = s.In[1], s.In[2]
		tail := c.pix % 12
		d.tail = growBuf(&c.tailBuf, 12*C)
		clear(d.tail)
		copy(d.tail, c.x[(c.pix-tail)*C:])
	case directFitsBF16(s):
		d.hp, d.wp = s.In[1]+2*s.Pad[1], s.In[2]+2*s.Pad[2]
		slack := (12*s.Stride[2] + KW*s.Dil[2]) * d.cp2
		d.xp = growBuf(&c.xpBuf, s.N*d.hp*d.wp*d.cp2+slack)
		clear(d.xp[s.N*d.hp*d.wp*d.cp2:])
		Parallel(s.N*d.hp, s.N*d.hp*d.wp*d.cp2, c.padFn)
	case gatherFitsBF16(s):
		c.forwardGather(w)
		return true
	default:
		return false
	}

	taps, cp := d.taps, d.cpt
	d.offs = growBuf(&c.offsBuf, taps)
	for t := range taps {
		kh, kw := t/KW, t%KW
		if d.rowRun {
			kh, kw = t, 0
		}
		d.offs[t] = 2 * (kh*s.Dil[1]*d.wp + kw*s.Dil[2]) * d.cp2
	}
	tb, nc := d.directBlocking(O)
	if tb < taps {
		c.ensureY() // tap blocks add into the float32 result
	}
	var pre [][]uint32
	if c.pre != nil {
		pre = c.pre.directB(s, w)
	} else {
		d.bp = words(growBuf(&c.bpBuf, 2*tb*cp*nc))
	}
	d.w = w
	rows := s.N * s.Out[1]
	block := 0
	for t0 := 0; t0 < taps; t0 += tb {
		d.t0, d.tb = t0, min(tb, taps-t0)
		d.beta = 1
		if t0 == 0 {
			d.beta = 0
		}
		d.last = t0+d.tb == taps
		for j0 := 0; j0 < O; j0 += nc {
			d.j0, d.nc = j0, min(nc, O-j0)
			if pre != nil {
				d.bp = pre[block]
				block++
			} else {
				Parallel(d.nc/16, d.nc*d.tb*cp, c.packFn)
			}
			switch {
			case d.pointwise:
				Parallel((c.pix+11)/12, c.pix*2*d.nc*C, c.pointFn)
			case s.Out[2]%4 == 0:
				Parallel((c.pix+11)/12, rows*s.Out[2]*2*d.nc*d.tb*d.cp2, c.panelsFn)
			default:
				Parallel(rows, rows*s.Out[2]*2*d.nc*d.tb*d.cp2, c.directFn)
			}
		}
	}
	d.w, d.xp, d.tail = nil, nil, nil
	return true
}

// directGeometry sets the depth's geometry of the direct path's
// products. An odd channel count is padded to even per tap, which for the
// ResNet stem (three channels) is a quarter of the kernel spent on zeros;
// there, with unit dilation along rows, a tap is instead a whole kernel
// row, whose KW·C weights are one run of the bordered input: 11 pairs a
// row against 14. The run's last pair reads one value past it, the next
// pixel's, against a zero weight, so the forward takes this layout only
// for a finite input (forwardDirect). Data gradients (flipped) keep the
// per-tap layout.
func (c *convBF16) directGeometry() {
	s, d := &c.s, &c.direct
	d.rowRun = s.C%2 == 1 && s.Kernel[2] > 1 && s.Dil[2] == 1 && !c.flipped && directFitsBF16(s)
	d.taps, d.tapC = s.kSize(), s.C
	if d.rowRun {
		d.taps, d.tapC = s.Kernel[1], s.Kernel[2]*s.C
	}
	d.cpt = (d.tapC + 1) / 2
}

// directBlocking returns the direct path's blocks of the geometry: taps
// per block of depth and output channels per block of B.
func (d *directBF16) directBlocking(O int) (tb, nc int) {
	taps, cp := d.taps, d.cpt
	nkb := (taps*cp + convBF16KP - 1) / convBF16KP
	tb = (taps + nkb - 1) / nkb
	return tb, max(32, min(O, convBF16B/(tb*cp)/32*32))
}

// directB returns the weights packed as the direct path's blocks of B, in
// the order forwardDirect takes them.
func (p *convBF16Packed) directB(s *ConvShape, w []uint16) [][]uint32 {
	p.directOnce.Do(func() {
		c := getConvBF16(s)
		defer c.release()
		p.direct = c.packDirectBlocks(w, nil, func(n int) []uint32 { return make([]uint32, n) })
	})
	return p.direct
}

// packDirectBlocks appends to blocks the weights w packed as the direct
// path's blocks of B, tap blocks outside and column blocks inside, each
// packed into next(its length in words).
func (c *convBF16) packDirectBlocks(w []uint16, blocks [][]uint32, next func(n int) []uint32) [][]uint32 {
	s, d := &c.s, &c.direct
	d.w = w
	c.directGeometry()
	taps, cp := d.taps, d.cpt
	tb, nc := d.directBlocking(s.O)
	for t0 := 0; t0 < taps; t0 += tb {
		d.t0, d.tb = t0, min(tb, taps-t0)
		for j0 := 0; j0 < s.O; j0 += nc {
			d.j0, d.nc = j0, min(nc, s.O-j0)
			d.bp = next(d.tb * cp * d.nc)
			Parallel(d.nc/16, d.nc*d.tb*cp, c.packFn)
			blocks = append(blocks, d.bp)
		}
	}
	d.w, d.bp = nil, nil
	return blocks
}

// directOut is where a worker's kernel calls put twelve output pixels of
// the current column block: with a bfloat16 stage and a single tap block
// (every convolution of ResNet-50), a tile of 12×nc floats that the stage
// then rounds into y while it is in cache, so the float32 result never
// goes to memory; otherwise y itself.
//
// Where the stage is one the kernel runs in registers (kernelMode), with
// a single tap block, mode is its mode and the kernel writes y directly.
type directOut struct {
	tile *[]float32
	tmp  *[2][bf16Stretch]float32
	mode int
}

func (c *convBF16) directOut() directOut {
	o := directOut{mode: -1}
	if c.staged {
		single := c.direct.t0 == 0 && c.direct.last
		if single {
			o.mode = c.gemmEp.stage.kernelMode()
		}
		if o.mode >= 0 {
			return o
		}
		o.tmp = c.gemmEp.stage.scratch()
		if single {
			o.tile = f32Scratch(12 * c.direct.nc)
		}
	}
	return o
}

// kernel runs the direct kernel for column tile t of pixels from p0 (rows
// of them), into o; the pixels' groups of four start at a, a+g2 and a+g3
// (bytes).
func (c *convBF16) kernel(o directOut, taps int, offs *int, cp int, a *uint16, lda int, b *uint32, p0, t, rows, g2, g3 int) {
	d := &c.direct
	bias := &convBF16Zero[0]
	if d.last && c.bias != nil {
		bias = &c.bias[d.j0+32*t]
	}
	if o.mode >= 0 {
		st := &c.gemmEp.stage
		idx := p0*c.s.O + d.j0 + 32*t
		var res *uint16
		if st.res != nil {
			res = &st.res[idx]
		}
		convBF16Kernel12x32H(taps, offs, cp, a, lda, b, &st.y[idx], c.s.O, rows, bias, res, o.mode, g2, g3)
		return
	}
	y, ldy := c.dst(o, p0, t)
	convBF16Kernel12x32(taps, offs, cp, a, lda, b, y, ldy, rows, d.beta, bias, 64*taps*cp, g2, g3)
}

func (c *convBF16) releaseOut(o directOut) {
	c.gemmEp.stage.release(o.tmp)
	if o.tile != nil {
		releaseF32Scratch(o.tile)
	}
}

// dst returns the kernel's output for column tile t of pixels from p0, and
// its row stride.
func (c *convBF16) dst(o directOut, p0, t int) (*float32, int) {
	if o.tile != nil {
		return &(*o.tile)[32*t], c.direct.nc
	}
	return &c.y[p0*c.s.O+c.direct.j0+32*t], c.s.O
}

// finishPixels runs the bfloat16 stage, where the forward has one, on
// output pixels [p0, p0+rows) of the current column block once their
// last tap block is summed.
func (c *convBF16) finishPixels(o directOut, p0, rows int) {
	d := &c.direct
	if !c.staged || !d.last || o.mode >= 0 {
		return
	}
	O := c.s.O
	for i := range rows {
		idx := (p0+i)*O + d.j0
		var row []float32
		if o.tile != nil {
			row = (*o.tile)[i*d.nc : (i+1)*d.nc]
		} else {
			row = c.y[idx : idx+d.nc]
		}
		c.gemmEp.stage.store(row, idx, o.tmp)
	}
}

// pointwiseFitsBF16 reports whether the pointwise forward of s runs on the
// direct kernel, reading the input in place (even channels).
func pointwiseFitsBF16(s *ConvShape) bool {
	return sbgemmAsm() && s.Groups == 1 && s.O%32 == 0 && s.C%2 == 0 && s.pointwise() && s.N > 0
}

// pointPanels runs the current block of a pointwise forward over panels
// [lo, hi) of 12 pixels.
func (c *convBF16) pointPanels(lo, hi int) {
	s, d := &c.s, &c.direct
	C := s.C
	cp := C / 2
	tile := 2 * d.tb * cp * 16
	out := c.directOut()
	defer c.releaseOut(out)
	for pn := lo; pn < hi; pn++ {
		p0 := pn * 12
		rows := min(12, c.pix-p0)
		a := &d.xp[p0*C]
		if rows < 12 {
			a = &d.tail[0]
		}
		for t := range d.nc / 32 {
			c.kernel(out, 1, &d.offs[0], cp, a, 2*C, &d.bp[t*tile], p0, t, rows, 8*C, 16*C)
		}
		c.finishPixels(out, p0, rows)
	}
}

// padRows copies input rows [lo, hi) into the bordered buffer.
func (c *convBF16) padRows(lo, hi int) {
	s, d := &c.s, &c.direct
	C, H, W, C2 := s.C, s.In[1], s.In[2], d.cp2
	ph, pw := s.Pad[1], s.Pad[2]
	for r := lo; r < hi; r++ {
		n, h := r/d.hp, r%d.hp-ph
		row := d.xp[r*d.wp*C2 : (r+1)*d.wp*C2]
		if h < 0 || h >= H {
			clear(row)
			continue
		}
		clear(row[:pw*C2])
		src := c.x[(n*H+h)*W*C : (n*H+h+1)*W*C]
		if C2 == C {
			copy(row[pw*C2:(pw+W)*C2], src)
		} else {
			for iw := range W {
				dst := row[(pw+iw)*C2 : (pw+iw+1)*C2]
				copy(dst, src[iw*C:(iw+1)*C])
				dst[C] = 0
			}
		}
		clear(row[(pw+W)*C2:])
	}
}

// packDirectB packs 16-column panels [lo, hi) of the current block of B:
// per panel, per tap, per channel pair, each column's pair as one word
// (the odd channel past C zero).
func (c *convBF16) packDirectB(lo, hi int) {
	d := &c.direct
	C, taps, cp := d.tapC, d.taps, d.cpt
	per := d.tb * cp * 16
	for q := lo; q < hi; q++ {
		dst := d.bp[q*per : (q+1)*per]
		j := d.j0 + q*16
		switch {
		case c.flipped:
			c.packFlippedPanel(dst, j)
		case C%2 == 0:
			// A column's pairs are the words of its weight row: the
			// panel is a transpose of 16 rows of words, which the
			// float32 transpose moves as bits.
			src := words(d.w[(j*taps+d.t0)*C : ((j+15)*taps+d.t0)*C+d.tb*C])
			convOps.transpose(wordsF32(dst), 16, wordsF32(src), taps*cp, 16, d.tb*cp)
		default:
			for col := range 16 {
				for t := range d.tb {
					src := d.w[((j+col)*taps+d.t0+t)*C:][:C]
					base := t * cp * 16
					for p := range C / 2 {
						dst[base+p*16+col] = uint32(src[2*p]) | uint32(src[2*p+1])<<16
					}
					dst[base+(cp-1)*16+col] = uint32(src[C-1])
				}
			}
		}
	}
}

// packFlippedPanel packs the 16-column panel from column j of the current
// block of B where d.w holds the weights of the convolution this one is
// the data gradient of (O = its C, C = its O): column o, tap t, channel ch
// is its weight ch, tap taps−1−t, channel o. Sixteen columns are sixteen
// adjacent weights and a channel pair two weight rows: GemmBF16's panel
// packing, tap by tap.
func (c *convBF16) packFlippedPanel(dst []uint32, j int) {
	s, d := &c.s, &c.direct
	C, O := s.C, s.O
	taps := s.kSize()
	cp := d.cpt
	for t := range d.tb {
		tw := taps - 1 - (d.t0 + t)
		out := dst[t*cp*16 : (t+1)*cp*16]
		sbPackPanel(&out[0], &d.w[tw*O+j], taps*O, C/2)
		if C%2 == 1 {
			row := out[(cp-1)*16 : cp*16]
			last := d.w[((C-1)*taps+tw)*O+j:][:16]
			for col := range row {
				row[col] = uint32(last[col])
			}
		}
	}
}

// directPanels runs the current block over panels [lo, hi) of twelve
// output pixels running on across rows and images, for output rows a
// whole number of groups of four wide: each group lies in one row, where
// the kernel reads it, so no panel is cut short at a row's end (a 56-wide
// row in panels of its own wasted a twelfth of the kernel).
func (c *convBF16) directPanels(lo, hi int) {
	s, d := &c.s, &c.direct
	cp := d.cpt
	tile := 2 * d.tb * cp * 16
	lda := 2 * s.Stride[2] * d.cp2
	out := c.directOut()
	defer c.releaseOut(out)
	for pn := lo; pn < hi; pn++ {
		p0 := 12 * pn
		rows := min(12, c.pix-p0)
		a := c.pixelRun(p0, 0)
		var g2, g3 int // a short last panel reads its first group again
		if rows > 4 {
			g2 = 2 * (c.pixelRun(p0+4, 0) - a)
		}
		if rows > 8 {
			g3 = 2 * (c.pixelRun(p0+8, 0) - a)
		}
		for t := range d.nc / 32 {
			c.kernel(out, d.tb, &d.offs[d.t0], cp, &d.xp[a], lda, &d.bp[t*tile], p0, t, rows, g2, g3)
		}
		c.finishPixels(out, p0, rows)
	}
}

// wordsF32 views words as float32s for code that only moves them.
func wordsF32(s []uint32) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// pixelRun returns where output pixel p's window row kh starts in the
// bordered input (d.cp2 channels per pixel).
func (c *convBF16) pixelRun(p, kh int) int {
	s, d := &c.s, &c.direct
	OH, OW := s.Out[1], s.Out[2]
	n, oh, ow := p/(OH*OW), p/OW%OH, p%OW
	return ((n*d.hp+oh*s.Stride[1]+kh*s.Dil[1])*d.wp + ow*s.Stride[2]) * d.cp2
}

// directRows runs the current block over output rows [lo, hi) (image and
// output row together), twelve pixels and 32 channels per kernel call.
func (c *convBF16) directRows(lo, hi int) {
	s, d := &c.s, &c.direct
	OH, OW := s.Out[1], s.Out[2]
	sh, sw := s.Stride[1], s.Stride[2]
	cp := d.cpt
	tile := 2 * d.tb * cp * 16
	out := c.directOut()
	defer c.releaseOut(out)
	for r := lo; r < hi; r++ {
		n, oh := r/OH, r%OH
		in := (n*d.hp + oh*sh) * d.wp
		for ow0 := 0; ow0 < OW; ow0 += 12 {
			rows := min(12, OW-ow0)
			a := &d.xp[(in+ow0*sw)*d.cp2]
			for t := range d.nc / 32 {
				c.kernel(out, d.tb, &d.offs[d.t0], cp, a, 2*sw*d.cp2, &d.bp[t*tile], r*OW+ow0, t, rows, 8*sw*d.cp2, 16*sw*d.cp2)
			}
			c.finishPixels(out, r*OW+ow0, rows)
		}
	}
}
