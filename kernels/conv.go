package kernels

import ()

// ConvShape describes a grouped convolution over up to three spatial
// dimensions, given in depth, height, width order. A 2-D convolution sets
// the depth entries of In, Out, Kernel, Stride and Dil (dilation) to 1 and of Pad
// to 0.
//
// With ChannelsLast false the input is laid out [N][C][D][H][W], the output
// [N][O][D'][H'][W'] and the weight [O][C/Groups][kd][kh][kw]. With
// ChannelsLast true they are [N][D][H][W][C], [N][D'][H'][W'][O] and
// [O][kd][kh][kw][C/Groups]: the physical orders of channels-last tensors.
//
// Channels-last is the layout the kernels are built for: every pixel's
// channels are contiguous, so the convolution is a few large matrix
// products over all the batch's pixels. Channels-first calls on large
// images run natively, image by image; on small images they are reordered
// to channels-last, computed, and reordered back.
type ConvShape struct {
	N, C, O, Groups  int
	In, Out, Kernel  [3]int
	Stride, Pad, Dil [3]int
	ChannelsLast     bool
}

// ConvOutSize is the output length of a convolution along one dimension:
// floor((in + 2·pad − dil·(k−1) − 1) / stride) + 1. The caller makes sure
// the padded input holds at least one window.
func ConvOutSize(in, k, stride, pad, dil int) int {
	return (in+2*pad-dil*(k-1)-1)/stride + 1
}

func (s *ConvShape) inSize() int  { return s.In[0] * s.In[1] * s.In[2] }
func (s *ConvShape) outSize() int { return s.Out[0] * s.Out[1] * s.Out[2] }
func (s *ConvShape) kSize() int   { return s.Kernel[0] * s.Kernel[1] * s.Kernel[2] }
func (s *ConvShape) cg() int      { return s.C / s.Groups }
func (s *ConvShape) og() int      { return s.O / s.Groups }

// pointwise reports whether the convolution is a plain matrix product over
// pixels (1×1×1 kernel, unit stride, no padding), so the channels-last
// input itself serves as the im2col matrix.
func (s *ConvShape) pointwise() bool {
	return s.kSize() == 1 && s.Stride == [3]int{1, 1, 1} && s.Pad == [3]int{}
}

// depthwise reports whether every group holds one input channel, which the
// kernels compute with direct loops: a matrix product with one input
// channel per group would have an inner dimension of just the kernel size.
func (s *ConvShape) depthwise() bool { return s.Groups > 1 && s.cg() == 1 }

// work is a rough multiply-add count of one pass, for Parallel.
func (s *ConvShape) work() int { return s.N * s.O * s.outSize() * s.cg() * s.kSize() }

// check panics unless the sizes are consistent and the operands long
// enough; lens holds (name, have, need) triples.
func (s *ConvShape) check(op string, lens ...convLen) {
	bad := s.N < 0 || s.C <= 0 || s.O <= 0 || s.Groups <= 0 || s.C%s.Groups != 0 || s.O%s.Groups != 0
	for i := range 3 {
		if bad {
			break
		}
		bad = s.In[i] <= 0 || s.Kernel[i] <= 0 || s.Stride[i] <= 0 || s.Dil[i] <= 0 || s.Pad[i] < 0 ||
			s.In[i]+2*s.Pad[i] < s.Dil[i]*(s.Kernel[i]-1)+1 ||
			s.Out[i] != ConvOutSize(s.In[i], s.Kernel[i], s.Stride[i], s.Pad[i], s.Dil[i])
	}
	if bad {
		fail(ErrShape, op, "inconsistent shape %+v", *s)
	}
	for _, l := range lens {
		if l.have < l.need {
			fail(ErrShape, op, "%s has %d elements, needs %d", l.name, l.have, l.need)
		}
	}
}

type convLen struct {
	name       string
	have, need int
}

func (s *ConvShape) xLen() int { return s.N * s.C * s.inSize() }
func (s *ConvShape) yLen() int { return s.N * s.O * s.outSize() }
func (s *ConvShape) wLen() int { return s.O * s.cg() * s.kSize() }

// ConvForward computes y = conv(x, w) + bias. bias (length O) may be nil.
// y is overwritten.
func ConvForward(s *ConvShape, x, w, bias, y []float32) { convForward(s, x, w, nil, bias, y) }

func convForward(s *ConvShape, x, w []float32, packed *PackedB, bias, y []float32) {
	convForwardEpilogue(s, x, w, packed, bias, y, ConvEpilogue{})
}

func convForwardEpilogue(s *ConvShape, x, w []float32, packed *PackedB, bias, y []float32, ep ConvEpilogue) {
	s.check("ConvForward", convLen{"x", len(x), s.xLen()})
	convForwardInput(s, x, nil, w, packed, bias, y, ep)
}

// convForwardInput is convForwardEpilogue with the input given as float32
// x or, for a channels-last s, as bfloat16 x16 (x nil), which the paths
// that pack the input themselves widen as they pack it.
func convForwardInput(s *ConvShape, x []float32, x16 []uint16, w []float32, packed *PackedB, bias, y []float32, ep ConvEpilogue) {
	nb := 0
	if bias != nil {
		nb = s.O
	}
	s.check("ConvForward", convLen{"w", len(w), s.wLen()}, convLen{"y", len(y), s.yLen()}, convLen{"bias", len(bias), nb})
	if s.N == 0 {
		return
	}
	j := getConvJob(s)
	defer j.release()
	j.packed = packed
	if bias != nil {
		bias = bias[:s.O]
	}
	y = y[:s.yLen()]
	if x16 != nil {
		if !s.ChannelsLast {
			panic("kernels: convForwardInput: a bfloat16 input needs a channels-last convolution")
		}
		j.x16 = x16[:s.xLen()]
	} else {
		x = x[:s.xLen()]
	}
	if s.ChannelsLast {
		j.ep = ep
		j.forward(x, w[:s.wLen()], bias, y)
		if !j.epDone && ep.active() {
			epiloguePass(y, &ep)
		}
		return
	}
	j.forwardCF(x[:s.xLen()], w[:s.wLen()], bias, y)
	if ep.active() {
		epiloguePass(y, &ep)
	}
}

// ConvBackwardData computes dx, the gradient of the input, from dy and w.
// dx is overwritten.
func ConvBackwardData(s *ConvShape, dy, w, dx []float32) {
	s.check("ConvBackwardData", convLen{"dx", len(dx), s.xLen()}, convLen{"w", len(w), s.wLen()},
		convLen{"dy", len(dy), s.yLen()})
	if s.N == 0 {
		return
	}
	j := getConvJob(s)
	defer j.release()
	if s.ChannelsLast {
		j.backwardData(dy[:s.yLen()], w[:s.wLen()], dx[:s.xLen()])
		return
	}
	j.backwardDataCF(dy[:s.yLen()], w[:s.wLen()], dx[:s.xLen()])
}

// ConvBackwardWeight computes dw, the gradient of the weight, from x and dy.
// dw is overwritten.
func ConvBackwardWeight(s *ConvShape, x, dy, dw []float32) {
	s.check("ConvBackwardWeight", convLen{"x", len(x), s.xLen()}, convLen{"dw", len(dw), s.wLen()},
		convLen{"dy", len(dy), s.yLen()})
	dw = dw[:s.wLen()]
	if s.N == 0 {
		clear(dw)
		return
	}
	j := getConvJob(s)
	defer j.release()
	if s.ChannelsLast {
		j.backwardWeight(x[:s.xLen()], dy[:s.yLen()], dw)
		return
	}
	j.backwardWeightCF(x[:s.xLen()], dy[:s.yLen()], dw)
}

// ConvBackwardBias computes db, the gradient of the bias: dy summed over
// the batch and the output pixels. db is overwritten.
func ConvBackwardBias(s *ConvShape, dy, db []float32) {
	s.check("ConvBackwardBias", convLen{"dy", len(dy), s.yLen()}, convLen{"db", len(db), s.O})
	db = db[:s.O]
	if s.N == 0 {
		clear(db)
		return
	}
	j := getConvJob(s)
	defer j.release()
	if s.ChannelsLast {
		j.sumRows(dy[:s.yLen()], s.N*s.outSize(), db)
		return
	}
	j.sumPlanes(dy[:s.yLen()], db)
}

// convJob is the state of one kernel call: the shape and its derived
// sizes, the operands, scratch buffers and the functions handed to
// Parallel. Jobs are pooled, and the functions are bound to their job once
// when it is made, so a call allocates nothing once the pool is warm.
type convJob struct {
	s ConvShape
	// Derived sizes: channels and outputs per group, the im2col row length
	// of one group (kernel positions × C/g) and of all groups, the kernel
	// size, output rows (n, od, oh) and their length OW, input rows.
	cg, og, kc, gkc, ks int
	rows, ow, inRows    int

	x, w, y, dy, dx, dw, bias []float32
	x16                       []uint16  // a bfloat16 forward input, which x is nil beside (see forward)
	wt                        []float32 // weights rearranged for this call
	packed                    *PackedB  // the forward's weights prepacked (ConvWeights), or nil

	col    []float32 // the current block's im2col matrix
	r0, r1 int       // the current block's output rows

	// Channels-first native paths: the current image, group and pixel block.
	n, g, p0, p1 int

	// col2im: the current block's candidate input rows, in segments.
	segs             []convSeg
	firstD, firstH   []int     // first output depth/row that reads each input depth/row, or -1
	parts, partRows  int       // fixed partition of a reduction, independent of the thread count
	partial          []float32 // per-part sums of a reduction
	red, redOut      []float32 // reduction operand (dy for the bias gradient) and result
	redRows, redCols int

	// Reordering between channels-first and channels-last.
	trSrc, trDst  []float32
	trRows, trCol int

	// The direct forward path (conv_direct_amd64.go).
	direct                           directState
	xpBuf, bpBuf, wpartBuf           []float32
	offsBuf                          []int
	padFn, directFn, wPartFn, wRedFn func(lo, hi int)

	colBuf, wtBuf, xlBuf, ylBuf, wlBuf, partBuf []float32
	part64Buf                                   []float64
	firstBuf                                    []int

	// The forward's epilogue, and whether a path applied it block by block.
	ep     ConvEpilogue
	epDone bool

	im2colFn, col2imFn, clearFn, biasFn, sumPartFn, planeFn, epilogueFn func(lo, hi int)
	dwForwardFn, dwDataFn, dwWeightFn, trFn                             func(lo, hi int)
	im2colCFFn, col2imCFFn, biasCFFn                                    func(lo, hi int)
}

// convSeg is a run of candidate input rows for col2im: image n, input
// depths id0 … id0+nd−1 and rows ih0 … ih0+nh−1, the first numbered start
// among the block's candidates.
type convSeg struct{ n, id0, nd, ih0, nh, start int }

var convJobs = freeList[convJob]{New: func() *convJob {
	j := &convJob{}
	j.im2colFn, j.col2imFn, j.clearFn, j.biasFn = j.im2colRows, j.col2imRows, j.clearUntouched, j.addBiasRows
	j.epilogueFn = j.epilogueRows
	j.sumPartFn, j.planeFn, j.trFn = j.sumParts, j.sumPlaneRange, j.transposeItems
	j.dwForwardFn, j.dwDataFn, j.dwWeightFn = j.dwForwardRows, j.dwDataRows, j.dwWeightParts
	j.im2colCFFn, j.col2imCFFn, j.biasCFFn = j.im2colCFRows, j.col2imCFChannels, j.addBiasPlanes
	j.padFn, j.directFn, j.wPartFn, j.wRedFn = j.padRows, j.directCells, j.weightParts, j.weightReduce
	return j
}}

func getConvJob(s *ConvShape) *convJob {
	j := convJobs.get()
	j.s = *s
	j.cg, j.og, j.ks = s.cg(), s.og(), s.kSize()
	j.kc = j.cg * j.ks
	j.gkc = s.Groups * j.kc
	j.rows, j.ow = s.N*s.Out[0]*s.Out[1], s.Out[2]
	j.inRows = s.N * s.In[0] * s.In[1]
	return j
}

// release drops the job's references to the caller's slices and returns it
// to the pool.
func (j *convJob) release() {
	j.x, j.w, j.y, j.dy, j.dx, j.dw, j.bias, j.x16 = nil, nil, nil, nil, nil, nil, nil, nil
	j.wt, j.col, j.red, j.redOut, j.trSrc, j.trDst = nil, nil, nil, nil, nil, nil
	j.partial, j.packed = nil, nil
	j.ep, j.epDone = ConvEpilogue{}, false
	j.direct = directState{}
	convJobs.put(j)
}

// growBuf returns (*b)[:n], reallocating when the pooled buffer is too small.
func growBuf[T any](b *[]T, n int) []T {
	if cap(*b) < n {
		*b = make([]T, n)
	}
	return (*b)[:n]
}

// convSgemm is the matrix product every convolution path runs on. It is a
// variable only so tests can count what the convolution code itself
// allocates and benchmarks can time the code around the products.
var convSgemm = Sgemm

// Block sizing for the im2col paths. A block is a run of whole output rows
// whose im2col matrix (block pixels × C/g·kernel size, all groups) is about
// convBlockFloats floats: large enough that its products are big,
// well-shaped GEMMs that share one weight operand across many pixels (of
// several batch items when images are small), small enough to stay in the
// last-level cache between being written and being read by the GEMM. A
// block is never smaller than the weights either: each block's product
// packs the weights (or, for the weight gradient, reads and writes them)
// once, which must stay small next to the block's own traffic.
var (
	convBlockFloats = 1 << 19 // 2 MiB
	convMinPixels   = 256
)

// blockRows returns how many output rows make one block when each output
// pixel needs perPixel floats of scratch; blocks are equal to within one row.
func (j *convJob) blockRows(perPixel int) int {
	pixels := max(convBlockFloats, j.s.wLen()) / max(perPixel, 1)
	r := max(pixels/j.ow, (convMinPixels+j.ow-1)/j.ow, 1)
	if r >= j.rows {
		return j.rows
	}
	nb := (j.rows + r - 1) / r
	return (j.rows + nb - 1) / nb
}

// sumRows writes to out (length cols) the column sums of the rows×cols
// matrix m. Rows are cut into a fixed number of parts, each summed in
// float32 vectors, and the parts are added in float64 in order, so the
// result does not depend on the thread count.
func (j *convJob) sumRows(m []float32, rows int, out []float32) {
	cols := len(out)
	j.red, j.redRows, j.redCols = m, rows, cols
	j.parts = min(64, max(1, rows/256))
	j.partRows = (rows + j.parts - 1) / j.parts
	j.parts = (rows + j.partRows - 1) / j.partRows
	j.partial = growBuf(&j.partBuf, j.parts*cols)
	Parallel(j.parts, rows*cols, j.sumPartFn)
	acc := growBuf(&j.part64Buf, cols)
	clear(acc)
	for p := range j.parts {
		for c, v := range j.partial[p*cols : (p+1)*cols] {
			acc[c] += float64(v)
		}
	}
	for c, v := range acc {
		out[c] = float32(v)
	}
}

func (j *convJob) sumParts(lo, hi int) {
	cols := j.redCols
	for p := lo; p < hi; p++ {
		acc := j.partial[p*cols : (p+1)*cols]
		clear(acc)
		for r := p * j.partRows; r < min((p+1)*j.partRows, j.redRows); r++ {
			convOps.addTo(acc, j.red[r*cols:(r+1)*cols])
		}
	}
}

// sumPlanes is the bias gradient of a channels-first dy, [N][O][P]: each
// output channel sums its N planes. Channels are split among workers, so
// each sum is formed in the same order whatever the thread count.
func (j *convJob) sumPlanes(dy, db []float32) {
	j.red, j.redOut = dy, db
	Parallel(j.s.O, len(dy), j.planeFn)
}

func (j *convJob) sumPlaneRange(lo, hi int) {
	s := &j.s
	so := s.outSize()
	for o := lo; o < hi; o++ {
		var acc float64
		for n := range s.N {
			acc += float64(convOps.sum(j.red[(n*s.O+o)*so : (n*s.O+o+1)*so]))
		}
		j.redOut[o] = float32(acc)
	}
}
