package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// poolCase is a pooling geometry (window, stride, padding, dilation,
// ceil mode) applied to inputs of several sizes.
type poolCase struct {
	kh, kw, sh, sw, ph, pw, dh, dw int
	ceil                           bool
}

var poolCases = []poolCase{
	{3, 3, 2, 2, 1, 1, 1, 1, false}, // the ResNet stem
	{2, 2, 2, 2, 0, 0, 1, 1, true},
	{3, 2, 2, 1, 1, 0, 1, 1, true},
	{3, 3, 1, 1, 1, 1, 2, 2, false},
	{1, 1, 3, 3, 0, 0, 1, 1, true},
}

func (p poolCase) shape(n, c, h, w int, cl bool) Pool2dShape {
	return Pool2dShape{N: n, C: c, H: h, W: w,
		OutH: PoolOutSize(h, p.kh, p.sh, p.ph, p.dh, p.ceil), OutW: PoolOutSize(w, p.kw, p.sw, p.pw, p.dw, p.ceil),
		KH: p.kh, KW: p.kw, SH: p.sh, SW: p.sw, PH: p.ph, PW: p.pw, DH: p.dh, DW: p.dw, ChannelsLast: cl}
}

// poolInput is random data with some NaNs and repeated values (ties).
func poolInput(r *rand.Rand, n int) []float32 {
	x := vecRand(r, n, 0)
	for i := range x {
		switch r.IntN(50) {
		case 0:
			x[i] = float32(math.NaN())
		case 1, 2:
			x[i] = 0.5
		}
	}
	return x
}

// poolGarbage fills an output the kernel must overwrite entirely.
func poolGarbage(d []float32) {
	for i := range d {
		d[i] = 99
	}
}

// TestPoolingLevels runs every variant of every pooling kernel in both
// layouts against the reference. The vector variants combine the same
// values in the same order, so they must give the reference's bits and
// indices.
func TestPoolingLevels(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(51, 52))
		mp, mpb := pick(l, maxPoolVariants), pick(l, maxPoolBackVariants)
		ap, apb := pick(l, avgPoolVariants), pick(l, avgPoolBackVariants)
		for _, C := range suiteSizes(8) {
			for ci, pc := range poolCases {
				for _, cl := range []bool{true, false} {
					N, H, W := 1+ci%2*2, 5+ci%3, 7-ci%2
					s := pc.shape(N, C, H, W, cl)
					name := fmt.Sprintf("C=%d case=%+v cl=%v", C, pc, cl)
					nx, ny := N*C*H*W, s.outLen()
					x := poolInput(r, nx)

					wy, widx := make([]float32, ny), make([]int32, ny)
					maxPoolGeneric(&s, x, wy, widx)
					y, oky := guarded(t, ny)
					poolGarbage(y)
					idx := make([]int32, ny)
					mp(&s, x, y, idx)
					oky()
					sameBits32(t, "max "+name, y, wy)
					for i := range idx {
						if idx[i] != widx[i] {
							t.Fatalf("max %s: index %d = %d, want %d", name, i, idx[i], widx[i])
						}
					}

					dy := vecRand(r, ny, 0)
					wdx := make([]float32, nx)
					maxPoolBackwardGeneric(&s, dy, widx, wdx)
					dx, okx := guarded(t, nx)
					poolGarbage(dx)
					mpb(&s, dy, idx, dx)
					okx()
					sameBits32(t, "max backward "+name, dx, wdx)

					for _, cip := range []bool{true, false} {
						avgPoolGeneric(&s, cip, x, wy)
						y, oky := guarded(t, ny)
						poolGarbage(y)
						ap(&s, cip, x, y)
						oky()
						sameBits32(t, fmt.Sprintf("avg %s includePad=%v", name, cip), y, wy)

						avgPoolBackwardGeneric(&s, cip, dy, wdx)
						dx, okx := guarded(t, nx)
						poolGarbage(dx)
						apb(&s, cip, dy, dx)
						okx()
						sameBits32(t, fmt.Sprintf("avg backward %s includePad=%v", name, cip), dx, wdx)
					}
				}
			}
		}
	})
}

func TestAdaptivePoolingLevels(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(53, 54))
		fwd, bwd := pick(l, adaptiveVariants), pick(l, adaptiveBackVariants)
		sizes := [][4]int{{7, 5, 3, 2}, {6, 6, 1, 1}, {5, 9, 5, 4}, {4, 3, 6, 5}}
		for _, C := range suiteSizes(8) {
			for i, hw := range sizes {
				for _, cl := range []bool{true, false} {
					s := Pool2dShape{N: 1 + i%2, C: C, H: hw[0], W: hw[1], OutH: hw[2], OutW: hw[3], ChannelsLast: cl}
					checkAdaptive(t, fmt.Sprintf("C=%d %v cl=%v", C, hw, cl), r, &s, fwd, bwd)
				}
			}
		}
		// A global window large enough that the channels are split
		// across several primitive calls.
		s := Pool2dShape{N: 2, C: 97, H: 40, W: 40, OutH: 1, OutW: 1, ChannelsLast: true}
		checkAdaptive(t, "global 40×40", r, &s, fwd, bwd)
	})
}

func checkAdaptive(t *testing.T, name string, r *rand.Rand, s *Pool2dShape, fwd, bwd adaptiveFunc) {
	t.Helper()
	nx, ny := s.N*s.C*s.H*s.W, s.outLen()
	x, dy := vecRand(r, nx, 0), vecRand(r, ny, 0)
	wy, wdx := make([]float32, ny), make([]float32, nx)
	adaptiveAvgPoolGeneric(s, x, wy)
	adaptiveAvgPoolBackwardGeneric(s, dy, wdx)
	y, oky := guarded(t, ny)
	poolGarbage(y)
	fwd(s, x, y)
	oky()
	sameBits32(t, "adaptive "+name, y, wy)
	dx, okx := guarded(t, nx)
	poolGarbage(dx)
	bwd(s, dy, dx)
	okx()
	sameBits32(t, "adaptive backward "+name, dx, wdx)
}

// TestMaxPoolNaN pins PyTorch's rule in both layouts: a NaN in a window
// wins and the index is the last NaN's.
func TestMaxPoolNaN(t *testing.T) {
	nan := float32(math.NaN())
	for _, cl := range []bool{false, true} {
		s := Pool2dShape{N: 1, C: 1, H: 1, W: 4, OutH: 1, OutW: 1, KH: 1, KW: 4, SH: 1, SW: 1, DH: 1, DW: 1, ChannelsLast: cl}
		y, idx := make([]float32, 1), make([]int32, 1)
		MaxPool2d(&s, []float32{1, nan, 3, nan}, y, idx)
		if !math.IsNaN(float64(y[0])) || idx[0] != 3 {
			t.Errorf("channels-last=%v: max %v at %d, want NaN at 3", cl, y[0], idx[0])
		}
	}
}

func TestPoolingDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	if level == Generic {
		t.Skip("the pure-Go reference allocates; only the vector path promises not to")
	}
	r := rand.New(rand.NewPCG(55, 56))
	s := poolCases[0].shape(4, 64, 28, 28, true)
	nx, ny := s.N*s.C*s.H*s.W, s.outLen()
	x, y, idx, dx := vecRand(r, nx, 0), make([]float32, ny), make([]int32, ny), make([]float32, nx)
	g := Pool2dShape{N: 4, C: 64, H: 28, W: 28, OutH: 1, OutW: 1, ChannelsLast: true}
	for name, f := range map[string]func(){
		"MaxPool2d":                 func() { MaxPool2d(&s, x, y, idx) },
		"MaxPool2dBackward":         func() { MaxPool2dBackward(&s, y, idx, dx) },
		"AvgPool2d":                 func() { AvgPool2d(&s, x, true, y) },
		"AvgPool2dBackward":         func() { AvgPool2dBackward(&s, y, true, dx) },
		"AdaptiveAvgPool2d":         func() { AdaptiveAvgPool2d(&g, x, y[:4*64]) },
		"AdaptiveAvgPool2dBackward": func() { AdaptiveAvgPool2dBackward(&g, y[:4*64], dx) },
	} {
		f()
		if a := testing.AllocsPerRun(5, f); a != 0 {
			t.Errorf("%s allocates %v times per call", name, a)
		}
	}
}

// BenchmarkMaxPool2d times the ResNet stem's 3×3 stride-2 max pooling on a
// [16, 64, 112, 112] batch. GB/s counts x, y and the int32 indices once
// (forward) or dy, the indices and dx (backward).
func BenchmarkMaxPool2d(b *testing.B) {
	r := rand.New(rand.NewPCG(57, 58))
	for _, cl := range []bool{true, false} {
		s := poolCases[0].shape(16, 64, 112, 112, cl)
		nx, ny := s.N*s.C*s.H*s.W, s.outLen()
		x, y, idx, dx := vecRand(r, nx, 0), make([]float32, ny), make([]int32, ny), make([]float32, nx)
		layout := map[bool]string{true: "nhwc", false: "nchw"}[cl]
		b.Run(layout+"/forward", func(b *testing.B) {
			m := startMeter()
			for b.Loop() {
				MaxPool2d(&s, x, y, idx)
			}
			m.report(b, float64(4*nx+8*ny))
		})
		b.Run(layout+"/backward", func(b *testing.B) {
			m := startMeter()
			for b.Loop() {
				MaxPool2dBackward(&s, y, idx, dx)
			}
			m.report(b, float64(4*nx+8*ny))
		})
	}
}

// BenchmarkAvgPool2d times channels-last 3×3 stride-2 average pooling and
// the global average pooling of a ResNet-50 head ([16, 2048, 7, 7]).
func BenchmarkAvgPool2d(b *testing.B) {
	r := rand.New(rand.NewPCG(59, 60))
	s := poolCases[0].shape(16, 64, 112, 112, true)
	nx, ny := s.N*s.C*s.H*s.W, s.outLen()
	x, y, dx := vecRand(r, nx, 0), make([]float32, ny), make([]float32, nx)
	b.Run("3x3s2/forward", func(b *testing.B) {
		m := startMeter()
		for b.Loop() {
			AvgPool2d(&s, x, true, y)
		}
		m.report(b, float64(4*nx+4*ny))
	})
	b.Run("3x3s2/backward", func(b *testing.B) {
		m := startMeter()
		for b.Loop() {
			AvgPool2dBackward(&s, y, true, dx)
		}
		m.report(b, float64(4*nx+4*ny))
	})
	g := Pool2dShape{N: 16, C: 2048, H: 7, W: 7, OutH: 1, OutW: 1, ChannelsLast: true}
	gx, gy := vecRand(r, 16*2048*49, 0), make([]float32, 16*2048)
	b.Run("global/forward", func(b *testing.B) {
		m := startMeter()
		for b.Loop() {
			AdaptiveAvgPool2d(&g, gx, gy)
		}
		m.report(b, float64(4*len(gx)+4*len(gy)))
	})
}
