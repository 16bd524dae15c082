package kernels

import (
	"sync"
	"unsafe"
)

// BF16 convolution: bfloat16 operands (uint16 bits), float32 accumulation
// and float32 results (callers round to BF16 where they want it).
//
// Channels-last with one group runs on GemmBF16 (VDPBF16PS where the CPU
// has AVX512_BF16): an im2col row of channels-last data holds its depth in
// (kd, kh, kw, c) order, the weight's own order, so the plain uint16
// im2col rows and the weight rows are GemmBF16 operands as they stand
// (GemmBF16 pairs consecutive depths). A 1×1 stride-1 convolution reads
// the input in place. Where the direct kernel applies (conv_bf16_amd64.go)
// the forward reads the input in place for every tap too; elsewhere with
// 32-channel multiples it gathers each panel's im2col rows into a buffer
// in cache (conv_bf16_gather_amd64.go). The data gradient of a unit-stride
// convolution runs on those forwards too (dataByForward).
//
// Every other case (channels-first, groups, a CPU without AVX512_BF16,
// the noasm build) widens the operands to float32, exactly, and runs the
// FP32 convolution: the same products, summed in another order.

// convBF16Native reports whether s runs on the BF16 kernels rather than
// the widened FP32 reference.
func convBF16Native(s *ConvShape) bool {
	return sbgemmAsm() && s.ChannelsLast && s.Groups == 1
}

// ConvForwardBF16 computes y = conv(x, w) + bias for bfloat16 x and w
// (ConvForward's layouts), accumulating in float32. bias (length O) may
// be nil. y is overwritten.
func ConvForwardBF16(s *ConvShape, x, w []uint16, bias []float32, y []float32) {
	nb := 0
	if bias != nil {
		nb = s.O
	}
	s.check("ConvForwardBF16", convLen{"x", len(x), s.xLen()}, convLen{"w", len(w), s.wLen()},
		convLen{"y", len(y), s.yLen()}, convLen{"bias", len(bias), nb})
	if s.N == 0 {
		return
	}
	x, w, y = x[:s.xLen()], w[:s.wLen()], y[:s.yLen()]
	if bias != nil {
		bias = bias[:s.O]
	}
	if !convBF16Native(s) {
		convWidened(x, w, func(xf, wf []float32) { ConvForward(s, xf, wf, bias, y) })
		return
	}
	c := getConvBF16(s)
	defer c.release()
	c.forward(x, w, bias, y)
}

// ConvBackwardDataBF16 computes dx, the gradient of the input, from
// bfloat16 dy and w. dx is overwritten.
func ConvBackwardDataBF16(s *ConvShape, dy, w []uint16, dx []float32) {
	s.check("ConvBackwardDataBF16", convLen{"dx", len(dx), s.xLen()}, convLen{"w", len(w), s.wLen()},
		convLen{"dy", len(dy), s.yLen()})
	if s.N == 0 {
		return
	}
	dy, w, dx = dy[:s.yLen()], w[:s.wLen()], dx[:s.xLen()]
	if !convBF16Native(s) {
		convWidened(dy, w, func(dyf, wf []float32) { ConvBackwardData(s, dyf, wf, dx) })
		return
	}
	c := getConvBF16(s)
	defer c.release()
	c.backwardData(dy, w, dx)
}

// ConvBackwardWeightBF16 computes dw, the gradient of the weight, from
// bfloat16 x and dy. dw is overwritten.
func ConvBackwardWeightBF16(s *ConvShape, x, dy []uint16, dw []float32) {
	s.check("ConvBackwardWeightBF16", convLen{"x", len(x), s.xLen()}, convLen{"dw", len(dw), s.wLen()},
		convLen{"dy", len(dy), s.yLen()})
	dw = dw[:s.wLen()]
	if s.N == 0 {
		clear(dw)
		return
	}
	x, dy = x[:s.xLen()], dy[:s.yLen()]
	if !convBF16Native(s) {
		convWidened(x, dy, func(xf, dyf []float32) { ConvBackwardWeight(s, xf, dyf, dw) })
		return
	}
	c := getConvBF16(s)
	defer c.release()
	c.backwardWeight(x, dy, dw)
}

// ConvForwardBF16To is ConvForwardBF16 with the result rounded to
// bfloat16 (nearest even) into y: the BF16-output form, accumulating in
// float32 as ever. y is overwritten.
func ConvForwardBF16To(s *ConvShape, x, w []uint16, bias []float32, y []uint16) {
	ConvForwardEpilogueBF16To(s, x, w, nil, bias, y, ConvEpilogueBF16{})
}

// ConvBackwardDataBF16To is ConvBackwardDataBF16 with dx rounded to
// bfloat16 into dx.
func ConvBackwardDataBF16To(s *ConvShape, dy, w []uint16, dx []uint16) {
	if convBF16Native(s) && s.N > 0 {
		s.check("ConvBackwardDataBF16To", convLen{"dx", len(dx), s.xLen()}, convLen{"w", len(w), s.wLen()},
			convLen{"dy", len(dy), s.yLen()})
		stage := bf16Stage{y: dx[:s.xLen()]}
		c := getConvBF16(s)
		done := c.dataByForward(dy[:s.yLen()], w[:s.wLen()], nil, &stage) ||
			c.dataBySubsample(dy[:s.yLen()], w[:s.wLen()], dx[:s.xLen()])
		c.release()
		if done {
			return
		}
		if s.pointwise() {
			// One product, dy·w, rounded into dx row by row as it is
			// finished.
			acc := f32Scratch(s.xLen())
			ep := sbRowEpilogues.get()
			ep.stage = stage
			gemmBF16(false, false, s.N*s.outSize(), s.C, s.O, 1, dy, s.O, w, s.C, 0, *acc, s.C, nil, ep, nil)
			*ep = sbRowEpilogue{}
			sbRowEpilogues.put(ep)
			releaseF32Scratch(acc)
			return
		}
	}
	acc := f32Scratch(len(dx))
	ConvBackwardDataBF16(s, dy, w, *acc)
	F32ToBF16(dx, *acc)
	releaseF32Scratch(acc)
}

// ConvBackwardWeightBF16To is ConvBackwardWeightBF16 with dw rounded to
// bfloat16 into dw.
func ConvBackwardWeightBF16To(s *ConvShape, x, dy []uint16, dw []uint16) {
	acc := f32Scratch(len(dw))
	ConvBackwardWeightBF16(s, x, dy, *acc)
	F32ToBF16(dw, *acc)
	releaseF32Scratch(acc)
}

// ConvBackwardBF16To computes a BF16 convolution's gradients, each where its
// destination is not nil: dx and dw rounded to bfloat16, as
// ConvBackwardDataBF16To and ConvBackwardWeightBF16To give them, and db in
// float32, ConvBackwardBias of dy widened. Where the convolution runs on
// the widened float32 kernels, dy is widened once for all three.
func ConvBackwardBF16To(s *ConvShape, x, w, dy []uint16, dx, dw []uint16, db []float32) {
	const op = "ConvBackwardBF16To"
	lens := []convLen{{"dy", len(dy), s.yLen()}}
	if dx != nil {
		lens = append(lens, convLen{"dx", len(dx), s.xLen()}, convLen{"w", len(w), s.wLen()})
	}
	if dw != nil {
		lens = append(lens, convLen{"dw", len(dw), s.wLen()}, convLen{"x", len(x), s.xLen()})
	}
	if db != nil {
		lens = append(lens, convLen{"db", len(db), s.O})
	}
	s.check(op, lens...)
	if convBF16Native(s) || s.N == 0 {
		if dx != nil {
			ConvBackwardDataBF16To(s, dy, w, dx)
		}
		if dw != nil {
			ConvBackwardWeightBF16To(s, x, dy, dw)
		}
		if db != nil {
			withWidened(dy[:s.yLen()], func(dyf []float32) { ConvBackwardBias(s, dyf, db) })
		}
		return
	}
	// A 1×1 stride-1 convolution's dx is one product, dy·w, whose
	// epilogue rounds it into dx as it is finished, with dy widened as it
	// is packed.
	pointDx := dx != nil && s.pointwise() && s.ChannelsLast && s.Groups == 1 && level >= AVX2
	var dyf *[]float32
	if dw != nil || db != nil || dx != nil && !pointDx {
		dyf = widenedOperand(dy[:s.yLen()])
		defer releaseF32Scratch(dyf)
	}
	if dx != nil {
		acc := f32Scratch(s.xLen())
		withWidened(w[:s.wLen()], func(wf []float32) {
			if pointDx && sgemmBF16A(s.N*s.outSize(), s.C, s.O, dy, s.O, false, wf, s.C, nil, *acc, s.C, Epilogue{out16: bf16Stage{y: dx[:s.xLen()]}}) {
				return
			}
			if dyf == nil { // only dx wanted: nothing below reads dyf
				dyf = widenedOperand(dy[:s.yLen()])
				defer releaseF32Scratch(dyf)
			}
			ConvBackwardData(s, *dyf, wf, *acc)
			F32ToBF16(dx[:s.xLen()], *acc)
		})
		releaseF32Scratch(acc)
	}
	if dw != nil {
		acc := f32Scratch(s.wLen())
		withWidened(x[:s.xLen()], func(xf []float32) { ConvBackwardWeight(s, xf, *dyf, *acc) })
		F32ToBF16(dw[:s.wLen()], *acc)
		releaseF32Scratch(acc)
	}
	if db != nil {
		ConvBackwardBias(s, *dyf, db)
	}
}

// convWidened runs f on pooled float32 copies of a and b, widened
// exactly: the reference path of the BF16 convolution.
func convWidened(a, b []uint16, f func(af, bf []float32)) {
	af, bf := widenedOperand(a), widenedOperand(b)
	f(*af, *bf)
	releaseF32Scratch(af)
	releaseF32Scratch(bf)
}

// withWidened runs f on a pooled float32 copy of v, widened exactly.
func withWidened(v []uint16, f func(vf []float32)) {
	vf := widenedOperand(v)
	f(*vf)
	releaseF32Scratch(vf)
}

// convBF16 is one BF16 convolution call on the native path.
type convBF16 struct {
	s      ConvShape
	k      int // depth of an im2col row: taps × C
	pix    int // output pixels of the batch
	x      []uint16
	y, dx  []float32
	bias   []float32
	p0, mb int // the current block of output pixels
	col16  []uint16
	col32  []float32
	direct directBF16

	// Set for a forward with prepared weights (pre) or a bfloat16 output
	// (staged: gemmEp.stage finishes each block of y as it is summed).
	pre      *convBF16Packed
	staged   bool
	gemmEp   sbRowEpilogue
	yScratch *[]float32 // the float32 result ensureY took

	// Set for dataByForward's convolution: its weights are those of the
	// convolution it is the data gradient of, which packing reads flipped.
	flipped bool

	colBuf16, xpBuf, bpBuf, tailBuf []uint16
	samples, dx16                   []uint16 // dataBySubsample's samples and dx
	colBuf32                        []float32
	offsBuf                         []int

	im2colFn, col2imFn, biasFn, padFn, directFn, panelsFn, pointFn, gatherFn, packFn, clearFn, scatterFn func(lo, hi int)
}

var convBF16Pool = freeList[convBF16]{New: func() *convBF16 {
	c := new(convBF16)
	c.im2colFn = c.im2colPixels
	c.col2imFn = c.col2imChannels
	c.biasFn = c.addBias
	c.padFn = c.padRows
	c.directFn = c.directRows
	c.panelsFn = c.directPanels
	c.pointFn = c.pointPanels
	c.gatherFn = c.gatherPanels
	c.packFn = c.packDirectB
	c.clearFn = c.clearDx
	c.scatterFn = c.scatterSamples
	return c
}}

func getConvBF16(s *ConvShape) *convBF16 {
	c := convBF16Pool.get()
	c.s = *s
	c.k = s.kSize() * s.C
	c.pix = s.N * s.outSize()
	return c
}

func (c *convBF16) release() {
	c.x, c.y, c.dx, c.bias, c.col16, c.col32 = nil, nil, nil, nil, nil, nil
	c.pre, c.staged, c.gemmEp, c.flipped = nil, false, sbRowEpilogue{}, false
	if c.yScratch != nil {
		releaseF32Scratch(c.yScratch)
		c.yScratch = nil
	}
	convBF16Pool.put(c)
}

// weightWorkers is the worker count the weight gradient splits for
// (conv_bf16_weight_amd64.go): a variable only so a test can check that
// every count gives the same bits.
var weightWorkers = Threads

// convBF16BlockBytes bounds an im2col block.
var convBF16BlockBytes = 4 << 20

// blockPixels is the number of output pixels per im2col block, for
// elemBytes bytes per element of the block's matrix: even, so the weight
// gradient's depth pairs (pixels) line up from block to block.
func (c *convBF16) blockPixels(elemBytes int) int {
	mb := max(96, convBF16BlockBytes/(elemBytes*c.k))
	mb = (mb + 1) &^ 1
	return min(mb, c.pix)
}

// forward computes the convolution into y, or, for a staged forward with
// y nil, into a float32 buffer taken only where the path needs one: the
// direct path with one tap block sums into per-worker tiles instead, and
// a result-sized buffer per call (tens of MB for ResNet-50's larger
// layers) was allocated and collected over and over.
func (c *convBF16) forward(x, w []uint16, bias, y []float32) {
	s := &c.s
	c.x, c.bias, c.y = x, bias, y
	if c.forwardDirect(w) {
		return
	}
	c.ensureY()
	if s.pointwise() {
		c.forwardProduct(0, c.pix, x, w)
		return
	}
	mb := c.blockPixels(2)
	for p0 := 0; p0 < c.pix; p0 += mb {
		c.p0, c.mb = p0, min(mb, c.pix-p0)
		c.col16 = growBuf(&c.colBuf16, c.mb*c.k)
		Parallel(c.mb, c.mb*c.k, c.im2colFn)
		c.forwardProduct(p0, c.mb, c.col16, w)
	}
}

// ensureY gives a staged forward without a float32 result one, from
// scratch that release hands back.
func (c *convBF16) ensureY() {
	if c.y == nil {
		c.yScratch = f32Scratch(c.pix * c.s.O)
		c.y = *c.yScratch
	}
}

// forwardProduct computes output pixels [p0, p0+rows) as the product of
// their im2col rows a (or the input itself) and the weights, with the
// bias and, for a bfloat16 output, the stage.
func (c *convBF16) forwardProduct(p0, rows int, a, w []uint16) {
	s := &c.s
	var pre *sbPackedB
	if c.pre != nil {
		pre = c.pre.gemmB(c.k, s.O, w)
	}
	var ep *sbRowEpilogue
	if c.staged {
		c.gemmEp.bias, c.gemmEp.off = c.bias, p0*s.O
		ep = &c.gemmEp
	}
	gemmBF16(false, true, rows, s.O, c.k, 1, a, c.k, w, c.k, 0, c.y[p0*s.O:], s.O, pre, ep, nil)
	if c.bias != nil && ep == nil {
		c.p0, c.mb = p0, rows
		Parallel(rows, rows*s.O, c.biasFn)
	}
}

// convBF16Packed holds a convolution's weights packed for the native
// forward, each layout made from the weights of the first forward that
// needs it: the direct kernel's blocks and the product's.
type convBF16Packed struct {
	directOnce, gemmOnce sync.Once
	direct               [][]uint32
	gemm                 *sbPackedB
}

// gemmB returns the weights packed as B of the im2col product (depth k,
// n output channels).
func (p *convBF16Packed) gemmB(k, n int, w []uint16) *sbPackedB {
	p.gemmOnce.Do(func() { p.gemm = packSbgemmB(true, k, n, w, k) })
	return p.gemm
}

// addBias adds the bias to pixels [lo, hi) of the current block.
func (c *convBF16) addBias(lo, hi int) {
	o := c.s.O
	y := c.y[c.p0*o:]
	for p := lo; p < hi; p++ {
		convOps.addTo(y[p*o:(p+1)*o], c.bias)
	}
}

// pixelOrigin splits output pixel p into its image and the input position
// of its first tap.
func (c *convBF16) pixelOrigin(p int) (n, id0, ih0, iw0 int) {
	s := &c.s
	OD, OH, OW := s.Out[0], s.Out[1], s.Out[2]
	ow, oh, od := p%OW, p/OW%OH, p/(OW*OH)%OD
	n = p / (OW * OH * OD)
	return n, od*s.Stride[0] - s.Pad[0], oh*s.Stride[1] - s.Pad[1], ow*s.Stride[2] - s.Pad[2]
}

// im2colPixels writes the im2col rows of pixels [lo, hi) of the current
// block.
func (c *convBF16) im2colPixels(lo, hi int) {
	taps := c.s.kSize()
	for p := lo; p < hi; p++ {
		c.im2colRow(c.col16[p*c.k:(p+1)*c.k], c.p0+p, 0, taps)
	}
}

// im2colRow writes taps [t0, t1) of output pixel p's im2col row into dst:
// per tap (kd, kh, kw) the pixel's C channels, zeros in padding.
func (c *convBF16) im2colRow(dst []uint16, p, t0, t1 int) {
	s := &c.s
	D, H, W, C := s.In[0], s.In[1], s.In[2], s.C
	KH, KW := s.Kernel[1], s.Kernel[2]
	n, id0, ih0, iw0 := c.pixelOrigin(p)
	for t := t0; t < t1; {
		kd, kh, kw := t/(KH*KW), t/KW%KH, t%KW
		id, ih := id0+kd*s.Dil[0], ih0+kh*s.Dil[1]
		in := id >= 0 && id < D && ih >= 0 && ih < H
		row := ((n*D+id)*H + ih) * W
		end := min(KW, kw+t1-t) // the taps of this kernel row in range
		iw := iw0 + kw*s.Dil[2]
		if in && s.Dil[2] == 1 && iw >= 0 && iw+end-kw <= W {
			// The taps lie inside the row: one run.
			copy(dst[(t-t0)*C:(t-t0+end-kw)*C], c.x[(row+iw)*C:])
			t += end - kw
			continue
		}
		for ; kw < end; kw++ {
			d := dst[(t-t0)*C : (t-t0+1)*C]
			if iw := iw0 + kw*s.Dil[2]; in && iw >= 0 && iw < W {
				copy(d, c.x[(row+iw)*C:])
			} else {
				clear(d)
			}
			t++
		}
	}
}

func (c *convBF16) backwardData(dy, w []uint16, dx []float32) {
	s := &c.s
	if c.dataByForward(dy, w, dx, nil) {
		return
	}
	if s.pointwise() {
		convGemmBF16(false, false, c.pix, s.C, s.O, 1, dy, s.O, w, s.C, 0, dx, s.C)
		return
	}
	c.dx = dx
	// Cleared by the workers, pixel by pixel: alone it ran serial, the
	// other thread idle.
	Parallel(c.s.N*c.s.inSize(), len(dx), c.clearFn)
	mb := c.blockPixels(4)
	for p0 := 0; p0 < c.pix; p0 += mb {
		c.p0, c.mb = p0, min(mb, c.pix-p0)
		c.col32 = growBuf(&c.colBuf32, c.mb*c.k)
		convGemmBF16(false, false, c.mb, c.k, s.O, 1, dy[p0*s.O:], s.O, w, c.k, 0, c.col32, c.k)
		// Workers take disjoint channel ranges, so no two write one element.
		Parallel((s.C+15)/16, c.mb*c.k, c.col2imFn)
	}
}

// clearDx clears input pixels [lo, hi) of dx.
func (c *convBF16) clearDx(lo, hi int) { clear(c.dx[lo*c.s.C : hi*c.s.C]) }

// dataByForward computes dx of a convolution with unit strides and
// dilations, where the direct or gathered forward takes it, as the forward
// convolution of dy with the kernel flipped and its channel axes swapped
// (done as the weights are packed), padded by what the kernel reaches past
// the input: the forward's kernels, no columns added back into a cleared
// float32 dx, and with stage (nil for none) dx rounded block by block. It
// reports false, doing nothing, for any other shape.
func (c *convBF16) dataByForward(dy, w []uint16, dx []float32, stage *bf16Stage) bool {
	s := &c.s
	if s.Stride != [3]int{1, 1, 1} || s.Dil != [3]int{1, 1, 1} || !s.ChannelsLast || s.Groups != 1 {
		return false
	}
	f := ConvShape{N: s.N, C: s.O, O: s.C, Groups: 1, In: s.Out, Out: s.In, Kernel: s.Kernel,
		Stride: s.Stride, Dil: s.Dil, ChannelsLast: true}
	for d := range 3 {
		if f.Pad[d] = s.Kernel[d] - 1 - s.Pad[d]; f.Pad[d] < 0 {
			return false
		}
	}
	if !directFitsBF16(&f) && !gatherFitsBF16(&f) && !pointwiseFitsBF16(&f) {
		return false
	}
	fc := getConvBF16(&f)
	defer fc.release()
	fc.flipped = true
	if stage != nil {
		fc.staged, fc.gemmEp.stage = true, *stage
		dx = nil // a float32 result only where the forward needs one
	}
	fc.forward(dy, w, nil, dx)
	return true
}

// dataBySubsample computes, for a strided 1×1 convolution without
// padding, dx rounded to bfloat16: the pointwise forward of dy with the
// weights transposed gives the input pixels the stride samples, which are
// scattered into dx with zeros between. It reports false, doing nothing,
// for any other shape. The product, its columns added back into a cleared
// float32 dx and the rounding moved about six times dx through memory.
func (c *convBF16) dataBySubsample(dy, w, dx []uint16) bool {
	s := &c.s
	one := [3]int{1, 1, 1}
	if s.Kernel != one || s.Pad != [3]int{} || !s.ChannelsLast || s.Groups != 1 || s.pointwise() {
		return false
	}
	f := ConvShape{N: s.N, C: s.O, O: s.C, Groups: 1, In: s.Out, Out: s.Out, Kernel: one,
		Stride: one, Dil: one, ChannelsLast: true}
	if !pointwiseFitsBF16(&f) {
		return false
	}
	samples := f32Scratch((f.yLen() + 1) / 2)
	defer releaseF32Scratch(samples)
	c.samples = unsafe.Slice((*uint16)(unsafe.Pointer(&(*samples)[0])), f.yLen())
	fc := getConvBF16(&f)
	fc.flipped, fc.staged, fc.gemmEp.stage = true, true, bf16Stage{y: c.samples}
	fc.forward(dy, w, nil, nil)
	fc.release()
	c.dx16 = dx
	Parallel(s.N*s.In[0]*s.In[1], len(dx), c.scatterFn)
	c.samples, c.dx16 = nil, nil
	return true
}

// scatterSamples writes input rows [lo, hi) (image, depth and row
// together) of dataBySubsample's dx: the sampled pixels' gradients, zeros
// elsewhere.
func (c *convBF16) scatterSamples(lo, hi int) {
	s := &c.s
	D, H, W, C := s.In[0], s.In[1], s.In[2], s.C
	OD, OH, OW := s.Out[0], s.Out[1], s.Out[2]
	sd, sh, sw := s.Stride[0], s.Stride[1], s.Stride[2]
	for r := lo; r < hi; r++ {
		n, id, ih := r/(D*H), r/H%D, r%H
		row := c.dx16[r*W*C : (r+1)*W*C]
		if id%sd != 0 || id/sd >= OD || ih%sh != 0 || ih/sh >= OH {
			clear(row)
			continue
		}
		src := c.samples[((n*OD+id/sd)*OH+ih/sh)*OW*C:]
		for iw := range W {
			px := row[iw*C : (iw+1)*C]
			if iw%sw == 0 && iw/sw < OW {
				copy(px, src[iw/sw*C:])
			} else {
				clear(px)
			}
		}
	}
}

// col2imChannels adds the current block's columns onto dx for channel
// chunks [lo, hi) (16 channels each).
func (c *convBF16) col2imChannels(lo, hi int) {
	s := &c.s
	D, H, W, C := s.In[0], s.In[1], s.In[2], s.C
	KD, KH, KW := s.Kernel[0], s.Kernel[1], s.Kernel[2]
	c0, c1 := lo*16, min(hi*16, C)
	for p := range c.mb {
		src := c.col32[p*c.k : (p+1)*c.k]
		n, id0, ih0, iw0 := c.pixelOrigin(c.p0 + p)
		t := 0
		for kd := range KD {
			id := id0 + kd*s.Dil[0]
			for kh := range KH {
				ih := ih0 + kh*s.Dil[1]
				in := id >= 0 && id < D && ih >= 0 && ih < H
				row := ((n*D+id)*H + ih) * W
				for kw := range KW {
					iw := iw0 + kw*s.Dil[2]
					if in && iw >= 0 && iw < W {
						convOps.addTo(c.dx[(row+iw)*C+c0:(row+iw)*C+c1], src[t*C+c0:t*C+c1])
					}
					t++
				}
			}
		}
	}
}

// backwardWeight computes dw = dyᵀ·im2col(x): in one product packing
// im2col(x) from the input where backwardWeightInPlace applies, else block
// by block of output pixels; GemmBF16 pairs dy's consecutive pixels as it
// packs it transposed.
func (c *convBF16) backwardWeight(x, dy []uint16, dw []float32) {
	s := &c.s
	if c.backwardWeightInPlace(x, dy, dw) {
		return
	}
	c.x = x
	mb := c.blockPixels(2)
	var beta float32
	for p0 := 0; p0 < c.pix; p0 += mb {
		c.p0, c.mb = p0, min(mb, c.pix-p0)
		a, lda := c.x[p0*s.C:], s.C
		if !s.pointwise() {
			c.col16 = growBuf(&c.colBuf16, c.mb*c.k)
			Parallel(c.mb, c.mb*c.k, c.im2colFn)
			a, lda = c.col16, c.k
		}
		convGemmBF16(true, false, s.O, c.k, c.mb, 1, dy[p0*s.O:], s.O, a, lda, beta, dw, c.k)
		beta = 1
	}
}

// bf16Finite reports whether x holds no infinity and no NaN, four values
// at a time: a value's exponent bits all set is a lane of t equal to the
// mask, a zero lane of t^mask.
func bf16Finite(x []uint16) bool {
	const mask, ones, highs = 0x7f807f807f807f80, 0x0001000100010001, 0x8000800080008000
	n := len(x) &^ 3
	if n > 0 {
		for _, v := range unsafe.Slice((*uint64)(unsafe.Pointer(&x[0])), n/4) {
			z := v&mask ^ mask
			if (z-ones)&^z&highs != 0 {
				return false
			}
		}
	}
	for _, v := range x[n:] {
		if v&0x7f80 == 0x7f80 {
			return false
		}
	}
	return true
}
