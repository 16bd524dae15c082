package kernels

import (
	"fmt"
	"sync"
)

// ConvShape describes a grouped convolution over up to three spatial
// dimensions, given in depth, height, width order. A 2-D convolution sets
// the depth entries of In, Out, Kernel, Stride and Dil (dilation) to 1 and of Pad
// to 0.
//
// With ChannelsLast false the input is laid out [N][C][D][H][W], the output
// [N][O][D'][H'][W'] and the weight [O][C/Groups][kd][kh][kw]. With
// ChannelsLast true they are [N][D][H][W][C], [N][D'][H'][W'][O] and
// [O][kd][kh][kw][C/Groups]: the physical orders of channels-last tensors.
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

// colSize is the number of elements of one group's im2col matrix.
func (s *ConvShape) colSize() int { return s.cg() * s.kSize() * s.outSize() }

// pointwise reports whether the convolution is a plain matrix product over
// pixels (1×1×1 kernel, unit stride, no padding), so the input itself serves
// as the im2col matrix.
func (s *ConvShape) pointwise() bool {
	return s.kSize() == 1 && s.Stride == [3]int{1, 1, 1} && s.Pad == [3]int{}
}

// check panics unless the sizes are consistent and the slices long enough.
func (s *ConvShape) check(op string, lens map[string][2]int) {
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
		panic(fmt.Sprintf("kernels: %s: inconsistent shape %+v", op, *s))
	}
	for name, l := range lens {
		if l[0] < l[1] {
			panic(fmt.Sprintf("kernels: %s: %s has %d elements, needs %d", op, name, l[0], l[1]))
		}
	}
}

// ConvForward computes y = conv(x, w) + bias. bias (length O) may be nil.
// y is overwritten.
func ConvForward(s *ConvShape, x, w, bias, y []float32) {
	s.check("ConvForward", map[string][2]int{
		"x": {len(x), s.N * s.C * s.inSize()}, "w": {len(w), s.O * s.cg() * s.kSize()},
		"y": {len(y), s.N * s.O * s.outSize()}, "bias": {len(bias), convLenIf(bias != nil, s.O)},
	})
	var wt []float32
	if s.ChannelsLast {
		// Each group's weight is read as a [kd·kh·kw·C/g][O/g] matrix so the
		// products below need no transposed operand.
		wt = getConvBuf(s.O * s.cg() * s.kSize())
		defer putConvBuf(wt)
		transposeGroups(s, w, wt)
	}
	s.overBatch(func(lo, hi int, col []float32, serial bool) {
		for n := lo; n < hi; n++ {
			if s.ChannelsLast {
				forwardCL(s, n, x, wt, bias, y, col, serial)
			} else {
				forwardCF(s, n, x, w, bias, y, col, serial)
			}
		}
	})
}

func convLenIf(cond bool, n int) int {
	if cond {
		return n
	}
	return 0
}

// transposeGroups writes each group's [O/g][K] block of w as [K][O/g].
func transposeGroups(s *ConvShape, w, wt []float32) {
	og, kc := s.og(), s.cg()*s.kSize()
	for g := range s.Groups {
		src := w[g*og*kc : (g+1)*og*kc]
		dst := wt[g*og*kc : (g+1)*og*kc]
		for o := range og {
			for j := range kc {
				dst[j*og+o] = src[o*kc+j]
			}
		}
	}
}

func forwardCF(s *ConvShape, n int, x, w, bias, y, col []float32, serial bool) {
	cg, og, k, si, so := s.cg(), s.og(), s.kSize(), s.inSize(), s.outSize()
	for g := range s.Groups {
		xg := x[(n*s.C+g*cg)*si : (n*s.C+(g+1)*cg)*si]
		a := xg
		if !s.pointwise() {
			im2colCF(s, xg, col, so, 1)
			a = col
		}
		convGemm(serial, false, false, og, so, cg*k, 1, w[g*og*cg*k:], cg*k, a, so, 0, y[(n*s.O+g*og)*so:], so)
	}
	if bias != nil {
		for o := range s.O {
			row := y[(n*s.O+o)*so : (n*s.O+o+1)*so]
			b := bias[o]
			for i := range row {
				row[i] += b
			}
		}
	}
}

func forwardCL(s *ConvShape, n int, x, wt, bias, y, col []float32, serial bool) {
	cg, og, kc, si, so := s.cg(), s.og(), s.cg()*s.kSize(), s.inSize(), s.outSize()
	xn := x[n*si*s.C : (n+1)*si*s.C]
	yn := y[n*so*s.O : (n+1)*so*s.O]
	for g := range s.Groups {
		a, lda := col, kc
		if s.pointwise() {
			a, lda = xn[g*cg:], s.C
		} else {
			im2colCL(s, xn, g, col)
		}
		convGemm(serial, false, false, so, og, kc, 1, a, lda, wt[g*kc*og:], og, 0, yn[g*og:], s.O)
	}
	if bias != nil {
		for p := range so {
			row := yn[p*s.O : (p+1)*s.O]
			for o, b := range bias[:s.O] {
				row[o] += b
			}
		}
	}
}

// ConvBackwardData computes dx, the gradient of the input, from dy and w.
// dx is overwritten.
func ConvBackwardData(s *ConvShape, dy, w, dx []float32) {
	s.check("ConvBackwardData", map[string][2]int{
		"dx": {len(dx), s.N * s.C * s.inSize()}, "w": {len(w), s.O * s.cg() * s.kSize()},
		"dy": {len(dy), s.N * s.O * s.outSize()},
	})
	s.overBatch(func(lo, hi int, col []float32, serial bool) {
		for n := lo; n < hi; n++ {
			if s.ChannelsLast {
				backwardDataCL(s, n, dy, w, dx, col, serial)
			} else {
				backwardDataCF(s, n, dy, w, dx, col, serial)
			}
		}
	})
}

func backwardDataCF(s *ConvShape, n int, dy, w, dx, col []float32, serial bool) {
	cg, og, k, si, so := s.cg(), s.og(), s.kSize(), s.inSize(), s.outSize()
	for g := range s.Groups {
		dxg := dx[(n*s.C+g*cg)*si : (n*s.C+(g+1)*cg)*si]
		dyg := dy[(n*s.O+g*og)*so:]
		wg := w[g*og*cg*k:]
		if s.pointwise() {
			convGemm(serial, true, false, cg, so, og, 1, wg, cg, dyg, so, 0, dxg, so)
			continue
		}
		convGemm(serial, true, false, cg*k, so, og, 1, wg, cg*k, dyg, so, 0, col, so)
		clear(dxg)
		col2imCF(s, col, dxg)
	}
}

func backwardDataCL(s *ConvShape, n int, dy, w, dx, col []float32, serial bool) {
	cg, og, kc, si, so := s.cg(), s.og(), s.cg()*s.kSize(), s.inSize(), s.outSize()
	dxn := dx[n*si*s.C : (n+1)*si*s.C]
	dyn := dy[n*so*s.O : (n+1)*so*s.O]
	if !s.pointwise() {
		clear(dxn)
	}
	for g := range s.Groups {
		wg := w[g*og*kc:]
		if s.pointwise() {
			convGemm(serial, false, false, so, cg, og, 1, dyn[g*og:], s.O, wg, kc, 0, dxn[g*cg:], s.C)
			continue
		}
		convGemm(serial, false, false, so, kc, og, 1, dyn[g*og:], s.O, wg, kc, 0, col, kc)
		col2imCL(s, col, g, dxn)
	}
}

// ConvBackwardWeight computes dw, the gradient of the weight, from x and dy.
// dw is overwritten.
func ConvBackwardWeight(s *ConvShape, x, dy, dw []float32) {
	nw := s.O * s.cg() * s.kSize()
	s.check("ConvBackwardWeight", map[string][2]int{
		"x": {len(x), s.N * s.C * s.inSize()}, "dw": {len(dw), nw},
		"dy": {len(dy), s.N * s.O * s.outSize()},
	})
	dw = dw[:nw]
	clear(dw)
	parts := s.batchParts()
	if parts <= 1 {
		col := getConvBuf(s.colSize())
		defer putConvBuf(col)
		for n := range s.N {
			backwardWeightItem(s, n, x, dy, dw, col, false)
		}
		return
	}
	// Each part sums its batch items into its own buffer; the buffers are
	// then added in part order so the result does not depend on timing.
	partial := make([][]float32, parts)
	Parallel(parts, s.work(), func(lo, hi int) {
		col := getConvBuf(s.colSize())
		defer putConvBuf(col)
		for p := lo; p < hi; p++ {
			acc := make([]float32, nw)
			for n := p * s.N / parts; n < (p+1)*s.N/parts; n++ {
				backwardWeightItem(s, n, x, dy, acc, col, true)
			}
			partial[p] = acc
		}
	})
	for _, acc := range partial {
		for i, v := range acc {
			dw[i] += v
		}
	}
}

// backwardWeightItem adds batch item n's contribution to dw.
func backwardWeightItem(s *ConvShape, n int, x, dy, dw, col []float32, serial bool) {
	cg, og, kc, si, so := s.cg(), s.og(), s.cg()*s.kSize(), s.inSize(), s.outSize()
	for g := range s.Groups {
		dwg := dw[g*og*kc:]
		if s.ChannelsLast {
			xn := x[n*si*s.C : (n+1)*si*s.C]
			a, lda := col, kc
			if s.pointwise() {
				a, lda = xn[g*cg:], s.C
			} else {
				im2colCL(s, xn, g, col)
			}
			convGemm(serial, true, false, og, kc, so, 1, dy[n*so*s.O+g*og:], s.O, a, lda, 1, dwg, kc)
			continue
		}
		// The im2col matrix is built transposed, [pixels][C/g·k], so the
		// product needs no transposed operand.
		xg := x[(n*s.C+g*cg)*si : (n*s.C+(g+1)*cg)*si]
		im2colCF(s, xg, col, 1, kc)
		convGemm(serial, false, false, og, kc, so, 1, dy[(n*s.O+g*og)*so:], so, col, kc, 1, dwg, kc)
	}
}

// ConvBackwardBias computes db, the gradient of the bias: dy summed over
// the batch and the output pixels. db is overwritten.
func ConvBackwardBias(s *ConvShape, dy, db []float32) {
	so := s.outSize()
	s.check("ConvBackwardBias", map[string][2]int{"dy": {len(dy), s.N * s.O * so}, "db": {len(db), s.O}})
	acc := make([]float64, s.O)
	for n := range s.N {
		if s.ChannelsLast {
			for p := range so {
				row := dy[(n*so+p)*s.O : (n*so+p+1)*s.O]
				for o, v := range row {
					acc[o] += float64(v)
				}
			}
			continue
		}
		for o := range s.O {
			var sum float64
			for _, v := range dy[(n*s.O+o)*so : (n*s.O+o+1)*so] {
				sum += float64(v)
			}
			acc[o] += sum
		}
	}
	for o, v := range acc {
		db[o] = float32(v)
	}
}

// work is a rough multiply-add count of one pass, for Parallel.
func (s *ConvShape) work() int { return s.N * s.O * s.outSize() * s.cg() * s.kSize() }

// batchParts is how many slices the batch is cut into for parallel work.
// The worker pool cannot run a parallel GEMM from inside a parallel task,
// so either the batch is split (with serial GEMMs inside) or, when there
// are fewer items than workers, items run one by one with parallel GEMMs.
func (s *ConvShape) batchParts() int {
	if t := Threads(); s.N >= t && t > 1 && s.work() >= minParallelWork {
		return t
	}
	return 1
}

// overBatch calls fn on ranges of batch items with an im2col scratch
// buffer, telling it whether its GEMMs must run serially. A pointwise
// convolution reads its input in place and gets no buffer.
func (s *ConvShape) overBatch(fn func(lo, hi int, col []float32, serial bool)) {
	colLen := s.colSize()
	if s.pointwise() {
		colLen = 0
	}
	parts := s.batchParts()
	if parts <= 1 {
		col := getConvBuf(colLen)
		defer putConvBuf(col)
		fn(0, s.N, col, false)
		return
	}
	Parallel(parts, s.work(), func(lo, hi int) {
		col := getConvBuf(colLen)
		defer putConvBuf(col)
		fn(lo*s.N/parts, hi*s.N/parts, col, true)
	})
}

// convGemm is Sgemm, or its single-threaded form inside a parallel task.
func convGemm(serial, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !serial {
		Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if m > 0 && n > 0 {
		sgemmRef(transA, transB, 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
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

// im2colCF unfolds one group of a channels-first input (C/g planes) into
// col, writing the value for row r = (c, kd, kh, kw) and output pixel p at
// col[r·rowStride + p·pixStride]. Positions in the padding get 0.
func im2colCF(s *ConvShape, xg, col []float32, rowStride, pixStride int) {
	walkCF(s, func(r, c, pOff, iOff, lo, hi, stride int) {
		base := r*rowStride + pOff*pixStride
		plane := xg[c*s.inSize():]
		for o := 0; o < lo; o++ {
			col[base+o*pixStride] = 0
		}
		for o := lo; o < hi; o++ {
			col[base+o*pixStride] = plane[iOff+o*stride]
		}
		for o := hi; o < s.Out[2]; o++ {
			col[base+o*pixStride] = 0
		}
	}, func(r, pOff int) {
		base := r*rowStride + pOff*pixStride
		for o := range s.Out[2] {
			col[base+o*pixStride] = 0
		}
	})
}

// col2imCF adds col (rows (c, kd, kh, kw), columns output pixels) back onto
// the input positions each entry was read from.
func col2imCF(s *ConvShape, col, dxg []float32) {
	so := s.outSize()
	walkCF(s, func(r, c, pOff, iOff, lo, hi, stride int) {
		src := col[r*so+pOff:]
		plane := dxg[c*s.inSize():]
		for o := lo; o < hi; o++ {
			plane[iOff+o*stride] += src[o]
		}
	}, nil)
}

// walkCF visits every row of a group's im2col matrix and every output row
// (fixed output depth and height) within it. For rows whose input depth and
// height are inside the input it calls run with the channel c, the offset
// pOff of the output row among the pixels, the input offset iOff (within
// the channel's plane) at output column 0, and the range [lo, hi) of output
// columns that read inside the input, whose input offsets step by stride.
// For output rows entirely in the padding it calls pad, if non-nil.
func walkCF(s *ConvShape, run func(r, c, pOff, iOff, lo, hi, stride int), pad func(r, pOff int)) {
	D, H, W := s.In[0], s.In[1], s.In[2]
	_, OH, OW := s.Out[0], s.Out[1], s.Out[2]
	r := 0
	for c := range s.cg() {
		for kd := range s.Kernel[0] {
			for kh := range s.Kernel[1] {
				for kw := range s.Kernel[2] {
					wlo, whi := validRange(OW, W, s.Stride[2], s.Pad[2], kw*s.Dil[2])
					for od := range s.Out[0] {
						id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
						for oh := range OH {
							ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
							pOff := (od*OH + oh) * OW
							if id < 0 || id >= D || ih < 0 || ih >= H {
								if pad != nil {
									pad(r, pOff)
								}
								continue
							}
							iOff := (id*H+ih)*W - s.Pad[2] + kw*s.Dil[2]
							run(r, c, pOff, iOff, wlo, whi, s.Stride[2])
						}
					}
					r++
				}
			}
		}
	}
}

// im2colCL unfolds group g of one channels-last batch item xn into col:
// one row per output pixel holding, for each kernel position (kd, kh, kw),
// the group's C/g channels.
func im2colCL(s *ConvShape, xn []float32, g int, col []float32) {
	cg := s.cg()
	walkCL(s, func(dst, src int) {
		if src < 0 {
			clear(col[dst : dst+cg])
		} else {
			copy(col[dst:dst+cg], xn[src+g*cg:src+g*cg+cg])
		}
	})
}

// col2imCL adds col (laid out as im2colCL writes it) back onto group g of
// the channels-last gradient dxn.
func col2imCL(s *ConvShape, col []float32, g int, dxn []float32) {
	cg := s.cg()
	walkCL(s, func(dst, src int) {
		if src < 0 {
			return
		}
		d := dxn[src+g*cg : src+g*cg+cg]
		for i, v := range col[dst : dst+cg] {
			d[i] += v
		}
	})
}

// walkCL calls fn for each output pixel and kernel position with the offset
// of its C/g-long run in the im2col matrix and the offset of the input
// pixel it reads (its channel 0), or -1 when that pixel is in the padding.
func walkCL(s *ConvShape, fn func(dst, src int)) {
	D, H, W := s.In[0], s.In[1], s.In[2]
	cg := s.cg()
	dst := 0
	for od := range s.Out[0] {
		for oh := range s.Out[1] {
			for ow := range s.Out[2] {
				for kd := range s.Kernel[0] {
					id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
					for kh := range s.Kernel[1] {
						ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
						for kw := range s.Kernel[2] {
							iw := ow*s.Stride[2] - s.Pad[2] + kw*s.Dil[2]
							src := -1
							if id >= 0 && id < D && ih >= 0 && ih < H && iw >= 0 && iw < W {
								src = ((id*H+ih)*W + iw) * s.C
							}
							fn(dst, src)
							dst += cg
						}
					}
				}
			}
		}
	}
}

// convScratch holds reusable float32 buffers for im2col matrices and other
// per-call temporaries.
var convScratch sync.Pool

// getConvBuf returns a buffer of n float32s with unspecified contents.
func getConvBuf(n int) []float32 {
	if p, ok := convScratch.Get().(*[]float32); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]float32, n)
}

// putConvBuf returns a buffer from getConvBuf to the pool.
func putConvBuf(b []float32) {
	convScratch.Put(&b)
}
