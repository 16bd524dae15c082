package kernels

// The INT8 convolution is the INT8 GEMM (see GemmU8S8) over an im2col
// matrix of uint8 activations: every output pixel is a row of A holding
// the input values under the kernel, channels-last, and the value z_x
// where the kernel reads padding. Padding thus contributes (z_x − z_x)·w =
// 0 once the GEMM subtracts z_x·Σw, which is the convolution of the
// dequantized input with zero padding. The sums are exact integers, so the
// result is the same bits whatever the blocking, the thread count or the
// kernel level, and the epilogue is the GEMM's own, channel by channel.
//
// Groups are separate GEMMs over column ranges of one im2col matrix (group
// g's depths follow group g−1's in each row) into column ranges of y. A
// pointwise convolution (1×1×1 kernel, unit stride, no padding) reads the
// channels-last input itself as A. Other one-group convolutions skip
// im2col at the levels with an indirect micro-kernel (see
// conv_int8_indirect.go): same sums, same bits, without writing K bytes a
// pixel. Channels-first calls reorder the input
// (and a residual) to channels-last, convolve, and reorder the output back:
// the GEMM wants each pixel's channels contiguous, and the reordering
// costs little next to the products.

// ConvWeightsInt8 are a quantized convolution's int8 filters (zero point
// 0, a scale per output channel held by the caller in the epilogue),
// packed by PackConvInt8 for ConvU8S8 and its kin: one PackedInt8 per
// group, whose rows are the group's output channels and whose depths are
// the kernel positions times the group's input channels, in channels-last
// order. They are read-only once made, and fit any convolution with the
// same channels, groups and kernel, in either memory format.
type ConvWeightsInt8 struct {
	c, o, groups int
	kernel       [3]int
	packs        []*PackedInt8
	// padded is the one group's weight with each kernel row padded to
	// whole groups of four, for the indirect convolution (nil when the
	// channels are a multiple of four or there are several groups).
	padded *PackedInt8
}

// PackConvInt8 packs the int8 weight w of the convolution s, laid out as
// ConvForward takes it for s: [O][kd][kh][kw][C/Groups] when
// s.ChannelsLast, else [O][C/Groups][kd][kh][kw]. The depth of one group,
// kernel size × C/Groups, must not exceed Int8MaxK. It returns new memory.
func PackConvInt8(s *ConvShape, w []int8) *ConvWeightsInt8 {
	const op = "PackConvInt8"
	s.check(op, convLen{"w", len(w), s.wLen()})
	cg, og, ks := s.cg(), s.og(), s.kSize()
	kc := cg * ks
	if kc > Int8MaxK {
		fail(ErrShape, op, "a group's depth %d (kernel %v × %d channels) exceeds %d, past which int32 sums could overflow",
			kc, s.Kernel, cg, Int8MaxK)
	}
	cw := &ConvWeightsInt8{c: s.C, o: s.O, groups: s.Groups, kernel: s.Kernel, packs: make([]*PackedInt8, s.Groups)}
	var cl []int8
	if !s.ChannelsLast {
		// [og][cg][ks] → [og][ks][cg], one group at a time.
		cl = make([]int8, og*kc)
	}
	for g := range s.Groups {
		wg := w[g*og*kc : (g+1)*og*kc]
		if cl != nil {
			transposeEach(cl, wg, og, cg, ks)
			wg = cl
		}
		cw.packs[g] = PackInt8(og, kc, wg, kc)
		if s.Groups == 1 && cg%4 != 0 {
			cw.padded = packRuns(og, cg, s.Kernel[0]*s.Kernel[1], s.Kernel[2], wg)
		}
	}
	return cw
}

// Fits reports whether cw was packed for s's channels, groups and kernel.
func (cw *ConvWeightsInt8) Fits(s *ConvShape) bool {
	return cw.c == s.C && cw.o == s.O && cw.groups == s.Groups && cw.kernel == s.Kernel
}

// ConvU8S8 computes the quantized convolution of the uint8 input x (zero
// point zX in [0, 255], laid out as s says) with the packed int8 weights
// cw into the float32 y, laid out as ConvForward's output. For output
// channel c the int32 sum acc = Σ x_q·w_q − zX·Σ w_q runs over the
// kernel's taps with padding read as zX; ep then turns it into y exactly
// as GemmU8S8's epilogue does, with ep.WScales and ep.Bias per output
// channel and ep.Residual or ep.ResidualU8 laid out as y. Large
// convolutions are split across the worker pool; the result does not
// depend on the number of threads or the kernel level.
func ConvU8S8(s *ConvShape, x []uint8, zX int32, cw *ConvWeightsInt8, y []float32, ep Int8Epilogue) {
	convU8S8(int8ConvImpl, "ConvU8S8", s, x, zX, cw, int8Out{f32: y, n: len(y)}, &ep)
}

// ConvU8S8ToU8 is ConvU8S8 with the result quantized to uint8 with
// ep.OutScale and ep.OutZero.
func ConvU8S8ToU8(s *ConvShape, x []uint8, zX int32, cw *ConvWeightsInt8, y []uint8, ep Int8Epilogue) {
	convU8S8(int8ConvImpl, "ConvU8S8ToU8", s, x, zX, cw, int8Out{u8: y, n: len(y), quant: true}, &ep)
}

// ConvU8S8ToS8 is ConvU8S8 with the result quantized to int8 with
// ep.OutScale and ep.OutZero.
func ConvU8S8ToS8(s *ConvShape, x []uint8, zX int32, cw *ConvWeightsInt8, y []int8, ep Int8Epilogue) {
	convU8S8(int8ConvImpl, "ConvU8S8ToS8", s, x, zX, cw, int8Out{s8: y, n: len(y), quant: true, signed: true}, &ep)
}

// int8ConvKernels are the micro-kernels of an INT8 convolution: strip
// for im2col matrices, tile for the indirect method (nil: im2col only).
type int8ConvKernels struct {
	strip int8StripFunc
	tile  int8IndTileFunc
}

// int8ConvImpl are the kernels in use. The AVX2 level has no indirect
// tile: its 6×8 micro-kernel reads A at a fixed stride.
var int8ConvImpl = int8ConvKernels{strip: u8s8StripImpl, tile: u8s8IndTileImpl}

func convU8S8(k int8ConvKernels, op string, s *ConvShape, x []uint8, zX int32, cw *ConvWeightsInt8, out int8Out, ep *Int8Epilogue) {
	if cw == nil {
		fail(ErrArgument, op, "nil packed weights")
	}
	s.check(op, convLen{"x", len(x), s.xLen()}, convLen{"y", out.n, s.yLen()})
	if !cw.Fits(s) {
		fail(ErrShape, op, "weights packed for %d→%d %v (groups %d), convolution is %d→%d %v (groups %d)",
			cw.c, cw.o, cw.kernel, cw.groups, s.C, s.O, s.Kernel, s.Groups)
	}
	if zX < u8Min || zX > u8Max {
		fail(ErrArgument, op, "input zero point %d is outside [0, 255]", zX)
	}
	if ep.RowAdd != nil {
		fail(ErrArgument, op, "row corrections are for products of two activations, not convolutions")
	}
	// The GEMMs check their own slices of the epilogue again; checking the
	// whole here names the convolution in the error.
	ep.check(op, s.N*s.outSize(), s.O, s.O)
	if out.quant {
		lo, hi := int32(u8Min), int32(u8Max)
		if out.signed {
			lo, hi = s8Min, s8Max
		}
		quantParams(op+" output", ep.OutScale, ep.OutZero, lo, hi)
	}
	if s.N == 0 {
		return
	}
	j := convInt8Jobs.get()
	j.s, j.strip, j.tile, j.op, j.zX, j.cw = *s, k.strip, k.tile, op, zX, cw
	j.cg, j.og, j.ks = s.cg(), s.og(), s.kSize()
	j.kc = j.cg * j.ks
	j.gkc = s.Groups * j.kc
	j.rows, j.ow = s.N*s.Out[0]*s.Out[1], s.Out[2]
	if s.ChannelsLast {
		j.forward(x[:s.xLen()], out, *ep)
	} else {
		j.forwardCF(x[:s.xLen()], out, *ep)
	}
	*j = convInt8Job{im2colFn: j.im2colFn, padFn: j.padFn, colBuf: j.colBuf, zsBuf: j.zsBuf, xlBuf: j.xlBuf,
		xpBuf: j.xpBuf, zrowBuf: j.zrowBuf, ylF32: j.ylF32, ylU8: j.ylU8, ylS8: j.ylS8, rlF32: j.rlF32, rlU8: j.rlU8,
		ind: convIndirect{segs: j.ind.segs[:0]}}
	convInt8Jobs.put(j)
}

// convInt8Job is one INT8 convolution's state, pooled with its im2col
// function bound once, so that a warm call allocates nothing.
type convInt8Job struct {
	s     ConvShape
	strip int8StripFunc
	tile  int8IndTileFunc
	op    string
	zX    int32
	cw    *ConvWeightsInt8
	// Channels and outputs per group, kernel size, a group's im2col depth
	// and a row's (all groups), output rows (n, od, oh) and their length.
	cg, og, ks, kc, gkc int
	rows, ow            int

	x      []uint8 // the channels-last input
	col    []uint8 // the current block's im2col rows
	r0     int     // the block's first output row
	zs     []uint8 // gkc bytes of zX, copied where the kernel reads padding
	colBuf []uint8
	zsBuf  []uint8

	// Channels-first: the input, output and residual reordered.
	xlBuf        []uint8
	ylF32, rlF32 []float32
	ylU8, rlU8   []uint8
	ylS8         []int8

	// The indirect method's geometry and padded input.
	ind            convIndirect
	xpBuf, zrowBuf []uint8
	zrow           []uint8 // a padded input row of z_x

	im2colFn, padFn func(lo, hi int)
}

var convInt8Jobs = freeList[convInt8Job]{New: func() *convInt8Job {
	j := new(convInt8Job)
	j.im2colFn = j.im2colRows
	j.padFn = j.padRows
	return j
}}

// convInt8BlockBytes (a variable only so tests can shrink it) bounds a block's im2col matrix: small enough to stay
// in L2 between im2col writing it and the GEMM reading it, large enough
// (with at least one output row) for many 12-row strips per thread.
var convInt8BlockBytes = 512 << 10

// forward convolves the channels-last x into out.
func (j *convInt8Job) forward(x []uint8, out int8Out, ep Int8Epilogue) {
	s := &j.s
	j.x = x
	if s.pointwise() {
		j.gemms(x, s.C, 0, s.N*s.outSize(), out, &ep)
		return
	}
	if pw := j.cw.indirectPack(s); pw != nil && j.tile != nil {
		j.forwardIndirect(x, pw, out, &ep)
		return
	}
	blk := max(1, convInt8BlockBytes/max(1, j.ow*j.gkc))
	if blk < j.rows {
		nb := (j.rows + blk - 1) / blk
		blk = (j.rows + nb - 1) / nb // equal blocks to within a row
	}
	blk = min(blk, j.rows)
	j.col = growBuf(&j.colBuf, blk*j.ow*j.gkc)
	j.zs = growBuf(&j.zsBuf, j.gkc)
	for i := range j.zs {
		j.zs[i] = uint8(j.zX)
	}
	for r0 := 0; r0 < j.rows; r0 += blk {
		nr := min(blk, j.rows-r0)
		j.r0 = r0
		Parallel(nr, nr*j.ow*j.gkc, j.im2colFn)
		j.gemms(j.col, j.gkc, r0*j.ow, nr*j.ow, out, &ep)
	}
	j.x, j.col, j.zs = nil, nil, nil
}

// gemms runs each group's GEMM on the rows of A that are output pixels
// [p0, p0+m), group g's depths starting at column g·kc of A (rows lda
// apart), into channels [g·og, (g+1)·og) of those pixels of out.
func (j *convInt8Job) gemms(a []uint8, lda, p0, m int, out int8Out, ep *Int8Epilogue) {
	O, og := j.s.O, j.og
	for g, pw := range j.cw.packs {
		off := p0*O + g*og
		e := ep.from(g*og, off)
		o := out.from(off)
		o.ldc = O
		gemmU8S8Entry(j.strip, j.op, m, a[g*j.kc:], lda, j.zX, pw, o, &e)
	}
}

// from is out starting at element off.
func (o int8Out) from(off int) int8Out {
	switch {
	case o.f32 != nil:
		o.f32 = o.f32[off:]
	case o.u8 != nil:
		o.u8 = o.u8[off:]
	case o.s8 != nil:
		o.s8 = o.s8[off:]
	}
	o.n -= off
	return o
}

// from is the epilogue of the output channels from c0 on, with the
// residual starting at element off (laid out as the output).
func (ep *Int8Epilogue) from(c0, off int) Int8Epilogue {
	e := *ep
	e.WScales = e.WScales[c0:]
	if e.Bias != nil {
		e.Bias = e.Bias[c0:]
	}
	if e.Residual != nil {
		e.Residual = e.Residual[off:]
	}
	if e.ResidualU8 != nil {
		e.ResidualU8 = e.ResidualU8[off:]
	}
	return e
}

func (j *convInt8Job) im2colRows(lo, hi int) {
	for r := lo; r < hi; r++ {
		j.im2colRow(j.r0+r, j.col[r*j.ow*j.gkc:(r+1)*j.ow*j.gkc])
	}
}

// im2colRow writes the im2col rows of output row r (image n, depth od,
// row oh) to dst: for pixel ow, group g, kernel position t and channel c
// of the group, element ow·gkc + g·kc + t·cg + c, or zX where the tap
// falls in the padding.
func (j *convInt8Job) im2colRow(r int, dst []uint8) {
	s := &j.s
	D, H, W, C := s.In[0], s.In[1], s.In[2], s.C
	KD, KH, KW := s.Kernel[0], s.Kernel[1], s.Kernel[2]
	sw, pw, dw := s.Stride[2], s.Pad[2], s.Dil[2]
	n, od, oh := r/(s.Out[0]*s.Out[1]), r/s.Out[1]%s.Out[0], r%s.Out[1]
	cg, kc := j.cg, j.kc
	// With one group and no horizontal dilation, a kernel row inside the
	// image is one run of KW·C input bytes.
	runs := s.Groups == 1 && dw == 1
	for ow := range j.ow {
		p := dst[ow*j.gkc : (ow+1)*j.gkc]
		iw0 := ow*sw - pw
		for kd := range KD {
			id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
			for kh := range KH {
				ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
				t0 := (kd*KH + kh) * KW
				if id < 0 || id >= D || ih < 0 || ih >= H {
					for g := range s.Groups {
						copy(p[g*kc+t0*cg:g*kc+(t0+KW)*cg], j.zs)
					}
					continue
				}
				in := ((n*D+id)*H + ih) * W
				if runs && iw0 >= 0 && iw0+KW <= W {
					copy(p[t0*C:(t0+KW)*C], j.x[(in+iw0)*C:])
					continue
				}
				for kw := range KW {
					iw := iw0 + kw*dw
					for g := range s.Groups {
						d := p[g*kc+(t0+kw)*cg : g*kc+(t0+kw+1)*cg]
						if iw < 0 || iw >= W {
							copy(d, j.zs)
						} else {
							copy(d, j.x[(in+iw)*C+g*cg:])
						}
					}
				}
			}
		}
	}
}

// forwardCF convolves the channels-first x into out by way of
// channels-last copies of the input, the output and any residual.
func (j *convInt8Job) forwardCF(x []uint8, out int8Out, ep Int8Epilogue) {
	s := &j.s
	N, C, O := s.N, s.C, s.O
	P, Q := s.inSize(), s.outSize()
	xl := growBuf(&j.xlBuf, len(x))
	transposeEach(xl, x, N, C, P)
	switch {
	case ep.Residual != nil:
		r := growBuf(&j.rlF32, N*O*Q)
		transposeEach(r, ep.Residual[:len(r)], N, O, Q)
		ep.Residual = r
	case ep.ResidualU8 != nil:
		r := growBuf(&j.rlU8, N*O*Q)
		transposeEach(r, ep.ResidualU8[:len(r)], N, O, Q)
		ep.ResidualU8 = r
	}
	yl := out
	yl.n = N * O * Q
	switch {
	case out.f32 != nil:
		yl.f32 = growBuf(&j.ylF32, yl.n)
	case out.u8 != nil:
		yl.u8 = growBuf(&j.ylU8, yl.n)
	default:
		yl.s8 = growBuf(&j.ylS8, yl.n)
	}
	j.forward(xl, yl, ep)
	switch {
	case out.f32 != nil:
		transposeEach(out.f32[:yl.n], yl.f32, N, Q, O)
	case out.u8 != nil:
		transposeEach(out.u8[:yl.n], yl.u8, N, Q, O)
	default:
		transposeEach(out.s8[:yl.n], yl.s8, N, Q, O)
	}
}

// transposeEach writes the n items of src, each an a×b row-major matrix,
// transposed (b×a) to dst.
func transposeEach[T any](dst, src []T, n, a, b int) {
	for i := range n {
		s, d := src[i*a*b:(i+1)*a*b], dst[i*a*b:(i+1)*a*b]
		for r := range a {
			for c, v := range s[r*b : (r+1)*b] {
				d[c*a+r] = v
			}
		}
	}
}
