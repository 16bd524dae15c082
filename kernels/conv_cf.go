package kernels

// Channels-first (NCHW / NCDHW) convolution. Two ways, chosen by image
// size (measured with BenchmarkConvLayout):
//
//   - natively, image by image and group by group: the output's pixels are
//     the columns of the products (Y[O][pixels] = W[O][C·k] × col[C·k][pixels]),
//     with the input itself as the right operand of a 1×1 stride-1
//     convolution and a channels-first im2col of pixel blocks otherwise.
//     Nothing is reordered, which pays on large images, where operands
//     are large next to the work;
//   - by reordering operands into channels-last scratch, running the
//     channels-last paths, and reordering the result back. On small images
//     a per-image product would have only a few dozen columns and repack
//     the weights for every image; channels-last merges the batch's pixels
//     into one product instead. Depthwise convolutions always go this way,
//     to their direct channels-last loops.

// convCFNativePixels is the output size (pixels per image) from which
// channels-first calls run natively; half of it for 1×1 stride-1
// convolutions, whose reorders weigh more next to their work. Measured on
// ResNet-50's shapes at batch 16: native wins by 10–50% at 56×56 and
// 28×28 and for 1×1 at 14×14, reordering by 10–30% at 7×7, and the two are
// even for 3×3 at 14×14.
var convCFNativePixels = 256

func (j *convJob) cfNative() bool {
	if j.s.depthwise() {
		return false
	}
	so := j.s.outSize()
	return so >= convCFNativePixels || j.s.pointwise() && so >= convCFNativePixels/2
}

func (j *convJob) forwardCF(x, w, bias, y []float32) {
	s := &j.s
	if !j.cfNative() {
		xl := j.reorder(&j.xlBuf, x, s.N, s.C, s.inSize())
		wl := j.reorder(&j.wlBuf, w, s.O, j.cg, j.ks)
		yl := growBuf(&j.ylBuf, s.yLen())
		j.forward(xl, wl, bias, yl)
		j.transposeBatch(y, yl, s.N, s.outSize(), s.O)
		return
	}
	j.x, j.w, j.bias, j.y = x, w, bias, y
	si, so := s.inSize(), s.outSize()
	pb := j.blockPixels()
	for n := range s.N {
		for g := range s.Groups {
			xg, yg, wg := x[(n*s.C+g*j.cg)*si:], y[(n*s.O+g*j.og)*so:], w[g*j.og*j.kc:]
			if s.pointwise() {
				convSgemm(false, false, j.og, so, j.cg, 1, wg, j.cg, xg, si, 0, yg, so)
				continue
			}
			for p0 := 0; p0 < so; p0 += pb {
				j.n, j.g, j.p0, j.p1 = n, g, p0, min(p0+pb, so)
				np := j.p1 - p0
				j.col = growBuf(&j.colBuf, j.kc*np)
				Parallel(j.kc, j.kc*np, j.im2colCFFn)
				convSgemm(false, false, j.og, np, j.kc, 1, wg, j.kc, j.col, np, 0, yg[p0:], so)
			}
		}
		if bias != nil {
			j.n = n
			Parallel(s.O, s.O*so, j.biasCFFn)
		}
	}
}

// addBiasPlanes adds the bias to output planes [lo, hi) of image j.n.
func (j *convJob) addBiasPlanes(lo, hi int) {
	so := j.s.outSize()
	y := j.y[j.n*j.s.O*so:]
	for o := lo; o < hi; o++ {
		convOps.addConst(y[o*so:(o+1)*so], j.bias[o])
	}
}

func (j *convJob) backwardDataCF(dy, w, dx []float32) {
	s := &j.s
	if !j.cfNative() {
		dyl := j.reorder(&j.ylBuf, dy, s.N, s.O, s.outSize())
		wl := j.reorder(&j.wlBuf, w, s.O, j.cg, j.ks)
		dxl := growBuf(&j.xlBuf, s.xLen())
		j.backwardData(dyl, wl, dxl)
		j.transposeBatch(dx, dxl, s.N, s.inSize(), s.C)
		return
	}
	j.dy, j.w, j.dx = dy, w, dx
	si, so := s.inSize(), s.outSize()
	pb := j.blockPixels()
	for n := range s.N {
		for g := range s.Groups {
			dxg, dyg, wg := dx[(n*s.C+g*j.cg)*si:], dy[(n*s.O+g*j.og)*so:], w[g*j.og*j.kc:]
			if s.pointwise() {
				convSgemm(true, false, j.cg, so, j.og, 1, wg, j.cg, dyg, so, 0, dxg, si)
				continue
			}
			// Channels are split among workers, so the blocks' col2im
			// can add onto the planes without two workers meeting.
			for p0 := 0; p0 < so; p0 += pb {
				j.n, j.g, j.p0, j.p1 = n, g, p0, min(p0+pb, so)
				np := j.p1 - p0
				j.col = growBuf(&j.colBuf, j.kc*np)
				convSgemm(true, false, j.kc, np, j.og, 1, wg, j.kc, dyg[p0:], so, 0, j.col, np)
				Parallel(j.cg, j.kc*np, j.col2imCFFn)
			}
		}
	}
}

func (j *convJob) backwardWeightCF(x, dy, dw []float32) {
	s := &j.s
	if !j.cfNative() {
		xl := j.reorder(&j.xlBuf, x, s.N, s.C, s.inSize())
		dyl := j.reorder(&j.ylBuf, dy, s.N, s.O, s.outSize())
		dwl := growBuf(&j.wlBuf, s.wLen())
		j.backwardWeight(xl, dyl, dwl)
		j.transposeBatch(dw, dwl, s.O, j.ks, j.cg)
		return
	}
	j.x, j.dy = x, dy
	si, so := s.inSize(), s.outSize()
	pb := j.blockPixels()
	for n := range s.N {
		for g := range s.Groups {
			xg, dyg, dwg := x[(n*s.C+g*j.cg)*si:], dy[(n*s.O+g*j.og)*so:], dw[g*j.og*j.kc:]
			if s.pointwise() {
				convSgemm(false, true, j.og, j.cg, so, 1, dyg, so, xg, si, float32(min(n, 1)), dwg, j.cg)
				continue
			}
			for p0 := 0; p0 < so; p0 += pb {
				j.n, j.g, j.p0, j.p1 = n, g, p0, min(p0+pb, so)
				np := j.p1 - p0
				j.col = growBuf(&j.colBuf, j.kc*np)
				Parallel(j.kc, j.kc*np, j.im2colCFFn)
				var beta float32 = 1
				if n == 0 && p0 == 0 {
					beta = 0
				}
				convSgemm(false, true, j.og, j.kc, np, 1, dyg[p0:], so, j.col, np, beta, dwg, j.kc)
			}
		}
	}
}

// blockPixels is how many output pixels of one image a channels-first
// block covers: its im2col matrix is about convBlockFloats floats (and no
// smaller than the weights, as in blockRows), the width a whole number of
// GEMM column panels.
func (j *convJob) blockPixels() int {
	so := j.s.outSize()
	p := max(max(convBlockFloats, j.s.wLen())/max(j.kc, 1), convMinPixels)
	if p >= so {
		return so
	}
	nb := (so + p - 1) / p
	p = (so + nb - 1) / nb
	return min((p+15)&^15, so)
}

// validRange returns the output positions [lo, hi) along one dimension
// whose input coordinate o·stride − pad + off lies inside [0, in).
func validRange(out, in, stride, pad, off int) (lo, hi int) {
	// o·stride ≥ pad − off and o·stride ≤ in − 1 + pad − off.
	if d := pad - off; d > 0 {
		lo = (d + stride - 1) / stride
	}
	if d := in - 1 + pad - off; d >= 0 {
		hi = d/stride + 1
	}
	hi = min(hi, out)
	lo = min(lo, hi)
	return lo, hi
}

// im2colCFRows writes rows [lo, hi) of the current block's channels-first
// im2col matrix: row r = (c, kd, kh, kw) holds, for each pixel of the
// block, the input value that kernel position reads (0 in the padding).
func (j *convJob) im2colCFRows(lo, hi int) {
	s := &j.s
	D, H, W := s.In[0], s.In[1], s.In[2]
	KH, KW := s.Kernel[1], s.Kernel[2]
	si, np := s.inSize(), j.p1-j.p0
	sw, pw := s.Stride[2], s.Pad[2]
	for r := lo; r < hi; r++ {
		c, kp := r/j.ks, r%j.ks
		kd, kh, kw := kp/(KH*KW), kp/KW%KH, kp%KW
		plane := j.x[(j.n*s.C+j.g*j.cg+c)*si : (j.n*s.C+j.g*j.cg+c+1)*si]
		dst := j.col[r*np : (r+1)*np]
		wlo, whi := validRange(s.Out[2], W, sw, pw, kw*s.Dil[2])
		for p := j.p0; p < j.p1; {
			row, ow0 := p/s.Out[2], p%s.Out[2]
			ow1 := min(s.Out[2], ow0+j.p1-p)
			seg := dst[p-j.p0 : p-j.p0+ow1-ow0]
			p += ow1 - ow0
			od, oh := row/s.Out[1], row%s.Out[1]
			id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
			ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
			a, b := max(ow0, wlo), min(ow1, whi)
			if id < 0 || id >= D || ih < 0 || ih >= H || a >= b {
				clear(seg)
				continue
			}
			clear(seg[:a-ow0])
			clear(seg[b-ow0:])
			// Input column of output column ow: ow·sw + off.
			in := plane[(id*H+ih)*W:]
			off := kw*s.Dil[2] - pw
			if sw == 1 {
				copy(seg[a-ow0:b-ow0], in[a+off:b+off])
				continue
			}
			for ow := a; ow < b; ow++ {
				seg[ow-ow0] = in[ow*sw+off]
			}
		}
	}
}

// col2imCFChannels adds the current block's channels-first im2col rows of
// channels [lo, hi) back onto the input planes they were read from,
// zeroing each plane at the image's first block.
func (j *convJob) col2imCFChannels(lo, hi int) {
	s := &j.s
	D, H, W := s.In[0], s.In[1], s.In[2]
	KH, KW := s.Kernel[1], s.Kernel[2]
	si, np := s.inSize(), j.p1-j.p0
	sw, pw := s.Stride[2], s.Pad[2]
	for c := lo; c < hi; c++ {
		plane := j.dx[(j.n*s.C+j.g*j.cg+c)*si : (j.n*s.C+j.g*j.cg+c+1)*si]
		if j.p0 == 0 {
			clear(plane)
		}
		for kp := range j.ks {
			kd, kh, kw := kp/(KH*KW), kp/KW%KH, kp%KW
			src := j.col[(c*j.ks+kp)*np : (c*j.ks+kp+1)*np]
			wlo, whi := validRange(s.Out[2], W, sw, pw, kw*s.Dil[2])
			off := kw*s.Dil[2] - pw
			for p := j.p0; p < j.p1; {
				row, ow0 := p/s.Out[2], p%s.Out[2]
				ow1 := min(s.Out[2], ow0+j.p1-p)
				seg := src[p-j.p0 : p-j.p0+ow1-ow0]
				p += ow1 - ow0
				od, oh := row/s.Out[1], row%s.Out[1]
				id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
				ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
				a, b := max(ow0, wlo), min(ow1, whi)
				if id < 0 || id >= D || ih < 0 || ih >= H || a >= b {
					continue
				}
				in := plane[(id*H+ih)*W:]
				if sw == 1 {
					convOps.addTo(in[a+off:b+off], seg[a-ow0:b-ow0])
					continue
				}
				for ow := a; ow < b; ow++ {
					in[ow*sw+off] += seg[ow-ow0]
				}
			}
		}
	}
}

// reorder transposes src, outer items of [rows][cols], into (*buf)[:len]
// as outer items of [cols][rows], and returns it.
func (j *convJob) reorder(buf *[]float32, src []float32, outer, rows, cols int) []float32 {
	dst := growBuf(buf, outer*rows*cols)
	j.transposeBatch(dst, src, outer, rows, cols)
	return dst
}

// transposeChunk is the number of columns one parallel transpose item
// covers, so a batch of one large image still splits among workers.
const transposeChunk = 512

// transposeBatch writes each of the outer [rows][cols] items of src to dst
// as [cols][rows].
func (j *convJob) transposeBatch(dst, src []float32, outer, rows, cols int) {
	j.trDst, j.trSrc = dst[:outer*rows*cols], src[:outer*rows*cols]
	j.trRows, j.trCol = rows, cols
	chunks := (cols + transposeChunk - 1) / transposeChunk
	Parallel(outer*chunks, outer*rows*cols, j.trFn)
}

func (j *convJob) transposeItems(lo, hi int) {
	rows, cols := j.trRows, j.trCol
	chunks := (cols + transposeChunk - 1) / transposeChunk
	for t := lo; t < hi; t++ {
		o, c0 := t/chunks, t%chunks*transposeChunk
		c1 := min(c0+transposeChunk, cols)
		base := o * rows * cols
		convOps.transpose(j.trDst[base+c0*rows:], rows, j.trSrc[base+c0:], cols, rows, c1-c0)
	}
}
