package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// naiveConv computes, straight from the definition and in float64, the
// output y and, for an output gradient dy, the gradients dx, dw and db of a
// channels-first convolution (x [N][C][D][H][W], w [O][C/g][kd][kh][kw]).
func naiveConv(s *ConvShape, x, w, b, dy []float32) (y, dx, dw, db []float64) {
	cg, og := s.C/s.Groups, s.O/s.Groups
	D, H, W := s.In[0], s.In[1], s.In[2]
	OD, OH, OW := s.Out[0], s.Out[1], s.Out[2]
	KD, KH, KW := s.Kernel[0], s.Kernel[1], s.Kernel[2]
	y = make([]float64, s.N*s.O*OD*OH*OW)
	dx = make([]float64, len(x))
	dw = make([]float64, len(w))
	db = make([]float64, s.O)
	for n := range s.N {
		for o := range s.O {
			g := o / og
			for od := range OD {
				for oh := range OH {
					for ow := range OW {
						yi := (((n*s.O+o)*OD+od)*OH+oh)*OW + ow
						sum := float64(b[o])
						db[o] += float64(dy[yi])
						for c := range cg {
							for kd := range KD {
								id := od*s.Stride[0] - s.Pad[0] + kd*s.Dil[0]
								for kh := range KH {
									ih := oh*s.Stride[1] - s.Pad[1] + kh*s.Dil[1]
									for kw := range KW {
										iw := ow*s.Stride[2] - s.Pad[2] + kw*s.Dil[2]
										if id < 0 || id >= D || ih < 0 || ih >= H || iw < 0 || iw >= W {
											continue
										}
										xi := (((n*s.C+g*cg+c)*D+id)*H+ih)*W + iw
										wi := (((o*cg+c)*KD+kd)*KH+kh)*KW + kw
										sum += float64(x[xi]) * float64(w[wi])
										dx[xi] += float64(dy[yi]) * float64(w[wi])
										dw[wi] += float64(dy[yi]) * float64(x[xi])
									}
								}
							}
						}
						y[yi] = sum
					}
				}
			}
		}
	}
	return y, dx, dw, db
}

// toChannelsLast moves the channel dimension (1) of an [A][B][rest...]
// row-major array to the end: [A][rest...][B].
func toChannelsLast[T float32 | float64](v []T, a, b int) []T {
	rest := len(v) / (a * b)
	out := make([]T, len(v))
	for i := range a {
		for j := range b {
			for r := range rest {
				out[(i*rest+r)*b+j] = v[(i*b+j)*rest+r]
			}
		}
	}
	return out
}

func closeTo(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	scale := 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > 1e-5*(math.Abs(want[i])+scale) || math.IsNaN(d) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestConvMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type cfg struct {
		n, c, o, groups  int
		in, k            [3]int
		stride, pad, dil [3]int
	}
	one := [3]int{1, 1, 1}
	cases := []cfg{
		{1, 1, 1, 1, [3]int{1, 1, 1}, one, one, [3]int{}, one},
		{2, 3, 5, 1, [3]int{1, 7, 5}, [3]int{1, 3, 3}, one, [3]int{}, one},
		{3, 3, 4, 1, [3]int{1, 9, 11}, [3]int{1, 3, 2}, [3]int{1, 2, 3}, [3]int{0, 1, 2}, one},
		{2, 4, 6, 2, [3]int{1, 7, 7}, [3]int{1, 3, 3}, one, [3]int{0, 2, 1}, [3]int{1, 2, 3}},
		{2, 5, 5, 5, [3]int{1, 6, 5}, [3]int{1, 3, 3}, [3]int{1, 2, 2}, [3]int{0, 1, 1}, one}, // depthwise
		{2, 6, 3, 3, [3]int{1, 5, 7}, one, one, [3]int{}, one},                                // pointwise, groups
		{3, 4, 7, 1, [3]int{1, 5, 3}, one, one, [3]int{}, one},                                // pointwise
		{2, 3, 4, 1, [3]int{1, 4, 4}, one, [3]int{1, 2, 2}, [3]int{0, 1, 1}, one},             // 1×1 strided, padded
		{1, 2, 3, 1, [3]int{1, 3, 3}, [3]int{1, 5, 5}, one, [3]int{0, 2, 2}, one},             // kernel > input
		{2, 2, 3, 1, [3]int{5, 4, 6}, [3]int{3, 2, 3}, [3]int{2, 1, 2}, [3]int{1, 1, 0}, [3]int{1, 2, 1}},
		{2, 4, 4, 2, [3]int{3, 5, 4}, [3]int{2, 3, 2}, one, [3]int{1, 0, 1}, [3]int{2, 1, 1}},
		{13, 6, 10, 2, [3]int{1, 11, 9}, [3]int{1, 3, 3}, one, [3]int{0, 1, 1}, one}, // big enough to split the batch
	}
	for i, c := range cases {
		s := ConvShape{N: c.n, C: c.c, O: c.o, Groups: c.groups, In: c.in, Kernel: c.k, Stride: c.stride, Pad: c.pad, Dil: c.dil}
		for d := range 3 {
			s.Out[d] = ConvOutSize(c.in[d], c.k[d], c.stride[d], c.pad[d], c.dil[d])
		}
		so := s.Out[0] * s.Out[1] * s.Out[2]
		x := randSlice(r, s.N*s.C*s.inSize())
		w := randSlice(r, s.O*s.cg()*s.kSize())
		b := randSlice(r, s.O)
		dy := randSlice(r, s.N*s.O*so)
		y, dx, dw, db := naiveConv(&s, x, w, b, dy)
		for _, cl := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/cl=%v", i, cl), func(t *testing.T) {
				s := s
				s.ChannelsLast = cl
				xs, ws, dys := x, w, dy
				wantY, wantDX, wantDW := y, dx, dw
				if cl {
					xs, ws, dys = toChannelsLast(x, s.N, s.C), toChannelsLast(w, s.O, s.cg()), toChannelsLast(dy, s.N, s.O)
					wantY, wantDX, wantDW = toChannelsLast(y, s.N, s.O), toChannelsLast(dx, s.N, s.C), toChannelsLast(dw, s.O, s.cg())
				}
				gotY := make([]float32, len(y))
				ConvForward(&s, xs, ws, b, gotY)
				closeTo(t, "y", gotY, wantY)
				gotDX := randSlice(r, len(dx)) // overwritten, whatever it held
				ConvBackwardData(&s, dys, ws, gotDX)
				closeTo(t, "dx", gotDX, wantDX)
				gotDW := randSlice(r, len(dw))
				ConvBackwardWeight(&s, xs, dys, gotDW)
				closeTo(t, "dw", gotDW, wantDW)
				gotDB := randSlice(r, len(db))
				ConvBackwardBias(&s, dys, gotDB)
				closeTo(t, "db", gotDB, db)
				noBias := make([]float32, len(y))
				ConvForward(&s, xs, ws, nil, noBias)
				for j := range noBias {
					// Per output element, bias only adds a constant.
					noBias[j] += b[outChannel(&s, j)]
				}
				closeTo(t, "y without bias", noBias, wantY)
			})
		}
	}
}

// outChannel is the output channel of physical output element j.
func outChannel(s *ConvShape, j int) int {
	if s.ChannelsLast {
		return j % s.O
	}
	return j / s.outSize() % s.O
}

func TestConvShapeChecks(t *testing.T) {
	good := ConvShape{N: 1, C: 2, O: 2, Groups: 1, In: [3]int{1, 3, 3}, Out: [3]int{1, 1, 1}, Kernel: [3]int{1, 3, 3}, Stride: [3]int{1, 1, 1}, Dil: [3]int{1, 1, 1}}
	mutate := map[string]func(s *ConvShape){
		"groups":   func(s *ConvShape) { s.Groups = 3 },
		"out":      func(s *ConvShape) { s.Out[1] = 2 },
		"stride":   func(s *ConvShape) { s.Stride[2] = 0 },
		"kernel":   func(s *ConvShape) { s.Kernel[1] = 4 },
		"negative": func(s *ConvShape) { s.Pad[1] = -1 },
	}
	x, w, y := make([]float32, 18), make([]float32, 36), make([]float32, 2)
	for name, m := range mutate {
		s := good
		m(&s)
		if !panics(func() { ConvForward(&s, x, w, nil, y) }) {
			t.Errorf("%s: no panic", name)
		}
	}
	if !panics(func() { ConvForward(&good, x[:17], w, nil, y) }) {
		t.Error("short x: no panic")
	}
	if panics(func() { ConvForward(&good, x, w, nil, y) }) {
		t.Error("good shape panicked")
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}

func TestPoolOutSize(t *testing.T) {
	cases := []struct {
		in, k, s, p, d int
		ceil           bool
		want           int
	}{
		{5, 2, 2, 0, 1, false, 2},
		{5, 2, 2, 0, 1, true, 3},
		{6, 3, 2, 1, 1, true, 4}, // the last window starts at 5, inside the input
		{5, 2, 2, 1, 1, true, 3}, // a fourth window would start in the right padding
		{7, 3, 3, 1, 2, false, 2},
		{2, 3, 1, 0, 1, false, 0},
	}
	for _, c := range cases {
		if got := PoolOutSize(c.in, c.k, c.s, c.p, c.d, c.ceil); got != c.want {
			t.Errorf("PoolOutSize%+v = %d, want %d", c, got, c.want)
		}
	}
}

// BenchmarkConv times a ResNet-style 3×3 convolution (64→64 channels on
// 28×28, batch 4) in both layouts.
func BenchmarkConv(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, cl := range []bool{false, true} {
		s := ConvShape{N: 4, C: 64, O: 64, Groups: 1, In: [3]int{1, 28, 28}, Out: [3]int{1, 28, 28},
			Kernel: [3]int{1, 3, 3}, Stride: [3]int{1, 1, 1}, Pad: [3]int{0, 1, 1}, Dil: [3]int{1, 1, 1}, ChannelsLast: cl}
		x, w := randSlice(r, s.N*s.C*s.inSize()), randSlice(r, s.O*s.cg()*s.kSize())
		y := randSlice(r, s.N*s.O*s.outSize())
		name := map[bool]string{false: "nchw", true: "nhwc"}[cl]
		flops := float64(2 * s.work())
		ops := []struct {
			name string
			run  func()
		}{
			{"forward", func() { ConvForward(&s, x, w, nil, y) }},
			{"data", func() { ConvBackwardData(&s, y, w, x) }},
			{"weight", func() { ConvBackwardWeight(&s, x, y, w) }},
		}
		for _, op := range ops {
			b.Run(name+"/"+op.name, func(b *testing.B) {
				for b.Loop() {
					op.run()
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
