package kernels

import "math"

// Pooling of uint8 quantized activations. The output keeps the input's
// scale and zero point, so neither kernel needs them: the maximum of
// quantized values is the quantized maximum (the affine map is
// increasing), and the mean is taken of the quantized values themselves.

// MaxPool2dU8 writes the window maxima of the uint8 x to y, laid out as
// MaxPool2d's. Padding never wins; a window with no tap inside the input
// (which PyTorch's limit of padding to half the kernel rules out) gives 0,
// the least uint8, as MaxPool2d gives −Inf.
func MaxPool2dU8(s *Pool2dShape, x, y []uint8) {
	nx, ny := s.N*s.C*s.H*s.W, s.outLen()
	s.check("MaxPool2dU8", true, map[string][2]int{"x": {len(x), nx}, "y": {len(y), ny}})
	s.runU8(x[:nx], y[:ny], ny*s.KH*s.KW, maxPoolU8Rows, maxPoolU8Planes)
}

// AdaptiveAvgPool2dU8 averages the uint8 x over PyTorch's adaptive
// windows (see adaptiveRange) into y's OutH×OutW, laid out as
// AdaptiveAvgPool2d's, rounding as PyTorch 1.13's quantized
// adaptive_avg_pool2d does for a contiguous (channels-first) quint8
// tensor: with r = float32(float32(1/kh)/kw), the float32 product
// float32(Σq)·r rounded half to even. It ignores the zero point, so the
// result is that whatever the memory format. (PyTorch's channels-last
// kernel rounds z + float32(Σq − z·kh·kw)·float32(1/(kh·kw)) instead,
// which can differ by one where the mean lies on or next to a half and the
// zero point is odd.)
func AdaptiveAvgPool2dU8(s *Pool2dShape, x, y []uint8) {
	nx, ny := s.N*s.C*s.H*s.W, s.outLen()
	s.check("AdaptiveAvgPool2dU8", false, map[string][2]int{"x": {len(x), nx}, "y": {len(y), ny}})
	s.runU8(x[:nx], y[:ny], nx, adaptiveAvgU8Rows, adaptiveAvgU8Planes)
}

// maxU8Impl is the running maximum in use; the variants are in
// pool_int8_amd64.go and pool_int8_noasm.go.
var maxU8Impl = pick(level, maxU8Variants)

// maxU8Go sets y[i] = max(y[i], x[i]) for i < len(y): the reference.
func maxU8Go(y, x []uint8) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] = max(y[i], v)
	}
}

type poolU8Args struct {
	s    Pool2dShape
	x, y []uint8
}

var poolU8Jobs parPool[poolU8Args]

// runU8 splits a uint8 pooling across the worker pool: channels-last by
// output rows (n, oh), each covering all channels, channels-first by
// planes (n, c).
func (s *Pool2dShape) runU8(x, y []uint8, work int, rows, planes func(a *poolU8Args, lo, hi int)) {
	a := poolU8Args{s: *s, x: x, y: y}
	if s.ChannelsLast {
		poolU8Jobs.run(s.N*s.OutH, work, a, rows)
		return
	}
	poolU8Jobs.run(s.N*s.C, work, a, planes)
}

func maxPoolU8Rows(a *poolU8Args, lo, hi int) {
	s := &a.s
	C := s.C
	for t := lo; t < hi; t++ {
		n, oh := t/s.OutH, t%s.OutH
		hlo, hhi := poolWindow(oh, s.SH, s.PH, s.KH, s.DH, s.H)
		for ow := range s.OutW {
			wlo, whi := poolWindow(ow, s.SW, s.PW, s.KW, s.DW, s.W)
			o := ((n*s.OutH+oh)*s.OutW + ow) * C
			yr := a.y[o : o+C]
			clear(yr)
			for ih := hlo; ih < hhi; ih += s.DH {
				for iw := wlo; iw < whi; iw += s.DW {
					maxU8Impl(yr, a.x[((n*s.H+ih)*s.W+iw)*C:][:C])
				}
			}
		}
	}
}

func maxPoolU8Planes(a *poolU8Args, lo, hi int) {
	s := &a.s
	for p := lo; p < hi; p++ {
		xp := a.x[p*s.H*s.W : (p+1)*s.H*s.W]
		yp := a.y[p*s.OutH*s.OutW : (p+1)*s.OutH*s.OutW]
		for oh := range s.OutH {
			hlo, hhi := poolWindow(oh, s.SH, s.PH, s.KH, s.DH, s.H)
			for ow := range s.OutW {
				wlo, whi := poolWindow(ow, s.SW, s.PW, s.KW, s.DW, s.W)
				var m uint8
				for ih := hlo; ih < hhi; ih += s.DH {
					for iw := wlo; iw < whi; iw += s.DW {
						m = max(m, xp[ih*s.W+iw])
					}
				}
				yp[oh*s.OutW+ow] = m
			}
		}
	}
}

// adaptiveScale is PyTorch's reciprocal of a kh×kw window,
// float32(float32(1/kh)/kw), formed as its kernel forms it.
func adaptiveScale(kh, kw int) float32 { return float32(1) / float32(kh) / float32(kw) }

// adaptiveAvgU8 rounds a window's sum times its adaptiveScale to the
// nearest integer, ties to even (std::nearbyint in the default rounding
// mode). The float32 conversion of the sum is exact below 2²⁴, and beyond
// rounds as C's conversion of an int64 to float does.
func adaptiveAvgU8(sum int64, r float32) uint8 {
	return uint8(min(math.RoundToEven(float64(float32(sum)*r)), u8Max))
}

// adaptiveChunk is how many channels a channels-last window sums at once,
// in int64 counters on the stack.
const adaptiveChunk = 256

func adaptiveAvgU8Rows(a *poolU8Args, lo, hi int) {
	s := &a.s
	C := s.C
	var buf [adaptiveChunk]int64
	for t := lo; t < hi; t++ {
		n, oh := t/s.OutH, t%s.OutH
		h0, h1 := adaptiveRange(oh, s.H, s.OutH)
		for ow := range s.OutW {
			w0, w1 := adaptiveRange(ow, s.W, s.OutW)
			r := adaptiveScale(h1-h0, w1-w0)
			o := ((n*s.OutH+oh)*s.OutW + ow) * C
			for c0 := 0; c0 < C; c0 += adaptiveChunk {
				acc := buf[:min(adaptiveChunk, C-c0)]
				clear(acc)
				for ih := h0; ih < h1; ih++ {
					for iw := w0; iw < w1; iw++ {
						xr := a.x[((n*s.H+ih)*s.W+iw)*C+c0:][:len(acc)]
						for i, v := range xr {
							acc[i] += int64(v)
						}
					}
				}
				for i, v := range acc {
					a.y[o+c0+i] = adaptiveAvgU8(v, r)
				}
			}
		}
	}
}

func adaptiveAvgU8Planes(a *poolU8Args, lo, hi int) {
	s := &a.s
	for p := lo; p < hi; p++ {
		xp := a.x[p*s.H*s.W : (p+1)*s.H*s.W]
		yp := a.y[p*s.OutH*s.OutW : (p+1)*s.OutH*s.OutW]
		for oh := range s.OutH {
			h0, h1 := adaptiveRange(oh, s.H, s.OutH)
			for ow := range s.OutW {
				w0, w1 := adaptiveRange(ow, s.W, s.OutW)
				var sum int64
				for ih := h0; ih < h1; ih++ {
					for _, v := range xp[ih*s.W+w0 : ih*s.W+w1] {
						sum += int64(v)
					}
				}
				yp[oh*s.OutW+ow] = adaptiveAvgU8(sum, adaptiveScale(h1-h0, w1-w0))
			}
		}
	}
}
