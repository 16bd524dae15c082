//go:build amd64 && !noasm

package kernels

// The direct channels-last convolution (AVX-512): no im2col matrix and no
// packed A panels. The input is copied once into a zero-bordered buffer;
// then twelve output pixels of one output row read their input pixels in
// place, a fixed stride apart, for every kernel tap (convKernel12x32).
// For narrow layers (64 or 128 channels, a 3×3 kernel) packing A cost a
// third of the forward pass, as much as a quarter of the multiply-adds'
// time; here the only extra pass is the border copy.

// convDirectKC bounds the depth (taps × channels) of one block of B, and
// convDirectB the floats of a packed B block, so the block stays in L2
// while every output row streams past it.
const (
	convDirectKC = 1024
	convDirectB  = 1 << 17
)

// directState is the direct path's part of a convJob.
type directState struct {
	xp, bp   []float32 // the zero-bordered input, a packed block of B
	offs     []int     // byte offset of each tap from a pixel's first tap
	hp, wp   int       // bordered input height and width
	t0, tb   int       // the block's taps
	j0, nc   int       // the block's output channels
	beta, lo float32
	bias     []float32 // the block's bias, from its first channel, or nil
	grid     gemmGrid  // the forward's cells: output rows × 32-channel blocks

	// The weight gradient: parts of step output rows each (a fixed
	// partition), each part's dwᵀ cut into cells of panels (12 rows of
	// dwᵀ, panels per kernel row) × 32-channel blocks.
	parts, step, panels int
	cells               gemmGrid
}

// forwardDirect computes y = conv(x, w) + bias on the direct path and
// reports true, or reports false, doing nothing, where the path does not
// apply: without AVX-512, several groups, a 3-D convolution, output
// channels not a multiple of 32, output rows that fill their 12-pixel
// panels badly, or a 1×1 stride-1 product (a plain GEMM already reads its
// input in place).
func (j *convJob) forwardDirect() bool {
	s := &j.s
	if !directFits(s) {
		return false
	}
	d := &j.direct
	C, O := s.C, s.O
	KH, KW := s.Kernel[1], s.Kernel[2]
	j.padInput()

	taps := KH * KW
	d.offs = growBuf(&j.offsBuf, taps)
	for t := range taps {
		kh, kw := t/KW, t%KW
		d.offs[t] = 4 * (kh*s.Dil[1]*d.wp + kw*s.Dil[2]) * C
	}
	tb, nc := directBlocking(s)
	K, kcMax := taps*C, tb*C
	d.bp = growBuf(&j.bpBuf, kcMax*nc)
	work := j.rows * j.ow * 2 * nc * kcMax
	for t0 := 0; t0 < taps; t0 += tb {
		d.t0, d.tb = t0, min(tb, taps-t0)
		kc := d.tb * C
		last := t0+d.tb == taps
		d.beta = 1
		if t0 == 0 {
			d.beta = 0
		}
		d.lo = negInf
		for j0 := 0; j0 < O; j0 += nc {
			d.j0, d.nc = j0, min(nc, O-j0)
			packBAVX2(true, j.w, K, t0*C, kc, j0, d.nc, d.bp)
			d.bias = nil
			if last && j.bias != nil {
				d.bias = j.bias[j0:]
			}
			// Rows alone leave workers idle at batch 1 on many cores
			// (56 rows on 64 workers); the grid then splits channels too.
			d.grid = gemmPlan(j.rows, d.nc/32, Threads(), false)
			Parallel(d.grid.cells(), work, j.directFn)
		}
	}
	return true
}

// directBlocking returns the direct forward's blocks of B: tb kernel taps
// (all channels of each) by nc output channels.
func directBlocking(s *ConvShape) (tb, nc int) {
	taps := s.kSize()
	nkb := (taps*s.C + convDirectKC - 1) / convDirectKC
	tb = (taps + nkb - 1) / nkb
	return tb, max(32, min(s.O, convDirectB/(tb*s.C)/32*32))
}

// padInput copies j.x into the zero-bordered buffer d.xp. The last panel
// of a row may have fewer than 12 pixels; the kernels still read 12, past
// the row's end, so the buffer has that much slack.
func (j *convJob) padInput() {
	s, d := &j.s, &j.direct
	C := s.C
	d.hp, d.wp = s.In[1]+2*s.Pad[1], s.In[2]+2*s.Pad[2]
	slack := (12*s.Stride[2] + s.Kernel[2]*s.Dil[2]) * C
	d.xp = growBuf(&j.xpBuf, s.N*d.hp*d.wp*C+slack)
	clear(d.xp[s.N*d.hp*d.wp*C:])
	Parallel(s.N*d.hp, s.N*d.hp*d.wp*C, j.padFn)
}

// directFits reports whether the direct path takes convolution s.
func directFits(s *ConvShape) bool {
	if level < AVX512 || s.Groups != 1 || s.O%32 != 0 || s.pointwise() ||
		s.In[0] != 1 || s.Kernel[0] != 1 || s.Out[0] != 1 || s.N == 0 {
		return false
	}
	// A kernel call covers 12 pixels of one output row; a row of OW pixels
	// wastes the rest of its last call. Where that passes a tenth (rows of
	// 7, 14 or 28 pixels) the packed implicit GEMM, whose panels run on
	// across rows, is faster.
	OW := s.Out[2]
	return 10*OW >= 9*12*((OW+11)/12)
}

// padRows copies input rows [lo, hi) of the bordered buffer (all images'
// rows in order), writing zeros in the border.
func (j *convJob) padRows(lo, hi int) {
	s, d := &j.s, &j.direct
	C, H, W := s.C, s.In[1], s.In[2]
	ph, pw := s.Pad[1], s.Pad[2]
	for r := lo; r < hi; r++ {
		n, h := r/d.hp, r%d.hp-ph
		row := d.xp[r*d.wp*C : (r+1)*d.wp*C]
		if h < 0 || h >= H {
			clear(row)
			continue
		}
		clear(row[:pw*C])
		if j.x16 != nil {
			bf16ToF32Impl(row[pw*C:(pw+W)*C], j.x16[(n*H+h)*W*C:(n*H+h+1)*W*C])
		} else {
			copy(row[pw*C:(pw+W)*C], j.x[(n*H+h)*W*C:])
		}
		clear(row[(pw+W)*C:])
	}
}

// directCells runs the current block over cells [lo, hi) of d.grid: its
// output rows (image and output row together), twelve pixels per kernel
// call, and its 32-channel blocks.
func (j *convJob) directCells(lo, hi int) {
	s, d := &j.s, &j.direct
	C, O, OH, OW := s.C, s.O, s.Out[1], s.Out[2]
	sh, sw := s.Stride[1], s.Stride[2]
	kc := d.tb * C
	for u := lo; u < hi; u++ {
		r0, r1, q0, q1 := d.grid.cell(u)
		colBias, biasStep := &gemmNegZero[0], 0
		if d.bias != nil {
			colBias, biasStep = &d.bias[q0*32], 4*2*gemmNR
		}
		for r := r0; r < r1; r++ {
			n, oh := r/OH, r%OH
			in := (n*d.hp + oh*sh) * d.wp
			for ow0 := 0; ow0 < OW; ow0 += 2 * gemmMR {
				rows := min(2*gemmMR, OW-ow0)
				convKernel12x32(d.tb, &d.offs[d.t0], C, &d.xp[(in+ow0*sw)*C], sw*C, &d.bp[q0*32*kc],
					&j.y[(r*OW+ow0)*O+d.j0+q0*32], O, q1-q0, rows, 1, d.beta, d.lo,
					colBias, &gemmNegZero[0], 4*2*gemmNR*kc, 4*2*gemmNR, biasStep)
			}
		}
	}
}

// backwardDataDirect computes dx for a stride-1 convolution as the direct
// forward convolution of dy with the kernel flipped and its channels
// swapped, padded by dil·(k−1) − pad: the transposed convolution of unit
// stride is an ordinary one. It reports false, doing nothing, where that
// convolution is not on the direct path (or the stride is not 1).
func (j *convJob) backwardDataDirect(dy, w, dx []float32) bool {
	s := j.s
	t, ok := directDataShape(&s)
	if !ok {
		return false
	}
	C, O := s.C, s.O
	ks := s.kSize()
	// wt[c][tap][o] = w[o][ks−1−tap][c]: the flipped kernel, channels
	// swapped.
	wt := growBuf(&j.wtBuf, len(w))
	for o := range O {
		for tap := range ks {
			src := w[(o*ks+tap)*C : (o*ks+tap+1)*C]
			ft := ks - 1 - tap
			for c, v := range src {
				wt[(c*ks+ft)*O+o] = v
			}
		}
	}
	saved, rows, ow := j.s, j.rows, j.ow
	j.s, j.rows, j.ow = t, t.N*t.Out[0]*t.Out[1], t.Out[2]
	j.x, j.w, j.y, j.bias = dy, wt, dx, nil
	j.forwardDirect()
	j.s, j.rows, j.ow = saved, rows, ow
	j.x, j.w, j.y = nil, nil, nil
	return true
}

// directDataShape returns the direct forward convolution whose output is
// s's input gradient, and whether there is one on the direct path.
func directDataShape(s *ConvShape) (ConvShape, bool) {
	t := *s
	if level < AVX512 || s.Groups != 1 || s.Stride != [3]int{1, 1, 1} || s.pointwise() {
		return t, false
	}
	t.C, t.O = s.O, s.C
	t.In, t.Out = s.Out, s.In
	for d := range 3 {
		t.Pad[d] = s.Dil[d]*(s.Kernel[d]-1) - s.Pad[d]
		if t.Pad[d] < 0 {
			return t, false
		}
	}
	return t, directFits(&t)
}

// backwardWeightDirect computes j.dw from j.x and j.dy on the direct path
// and reports true, or reports false, doing nothing, where it does not
// apply (as for the forward, and also dilated kernels and rows under 24
// pixels).
//
// For kernel row kh, the (kernel column, channel) pairs an output pixel
// reads are one run of KW·C floats of the bordered input, so dwᵀ's rows
// kh·KW·C … are that run and its depth is the output pixels: twelve run
// elements times 32 output channels per sgemmKernel12x32D call, over the
// pixels of one output row, with dy's row packed as the B operand. No
// im2col matrix is written. Each part of the output rows sums into its own
// dwᵀ, and the parts are added in order. The parts depend on the shape
// alone (convWeightParts), so the sums, and the bits, are the same at
// every thread count; where the parts do not share evenly among the
// threads (or are fewer), each part's dwᵀ is cut into cells too, which
// never changes an element's sums.
func (j *convJob) backwardWeightDirect() bool {
	s := &j.s
	if !directWeightFits(s) {
		return false
	}
	d := &j.direct
	O := s.O
	K := s.kSize() * s.C
	j.padInput()
	d.parts, d.step, d.panels, d.cells = directWeightPlan(s, Threads())
	j.partial = growBuf(&j.wpartBuf, d.parts*K*O)
	Parallel(d.parts*d.cells.cells(), j.rows*j.ow*2*K*O, j.wPartFn)
	Parallel(K, K*O*d.parts, j.wRedFn)
	return true
}

// directWeightFits reports whether the direct weight gradient takes s:
// as the forward, without dilation, on rows of at least 24 pixels.
func directWeightFits(s *ConvShape) bool {
	return directFits(s) && s.Dil[1] == 1 && s.Dil[2] == 1 && s.Out[2] >= 24
}

// directWeightPlan returns the direct weight gradient's partition on
// threads workers: parts of step output rows, panels per kernel row of
// dwᵀ, and each part's cells.
func directWeightPlan(s *ConvShape, threads int) (parts, step, panels int, cells gemmGrid) {
	rows, K := s.N*s.Out[0]*s.Out[1], s.kSize()*s.C
	parts = min(convWeightParts, rows, max(1, gemmSplitKMaxPartial/(K*s.O)))
	step = (rows + parts - 1) / parts
	parts = (rows + step - 1) / step
	panels = (s.Kernel[2]*s.C + 2*gemmMR - 1) / (2 * gemmMR)
	return parts, step, panels, partCells(s.Kernel[1]*panels, s.O/32, rows, step, parts, threads, true)
}

// convWeightParts is how many parts the direct weight gradient cuts the
// output rows into (fewer where there are fewer rows or the partial dwᵀ
// would pass gemmSplitKMaxPartial): a multiple of 8, so they share evenly
// among 1, 2, 4 and 8 threads, and few, since each costs a dwᵀ to clear
// and add (at 64 parts, a tenth of a ResNet-50 3×3 layer's gradient on two
// cores); cells give more workers their share.
const convWeightParts = 8

// weightParts computes units [lo, hi) of the weight gradient: unit u is
// cell u%cells of part u/cells' dwᵀ.
func (j *convJob) weightParts(lo, hi int) {
	s, d := &j.s, &j.direct
	C, O, OH, OW := s.C, s.O, s.Out[1], s.Out[2]
	sh, sw := s.Stride[1], s.Stride[2]
	K, run := s.kSize()*C, s.Kernel[2]*C
	pack := getScratchF32(OW * O)
	defer pack.put()
	bp := pack.s
	cells := d.cells.cells()
	for u := lo; u < hi; u++ {
		p := u / cells
		p0, p1, q0, q1 := d.cells.cell(u % cells)
		acc := j.partial[p*K*O : (p+1)*K*O]
		c0, c1 := q0*32, q1*32
		// The part's first row overwrites its cell (beta 0: the kernel
		// reads no C), the others add to it.
		var beta float32
		for r := p * d.step; r < min((p+1)*d.step, j.rows); r++ {
			n, oh := r/OH, r%OH
			packBAVX2(false, j.dy[r*OW*O:], O, 0, OW, c0, c1-c0, bp)
			for pi := p0; pi < p1; pi++ {
				kh, e := pi/d.panels, pi%d.panels*2*gemmMR
				base := ((n*d.hp + oh*sh + kh) * d.wp) * C
				sgemmKernel12x32D(OW, &d.xp[base+e], &bp[0], &acc[(kh*run+e)*O+c0], O, q1-q0, min(2*gemmMR, run-e),
					1, beta, negInf, &gemmNegZero[0], &gemmNegZero[0], 0, 4*2*gemmNR*OW, 4*2*gemmNR, 0, 0, sw*C)
			}
			beta = 1
		}
	}
}

// weightReduce adds the parts' dwᵀ in order, rows [lo, hi) (of K), into
// the first part's and writes them transposed to dw.
func (j *convJob) weightReduce(lo, hi int) {
	s, d := &j.s, &j.direct
	O, K := s.O, s.kSize()*s.C
	for k := lo; k < hi; k++ {
		row := j.partial[k*O : (k+1)*O]
		for p := 1; p < d.parts; p++ {
			convOps.addTo(row, j.partial[p*K*O+k*O:p*K*O+(k+1)*O])
		}
		for o, v := range row {
			j.dw[o*K+k] = v
		}
	}
}
