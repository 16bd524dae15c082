package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// convBF16Cases adds to the conv suite's cases the direct and gathered
// BF16 forwards' edges: even and odd channels, rows of 12 and 24 pixels
// and partial panels, panels across rows and images, pixels sorted by the
// taps inside the input (none for some), stride, dilation, 3-D, several
// tap blocks and column blocks; data gradients those
// forwards take with the weights flipped, odd output channels included;
// and weight gradients over several depth blocks and chunks of pixels.
var convBF16Cases = []convCase{
	{"bf16 direct 3x3 even", 2, 8, 32, 1, [3]int{1, 6, 12}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 direct 3x3 odd", 2, 5, 64, 1, [3]int{1, 5, 24}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 direct stride dil", 1, 6, 32, 1, [3]int{1, 14, 24}, [3]int{1, 3, 3}, [3]int{1, 2, 2}, [3]int{0, 2, 2}, [3]int{1, 2, 2}},
	{"bf16 direct 7x7 stem", 1, 3, 64, 1, [3]int{1, 9, 47}, [3]int{1, 7, 7}, [3]int{1, 2, 2}, [3]int{0, 3, 3}, one3},
	{"bf16 direct tap blocks", 1, 200, 64, 1, [3]int{1, 3, 12}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 direct column blocks", 1, 130, 576, 1, [3]int{1, 2, 12}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 direct partial panel", 1, 4, 32, 1, [3]int{1, 3, 23}, [3]int{1, 1, 3}, one3, [3]int{0, 0, 1}, one3},
	{"bf16 direct panels across rows", 2, 6, 32, 1, [3]int{1, 1, 44}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 direct data gradient odd outputs", 2, 32, 7, 1, [3]int{1, 6, 12}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 weight gradient depth blocks", 3, 8, 32, 1, [3]int{1, 21, 19}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 weight gradient chunks", 1, 2, 32, 1, [3]int{1, 129, 127}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 pointwise weight gradient chunks", 1, 4, 32, 1, [3]int{1, 129, 127}, one3, one3, [3]int{}, one3},
	{"bf16 pointwise", 1, 6, 32, 1, [3]int{1, 1, 5}, one3, one3, [3]int{}, one3},
	{"bf16 pointwise data gradient", 2, 64, 30, 1, [3]int{1, 5, 7}, one3, one3, [3]int{}, one3},
	{"bf16 pointwise wide", 2, 70, 64, 1, [3]int{1, 5, 7}, one3, one3, [3]int{}, one3},
	{"bf16 gathered tap and column blocks", 1, 130, 576, 1, [3]int{1, 4, 5}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 gathered rows across images", 3, 32, 64, 1, [3]int{1, 7, 7}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	{"bf16 gathered 1x1 stride 2", 2, 64, 96, 1, [3]int{1, 7, 9}, one3, [3]int{1, 2, 2}, [3]int{}, one3},
	{"bf16 1x1 strided 3d", 1, 32, 8, 1, [3]int{3, 4, 5}, one3, [3]int{2, 2, 3}, [3]int{}, one3},
	{"bf16 gathered stride dil", 2, 10, 32, 1, [3]int{1, 9, 8}, [3]int{1, 3, 2}, [3]int{1, 2, 1}, [3]int{0, 2, 1}, [3]int{1, 2, 3}},
	{"bf16 gathered 3d", 1, 4, 32, 1, [3]int{3, 4, 5}, [3]int{2, 3, 3}, one3, [3]int{1, 1, 1}, [3]int{1, 1, 2}},
	{"bf16 gathered pixels seeing no tap", 2, 4, 32, 1, [3]int{1, 2, 3}, [3]int{1, 3, 3}, one3, [3]int{0, 3, 3}, one3},
	{"bf16 product pixel blocks", 2, 24, 40, 1, [3]int{1, 7, 9}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
}

// randBF16 returns n random bfloat16 values and the same values as float32.
func randBF16(r *rand.Rand, n int) ([]uint16, []float32) {
	h, f := make([]uint16, n), make([]float32, n)
	for i := range h {
		h[i] = BF16FromF32(float32(r.NormFloat64()))
		f[i] = F32FromBF16(h[i])
	}
	return h, f
}

// closeBF16 checks got against want within a few float32 ulps of the sum
// of the products' magnitudes (mag): the products are exact, the sums are
// taken in another order.
func closeBF16(t *testing.T, what string, got, want []float32, mag []float64) {
	t.Helper()
	for i := range want {
		tol := 32 * 0x1p-24 * mag[i]
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol) {
			t.Fatalf("%s: element %d = %v, want %v (tolerance %g)", what, i, got[i], want[i], tol)
		}
	}
}

func checkConvBF16Case(t *testing.T, r *rand.Rand, c convCase, cl bool) {
	t.Helper()
	s := c.shape(cl)
	xh, x := randBF16(r, s.xLen())
	wh, w := randBF16(r, s.wLen())
	dyh, dy := randBF16(r, s.yLen())
	b := randSlice(r, s.O)
	// Magnitudes: the naive convolution of the absolute values (in the
	// channels-first order naiveConv uses).
	sf := c.shape(false)
	xa, wa, dya := absAll(x), absAll(w), absAll(dy)
	if cl {
		xa = toChannelsFirst(xa, s.N, s.C)
		wa = toChannelsFirst(wa, s.O, s.cg())
		dya = toChannelsFirst(dya, s.N, s.O)
	}
	magY, magDX, magDW, _ := naiveConv(&sf, xa, wa, absAll(b), dya)
	if cl {
		magY, magDX, magDW = toChannelsLast(magY, s.N, s.O), toChannelsLast(magDX, s.N, s.C), toChannelsLast(magDW, s.O, s.cg())
	}

	wantY := make([]float32, s.yLen())
	ConvForward(&s, x, w, b, wantY)
	gotY, checkY := guardedNaN(t, s.yLen())
	ConvForwardBF16(&s, xh, wh, b, gotY)
	checkY()
	closeBF16(t, "y", gotY, wantY, magY)

	ConvForward(&s, x, w, nil, wantY)
	gotY, checkY = guardedNaN(t, s.yLen())
	ConvForwardBF16(&s, xh, wh, nil, gotY)
	checkY()
	closeBF16(t, "y without bias", gotY, wantY, magY)

	wantDX := make([]float32, s.xLen())
	ConvBackwardData(&s, dy, w, wantDX)
	gotDX, checkDX := guardedNaN(t, s.xLen())
	ConvBackwardDataBF16(&s, dyh, wh, gotDX)
	checkDX()
	closeBF16(t, "dx", gotDX, wantDX, magDX)

	wantDW := make([]float32, s.wLen())
	ConvBackwardWeight(&s, x, dy, wantDW)
	gotDW, checkDW := guardedNaN(t, s.wLen())
	ConvBackwardWeightBF16(&s, xh, dyh, gotDW)
	checkDW()
	closeBF16(t, "dw", gotDW, wantDW, magDW)
}

// toChannelsFirst undoes toChannelsLast: [A][rest...][B] to [A][B][rest...].
func toChannelsFirst(v []float32, a, b int) []float32 {
	rest := len(v) / (a * b)
	out := make([]float32, len(v))
	for i := range a {
		for j := range b {
			for r := range rest {
				out[(i*b+j)*rest+r] = v[(i*rest+r)*b+j]
			}
		}
	}
	return out
}

// The BF16 convolutions agree with the FP32 ones on the same
// (bfloat16-representable) values, on every suite shape, channels-last
// (the native path for one group) and channels-first, with the im2col
// blocks at their size and cut small, and write nothing outside their
// outputs.
func TestConvBF16MatchesFP32(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	cases := append(append([]convCase{}, convCases...), convBF16Cases...)
	direct, gathered := 0, 0
	for _, blockBytes := range []int{convBF16BlockBytes, 1} {
		t.Run(fmt.Sprintf("block %d", blockBytes), func(t *testing.T) {
			defer func(old int) { convBF16BlockBytes = old }(convBF16BlockBytes)
			convBF16BlockBytes = blockBytes
			for _, c := range cases {
				for _, cl := range []bool{true, false} {
					t.Run(fmt.Sprintf("%s/cl=%v", c.name, cl), func(t *testing.T) {
						s := c.shape(cl)
						switch {
						case !cl:
						case directFitsBF16(&s):
							direct++
						case gatherFitsBF16(&s):
							gathered++
						}
						checkConvBF16Case(t, r, c, cl)
					})
				}
			}
		})
	}
	t.Logf("native BF16 kernels: %v; direct forward cases: %d, gathered: %d", sbgemmAsm(), direct/2, gathered/2)
}

func TestConvBF16Empty(t *testing.T) {
	c := convCases[1]
	c.n = 0
	s := c.shape(true)
	dw := make([]float32, s.wLen())
	for i := range dw {
		dw[i] = 1
	}
	ConvForwardBF16(&s, nil, make([]uint16, s.wLen()), nil, nil)
	ConvBackwardDataBF16(&s, nil, make([]uint16, s.wLen()), nil)
	ConvBackwardWeightBF16(&s, nil, nil, dw)
	for _, v := range dw {
		if v != 0 {
			t.Fatal("dw not cleared for an empty batch")
		}
	}
	if !panics(func() { ConvForwardBF16(&s, nil, nil, nil, nil) }) {
		t.Fatal("short weight accepted")
	}
}

// BenchmarkConvBF16ResNet50 times the BF16 forward beside the FP32 one at
// some ResNet-50 shapes (batch 16, channels-last, with bias).
func BenchmarkConvBF16ResNet50(b *testing.B) {
	shapes := []struct {
		name                   string
		c, o, hw, k, stride, p int
	}{
		{"3x3 64 56", 64, 64, 56, 3, 1, 1},
		{"1x1 256-64 56", 256, 64, 56, 1, 1, 0},
		{"3x3 256 14", 256, 256, 14, 3, 1, 1},
		{"3x3 128 28", 128, 128, 28, 3, 1, 1},
		{"7x7 stem", 3, 64, 224, 7, 2, 3},
	}
	for _, sh := range shapes {
		s := ConvShape{N: 16, C: sh.c, O: sh.o, Groups: 1, In: [3]int{1, sh.hw, sh.hw}, Kernel: [3]int{1, sh.k, sh.k},
			Stride: [3]int{1, sh.stride, sh.stride}, Pad: [3]int{0, sh.p, sh.p}, Dil: one3, ChannelsLast: true}
		for d := range 3 {
			s.Out[d] = ConvOutSize(s.In[d], s.Kernel[d], s.Stride[d], s.Pad[d], s.Dil[d])
		}
		r := rand.New(rand.NewPCG(1, 2))
		xh, x := randBF16(r, s.xLen())
		wh, w := randBF16(r, s.wLen())
		dyh, dy := randBF16(r, s.yLen())
		bias := randSlice(r, s.O)
		y := make([]float32, s.yLen())
		dx := make([]float32, s.xLen())
		dw := make([]float32, s.wLen())
		ops := []struct {
			name string
			run  func()
		}{
			{"fwd fp32", func() { ConvForward(&s, x, w, bias, y) }},
			{"fwd bf16", func() { ConvForwardBF16(&s, xh, wh, bias, y) }},
			{"data fp32", func() { ConvBackwardData(&s, dy, w, dx) }},
			{"data bf16", func() { ConvBackwardDataBF16(&s, dyh, wh, dx) }},
			{"weight fp32", func() { ConvBackwardWeight(&s, x, dy, dw) }},
			{"weight bf16", func() { ConvBackwardWeightBF16(&s, xh, dyh, dw) }},
		}
		for _, op := range ops {
			b.Run(sh.name+"/"+op.name, func(b *testing.B) {
				for b.Loop() {
					op.run()
				}
				b.ReportMetric(s.FLOPs()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestConvBF16To checks the BF16-output forms against their float32-output
// twins rounded to nearest even, bit for bit, with guards around the
// outputs.
func TestConvBF16To(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 82))
	round := func(f []float32) []uint16 {
		h := make([]uint16, len(f))
		for i, v := range f {
			h[i] = BF16FromF32(v)
		}
		return h
	}
	same := func(t *testing.T, what string, got, want []uint16) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s[%d] = %#x, want %#x", what, i, got[i], want[i])
			}
		}
	}
	for _, c := range append(append([]convCase{}, convBF16Cases...), convCases[:4]...) {
		for _, cl := range []bool{true, false} {
			s := c.shape(cl)
			t.Run(fmt.Sprintf("%s/cl=%v", c.name, cl), func(t *testing.T) {
				x, _ := randBF16(r, s.xLen())
				w, _ := randBF16(r, s.wLen())
				dy, _ := randBF16(r, s.yLen())
				bias := randSlice(r, s.O)

				y32 := make([]float32, s.yLen())
				ConvForwardBF16(&s, x, w, bias, y32)
				y, check := guarded16(t, s.yLen())
				ConvForwardBF16To(&s, x, w, bias, y)
				check()
				same(t, "y", y, round(y32))

				dx32 := make([]float32, s.xLen())
				ConvBackwardDataBF16(&s, dy, w, dx32)
				dx, check := guarded16(t, s.xLen())
				ConvBackwardDataBF16To(&s, dy, w, dx)
				check()
				same(t, "dx", dx, round(dx32))

				dw32 := make([]float32, s.wLen())
				ConvBackwardWeightBF16(&s, x, dy, dw32)
				dw, check := guarded16(t, s.wLen())
				ConvBackwardWeightBF16To(&s, x, dy, dw)
				check()
				same(t, "dw", dw, round(dw32))
			})
		}
	}
}

// TestConvBackwardBF16 checks the combined backward against the separate
// BF16-output calls and ConvBackwardBias of the widened dy, bit for bit,
// for every subset of gradients, with guards around the outputs.
func TestConvBackwardBF16To(t *testing.T) {
	r := rand.New(rand.NewPCG(83, 84))
	for _, c := range append(append([]convCase{}, convBF16Cases...), convCases...) {
		for _, cl := range []bool{true, false} {
			s := c.shape(cl)
			x, _ := randBF16(r, s.xLen())
			w, _ := randBF16(r, s.wLen())
			dy, dyf := randBF16(r, s.yLen())
			wantDx, wantDw, wantDb := make([]uint16, s.xLen()), make([]uint16, s.wLen()), make([]float32, s.O)
			ConvBackwardDataBF16To(&s, dy, w, wantDx)
			ConvBackwardWeightBF16To(&s, x, dy, wantDw)
			ConvBackwardBias(&s, dyf, wantDb)
			for mask := 1; mask < 8; mask++ {
				var dx, dw []uint16
				var db []float32
				var checks []func()
				if mask&1 != 0 {
					var check func()
					dx, check = guarded16(t, s.xLen())
					checks = append(checks, check)
				}
				if mask&2 != 0 {
					var check func()
					dw, check = guarded16(t, s.wLen())
					checks = append(checks, check)
				}
				if mask&4 != 0 {
					var check func()
					db, check = guarded(t, s.O)
					checks = append(checks, check)
				}
				ConvBackwardBF16To(&s, x, w, dy, dx, dw, db)
				for _, check := range checks {
					check()
				}
				name := fmt.Sprintf("%s (channels-last %v, gradients %03b)", c.name, cl, mask)
				for i := range dx {
					if dx[i] != wantDx[i] {
						t.Fatalf("%s: dx[%d] = %#x, want %#x", name, i, dx[i], wantDx[i])
					}
				}
				for i := range dw {
					if dw[i] != wantDw[i] {
						t.Fatalf("%s: dw[%d] = %#x, want %#x", name, i, dw[i], wantDw[i])
					}
				}
				for i := range db {
					if math.Float32bits(db[i]) != math.Float32bits(wantDb[i]) {
						t.Fatalf("%s: db[%d] = %v, want %v", name, i, db[i], wantDb[i])
					}
				}
			}
		}
	}
}

// TestConvBF16NonFinite: an infinity or NaN in the input reaches exactly
// the outputs whose windows hold it, on every forward path (the stem's
// kernel-row layout reads a value past each run against a zero weight, and
// so must not run on such an input), as in the float32 convolution.
func TestConvBF16NonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, c := range convBF16Cases {
		s := c.shape(true)
		xh0, x0 := randBF16(r, s.xLen())
		wh, w := randBF16(r, s.wLen())
		// Channel 0 along a middle row: the values a run overreads.
		row := (s.In[0] * s.In[1] / 2) * s.In[2] * s.C
		for i := row; i < row+s.In[2]*s.C; i += s.C {
			bad := float32(math.Inf(1))
			if i%2 == 1 {
				bad = float32(math.NaN())
			}
			xh, x := append([]uint16(nil), xh0...), append([]float32(nil), x0...)
			x[i] = bad
			xh[i] = BF16FromF32(bad)
			want := make([]float32, s.yLen())
			ConvForward(&s, x, w, nil, want)
			got := make([]float32, s.yLen())
			ConvForwardBF16(&s, xh, wh, nil, got)
			for k := range want {
				wf := math.IsInf(float64(want[k]), 0) || math.IsNaN(float64(want[k]))
				gf := math.IsInf(float64(got[k]), 0) || math.IsNaN(float64(got[k]))
				if wf != gf {
					t.Fatalf("%s, %v at x[%d]: y[%d] = %v, float32 %v", c.name, bad, i, k, got[k], want[k])
				}
			}
		}
	}
}

func TestBF16Finite(t *testing.T) {
	for n := range 11 {
		x := make([]uint16, n)
		for i := range x {
			x[i] = BF16FromF32(float32(i) - 3.5)
		}
		if !bf16Finite(x) {
			t.Fatalf("length %d: finite values reported non-finite", n)
		}
		for i := range n {
			for _, v := range []uint16{0x7f80, 0xff80, 0x7fc0, 0xffc1} {
				y := append([]uint16(nil), x...)
				y[i] = v
				if bf16Finite(y) {
					t.Fatalf("length %d: %#x at %d not found", n, v, i)
				}
			}
		}
	}
}

// TestConvBF16WeightSplit: the weight gradient's bits do not depend on how
// many workers it splits for (columns per worker, chunks of pixels taken
// in any order, or one product).
func TestConvBF16WeightSplit(t *testing.T) {
	if !sbgemmAsm() {
		t.Skip("the split is the assembly path's (needs AVX512_BF16)")
	}
	defer func(f func() int) { weightWorkers = f }(weightWorkers)
	r := rand.New(rand.NewPCG(15, 16))
	for _, c := range []convCase{
		{"3x3", 2, 8, 32, 1, [3]int{1, 9, 11}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
		{"3x3 wide", 1, 40, 64, 1, [3]int{1, 7, 6}, [3]int{1, 3, 3}, [3]int{1, 2, 1}, [3]int{0, 1, 1}, one3},
		{"1x1", 2, 130, 32, 1, [3]int{1, 5, 7}, one3, one3, [3]int{}, one3},
		{"chunks", 1, 2, 32, 1, [3]int{1, 129, 127}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	} {
		s := c.shape(true)
		x, _ := randBF16(r, s.xLen())
		dy, _ := randBF16(r, s.yLen())
		var want []float32
		for _, workers := range []int{1, 2, 3, 5} {
			weightWorkers = func() int { return workers }
			dw := make([]float32, s.wLen())
			ConvBackwardWeightBF16(&s, x, dy, dw)
			if want == nil {
				want = dw
				continue
			}
			for i := range want {
				if math.Float32bits(dw[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s, split for %d workers: dw[%d] = %v, for 1: %v", c.name, workers, i, dw[i], want[i])
				}
			}
		}
	}
}
