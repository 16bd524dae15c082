package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The INT8 convolution's conformance suite: every geometry the kernels
// treat differently (padding read as z_x, strides, dilation, groups,
// depthwise, pointwise, 1-D and 3-D, both memory formats, several im2col
// blocks), every output type and post-op, at every level, against
// convU8S8Ref bit for bit.

// convU8S8Ref is the quantized convolution written from its definition,
// one output element at a time: the int32 sum Σ x_q·w_q − z_x·Σ w_q over
// the kernel's taps, padding read as z_x, with s's layouts for x, w and
// the output (and the residual), then the epilogue's steps (see
// int8EpilogueRef). It returns the output as float64 values.
func convU8S8Ref(s *ConvShape, x []uint8, zX int32, w []int8, ep *Int8Epilogue, out string) []float64 {
	y := make([]float64, s.yLen())
	cg, og := s.cg(), s.og()
	I, K, S, P, Dl, Od := s.In, s.Kernel, s.Stride, s.Pad, s.Dil, s.Out
	for n := range s.N {
		for o := range s.O {
			g := o / og
			for od := range Od[0] {
				for oh := range Od[1] {
					for ow := range Od[2] {
						var sxw, sw int64
						for kd := range K[0] {
							for kh := range K[1] {
								for kw := range K[2] {
									id, ih, iw := od*S[0]-P[0]+kd*Dl[0], oh*S[1]-P[1]+kh*Dl[1], ow*S[2]-P[2]+kw*Dl[2]
									inside := id >= 0 && id < I[0] && ih >= 0 && ih < I[1] && iw >= 0 && iw < I[2]
									for ci := range cg {
										c := g*cg + ci
										xv := int64(zX)
										var wv int64
										if s.ChannelsLast {
											if inside {
												xv = int64(x[(((n*I[0]+id)*I[1]+ih)*I[2]+iw)*s.C+c])
											}
											wv = int64(w[(((o*K[0]+kd)*K[1]+kh)*K[2]+kw)*cg+ci])
										} else {
											if inside {
												xv = int64(x[(((n*s.C+c)*I[0]+id)*I[1]+ih)*I[2]+iw])
											}
											wv = int64(w[(((o*cg+ci)*K[0]+kd)*K[1]+kh)*K[2]+kw])
										}
										sxw += xv * wv
										sw += wv
									}
								}
							}
						}
						acc := sxw - int64(zX)*sw
						if acc != int64(int32(acc)) {
							panic(fmt.Sprintf("sum %d overflows int32", acc))
						}
						off := ((((n*Od[0]+od)*Od[1]+oh)*Od[2] + ow) * s.O) + o
						if !s.ChannelsLast {
							off = (((n*s.O+o)*Od[0]+od)*Od[1]+oh)*Od[2] + ow
						}
						y[off] = int8EpilogueRef(ep, out, int32(acc), o, off)
					}
				}
			}
		}
	}
	return y
}

// convShape3 fills in a ConvShape's output size from the rest.
func convShape3(n, c, o, groups int, in, k, stride, pad, dil [3]int, cl bool) ConvShape {
	s := ConvShape{N: n, C: c, O: o, Groups: groups, In: in, Kernel: k, Stride: stride, Pad: pad, Dil: dil, ChannelsLast: cl}
	for i := range 3 {
		s.Out[i] = ConvOutSize(in[i], k[i], stride[i], pad[i], dil[i])
	}
	return s
}

// convShape2 is a 2-D convolution with square kernel, stride, padding and
// dilation.
func convShape2(n, c, o, groups, h, w, k, stride, pad, dil int) ConvShape {
	return convShape3(n, c, o, groups, [3]int{1, h, w}, [3]int{1, k, k}, [3]int{1, stride, stride},
		[3]int{0, pad, pad}, [3]int{1, dil, dil}, true)
}

// convInt8Case is one quantized convolution and its epilogue.
type convInt8Case struct {
	s   ConvShape
	zX  int32
	x   []uint8
	w   []int8
	ep  Int8Epilogue
	out string // "f32", "u8" or "s8"
}

func newConvInt8Case(r *rand.Rand, s ConvShape, zX int32) *convInt8Case {
	tc := &convInt8Case{s: s, zX: zX, out: "f32"}
	tc.x = make([]uint8, s.xLen())
	for i := range tc.x {
		tc.x[i] = uint8(r.IntN(256))
	}
	tc.w = make([]int8, s.wLen())
	for i := range tc.w {
		tc.w[i] = int8(r.IntN(256) - 128)
	}
	tc.ep.Scale = 0.02 + r.Float32()*0.01
	tc.ep.WScales = make([]float32, s.O)
	tc.ep.Bias = make([]float32, s.O)
	for c := range s.O {
		tc.ep.WScales[c] = 1e-3 * (1 + r.Float32())
		tc.ep.Bias[c] = float32(r.NormFloat64())
	}
	tc.ep.OutScale, tc.ep.OutZero = 0.05, 3
	return tc
}

// int8ConvMethods are the ways level l convolves: im2col, and the
// indirect method where the level has a tile for it.
func int8ConvMethods(l Level) []struct {
	name string
	k    int8ConvKernels
} {
	strip := pick(l, u8s8StripVariants)
	m := []struct {
		name string
		k    int8ConvKernels
	}{{"im2col", int8ConvKernels{strip: strip}}}
	if tile := indTileFor(l); tile != nil {
		m = append(m, struct {
			name string
			k    int8ConvKernels
		}{"indirect", int8ConvKernels{strip: strip, tile: tile}})
	}
	return m
}

// run convolves with the kernels k into an output with guard elements
// past its end, and returns the output as float64 values.
func (tc *convInt8Case) run(t *testing.T, k int8ConvKernels) []float64 {
	t.Helper()
	const guards = 13
	s := &tc.s
	n := s.yLen()
	cw := PackConvInt8(s, tc.w)
	strip := k
	got := make([]float64, n)
	bad := -1
	switch tc.out {
	case "f32":
		y := make([]float32, n+guards)
		for i := range y {
			y[i] = guardValue
		}
		convU8S8(strip, "ConvU8S8", s, tc.x, tc.zX, cw, int8Out{f32: y[:n], n: n}, &tc.ep)
		for i, v := range y {
			if i < n {
				got[i] = float64(v)
			} else if v != guardValue {
				bad = i
			}
		}
	case "u8":
		y := make([]uint8, n+guards)
		for i := range y {
			y[i] = 0xa5
		}
		convU8S8(strip, "ConvU8S8ToU8", s, tc.x, tc.zX, cw, int8Out{u8: y[:n], n: n, quant: true}, &tc.ep)
		for i, v := range y {
			if i < n {
				got[i] = float64(v)
			} else if v != 0xa5 {
				bad = i
			}
		}
	case "s8":
		y := make([]int8, n+guards)
		for i := range y {
			y[i] = 0x5a
		}
		convU8S8(strip, "ConvU8S8ToS8", s, tc.x, tc.zX, cw, int8Out{s8: y[:n], n: n, quant: true, signed: true}, &tc.ep)
		for i, v := range y {
			if i < n {
				got[i] = float64(v)
			} else if v != 0x5a {
				bad = i
			}
		}
	}
	if bad >= 0 {
		t.Fatalf("%+v: guard element %d overwritten", *s, bad)
	}
	return got
}

// check runs the case at every level and compares each output with the
// reference, bit for bit.
func (tc *convInt8Case) check(t *testing.T, name string) {
	t.Helper()
	want := convU8S8Ref(&tc.s, tc.x, tc.zX, tc.w, &tc.ep, tc.out)
	for _, l := range Levels() {
		for _, m := range int8ConvMethods(l) {
			got := tc.run(t, m.k)
			for i, w := range want {
				if g := got[i]; math.Float32bits(float32(g)) != math.Float32bits(float32(w)) && !(g != g && w != w) {
					t.Fatalf("%s %s %s zX=%d out=%s cl=%v: y[%d] = %v, want %v", name, l, m.name, tc.zX, tc.out, tc.s.ChannelsLast, i, g, w)
				}
			}
		}
	}
}

// namedConv is a convolution shape with a name for failures and
// benchmarks.
type namedConv struct {
	name string
	s    ConvShape
}

// convInt8Geometries are the shapes of the suite, channels-last; each is
// also run channels-first.
var convInt8Geometries = []namedConv{
	{"odd 3x3 pad1", convShape2(3, 5, 7, 1, 7, 9, 3, 1, 1, 1)},
	{"C3 stride2", convShape2(2, 3, 8, 1, 11, 10, 3, 2, 1, 1)},
	{"5x5 pad2 O33", convShape2(1, 6, 33, 1, 9, 8, 5, 1, 2, 1)},
	{"3x3 stride2 unpadded", convShape2(2, 7, 9, 1, 9, 12, 3, 2, 0, 1)},
	{"dilation2", convShape2(2, 4, 6, 1, 9, 10, 3, 1, 2, 2)},
	{"groups2", convShape2(2, 6, 10, 2, 7, 8, 3, 1, 1, 1)},
	{"groups3 stride2 dil2", convShape2(1, 9, 6, 3, 10, 9, 3, 2, 2, 2)},
	{"depthwise", convShape2(2, 8, 8, 8, 9, 7, 3, 1, 1, 1)},
	{"depthwise stride2 multiplier2", convShape2(1, 5, 10, 5, 8, 9, 3, 2, 1, 1)},
	{"pointwise", convShape2(2, 19, 13, 1, 5, 6, 1, 1, 0, 1)},
	{"pointwise groups2", convShape2(3, 8, 6, 2, 4, 5, 1, 1, 0, 1)},
	{"1x1 stride2", convShape2(2, 7, 5, 1, 9, 8, 1, 2, 0, 1)},
	{"1x1 padded", convShape2(1, 4, 3, 1, 5, 5, 1, 1, 1, 1)},
	{"output past input", convShape2(2, 4, 5, 1, 2, 3, 3, 1, 3, 1)},
	{"rectangular 1-D", convShape3(2, 4, 5, 1, [3]int{1, 1, 17}, [3]int{1, 1, 3}, [3]int{1, 1, 2}, [3]int{0, 0, 1}, [3]int{1, 1, 1}, true)},
	{"3-D", convShape3(2, 3, 5, 1, [3]int{4, 5, 6}, [3]int{2, 3, 3}, [3]int{1, 2, 1}, [3]int{1, 1, 1}, [3]int{1, 1, 2}, true)},
	{"3-D groups2", convShape3(1, 4, 6, 2, [3]int{5, 4, 4}, [3]int{3, 2, 2}, [3]int{2, 1, 1}, [3]int{1, 0, 1}, [3]int{1, 1, 1}, true)},
	{"wide K=576", convShape2(1, 64, 17, 1, 6, 7, 3, 1, 1, 1)},
	// Three panels (a pair and an odd one) over strips that cross output
	// rows and images; the stem of ResNet (C = 3, 7×7, stride 2).
	{"3 panels", convShape2(2, 8, 96, 1, 5, 7, 3, 1, 1, 1)},
	{"7x7 stride2 C3 O64", convShape2(1, 3, 64, 1, 23, 21, 7, 2, 3, 1)},
	{"1-D dilation3 C5", convShape3(3, 5, 40, 1, [3]int{1, 1, 19}, [3]int{1, 1, 3}, [3]int{1, 1, 1}, [3]int{0, 0, 2}, [3]int{1, 1, 3}, true)},
}

func TestInt8ConvGeometries(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 21))
	for _, geo := range convInt8Geometries {
		for _, cl := range []bool{true, false} {
			for _, out := range []string{"f32", "u8", "s8"} {
				s := geo.s
				s.ChannelsLast = cl
				tc := newConvInt8Case(r, s, []int32{0, 37, 128, 255}[r.IntN(4)])
				tc.out = out
				if out == "s8" {
					tc.ep.OutZero = -5
				}
				tc.check(t, geo.name)
			}
		}
	}
}

// TestInt8ConvBlocks shrinks the im2col blocks so that a convolution
// spans several, uneven ones, and a block's rows split across threads.
func TestInt8ConvBlocks(t *testing.T) {
	saved := convInt8BlockBytes
	defer func() { convInt8BlockBytes = saved }()
	r := rand.New(rand.NewPCG(18, 22))
	for _, bytes := range []int{1, 700, 5000} {
		convInt8BlockBytes = bytes
		for _, s := range []ConvShape{convShape2(3, 5, 7, 1, 9, 11, 3, 1, 1, 1), convShape2(2, 6, 4, 2, 13, 7, 3, 2, 1, 1)} {
			newConvInt8Case(r, s, 201).check(t, fmt.Sprintf("blocks of %d bytes", bytes))
		}
	}
}

// TestInt8ConvEpilogues runs every post-op and output type, alone and
// combined, with and without a bias, with the residual in both layouts.
func TestInt8ConvEpilogues(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 23))
	for _, geo := range []ConvShape{convShape2(2, 6, 10, 2, 5, 6, 3, 2, 1, 1), convShape2(1, 9, 7, 1, 4, 5, 1, 1, 0, 1)} {
		for _, cl := range []bool{true, false} {
			for _, sum := range int8Sums {
				for _, f := range int8Finals {
					for _, out := range []string{"f32", "u8", "s8"} {
						for _, bias := range []bool{true, false} {
							s := geo
							s.ChannelsLast = cl
							tc := newConvInt8Case(r, s, int32(r.IntN(256)))
							tc.out = out
							if out == "s8" {
								tc.ep.OutZero = -5
							}
							if !bias {
								tc.ep.Bias = nil
							}
							sum.set(&tc.ep, tc.s.yLen(), r)
							f.set(&tc.ep, 0, r)
							tc.check(t, sum.name+"+"+f.name)
						}
					}
				}
			}
		}
	}
}

// TestInt8ConvExtremes fills the input with 255 (or 0) and the weights
// with 127 or −128, with z_x at both ends, on padded convolutions whose
// padding taps then carry the largest corrections.
func TestInt8ConvExtremes(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 24))
	for _, geo := range []ConvShape{convShape2(2, 64, 9, 1, 5, 6, 3, 1, 1, 1), convShape2(1, 6, 6, 6, 5, 5, 3, 2, 2, 1)} {
		for _, cl := range []bool{true, false} {
			for _, wv := range []int8{127, -128} {
				for _, zX := range []int32{0, 255} {
					for _, xv := range []uint8{255, 0} {
						s := geo
						s.ChannelsLast = cl
						tc := newConvInt8Case(r, s, zX)
						for i := range tc.x {
							tc.x[i] = xv
						}
						for i := range tc.w {
							tc.w[i] = wv
						}
						tc.check(t, "extremes")
					}
				}
			}
		}
	}
}

// TestInt8ConvThreads checks that the result does not depend on the
// number of threads.
func TestInt8ConvThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 25))
	tc := newConvInt8Case(r, convShape2(2, 32, 48, 1, 14, 14, 3, 1, 1, 1), 90)
	var runs [][]float64
	for _, threads := range []int{1, 2, 3} {
		int8WithThreads(threads, func() { runs = append(runs, tc.run(t, int8ConvImpl)) })
	}
	for i, got := range runs[1:] {
		for j := range got {
			if math.Float32bits(float32(got[j])) != math.Float32bits(float32(runs[0][j])) {
				t.Fatalf("run %d differs from one thread at %d: %v, want %v", i+1, j, got[j], runs[0][j])
			}
		}
	}
}

func TestInt8ConvZeroBatch(t *testing.T) {
	s := convShape2(0, 3, 4, 1, 5, 5, 3, 1, 1, 1)
	cw := PackConvInt8(&s, make([]int8, s.wLen()))
	ep := Int8Epilogue{Scale: 1, WScales: []float32{1, 1, 1, 1}}
	ConvU8S8(&s, nil, 0, cw, nil, ep)
}

func TestInt8ConvMisuse(t *testing.T) {
	s := convShape2(2, 4, 6, 2, 5, 5, 3, 1, 1, 1)
	w := make([]int8, s.wLen())
	cw := PackConvInt8(&s, w)
	x, y := make([]uint8, s.xLen()), make([]float32, s.yLen())
	ep := Int8Epilogue{Scale: 1, WScales: []float32{1, 1, 1, 1, 1, 1}}
	other := convShape2(2, 4, 6, 1, 5, 5, 3, 1, 1, 1)
	cases := []misuseCase{
		{"short x", ErrShape, func() { ConvU8S8(&s, x[:len(x)-1], 0, cw, y, ep) }},
		{"row corrections", ErrArgument, func() {
			e := ep
			e.RowAdd = make([]int32, 1000)
			ConvU8S8(&s, x, 0, cw, y, e)
		}},
		{"short y", ErrShape, func() { ConvU8S8(&s, x, 0, cw, y[:len(y)-1], ep) }},
		{"short u8 y", ErrShape, func() {
			e := ep
			e.OutScale = 1
			ConvU8S8ToU8(&s, x, 0, cw, make([]uint8, len(y)-1), e)
		}},
		{"nil weights", ErrArgument, func() { ConvU8S8(&s, x, 0, nil, y, ep) }},
		{"weights of other groups", ErrShape, func() { ConvU8S8(&other, x, 0, cw, y, ep) }},
		{"inconsistent shape", ErrShape, func() {
			bad := s
			bad.Out[1]++
			ConvU8S8(&bad, x, 0, cw, make([]float32, 2*len(y)), ep)
		}},
		{"zero point", ErrArgument, func() { ConvU8S8(&s, x, 256, cw, y, ep) }},
		{"few scales", ErrShape, func() {
			e := ep
			e.WScales = e.WScales[:5]
			ConvU8S8(&s, x, 0, cw, y, e)
		}},
		{"short bias", ErrShape, func() {
			e := ep
			e.Bias = make([]float32, 5)
			ConvU8S8(&s, x, 0, cw, y, e)
		}},
		{"short residual", ErrShape, func() {
			e := ep
			e.Residual = make([]float32, len(y)-1)
			ConvU8S8(&s, x, 0, cw, y, e)
		}},
		{"output scale", ErrArgument, func() { ConvU8S8ToS8(&s, x, 0, cw, make([]int8, len(y)), ep) }},
		{"short weights", ErrShape, func() { PackConvInt8(&s, w[:len(w)-1]) }},
		{"deep groups", ErrShape, func() {
			d := convShape2(1, 8192, 1, 1, 3, 3, 3, 1, 1, 1)
			PackConvInt8(&d, make([]int8, d.wLen()))
		}},
	}
	checkMisuse(t, cases)
}

func TestInt8ConvAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 26))
	for _, cl := range []bool{true, false} {
		s := convShape2(2, 16, 24, 1, 12, 12, 3, 1, 1, 1)
		s.ChannelsLast = cl
		tc := newConvInt8Case(r, s, 7)
		cw := PackConvInt8(&tc.s, tc.w)
		y := make([]float32, s.yLen())
		ConvU8S8(&tc.s, tc.x, tc.zX, cw, y, tc.ep)
		if n := testing.AllocsPerRun(10, func() { ConvU8S8(&tc.s, tc.x, tc.zX, cw, y, tc.ep) }); n != 0 {
			t.Errorf("ConvU8S8 (channels-last %v) allocates %v times a call", cl, n)
		}
	}
}

// BenchmarkConvU8S8 times ResNet-50's INT8 layer kinds, batch 1,
// channels-last, with a bias and uint8 output, reporting GOP/s (two
// operations a multiply-add) beside the VPDPBUSD peak of the same number
// of threads.
func BenchmarkConvU8S8(b *testing.B) {
	dp, mw := MeasurePeakInt8(Threads(), 200*time.Millisecond)
	for _, bc := range []namedConv{
		{"stem 7x7s2 C3 224", convShape2(1, 3, 64, 1, 224, 224, 7, 2, 3, 1)},
		{"3x3 64 56", convShape2(1, 64, 64, 1, 56, 56, 3, 1, 1, 1)},
		{"3x3s2 128 56", convShape2(1, 128, 128, 1, 56, 56, 3, 2, 1, 1)},
		{"3x3 256 14", convShape2(1, 256, 256, 1, 14, 14, 3, 1, 1, 1)},
		{"3x3 512 7", convShape2(1, 512, 512, 1, 7, 7, 3, 1, 1, 1)},
		{"1x1 64-256 56", convShape2(1, 64, 256, 1, 56, 56, 1, 1, 0, 1)},
		{"1x1s2 512-1024 28", convShape2(1, 512, 1024, 1, 28, 28, 1, 2, 0, 1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := bc.s
			r := rand.New(rand.NewPCG(18, 27))
			tc := newConvInt8Case(r, s, 128)
			cw := PackConvInt8(&s, tc.w)
			y := make([]uint8, s.yLen())
			ConvU8S8ToU8(&s, tc.x, tc.zX, cw, y, tc.ep)
			b.ResetTimer()
			for range b.N {
				ConvU8S8ToU8(&s, tc.x, tc.zX, cw, y, tc.ep)
			}
			b.ReportMetric(s.FLOPs()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
			b.ReportMetric(dp, "vpdpbusd-GOP/s")
			b.ReportMetric(mw, "vpmaddwd-GOP/s")
		})
	}
}
