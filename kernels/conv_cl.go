package kernels

import "slices"

// Dense channels-last convolution. The output pixels of the whole batch
// are the rows of one matrix: a 1×1 stride-1 convolution is a single GEMM
// over [N·D'·H'·W', C]×[C, O] on the input in place. Any other forward
// with one group is a single GEMM too, its im2col matrix packed straight
// from the input panel by panel (conv_pack_amd64.go) where the assembly
// GEMM runs; the rest is cut into
// blocks of whole output rows, each unfolded (im2col) into a scratch matrix
// whose row for a pixel holds, per group, the C/g channels of every kernel
// position, and multiplied by the weights, so several small images share
// one product and a large image never needs its whole im2col matrix.

// forward computes y = conv(x, w) + bias in channels-last layout.
func (j *convJob) forward(x, w, bias, y []float32) {
	s := &j.s
	j.x, j.w, j.bias, j.y = x, w, bias, y
	if j.x16 != nil {
		// The direct and implicit paths pack a bfloat16 input themselves,
		// widening it as they go; the others read a float32 copy.
		if !s.depthwise() && (j.forwardDirect() || !s.pointwise() && j.forwardImplicit()) {
			return
		}
		xf := widenedOperand(j.x16)
		defer releaseF32Scratch(xf)
		x, j.x, j.x16 = *xf, *xf, nil
	}
	if s.depthwise() {
		j.dwForward()
		return
	}
	// The products read each group's [O/g][K] block of w as a transposed
	// right operand: the GEMM packs its panels from rows of w as cheaply as
	// from columns, and rearranging w first cost a pass over every weight
	// per call, a fifth of a batch-1 ResNet-50 forward.
	pw := s.pointwise()
	if j.forwardDirect() || !pw && j.forwardImplicit() {
		return
	}
	if pw && j.packed != nil && (bias != nil || j.ep.active()) {
		// Prepacked weights (inference): one product over the whole batch
		// with the bias, residual and activation in the GEMM's epilogue,
		// applied to each tile as it is finished, instead of blocks and
		// passes of their own.
		SgemmPacked(false, j.rows*j.ow, 1, x, s.C, j.packed, 0, y, s.O, j.ep.gemm(bias))
		j.epDone = true
		return
	}
	rb := j.rows
	switch {
	case !pw:
		rb = j.blockRows(j.gkc)
	case bias != nil || j.ep.active():
		// Blocks keep the output rows in cache for the bias and epilogue
		// that follow.
		rb = j.blockRows(s.O)
	}
	for r0 := 0; r0 < j.rows; r0 += rb {
		r1 := min(r0+rb, j.rows)
		j.r0, j.r1 = r0, r1
		p0, mb := r0*j.ow, (r1-r0)*j.ow
		// The input as it stands only for a 1×1 product: with padding the
		// output may have more pixels than the input.
		var a []float32
		lda := s.C
		if pw {
			a = x[p0*s.C:]
		} else {
			j.col = growBuf(&j.colBuf, mb*j.gkc)
			Parallel(r1-r0, mb*j.gkc, j.im2colFn)
			a, lda = j.col, j.gkc
		}
		for g := range s.Groups {
			if j.packed != nil { // one group: PackConvWeights packs no other
				SgemmPacked(false, mb, 1, a, lda, j.packed, 0, y[p0*s.O:], s.O, Epilogue{})
				continue
			}
			convSgemm(false, true, mb, j.og, j.kc, 1, a[g*j.kc:], lda, w[g*j.og*j.kc:], j.kc,
				0, y[p0*s.O+g*j.og:], s.O)
		}
		if bias != nil {
			Parallel(mb, mb*s.O, j.biasFn)
		}
		if j.ep.active() {
			Parallel(mb, mb*s.O, j.epilogueFn)
		}
	}
	j.epDone = true
}

// addBiasRows adds the bias to pixels [lo, hi) of the current block.
func (j *convJob) addBiasRows(lo, hi int) {
	o := j.s.O
	y := j.y[j.r0*j.ow*o:]
	for p := lo; p < hi; p++ {
		convOps.addTo(y[p*o:(p+1)*o], j.bias)
	}
}

// backwardData computes dx from dy and w in channels-last layout.
func (j *convJob) backwardData(dy, w, dx []float32) {
	s := &j.s
	j.dy, j.w, j.dx = dy, w, dx
	if s.depthwise() {
		j.dwData()
		return
	}
	if s.pointwise() {
		m := j.rows * j.ow
		for g := range s.Groups {
			convSgemm(false, false, m, j.cg, j.og, 1, dy[g*j.og:], s.O, w[g*j.og*j.cg:], j.cg, 0, dx[g*j.cg:], s.C)
		}
		return
	}
	if j.backwardDataDirect(dy, w, dx) {
		return
	}
	// The block products give, per output pixel, what it sends back to each
	// input it read; col2im adds those onto dx. Every input row is zeroed
	// by the first block that adds to it (rows no output reads are zeroed
	// here), so dx is written in one pass while in cache.
	if j.firstTouch() {
		Parallel(j.inRows, len(dx), j.clearFn)
	}
	rb := j.blockRows(j.gkc)
	for r0 := 0; r0 < j.rows; r0 += rb {
		r1 := min(r0+rb, j.rows)
		j.r0, j.r1 = r0, r1
		p0, mb := r0*j.ow, (r1-r0)*j.ow
		j.col = growBuf(&j.colBuf, mb*j.gkc)
		for g := range s.Groups {
			convSgemm(false, false, mb, j.kc, j.og, 1, dy[p0*s.O+g*j.og:], s.O, w[g*j.og*j.kc:], j.kc,
				0, j.col[g*j.kc:], j.gkc)
		}
		Parallel(j.candidates(), mb*j.gkc, j.col2imFn)
	}
}

// backwardWeight computes dw from x and dy in channels-last layout: per
// group one product over all the batch's pixels, accumulated block by
// block.
func (j *convJob) backwardWeight(x, dy, dw []float32) {
	s := &j.s
	j.x, j.dy, j.dw = x, dy, dw
	if s.depthwise() {
		j.dwWeight()
		return
	}
	if s.pointwise() {
		m := j.rows * j.ow
		for g := range s.Groups {
			convSgemm(true, false, j.og, j.cg, m, 1, dy[g*j.og:], s.O, x[g*j.cg:], s.C, 0, dw[g*j.og*j.cg:], j.cg)
		}
		return
	}
	if j.backwardWeightDirect() {
		return
	}
	rb := j.blockRows(j.gkc)
	var beta float32
	for r0 := 0; r0 < j.rows; r0 += rb {
		r1 := min(r0+rb, j.rows)
		j.r0, j.r1 = r0, r1
		p0, mb := r0*j.ow, (r1-r0)*j.ow
		j.col = growBuf(&j.colBuf, mb*j.gkc)
		Parallel(r1-r0, mb*j.gkc, j.im2colFn)
		for g := range s.Groups {
			convSgemm(true, false, j.og, j.kc, mb, 1, dy[p0*s.O+g*j.og:], s.O, j.col[g*j.kc:], j.gkc,
				beta, dw[g*j.og*j.kc:], j.kc)
		}
		beta = 1
	}
}

// im2colRows unfolds output rows r0+lo … r0+hi−1 of the current block.
func (j *convJob) im2colRows(lo, hi int) {
	for r := j.r0 + lo; r < j.r0+hi; r++ {
		j.im2colRow(r)
	}
}

// im2colRowRuns is im2colRow for one group, kernel row by kernel row:
// without horizontal dilation, the pixels whose kernel row lies inside the
// image each copy one run of KW·C floats, at a constant stride in x and in
// col, so one copyRuns call fills them all; the other pixels go kernel
// position by position.
func (j *convJob) im2colRowRuns(n, od, oh int, base []float32) {
	s := &j.s
	D, H, W, C := s.In[0], s.In[1], s.In[2], s.C
	KD, KH, KW := s.Kernel[0], s.Kernel[1], s.Kernel[2]
	sw, pw, dw := s.Stride[2], s.Pad[2], s.Dil[2]
	run := KW * C
	// Pixels [lo, hi) read columns iw0 … iw0+KW−1, all inside the row.
	lo, hi := 0, 0
	if dw == 1 {
		lo = min((pw+sw-1)/sw, j.ow)
		hi = max(min(j.ow, (W-KW+pw)/sw+1), lo)
	}
	for kd := range KD {
		id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
		for kh := range KH {
			ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
			off := (kd*KH + kh) * run
			if id < 0 || id >= D || ih < 0 || ih >= H {
				for ow := range j.ow {
					clear(base[ow*j.gkc+off : ow*j.gkc+off+run])
				}
				continue
			}
			inPix := ((n*D+id)*H + ih) * W
			if hi > lo {
				convOps.copyRuns(base[lo*j.gkc+off:], j.gkc, j.x[(inPix+lo*sw-pw)*C:], sw*C, hi-lo, run)
			}
			for ow := range j.ow {
				if ow >= lo && ow < hi {
					continue
				}
				iw0 := ow*sw - pw
				d := base[ow*j.gkc+off : ow*j.gkc+off+run]
				for kw := range KW {
					dk := d[kw*C : (kw+1)*C]
					if iw := iw0 + kw*dw; iw >= 0 && iw < W {
						copy(dk, j.x[(inPix+iw)*C:])
					} else {
						clear(dk)
					}
				}
			}
		}
	}
}

// im2colRow writes the im2col rows of the OW pixels of output row r:
// for pixel ow, group g, kernel position (kd, kh, kw) and channel c of the
// group, element g·K + ((kd·KH + kh)·KW + kw)·C/g + c, zero where the
// kernel reads padding. One group goes kernel row by kernel row
// (im2colRowRuns).
func (j *convJob) im2colRow(r int) {
	s := &j.s
	D, H, W, C := s.In[0], s.In[1], s.In[2], s.C
	OD, OH := s.Out[0], s.Out[1]
	KD, KH, KW := s.Kernel[0], s.Kernel[1], s.Kernel[2]
	n, od, oh := r/(OD*OH), r/OH%OD, r%OH
	base := j.col[(r-j.r0)*j.ow*j.gkc:]
	if s.Groups == 1 {
		j.im2colRowRuns(n, od, oh, base)
		return
	}
	cg, kc := j.cg, j.kc
	for ow := range j.ow {
		dst := base[ow*j.gkc : (ow+1)*j.gkc]
		iw0 := ow*s.Stride[2] - s.Pad[2]
		for kd := range KD {
			id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
			for kh := range KH {
				ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
				kpos0 := (kd*KH + kh) * KW
				inside := id >= 0 && id < D && ih >= 0 && ih < H
				inPix := ((n*D+id)*H + ih) * W
				for kw := range KW {
					iw := iw0 + kw*s.Dil[2]
					ok := inside && iw >= 0 && iw < W
					src := (inPix + iw) * C
					for g := range s.Groups {
						dk := dst[g*kc+(kpos0+kw)*cg : g*kc+(kpos0+kw+1)*cg]
						if ok {
							copy(dk, j.x[src+g*cg:])
						} else {
							clear(dk)
						}
					}
				}
			}
		}
	}
}

// firstTouch records, for each input depth and row, the first output depth
// and row whose window reads it (-1 when none does), and reports whether
// some input row is read by no output.
func (j *convJob) firstTouch() (untouched bool) {
	s := &j.s
	j.firstD = growBuf(&j.firstBuf, s.In[0]+s.In[1])
	j.firstH = j.firstD[s.In[0]:]
	j.firstD = j.firstD[:s.In[0]]
	for i := range s.In[0] {
		j.firstD[i] = firstOut(i, s.Out[0], s.Kernel[0], s.Stride[0], s.Pad[0], s.Dil[0])
	}
	for i := range s.In[1] {
		j.firstH[i] = firstOut(i, s.Out[1], s.Kernel[1], s.Stride[1], s.Pad[1], s.Dil[1])
	}
	return slices.Contains(j.firstD, -1) || slices.Contains(j.firstH, -1)
}

// firstOut is the smallest output position along one dimension whose
// window reads input position i, or -1.
func firstOut(i, out, k, stride, pad, dil int) int {
	best := -1
	for kk := range k {
		t := i + pad - kk*dil
		if t < 0 || t%stride != 0 {
			continue
		}
		if o := t / stride; o < out && (best < 0 || o < best) {
			best = o
		}
	}
	return best
}

// clearUntouched zeroes, among input rows [lo, hi), those no output reads.
func (j *convJob) clearUntouched(lo, hi int) {
	s := &j.s
	rowLen := s.In[2] * s.C
	for r := lo; r < hi; r++ {
		if j.firstD[r/s.In[1]%s.In[0]] < 0 || j.firstH[r%s.In[1]] < 0 {
			clear(j.dx[r*rowLen : (r+1)*rowLen])
		}
	}
}

// candidates lists, as segments, the input rows (n, id, ih) the current
// block's outputs may read, each once, and returns how many there are.
// Every input row the block reads is among them, so col2im can split them
// freely among workers: each input row is written by one worker.
func (j *convJob) candidates() int {
	s := &j.s
	OD, OH := s.Out[0], s.Out[1]
	per := OD * OH
	j.segs = j.segs[:0]
	total := 0
	for n := j.r0 / per; n <= (j.r1-1)/per; n++ {
		lo, hi := max(j.r0, n*per)-n*per, min(j.r1, (n+1)*per)-n*per
		oda, odb := lo/OH, (hi-1)/OH
		oha, ohb := 0, OH-1
		if oda == odb {
			oha, ohb = lo%OH, (hi-1)%OH
		}
		id0 := max(0, oda*s.Stride[0]-s.Pad[0])
		id1 := min(s.In[0]-1, odb*s.Stride[0]-s.Pad[0]+(s.Kernel[0]-1)*s.Dil[0])
		ih0 := max(0, oha*s.Stride[1]-s.Pad[1])
		ih1 := min(s.In[1]-1, ohb*s.Stride[1]-s.Pad[1]+(s.Kernel[1]-1)*s.Dil[1])
		if id0 > id1 || ih0 > ih1 {
			continue
		}
		seg := convSeg{n: n, id0: id0, nd: id1 - id0 + 1, ih0: ih0, nh: ih1 - ih0 + 1, start: total}
		total += seg.nd * seg.nh
		j.segs = append(j.segs, seg)
	}
	return total
}

// col2imRows runs col2im for candidates [lo, hi) of the current block.
func (j *convJob) col2imRows(lo, hi int) {
	k := 0
	for k+1 < len(j.segs) && j.segs[k+1].start <= lo {
		k++
	}
	for c := lo; c < hi; c++ {
		for c >= j.segs[k].start+j.segs[k].nd*j.segs[k].nh {
			k++
		}
		sg := &j.segs[k]
		i := c - sg.start
		j.col2imRow(sg.n, sg.id0+i/sg.nh, sg.ih0+i%sg.nh)
	}
}

// col2imRow adds onto input row (n, id, ih) of dx what the current block's
// outputs send back to it, after zeroing the row when this block holds the
// first output that reads it. Contributions are added in a fixed order
// (kernel depth and row, output column, kernel column).
func (j *convJob) col2imRow(n, id, ih int) {
	s := &j.s
	D, H, W, C := s.In[0], s.In[1], s.In[2], s.C
	OD, OH := s.Out[0], s.Out[1]
	KH, KW := s.Kernel[1], s.Kernel[2]
	fd, fh := j.firstD[id], j.firstH[ih]
	if fd < 0 || fh < 0 {
		return
	}
	rowPix := ((n*D+id)*H + ih) * W
	dxrow := j.dx[rowPix*C : (rowPix+W)*C]
	if f := (n*OD+fd)*OH + fh; f >= j.r0 && f < j.r1 {
		clear(dxrow)
	}
	for kd := range s.Kernel[0] {
		t := id + s.Pad[0] - kd*s.Dil[0]
		if t < 0 || t%s.Stride[0] != 0 || t/s.Stride[0] >= OD {
			continue
		}
		od := t / s.Stride[0]
		for kh := range KH {
			u := ih + s.Pad[1] - kh*s.Dil[1]
			if u < 0 || u%s.Stride[1] != 0 || u/s.Stride[1] >= OH {
				continue
			}
			r := (n*OD+od)*OH + u/s.Stride[1]
			if r < j.r0 || r >= j.r1 {
				continue
			}
			j.col2imSpan(dxrow, j.col[(r-j.r0)*j.ow*j.gkc:], (kd*KH+kh)*KW)
		}
	}
}

// col2imSpan adds kernel row kpos0 … kpos0+KW−1 of the im2col rows of one
// output row (starting at cols) onto the input row dxrow.
func (j *convJob) col2imSpan(dxrow, cols []float32, kpos0 int) {
	s := &j.s
	W, C, KW := s.In[2], s.C, s.Kernel[2]
	cg, kc, gkc := j.cg, j.kc, j.gkc
	for ow := range j.ow {
		src := cols[ow*gkc : (ow+1)*gkc]
		iw0 := ow*s.Stride[2] - s.Pad[2]
		if s.Groups == 1 && s.Dil[2] == 1 && iw0 >= 0 && iw0+KW <= W {
			convOps.addTo(dxrow[iw0*C:(iw0+KW)*C], src[kpos0*C:])
			continue
		}
		for kw := range KW {
			iw := iw0 + kw*s.Dil[2]
			if iw < 0 || iw >= W {
				continue
			}
			if s.Groups == 1 {
				convOps.addTo(dxrow[iw*C:(iw+1)*C], src[(kpos0+kw)*C:])
				continue
			}
			for g := range s.Groups {
				convOps.addTo(dxrow[iw*C+g*cg:iw*C+(g+1)*cg], src[g*kc+(kpos0+kw)*cg:])
			}
		}
	}
}
