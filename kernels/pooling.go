package kernels

import (
	"math"
)

// Pool2dShape describes 2-D pooling of N×C planes of H×W into OutH×OutW.
// KH, KW is the poolWindow, SH, SW the stride, PH, PW the padding (on both
// sides) and DH, DW the dilation; adaptive pooling uses only N, C, H, W,
// OutH and OutW. With ChannelsLast the data is laid out [N][H][W][C],
// otherwise [N][C][H][W].
type Pool2dShape struct {
	N, C, H, W, OutH, OutW int
	KH, KW, SH, SW, PH, PW int
	DH, DW                 int
	ChannelsLast           bool
}

// PoolOutSize is the output length of a pooling poolWindow along one
// dimension, by PyTorch's rule: floor (or with ceilMode ceil) of
// (in + 2·pad − dil·(k−1) − 1) / stride, plus 1, where in ceil mode the last
// poolWindow must start inside the input or its left padding. The result may
// be below 1, which callers reject.
func PoolOutSize(in, k, stride, pad, dil int, ceilMode bool) int {
	num := in + 2*pad - dil*(k-1) - 1
	if ceilMode {
		num += stride - 1
	}
	out := poolFloorDiv(num, stride) + 1
	if ceilMode && (out-1)*stride >= in+pad {
		out--
	}
	return out
}

func poolFloorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (s *Pool2dShape) check(op string, poolWindow bool, lens map[string][2]int) {
	bad := s.N < 0 || s.C <= 0 || s.H <= 0 || s.W <= 0 || s.OutH <= 0 || s.OutW <= 0
	if poolWindow {
		bad = bad || s.KH <= 0 || s.KW <= 0 || s.SH <= 0 || s.SW <= 0 || s.PH < 0 || s.PW < 0 || s.DH <= 0 || s.DW <= 0
	}
	if bad {
		fail(ErrShape, op, "inconsistent shape %+v", *s)
	}
	checkLens(op, lens)
}

// layout returns the offset between the planes of neighbouring channels
// and the step between neighbouring pixels of one channel.
func (s *Pool2dShape) layout() (planeStep, chanStep int) {
	if s.ChannelsLast {
		return 1, s.C
	}
	return s.H * s.W, 1
}

// overPlanes runs a.plane over (n, c) planes as Pool2dShape.overPlanes
// does. The plane function reads its operands from a rather than
// capturing them, so the forward references allocate nothing per call
// (compiled graphs run them on every inference).
func (a poolArgs) overPlanes(work int) {
	if a.s.ChannelsLast {
		poolJobs.run(a.s.N, work, a, func(a *poolArgs, lo, hi int) {
			for n := lo; n < hi; n++ {
				a.plane(a, n, -1)
			}
		})
		return
	}
	poolJobs.run(a.s.N*a.s.C, work, a, func(a *poolArgs, lo, hi int) {
		for i := lo; i < hi; i++ {
			a.plane(a, i/a.s.C, i%a.s.C)
		}
	})
}

// overPlanes runs fn over (n, c) planes, in parallel when the work is large.
// In the channels-last layout a batch item's channels are interleaved, so
// the unit of work is a whole item and c is -1.
func (s *Pool2dShape) overPlanes(work int, fn func(n, c int)) {
	if s.ChannelsLast {
		Parallel(s.N, work, func(lo, hi int) {
			for n := lo; n < hi; n++ {
				fn(n, -1)
			}
		})
		return
	}
	Parallel(s.N*s.C, work, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i/s.C, i%s.C)
		}
	})
}

// poolWindow returns the clipped input range [lo, hi) read by output index o
// along one dimension with stride st, padding pad, kernel k and dilation
// dil over an input of length in: the first and one past the last tap that
// land inside the input, stepping by dil.
func poolWindow(o, st, pad, k, dil, in int) (lo, hi int) {
	start := o*st - pad
	lo = start
	if lo < 0 {
		lo += ((-lo + dil - 1) / dil) * dil
	}
	hi = min(start+(k-1)*dil+1, in)
	return lo, hi
}

// MaxPool2d writes the poolWindow maxima of x to y and, for the backward pass,
// the position h·W+w within its plane of each maximum to idx. A NaN in a
// poolWindow wins, as in PyTorch.
func MaxPool2d(s *Pool2dShape, x, y []float32, idx []int32) {
	nx, ny := s.N*s.C*s.H*s.W, s.N*s.C*s.OutH*s.OutW
	s.check("MaxPool2d", true, map[string][2]int{"x": {len(x), nx}, "y": {len(y), ny}, "idx": {len(idx), ny}})
	if s.H*s.W > math.MaxInt32 {
		fail(ErrArgument, "MaxPool2d", "plane too large for int32 indices")
	}
	maxPool(s, x, y, idx)
}

type (
	maxPoolFunc     func(s *Pool2dShape, x, y []float32, idx []int32)
	maxPoolBackFunc func(s *Pool2dShape, dy []float32, idx []int32, dx []float32)
	avgPoolFunc     func(s *Pool2dShape, countIncludePad bool, x, y []float32)
	adaptiveFunc    func(s *Pool2dShape, x, y []float32)
)

// The vector variants take the channels-last layout, where a window's
// taps are rows of C channels; the planar layout runs the reference.
var (
	maxPoolVariants = [levelCount]maxPoolFunc{
		Generic: maxPoolGeneric,
		AVX2: func(s *Pool2dShape, x, y []float32, idx []int32) {
			poolKit(kitAt(AVX2), s, false, x, y, idx, maxPoolGeneric, nil, nil, poolMaxRows)
		},
	}
	maxPoolBackVariants = [levelCount]maxPoolBackFunc{
		Generic: maxPoolBackwardGeneric,
		AVX2: func(s *Pool2dShape, dy []float32, idx []int32, dx []float32) {
			if !s.ChannelsLast {
				maxPoolBackwardGeneric(s, dy, idx, dx)
				return
			}
			poolBackKit(kitAt(AVX2), s, false, false, dy, idx, dx)
		},
	}
	avgPoolVariants = [levelCount]avgPoolFunc{
		Generic: avgPoolGeneric,
		AVX2: func(s *Pool2dShape, countIncludePad bool, x, y []float32) {
			poolKit(kitAt(AVX2), s, countIncludePad, x, y, nil, nil, avgPoolGeneric, nil, poolAvgRows)
		},
	}
	avgPoolBackVariants = [levelCount]avgPoolFunc{
		Generic: avgPoolBackwardGeneric,
		AVX2: func(s *Pool2dShape, countIncludePad bool, dy, dx []float32) {
			if !s.ChannelsLast {
				avgPoolBackwardGeneric(s, countIncludePad, dy, dx)
				return
			}
			poolBackKit(kitAt(AVX2), s, countIncludePad, false, dy, nil, dx)
		},
	}
	adaptiveVariants = [levelCount]adaptiveFunc{
		Generic: adaptiveAvgPoolGeneric,
		AVX2: func(s *Pool2dShape, x, y []float32) {
			poolKit(kitAt(AVX2), s, false, x, y, nil, nil, nil, adaptiveAvgPoolGeneric, poolAvgRows)
		},
	}
	adaptiveBackVariants = [levelCount]adaptiveFunc{
		Generic: adaptiveAvgPoolBackwardGeneric,
		AVX2: func(s *Pool2dShape, dy, dx []float32) {
			if !s.ChannelsLast {
				adaptiveAvgPoolBackwardGeneric(s, dy, dx)
				return
			}
			poolBackKit(kitAt(AVX2), s, false, true, dy, nil, dx)
		},
	}

	maxPool          = pick(level, maxPoolVariants)
	maxPoolBackward  = pick(level, maxPoolBackVariants)
	avgPool          = pick(level, avgPoolVariants)
	avgPoolBackward  = pick(level, avgPoolBackVariants)
	adaptivePool     = pick(level, adaptiveVariants)
	adaptivePoolBack = pick(level, adaptiveBackVariants)
)

// maxPoolGeneric is the reference max pooling.
func maxPoolGeneric(s *Pool2dShape, x, y []float32, idx []int32) {
	poolArgs{s: *s, x: x, y: y, idx: idx, plane: maxPoolPlane}.overPlanes(s.outLen() * s.KH * s.KW)
}

func maxPoolPlane(a *poolArgs, n, c int) {
	s, x, y, idx := &a.s, a.x, a.y, a.idx
	if c >= 0 {
		xp := x[(n*s.C+c)*s.H*s.W:]
		base := (n*s.C + c) * s.OutH * s.OutW
		for oh := range s.OutH {
			hlo, hhi := poolWindow(oh, s.SH, s.PH, s.KH, s.DH, s.H)
			for ow := range s.OutW {
				wlo, whi := poolWindow(ow, s.SW, s.PW, s.KW, s.DW, s.W)
				best, at := float32(math.Inf(-1)), int32(-1)
				if hlo < hhi && wlo < whi {
					at = int32(hlo*s.W + wlo)
				}
				for ih := hlo; ih < hhi; ih += s.DH {
					for iw := wlo; iw < whi; iw += s.DW {
						if v := xp[ih*s.W+iw]; v > best || v != v {
							best, at = v, int32(ih*s.W+iw)
						}
					}
				}
				y[base+oh*s.OutW+ow] = best
				idx[base+oh*s.OutW+ow] = at
			}
		}
		return
	}
	C := s.C
	for oh := range s.OutH {
		hlo, hhi := poolWindow(oh, s.SH, s.PH, s.KH, s.DH, s.H)
		for ow := range s.OutW {
			wlo, whi := poolWindow(ow, s.SW, s.PW, s.KW, s.DW, s.W)
			o := ((n*s.OutH+oh)*s.OutW + ow) * C
			yr, ir := y[o:o+C], idx[o:o+C]
			first := int32(-1)
			if hlo < hhi && wlo < whi {
				first = int32(hlo*s.W + wlo)
			}
			for i := range yr {
				yr[i], ir[i] = float32(math.Inf(-1)), first
			}
			for ih := hlo; ih < hhi; ih += s.DH {
				for iw := wlo; iw < whi; iw += s.DW {
					pos := int32(ih*s.W + iw)
					xr := x[((n*s.H+ih)*s.W+iw)*C:][:C]
					for i, v := range xr {
						if v > yr[i] || v != v {
							yr[i], ir[i] = v, pos
						}
					}
				}
			}
		}
	}
}

// MaxPool2dBackward routes each element of dy to the input position idx
// recorded by MaxPool2d, summing where windows overlap. dx is overwritten.
func MaxPool2dBackward(s *Pool2dShape, dy []float32, idx []int32, dx []float32) {
	nx, ny := s.N*s.C*s.H*s.W, s.N*s.C*s.OutH*s.OutW
	s.check("MaxPool2dBackward", true, map[string][2]int{"dx": {len(dx), nx}, "dy": {len(dy), ny}, "idx": {len(idx), ny}})
	maxPoolBackward(s, dy, idx, dx)
}

// maxPoolBackwardGeneric is the reference.
func maxPoolBackwardGeneric(s *Pool2dShape, dy []float32, idx []int32, dx []float32) {
	ny := s.outLen()
	planeStep, chanStep := s.layout()
	s.overPlanes(ny, func(n, c int) {
		lo, hi := c, c+1
		if c < 0 {
			lo, hi = 0, s.C
		}
		for c := lo; c < hi; c++ {
			in := n*s.C*s.H*s.W + c*planeStep
			poolClearStrided(dx, in, s.H*s.W, chanStep)
			for p := range s.OutH * s.OutW {
				o := n*s.C*s.OutH*s.OutW + c*s.outPlaneStep() + p*chanStep
				if i := idx[o]; i >= 0 {
					dx[in+int(i)*chanStep] += dy[o]
				}
			}
		}
	})
}

func (s *Pool2dShape) outPlaneStep() int {
	if s.ChannelsLast {
		return 1
	}
	return s.OutH * s.OutW
}

func poolClearStrided(d []float32, off, n, step int) {
	if step == 1 {
		clear(d[off : off+n])
		return
	}
	for i := range n {
		d[off+i*step] = 0
	}
}

// avgWindow returns the input range [h0, h1)×[w0, w1) that output (oh, ow)
// averages and the count PyTorch divides its sum by: the size of the poolWindow
// clipped to the padded input when countIncludePad, else to the input.
func (s *Pool2dShape) avgWindow(oh, ow int, countIncludePad bool) (h0, h1, w0, w1 int, div float32) {
	h0, w0 = oh*s.SH-s.PH, ow*s.SW-s.PW
	h1, w1 = min(h0+s.KH, s.H+s.PH), min(w0+s.KW, s.W+s.PW)
	size := (h1 - h0) * (w1 - w0)
	h0, w0 = max(h0, 0), max(w0, 0)
	h1, w1 = min(h1, s.H), min(w1, s.W)
	if !countIncludePad {
		size = (h1 - h0) * (w1 - w0)
	}
	return h0, h1, w0, w1, float32(size)
}

// AvgPool2d writes the poolWindow means of x to y with PyTorch's divisor rules
// (see avgWindow); windows entirely in the padding give 0. Dilation is not
// supported, as in PyTorch.
func AvgPool2d(s *Pool2dShape, x []float32, countIncludePad bool, y []float32) {
	nx, ny := s.N*s.C*s.H*s.W, s.N*s.C*s.OutH*s.OutW
	s.check("AvgPool2d", true, map[string][2]int{"x": {len(x), nx}, "y": {len(y), ny}})
	avgPool(s, countIncludePad, x, y)
}

// avgPoolGeneric is the reference.
func avgPoolGeneric(s *Pool2dShape, countIncludePad bool, x, y []float32) {
	a := poolArgs{s: *s, countIncludePad: countIncludePad, x: x, y: y, plane: avgPoolPlane}
	a.overPlanes(s.outLen() * s.KH * s.KW)
}

func avgPoolPlane(a *poolArgs, n, c int) {
	s, countIncludePad, x, y := &a.s, a.countIncludePad, a.x, a.y
	planeStep, chanStep := s.layout()
	for oh := range s.OutH {
		for ow := range s.OutW {
			h0, h1, w0, w1, div := s.avgWindow(oh, ow, countIncludePad)
			if h0 >= h1 || w0 >= w1 {
				h1, w1, div = h0, w0, 1 // the sum stays 0
			}
			s.eachChannel(n, c, func(c int) {
				in := n*s.C*s.H*s.W + c*planeStep
				var sum float32
				for ih := h0; ih < h1; ih++ {
					for iw := w0; iw < w1; iw++ {
						sum += x[in+(ih*s.W+iw)*chanStep]
					}
				}
				y[s.outAt(n, c, oh, ow)] = sum / div
			})
		}
	}
}

// AvgPool2dBackward spreads each element of dy evenly, by the same divisor
// as AvgPool2d, over its poolWindow. dx is overwritten.
func AvgPool2dBackward(s *Pool2dShape, dy []float32, countIncludePad bool, dx []float32) {
	nx, ny := s.N*s.C*s.H*s.W, s.N*s.C*s.OutH*s.OutW
	s.check("AvgPool2dBackward", true, map[string][2]int{"dx": {len(dx), nx}, "dy": {len(dy), ny}})
	avgPoolBackward(s, countIncludePad, dy, dx)
}

// avgPoolBackwardGeneric is the reference.
func avgPoolBackwardGeneric(s *Pool2dShape, countIncludePad bool, dy, dx []float32) {
	ny := s.outLen()
	planeStep, chanStep := s.layout()
	s.overPlanes(ny*s.KH*s.KW, func(n, c int) {
		s.eachChannel(n, c, func(c int) {
			poolClearStrided(dx, n*s.C*s.H*s.W+c*planeStep, s.H*s.W, chanStep)
		})
		for oh := range s.OutH {
			for ow := range s.OutW {
				h0, h1, w0, w1, div := s.avgWindow(oh, ow, countIncludePad)
				s.eachChannel(n, c, func(c int) {
					in := n*s.C*s.H*s.W + c*planeStep
					g := dy[s.outAt(n, c, oh, ow)] / div
					for ih := h0; ih < h1; ih++ {
						for iw := w0; iw < w1; iw++ {
							dx[in+(ih*s.W+iw)*chanStep] += g
						}
					}
				})
			}
		}
	})
}

// eachChannel calls fn for channel c, or for every channel when c is -1
// (the channels-last unit of work).
func (s *Pool2dShape) eachChannel(n, c int, fn func(c int)) {
	if c >= 0 {
		fn(c)
		return
	}
	for c := range s.C {
		fn(c)
	}
}

// outAt is the offset of output element (n, c, oh, ow).
func (s *Pool2dShape) outAt(n, c, oh, ow int) int {
	if s.ChannelsLast {
		return ((n*s.OutH+oh)*s.OutW+ow)*s.C + c
	}
	return ((n*s.C+c)*s.OutH+oh)*s.OutW + ow
}

// adaptiveRange is PyTorch's adaptive pooling poolWindow along one dimension:
// [floor(o·in/out), ceil((o+1)·in/out)).
func adaptiveRange(o, in, out int) (lo, hi int) {
	return o * in / out, ((o+1)*in + out - 1) / out
}

// AdaptiveAvgPool2d averages x over PyTorch's adaptive windows (see
// adaptiveRange) into OutH×OutW.
func AdaptiveAvgPool2d(s *Pool2dShape, x, y []float32) {
	nx, ny := s.N*s.C*s.H*s.W, s.N*s.C*s.OutH*s.OutW
	s.check("AdaptiveAvgPool2d", false, map[string][2]int{"x": {len(x), nx}, "y": {len(y), ny}})
	adaptivePool(s, x, y)
}

// adaptiveAvgPoolGeneric is the reference.
func adaptiveAvgPoolGeneric(s *Pool2dShape, x, y []float32) {
	poolArgs{s: *s, x: x, y: y, plane: adaptiveAvgPoolPlane}.overPlanes(s.N * s.C * s.H * s.W)
}

func adaptiveAvgPoolPlane(a *poolArgs, n, c int) {
	s, x, y := &a.s, a.x, a.y
	planeStep, chanStep := s.layout()
	for oh := range s.OutH {
		h0, h1 := adaptiveRange(oh, s.H, s.OutH)
		for ow := range s.OutW {
			w0, w1 := adaptiveRange(ow, s.W, s.OutW)
			div := float32((h1 - h0) * (w1 - w0))
			s.eachChannel(n, c, func(c int) {
				in := n*s.C*s.H*s.W + c*planeStep
				var sum float32
				for ih := h0; ih < h1; ih++ {
					for iw := w0; iw < w1; iw++ {
						sum += x[in+(ih*s.W+iw)*chanStep]
					}
				}
				y[s.outAt(n, c, oh, ow)] = sum / div
			})
		}
	}
}

// AdaptiveAvgPool2dBackward spreads each element of dy evenly over its
// adaptive poolWindow. dx is overwritten.
func AdaptiveAvgPool2dBackward(s *Pool2dShape, dy, dx []float32) {
	nx, ny := s.N*s.C*s.H*s.W, s.N*s.C*s.OutH*s.OutW
	s.check("AdaptiveAvgPool2dBackward", false, map[string][2]int{"dx": {len(dx), nx}, "dy": {len(dy), ny}})
	adaptivePoolBack(s, dy, dx)
}

// adaptiveAvgPoolBackwardGeneric is the reference.
func adaptiveAvgPoolBackwardGeneric(s *Pool2dShape, dy, dx []float32) {
	nx := s.N * s.C * s.H * s.W
	planeStep, chanStep := s.layout()
	s.overPlanes(nx, func(n, c int) {
		s.eachChannel(n, c, func(c int) {
			poolClearStrided(dx, n*s.C*s.H*s.W+c*planeStep, s.H*s.W, chanStep)
		})
		for oh := range s.OutH {
			h0, h1 := adaptiveRange(oh, s.H, s.OutH)
			for ow := range s.OutW {
				w0, w1 := adaptiveRange(ow, s.W, s.OutW)
				div := float32((h1 - h0) * (w1 - w0))
				s.eachChannel(n, c, func(c int) {
					in := n*s.C*s.H*s.W + c*planeStep
					g := dy[s.outAt(n, c, oh, ow)] / div
					for ih := h0; ih < h1; ih++ {
						for iw := w0; iw < w1; iw++ {
							dx[in+(ih*s.W+iw)*chanStep] += g
						}
					}
				})
			}
		}
	})
}

func (s *Pool2dShape) outLen() int { return s.N * s.C * s.OutH * s.OutW }

// The channels-last variants on a kit: every output pixel's window is a
// few rows of C channels, which the window primitives combine across the
// channels in vector lanes, in the reference's tap order (so the sums and
// maxima are the reference's bits).

type poolArgs struct {
	k               *vecKit
	s               Pool2dShape
	countIncludePad bool
	adaptive        bool
	x, y            []float32
	idx             []int32
	cparts          int                         // channel ranges per batch item (backward)
	plane           func(a *poolArgs, n, c int) // the planar references' work on one plane
}

var poolJobs parPool[poolArgs]

// poolKit runs rows (one task per output row (n, oh)) for a
// channels-last shape, or the matching reference for a planar one.
func poolKit(k *vecKit, s *Pool2dShape, countIncludePad bool, x, y []float32, idx []int32,
	maxRef maxPoolFunc, avgRef avgPoolFunc, adaptiveRef adaptiveFunc, rows func(a *poolArgs, lo, hi int)) {
	if !s.ChannelsLast {
		switch {
		case maxRef != nil:
			maxRef(s, x, y, idx)
		case avgRef != nil:
			avgRef(s, countIncludePad, x, y)
		default:
			adaptiveRef(s, x, y)
		}
		return
	}
	taps := s.KH * s.KW
	if adaptiveRef != nil {
		taps = (s.H/s.OutH + 2) * (s.W/s.OutW + 2)
	}
	a := poolArgs{k: k, s: *s, countIncludePad: countIncludePad, adaptive: adaptiveRef != nil, x: x, y: y, idx: idx}
	poolJobs.run(s.N*s.OutH, s.outLen()*taps, a, rows)
}

// poolChannelStep is how many channels one window call covers: all of
// them, unless the window is so large that the call would be long.
func poolChannelStep(C, taps int) int {
	if taps*C <= vecChunk || taps == 0 {
		return C
	}
	return max(32, vecChunk/taps&^31)
}

// windowTaps is the number of taps from lo to hi (exclusive) stepping by
// dil, 0 when the range is empty.
func windowTaps(lo, hi, dil int) int {
	if lo >= hi {
		return 0
	}
	return (hi - lo + dil - 1) / dil
}

func poolMaxRows(a *poolArgs, lo, hi int) {
	s, k := &a.s, a.k
	C := s.C
	for t := lo; t < hi; t++ {
		n, oh := t/s.OutH, t%s.OutH
		hlo, hhi := poolWindow(oh, s.SH, s.PH, s.KH, s.DH, s.H)
		nh := windowTaps(hlo, hhi, s.DH)
		for ow := range s.OutW {
			wlo, whi := poolWindow(ow, s.SW, s.PW, s.KW, s.DW, s.W)
			nw := windowTaps(wlo, whi, s.DW)
			o := ((n*s.OutH+oh)*s.OutW + ow) * C
			pos0, base := int32(-1), 0
			if nh > 0 && nw > 0 {
				pos0, base = int32(hlo*s.W+wlo), ((n*s.H+hlo)*s.W+wlo)*C
			} else {
				nh, nw = 0, 0
			}
			step := poolChannelStep(C, nh*nw)
			for c := 0; c < C; c += step {
				e := min(c+step, C)
				k.maxWindow(a.y[o+c:o+e], a.idx[o+c:o+e], a.x[base+c:], nh, nw, s.DH*s.W*C, s.DW*C, pos0, int32(s.DH*s.W), int32(s.DW))
			}
		}
	}
}

// avgPoolWindow is the window of output (oh, ow) for average or adaptive
// pooling as offsets: its first input pixel (h0, w0), its extent and the
// divisor, with an empty window given as 0×0 and divisor 1 (a zero sum).
func (a *poolArgs) avgPoolWindow(oh, ow int) (h0, w0, nh, nw int, div float32) {
	s := &a.s
	if a.adaptive {
		h0, h1 := adaptiveRange(oh, s.H, s.OutH)
		w0, w1 := adaptiveRange(ow, s.W, s.OutW)
		return h0, w0, h1 - h0, w1 - w0, float32((h1 - h0) * (w1 - w0))
	}
	h0, h1, w0, w1, div := s.avgWindow(oh, ow, a.countIncludePad)
	if h0 >= h1 || w0 >= w1 {
		return 0, 0, 0, 0, 1
	}
	return h0, w0, h1 - h0, w1 - w0, div
}

func poolAvgRows(a *poolArgs, lo, hi int) {
	s, k := &a.s, a.k
	C := s.C
	for t := lo; t < hi; t++ {
		n, oh := t/s.OutH, t%s.OutH
		for ow := range s.OutW {
			h0, w0, nh, nw, div := a.avgPoolWindow(oh, ow)
			o := ((n*s.OutH+oh)*s.OutW + ow) * C
			base := ((n*s.H+h0)*s.W + w0) * C
			step := poolChannelStep(C, nh*nw)
			for c := 0; c < C; c += step {
				e := min(c+step, C)
				k.sumWindow(a.y[o+c:o+e], a.x[base+c:], nh, nw, s.W*C, C, div)
			}
		}
	}
}

// poolBackKit runs a channels-last pooling backward pass. Windows overlap,
// so a task owns whole input planes: a batch item, or a range of its
// channels when there are fewer items than workers. Within a task the
// outputs are visited in the reference's order, so every input gradient
// receives its additions in the same order and gets the same bits.
func poolBackKit(k *vecKit, s *Pool2dShape, countIncludePad, adaptive bool, dy []float32, idx []int32, dx []float32) {
	parts := 1
	if t := Threads(); s.N < t && s.C >= 16 {
		parts = min((t+s.N-1)/s.N, s.C/8)
	}
	a := poolArgs{k: k, s: *s, countIncludePad: countIncludePad, adaptive: adaptive, x: dx, y: dy, idx: idx, cparts: parts}
	body := poolAvgBackTasks
	if idx != nil {
		body = poolMaxBackTasks
	}
	poolJobs.run(s.N*parts, s.N*s.C*s.H*s.W+s.outLen()*s.KH*s.KW, a, body)
}

// poolTaskChannels is the channel range [c0, c1) of backward task t.
func (a *poolArgs) poolTaskChannels(t int) (n, c0, c1 int) {
	n, p := t/a.cparts, t%a.cparts
	C := a.s.C
	if a.cparts == 1 {
		return n, 0, C
	}
	// Ranges of whole vectors where possible.
	step := ((C+a.cparts-1)/a.cparts + 7) &^ 7
	return n, min(p*step, C), min((p+1)*step, C)
}

// poolClearItem zeroes channels [c0, c1) of batch item n of dx.
func (a *poolArgs) poolClearItem(n, c0, c1 int) {
	s := &a.s
	C, plane := s.C, s.H*s.W
	d := a.x[n*plane*C : (n+1)*plane*C]
	if c0 == 0 && c1 == C {
		clear(d)
		return
	}
	for p := range plane {
		clear(d[p*C+c0 : p*C+c1])
	}
}

func poolMaxBackTasks(a *poolArgs, lo, hi int) {
	s := &a.s
	C := s.C
	for t := lo; t < hi; t++ {
		n, c0, c1 := a.poolTaskChannels(t)
		a.poolClearItem(n, c0, c1)
		d := a.x[n*s.H*s.W*C : (n+1)*s.H*s.W*C]
		for p := range s.OutH * s.OutW {
			o := (n*s.OutH*s.OutW + p) * C
			g, ix := a.y[o+c0:o+c1], a.idx[o+c0:o+c1]
			for c, i := range ix {
				if i >= 0 {
					d[int(i)*C+c0+c] += g[c]
				}
			}
		}
	}
}

func poolAvgBackTasks(a *poolArgs, lo, hi int) {
	s, k := &a.s, a.k
	C := s.C
	for t := lo; t < hi; t++ {
		n, c0, c1 := a.poolTaskChannels(t)
		a.poolClearItem(n, c0, c1)
		for oh := range s.OutH {
			for ow := range s.OutW {
				h0, w0, nh, nw, div := a.avgPoolWindow(oh, ow)
				if nh == 0 || nw == 0 {
					continue
				}
				o := ((n*s.OutH+oh)*s.OutW + ow) * C
				base := ((n*s.H+h0)*s.W + w0) * C
				step := poolChannelStep(c1-c0, nh*nw)
				for c := c0; c < c1; c += step {
					e := min(c+step, c1)
					k.addWindow(a.x[base+c:], nh, nw, s.W*C, C, a.y[o+c:o+e], div)
				}
			}
		}
	}
}
