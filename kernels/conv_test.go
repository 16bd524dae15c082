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

// convCase is a convolution geometry for the conformance suite; the depth
// entries are 1 (and padding 0) for 2-D cases.
type convCase struct {
	name             string
	n, c, o, groups  int
	in, k            [3]int
	stride, pad, dil [3]int
}

var one3 = [3]int{1, 1, 1}

// convCases covers every path of the kernels: pointwise (1×1 stride 1,
// the direct GEMM), 1×1 strided or padded (a gather), k×k im2col with
// stride, padding and dilation, strides larger than the kernel (input
// rows and columns no output reads), groups, depthwise with one and two
// outputs per channel, 3-D versions of each, channel counts off the
// vector width, and multiples of 8 channels (the forward then packs its
// im2col panels straight from the input).
var convCases = []convCase{
	{"single", 1, 1, 1, 1, one3, one3, one3, [3]int{}, one3},
	{"3x3", 2, 3, 5, 1, [3]int{1, 7, 5}, [3]int{1, 3, 3}, one3, [3]int{}, one3},
	{"3x2 stride pad", 3, 3, 4, 1, [3]int{1, 9, 11}, [3]int{1, 3, 2}, [3]int{1, 2, 3}, [3]int{0, 1, 2}, one3},
	{"dil", 2, 3, 5, 1, [3]int{1, 9, 10}, [3]int{1, 3, 3}, one3, [3]int{0, 2, 1}, [3]int{1, 2, 3}},
	{"3x3 channels 16 pad", 2, 16, 20, 1, [3]int{1, 9, 10}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"3x3 channels 24 stride 2", 3, 24, 35, 1, [3]int{1, 11, 9}, [3]int{1, 3, 3}, [3]int{1, 2, 2}, [3]int{0, 1, 1}, one3},
	{"groups dil", 2, 4, 6, 2, [3]int{1, 7, 7}, [3]int{1, 3, 3}, one3, [3]int{0, 2, 1}, [3]int{1, 2, 3}},
	{"groups wide", 2, 18, 12, 3, [3]int{1, 5, 6}, [3]int{1, 3, 3}, [3]int{1, 2, 1}, [3]int{0, 1, 1}, one3},
	{"depthwise", 2, 5, 5, 5, [3]int{1, 6, 5}, [3]int{1, 3, 3}, [3]int{1, 2, 2}, [3]int{0, 1, 1}, one3},
	{"depthwise wide dil", 2, 19, 19, 19, [3]int{1, 7, 6}, [3]int{1, 3, 3}, one3, [3]int{0, 2, 2}, [3]int{1, 2, 2}},
	{"depthwise x2", 2, 3, 6, 3, [3]int{1, 5, 7}, [3]int{1, 3, 2}, [3]int{1, 1, 2}, [3]int{0, 1, 1}, one3},
	{"pointwise groups", 2, 6, 3, 3, [3]int{1, 5, 7}, one3, one3, [3]int{}, one3},
	{"pointwise", 3, 4, 7, 1, [3]int{1, 5, 3}, one3, one3, [3]int{}, one3},
	{"pointwise wide", 2, 33, 17, 1, [3]int{1, 3, 5}, one3, one3, [3]int{}, one3},
	{"1x1 strided", 2, 9, 5, 1, [3]int{1, 7, 5}, one3, [3]int{1, 2, 3}, [3]int{}, one3},
	{"1x1 strided padded", 2, 3, 4, 1, [3]int{1, 4, 4}, one3, [3]int{1, 2, 2}, [3]int{0, 1, 1}, one3},
	{"stride over kernel", 2, 3, 5, 1, [3]int{1, 8, 9}, [3]int{1, 2, 2}, [3]int{1, 3, 3}, [3]int{}, one3},
	{"kernel over input", 1, 2, 3, 1, [3]int{1, 3, 3}, [3]int{1, 5, 5}, one3, [3]int{0, 2, 2}, one3},
	{"output past input", 2, 4, 5, 1, [3]int{1, 2, 3}, [3]int{1, 3, 3}, one3, [3]int{0, 3, 3}, one3},
	{"depthwise output past input", 2, 4, 4, 4, [3]int{1, 2, 3}, [3]int{1, 3, 3}, one3, [3]int{0, 3, 3}, one3},
	{"groups output past input", 1, 4, 6, 2, [3]int{1, 3, 2}, [3]int{1, 3, 3}, one3, [3]int{0, 3, 3}, one3},
	{"7x7 stride 2", 2, 3, 8, 1, [3]int{1, 13, 11}, [3]int{1, 7, 7}, [3]int{1, 2, 2}, [3]int{0, 3, 3}, one3},
	{"3d", 2, 2, 3, 1, [3]int{5, 4, 6}, [3]int{3, 2, 3}, [3]int{2, 1, 2}, [3]int{1, 1, 0}, [3]int{1, 2, 1}},
	{"3d groups", 2, 4, 4, 2, [3]int{3, 5, 4}, [3]int{2, 3, 2}, one3, [3]int{1, 0, 1}, [3]int{2, 1, 1}},
	{"3d pointwise", 2, 5, 3, 1, [3]int{3, 2, 3}, one3, one3, [3]int{}, one3},
	{"3d 1x1 strided", 1, 3, 4, 1, [3]int{5, 3, 4}, one3, [3]int{2, 2, 1}, [3]int{}, one3},
	{"3d depthwise", 2, 3, 3, 3, [3]int{4, 3, 5}, [3]int{3, 2, 3}, [3]int{2, 1, 1}, [3]int{1, 1, 1}, one3},
	{"3d stride over kernel", 1, 2, 3, 1, [3]int{7, 5, 5}, [3]int{2, 1, 2}, [3]int{3, 3, 3}, [3]int{}, one3},
	{"batch 13", 13, 6, 10, 2, [3]int{1, 11, 9}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	// The direct AVX-512 forward (32-channel multiples, rows of 12 or 24):
	// odd channels, stride and dilation, a 7×7 stem, and depths and widths
	// that take several blocks of B.
	{"direct 3x3", 2, 5, 32, 1, [3]int{1, 9, 12}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"direct stride dilation", 1, 8, 64, 1, [3]int{1, 14, 24}, [3]int{1, 3, 3}, [3]int{1, 2, 2}, [3]int{0, 2, 2}, [3]int{1, 2, 2}},
	{"direct 7x7", 1, 3, 64, 1, [3]int{1, 9, 47}, [3]int{1, 7, 7}, [3]int{1, 2, 2}, [3]int{0, 3, 3}, one3},
	{"direct blocks", 1, 200, 192, 1, [3]int{1, 3, 12}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	// Stride-1 backward-data as a direct forward (input channels a
	// multiple of 32, input rows of 12 or 24).
	{"direct data 3x3", 2, 32, 16, 1, [3]int{1, 7, 12}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"direct data dilated", 1, 64, 8, 1, [3]int{1, 9, 24}, [3]int{1, 3, 3}, one3, [3]int{0, 2, 2}, [3]int{1, 2, 2}},
	{"direct data unpadded", 1, 32, 5, 1, [3]int{1, 6, 12}, [3]int{1, 3, 3}, one3, [3]int{}, one3},
	// The direct weight gradient (rows of 24 or more pixels): runs of
	// kernel columns × channels that are and are not multiples of 12.
	{"direct weight 3x3", 2, 20, 64, 1, [3]int{1, 5, 24}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"direct weight stride", 1, 7, 32, 1, [3]int{1, 6, 49}, [3]int{1, 5, 5}, [3]int{1, 2, 2}, [3]int{0, 2, 2}, one3},
}

// convBlockings are block sizes the suite runs every case with: the
// default, one output row per block (every input row is then shared by
// several blocks), and blocks of a few rows that straddle images.
var convBlockings = []struct {
	name           string
	floats, pixels int
}{
	{"default", 0, 0},
	{"row", 1, 1},
	{"rows", 1, 7},
}

// setConvLevel makes the convolution kernels run their level-l vector
// loops and returns a function restoring the previous set.
func setConvLevel(l Level) func() {
	old := convOps
	convOps = pick(l, convVecs)
	return func() { convOps = old }
}

func setConvBlocking(floats, pixels int) func() {
	of, op := convBlockFloats, convMinPixels
	if floats > 0 {
		convBlockFloats, convMinPixels = floats, pixels
	}
	return func() { convBlockFloats, convMinPixels = of, op }
}

func (c convCase) shape(cl bool) ConvShape {
	s := ConvShape{N: c.n, C: c.c, O: c.o, Groups: c.groups, In: c.in, Kernel: c.k, Stride: c.stride, Pad: c.pad,
		Dil: c.dil, ChannelsLast: cl}
	for d := range 3 {
		s.Out[d] = ConvOutSize(c.in[d], c.k[d], c.stride[d], c.pad[d], c.dil[d])
	}
	return s
}

// guardedNaN is guarded(t, n) filled with NaN, so an output element the
// kernel fails to write shows.
func guardedNaN(t *testing.T, n int) ([]float32, func()) {
	s, check := guarded(t, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s, check
}

func TestConvMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	forEachLevel(t, func(t *testing.T, l Level) {
		defer setConvLevel(l)()
		for _, bl := range convBlockings {
			t.Run(bl.name, func(t *testing.T) {
				defer setConvBlocking(bl.floats, bl.pixels)()
				for _, c := range convCases {
					checkConvCase(t, r, c)
				}
			})
		}
	})
}

// convLayouts are the layouts the suite runs each case in: channels-last,
// and channels-first both natively and reordered through channels-last
// (chosen by convCFNativePixels, forced here either way).
var convLayouts = []struct {
	name         string
	cl           bool
	nativePixels int
}{
	{"nhwc", true, 0},
	{"nchw native", false, 1},
	{"nchw reordered", false, math.MaxInt},
}

// setCFNative sets convCFNativePixels (unless pixels is 0) and returns a
// function restoring it.
func setCFNative(pixels int) func() {
	old := convCFNativePixels
	if pixels > 0 {
		convCFNativePixels = pixels
	}
	return func() { convCFNativePixels = old }
}

func checkConvCase(t *testing.T, r *rand.Rand, c convCase) {
	t.Helper()
	s := c.shape(false)
	x := randSlice(r, s.N*s.C*s.inSize())
	w := randSlice(r, s.O*s.cg()*s.kSize())
	b := randSlice(r, s.O)
	dy := randSlice(r, s.N*s.O*s.outSize())
	y, dx, dw, db := naiveConv(&s, x, w, b, dy)
	for _, lay := range convLayouts {
		t.Run(c.name+"/"+lay.name, func(t *testing.T) {
			defer setCFNative(lay.nativePixels)()
			cl := lay.cl
			s := c.shape(cl)
			xs, ws, dys := x, w, dy
			wantY, wantDX, wantDW := y, dx, dw
			if cl {
				xs, ws, dys = toChannelsLast(x, s.N, s.C), toChannelsLast(w, s.O, s.cg()), toChannelsLast(dy, s.N, s.O)
				wantY, wantDX, wantDW = toChannelsLast(y, s.N, s.O), toChannelsLast(dx, s.N, s.C), toChannelsLast(dw, s.O, s.cg())
			}
			gotY, checkY := guardedNaN(t, len(y))
			ConvForward(&s, xs, ws, b, gotY)
			checkY()
			closeTo(t, "y", gotY, wantY)
			gotDX, checkDX := guardedNaN(t, len(dx))
			ConvBackwardData(&s, dys, ws, gotDX)
			checkDX()
			closeTo(t, "dx", gotDX, wantDX)
			gotDW, checkDW := guardedNaN(t, len(dw))
			ConvBackwardWeight(&s, xs, dys, gotDW)
			checkDW()
			closeTo(t, "dw", gotDW, wantDW)
			gotDB, checkDB := guardedNaN(t, len(db))
			ConvBackwardBias(&s, dys, gotDB)
			checkDB()
			closeTo(t, "db", gotDB, db)
			noBias, checkNB := guardedNaN(t, len(y))
			ConvForward(&s, xs, ws, nil, noBias)
			checkNB()
			for j := range noBias {
				// Per output element, bias only adds a constant.
				noBias[j] += b[outChannel(&s, j)]
			}
			closeTo(t, "y without bias", noBias, wantY)
		})
	}
}

// The vector loops of every level agree with the pure-Go reference on
// every suite size, and write nothing outside their outputs.
func TestConvVecMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ref := convVecs[Generic]
	forEachLevel(t, func(t *testing.T, l Level) {
		v := pick(l, convVecs)
		for _, n := range suiteSizes(8) {
			a, b, d0 := randSlice(r, n), randSlice(r, n), randSlice(r, n)
			want := append([]float32(nil), d0...)
			ref.addTo(want, a)
			got, check := guarded(t, n)
			copy(got, d0)
			v.addTo(got, a)
			check()
			closeTo(t, fmt.Sprintf("addTo %d", n), got, f64s(want))
			want = append(want[:0], d0...)
			ref.mulAddTo(want, a, b)
			got, check = guarded(t, n)
			copy(got, d0)
			v.mulAddTo(got, a, b)
			check()
			closeTo(t, fmt.Sprintf("mulAddTo %d", n), got, f64s(want))
			want = append(want[:0], d0...)
			ref.addConst(want, a[0])
			got, check = guarded(t, n)
			copy(got, d0)
			v.addConst(got, a[0])
			check()
			closeTo(t, fmt.Sprintf("addConst %d", n), got, f64s(want))
			scale := 0.0
			for _, x := range a {
				scale += math.Abs(float64(x))
			}
			if g, w := v.sum(a), ref.sum(a); math.Abs(float64(g-w)) > 1e-6*scale {
				t.Fatalf("sum %d = %v, want %v", n, g, w)
			}
			// Three runs of n floats, strided apart with gaps the copy must
			// leave alone.
			const runs = 3
			src := randSlice(r, runs*(n+5))
			want = make([]float32, runs*(n+3))
			for i := range want {
				want[i] = -7
			}
			ref.copyRuns(want, n+3, src, n+5, runs, n)
			got, check = guarded(t, len(want))
			for i := range got {
				got[i] = -7
			}
			v.copyRuns(got, n+3, src, n+5, runs, n)
			check()
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("copyRuns %d: element %d = %v, want %v", n, i, got[i], want[i])
				}
			}
		}
		// Transposes with row strides wider than the matrices: the gaps
		// between destination rows must keep their values too.
		sizes := []int{1, 3, 7, 8, 9, 16, 17, 31, 40}
		for _, rows := range sizes {
			for _, cols := range sizes {
				lds, ldd := cols+5, rows+3
				src := randSlice(r, (rows-1)*lds+cols)
				got, check := guarded(t, (cols-1)*ldd+rows)
				for i := range got {
					got[i] = guardValue
				}
				v.transpose(got, ldd, src, lds, rows, cols)
				check()
				for i, g := range got {
					k, c := i/ldd, i%ldd
					want := guardValue
					if c < rows {
						want = src[c*lds+k]
					}
					if g != want {
						t.Fatalf("transpose %d×%d: element %d (row %d, column %d) = %v, want %v", rows, cols, i, k, c, g, want)
					}
				}
			}
		}
	})
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
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

// Once the scratch pools are warm, a convolution allocates nothing of its
// own. The GEMM is swapped for plain loops here, so what is counted is the
// convolution code alone (the GEMM has its own allocation test).
func TestConvAllocs(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	old := convSgemm
	defer func() { convSgemm = old }()
	convSgemm = loopSgemm
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range convCases {
		switch c.name {
		case "3x3", "pointwise", "1x1 strided", "depthwise", "groups wide", "3d", "batch 13":
		default:
			continue
		}
		for _, lay := range convLayouts {
			restore := setCFNative(lay.nativePixels)
			s := c.shape(lay.cl)
			x, w, b := randSlice(r, s.xLen()), randSlice(r, s.wLen()), randSlice(r, s.O)
			y, dx, dw, db := make([]float32, s.yLen()), make([]float32, s.xLen()), make([]float32, s.wLen()), make([]float32, s.O)
			for _, op := range []struct {
				name string
				run  func()
			}{
				{"forward", func() { ConvForward(&s, x, w, b, y) }},
				{"data", func() { ConvBackwardData(&s, y, w, dx) }},
				{"weight", func() { ConvBackwardWeight(&s, x, y, dw) }},
				{"bias", func() { ConvBackwardBias(&s, y, db) }},
			} {
				if a := testing.AllocsPerRun(10, op.run); a != 0 {
					t.Errorf("%s, %s, %s: %v allocations per call", c.name, lay.name, op.name, a)
				}
			}
			restore()
		}
	}
}

// loopSgemm is Sgemm as plain loops that allocate nothing.
func loopSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	for i := range m {
		for jj := range n {
			var sum float32
			for p := range k {
				ai, bi := i*lda+p, p*ldb+jj
				if transA {
					ai = p*lda + i
				}
				if transB {
					bi = jj*ldb + p
				}
				av, bv := a[ai], b[bi]
				sum += av * bv
			}
			sum *= alpha
			if beta != 0 {
				sum += beta * c[i*ldc+jj]
			}
			c[i*ldc+jj] = sum
		}
	}
}
