package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The INT8 GEMM conformance suite: every variant, at every level this CPU
// and build have, against a yardstick written from the formula alone
// (int64 sums, one element at a time), bit for bit, with guard cells
// around C and in its row padding.

// int8Case is one product and its epilogue.
type int8Case struct {
	m, n, k, lda, ldc int
	zA                int32
	a                 []uint8
	w                 []int8 // n×k, rows k apart
	ep                Int8Epilogue
	out               string // "f32", "u8" or "s8"
}

// int8Sizes are the suite's m, n and k: 1, tails of every width the
// kernels use (4 depths, 6 and 12 rows, 8, 16 and 32 channels), and sizes
// past one tile.
var int8Sizes = []int{1, 3, 4, 5, 7, 13, 16, 17, 31, 33, 64, 65, 100, 129}

// newInt8Case makes a product with random operands, A's rows padded by
// 3 bytes and C's by 5 elements, and the basic epilogue (scales, a bias).
func newInt8Case(r *rand.Rand, m, n, k int, zA int32) *int8Case {
	tc := &int8Case{m: m, n: n, k: k, lda: k + 3, ldc: n + 5, zA: zA, out: "f32"}
	tc.a = make([]uint8, max(0, (m-1)*tc.lda+k))
	for i := range tc.a {
		tc.a[i] = uint8(r.IntN(256))
	}
	tc.w = make([]int8, n*k)
	for i := range tc.w {
		tc.w[i] = int8(r.IntN(256) - 128)
	}
	tc.ep.Scale = 0.02 + r.Float32()*0.01
	tc.ep.WScales = make([]float32, n)
	tc.ep.Bias = make([]float32, n)
	for c := range n {
		tc.ep.WScales[c] = 1e-3 * (1 + r.Float32())
		tc.ep.Bias[c] = float32(r.NormFloat64())
	}
	tc.ep.OutScale, tc.ep.OutZero = 0.05, 3
	return tc
}

// want computes element (i, c) from the formula: the sum in int64, which
// must fit int32, then the float32 steps one by one, in the reference Go
// of each (Act.forward, quantizeOne).
func (tc *int8Case) want(i, c int) float64 {
	var s int64
	for p := 0; p < tc.k; p++ {
		s += (int64(tc.a[i*tc.lda+p]) - int64(tc.zA)) * int64(tc.w[c*tc.k+p])
	}
	if tc.ep.RowAdd != nil {
		s += int64(tc.ep.RowAdd[i])
	}
	if s != int64(int32(s)) {
		panic(fmt.Sprintf("sum %d overflows int32", s))
	}
	return int8EpilogueRef(&tc.ep, tc.out, int32(s), c, i*tc.ldc+c)
}

// int8EpilogueRef takes the int32 sum acc of output channel c through
// ep's float32 steps one by one, in the reference Go of each, for the
// output element at off (where a residual is read) of type out.
func int8EpilogueRef(ep *Int8Epilogue, out string, acc int32, c, off int) float64 {
	cs := ep.Scale * ep.WScales[c]
	y := float32(acc) * cs
	if ep.Bias != nil {
		y = float32(y) + ep.Bias[c]
	}
	if ep.Residual != nil {
		y = float32(y) + ep.Residual[off]
	}
	if ep.ResidualU8 != nil {
		r := float32(int32(ep.ResidualU8[off])-ep.ResidualZero) * ep.ResidualScale
		y = float32(y) + float32(r)
	}
	if ep.Activate {
		v := []float32{y}
		ep.Act.forward(v, v)
		y = v[0]
	}
	if ep.Divide {
		y = float32(y) / ep.Divisor
	}
	switch out {
	case "u8":
		return float64(quantizeOne(y, 1/ep.OutScale, ep.OutZero, u8Min, u8Max))
	case "s8":
		return float64(quantizeOne(y, 1/ep.OutScale, ep.OutZero, s8Min, s8Max))
	}
	return float64(y)
}

// run multiplies with the strip variant at level l into a guarded C and
// returns C's elements (as float64) and a check of its guards.
func (tc *int8Case) run(t *testing.T, l Level, pw *PackedInt8) []float64 {
	t.Helper()
	const pad = 19
	size := 0
	if tc.m > 0 {
		size = (tc.m-1)*tc.ldc + tc.n
	}
	got := make([]float64, size)
	strip := pick(l, u8s8StripVariants)
	switch tc.out {
	case "f32":
		c, check := guarded(t, size)
		for i := 0; i < tc.m; i++ {
			for j := tc.n; j < tc.ldc && i*tc.ldc+j < size; j++ {
				c[i*tc.ldc+j] = guardValue
			}
		}
		gemmU8S8Entry(strip, "GemmU8S8", tc.m, tc.a, tc.lda, tc.zA, pw, int8Out{f32: c, ldc: tc.ldc, n: len(c)}, &tc.ep)
		check()
		for i, v := range c {
			got[i] = float64(v)
			if i%tc.ldc >= tc.n && v != guardValue {
				t.Fatalf("padding element %d of C changed to %v", i, v)
			}
		}
	default:
		const g = 0xA5
		buf := make([]uint8, size+2*pad)
		for i := range buf {
			buf[i] = g
		}
		c := buf[pad : pad+size : pad+size]
		if tc.out == "u8" {
			gemmU8S8Entry(strip, "GemmU8S8ToU8", tc.m, tc.a, tc.lda, tc.zA, pw, int8Out{u8: c, ldc: tc.ldc, n: len(c), quant: true}, &tc.ep)
		} else {
			s8 := make([]int8, len(buf))
			for i := range s8 {
				s8[i] = int8(buf[i])
			}
			cs := s8[pad : pad+size : pad+size]
			gemmU8S8Entry(strip, "GemmU8S8ToS8", tc.m, tc.a, tc.lda, tc.zA, pw, int8Out{s8: cs, ldc: tc.ldc, n: len(cs), quant: true, signed: true}, &tc.ep)
			for i := range s8 {
				buf[i] = uint8(s8[i])
			}
		}
		for i, v := range buf {
			if (i < pad || i >= pad+size || (i-pad)%tc.ldc >= tc.n) && v != g {
				t.Fatalf("guard byte %d (C has %d elements) changed to %#x", i-pad, size, v)
			}
		}
		for i, v := range c {
			if tc.out == "s8" {
				got[i] = float64(int8(v))
			} else {
				got[i] = float64(v)
			}
		}
	}
	return got
}

// check runs the case at level l and compares every element of C with
// want, bit for bit.
func (tc *int8Case) check(t *testing.T, l Level) {
	t.Helper()
	pw := PackInt8(tc.n, tc.k, tc.w, tc.k)
	got := tc.run(t, l, pw)
	for i := 0; i < tc.m; i++ {
		for c := 0; c < tc.n; c++ {
			g, w := got[i*tc.ldc+c], tc.want(i, c)
			if math.Float32bits(float32(g)) != math.Float32bits(float32(w)) && !(g != g && w != w) {
				t.Fatalf("%s m=%d n=%d k=%d zA=%d out=%s: C[%d,%d] = %v, want %v", l, tc.m, tc.n, tc.k, tc.zA, tc.out, i, c, g, w)
			}
		}
	}
}

func TestInt8GemmSizes(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(18, 1))
		for _, m := range int8Sizes {
			for _, n := range int8Sizes {
				for _, k := range int8Sizes {
					zA := []int32{0, 128, 255}[r.IntN(3)]
					newInt8Case(r, m, n, k, zA).check(t, l)
				}
			}
		}
	})
}

// TestInt8GemmBlocks covers several K blocks, several column blocks, A
// read in place with a depth tail, and both thread splits.
func TestInt8GemmBlocks(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(18, 2))
		for _, s := range [][3]int{{25, 300, 1030}, {37, 70, 2049}, {3, 700, 517}, {130, 40, 300}} {
			for _, zA := range []int32{0, 128, 255} {
				newInt8Case(r, s[0], s[1], s[2], zA).check(t, l)
			}
		}
	})
}

// TestInt8GemmExtremes fills A with 255 and W with 127 or −128, the
// largest products, at depths up to one past several K blocks, and at the
// largest depth the GEMM accepts.
func TestInt8GemmExtremes(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(18, 3))
		for _, k := range []int{1, 3, 4, 5, 1023, 1025, 4097} {
			for _, wv := range []int8{127, -128} {
				for _, zA := range []int32{0, 128, 255} {
					for _, av := range []uint8{255, 0} {
						tc := newInt8Case(r, 13, 33, k, zA)
						for i := range tc.a {
							tc.a[i] = av
						}
						for i := range tc.w {
							tc.w[i] = wv
						}
						tc.check(t, l)
					}
				}
			}
		}
		if testing.Short() {
			return
		}
		// The largest depth: 255·128·K just below 2³¹, both signs.
		for _, wv := range []int8{127, -128} {
			for _, zA := range []int32{0, 255} {
				tc := newInt8Case(r, 2, 3, Int8MaxK, zA)
				for i := range tc.a {
					tc.a[i] = uint8(255 - zA)
				}
				for i := range tc.w {
					tc.w[i] = wv
				}
				tc.check(t, l)
			}
		}
	})
}

// int8Post is a post-op of the INT8 epilogue that a suite sets on ep,
// whose residual (if any) must have n elements.
type int8Post struct {
	name string
	set  func(ep *Int8Epilogue, n int, r *rand.Rand)
}

// int8Sums are the residual post-ops, int8Finals the activations and the
// division; the suites combine each of one with each of the other.
var (
	int8Sums = []int8Post{
		{"none", func(*Int8Epilogue, int, *rand.Rand) {}},
		{"sum", func(ep *Int8Epilogue, n int, r *rand.Rand) {
			ep.Residual = make([]float32, n)
			for i := range ep.Residual {
				ep.Residual[i] = float32(r.NormFloat64())
			}
		}},
		{"sumU8", func(ep *Int8Epilogue, n int, r *rand.Rand) {
			ep.ResidualU8 = make([]uint8, n)
			for i := range ep.ResidualU8 {
				ep.ResidualU8[i] = uint8(r.IntN(256))
			}
			ep.ResidualScale, ep.ResidualZero = 0.013, 117
		}},
	}
	int8Finals = []int8Post{
		{"none", func(*Int8Epilogue, int, *rand.Rand) {}},
		{"relu", int8Activation(ActReLU)},
		{"gelu", int8Activation(ActGELU)},
		{"sigmoid", int8Activation(ActSigmoid)},
		{"div", func(ep *Int8Epilogue, _ int, _ *rand.Rand) { ep.Divisor, ep.Divide = 3, true }},
	}
)

func int8Activation(f ActFunc) func(*Int8Epilogue, int, *rand.Rand) {
	return func(ep *Int8Epilogue, _ int, _ *rand.Rand) { ep.Act, ep.Activate = Act{Fn: f}, true }
}

// TestInt8GemmEpilogues runs every post-op and output type, alone and
// combined, with and without a bias.
func TestInt8GemmEpilogues(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(18, 4))
		for _, sz := range [][3]int{{1, 1, 1}, {13, 33, 17}, {29, 65, 131}} {
			for _, s := range int8Sums {
				for _, f := range int8Finals {
					for _, out := range []string{"f32", "u8", "s8"} {
						for _, bias := range []bool{true, false} {
							tc := newInt8Case(r, sz[0], sz[1], sz[2], int32(r.IntN(256)))
							tc.out = out
							if out == "s8" {
								tc.ep.OutZero = -5
							}
							if !bias {
								tc.ep.Bias = nil
							}
							s.set(&tc.ep, (tc.m-1)*tc.ldc+tc.n, r)
							f.set(&tc.ep, 0, r)
							tc.check(t, l)
						}
					}
				}
			}
		}
	})
}

// TestInt8GemmThreads checks that the result does not depend on the
// number of threads, with rows or columns split.
func TestInt8GemmThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 5))
	for _, sz := range [][3]int{{200, 100, 300}, {5, 512, 1024}} {
		tc := newInt8Case(r, sz[0], sz[1], sz[2], 77)
		pw := PackInt8(tc.n, tc.k, tc.w, tc.k)
		var runs [][]float64
		for _, threads := range []int{1, 2, 3, 7} {
			int8WithThreads(threads, func() { runs = append(runs, tc.run(t, level, pw)) })
		}
		for i, got := range runs[1:] {
			for j := range got {
				if math.Float32bits(float32(got[j])) != math.Float32bits(float32(runs[0][j])) {
					t.Fatalf("%v: run %d differs from one thread at %d: %v, want %v", sz, i+1, j, got[j], runs[0][j])
				}
			}
		}
	}
}

// int8WithThreads runs f with the worker pool split into threads shares.
func int8WithThreads(threads int, f func()) {
	workers.start()
	saved := workers.threads
	workers.threads = threads
	defer func() { workers.threads = saved }()
	f()
}

func TestInt8GemmZeroSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 6))
	for _, s := range [][3]int{{0, 5, 7}, {5, 0, 7}, {5, 7, 0}} {
		tc := newInt8Case(r, s[0], s[1], s[2], 9)
		forEachLevel(t, func(t *testing.T, l Level) { tc.check(t, l) })
	}
}

func TestInt8GemmMisuse(t *testing.T) {
	w := make([]int8, 12)
	pw := PackInt8(3, 4, w, 4)
	ep := Int8Epilogue{Scale: 1, WScales: []float32{1, 1, 1}}
	a, c := make([]uint8, 8), make([]float32, 6)
	cases := []misuseCase{
		{"short A", ErrShape, func() { GemmU8S8(2, a[:7], 4, 0, pw, c, 3, ep) }},
		{"small lda", ErrShape, func() { GemmU8S8(2, a, 3, 0, pw, c, 3, ep) }},
		{"short C", ErrShape, func() { GemmU8S8(2, a, 4, 0, pw, c[:5], 3, ep) }},
		{"small ldc", ErrShape, func() { GemmU8S8(2, a, 4, 0, pw, c, 2, ep) }},
		{"zero point", ErrArgument, func() { GemmU8S8(2, a, 4, 256, pw, c, 3, ep) }},
		{"few scales", ErrShape, func() {
			e := ep
			e.WScales = e.WScales[:2]
			GemmU8S8(2, a, 4, 0, pw, c, 3, e)
		}},
		{"zero scale", ErrArgument, func() {
			e := ep
			e.Scale = 0
			GemmU8S8(2, a, 4, 0, pw, c, 3, e)
		}},
		{"act and div", ErrArgument, func() {
			e := ep
			e.Activate, e.Divide = true, true
			GemmU8S8(2, a, 4, 0, pw, c, 3, e)
		}},
		{"two residuals", ErrArgument, func() {
			e := ep
			e.Residual, e.ResidualU8, e.ResidualScale = make([]float32, 6), make([]uint8, 6), 1
			GemmU8S8(2, a, 4, 0, pw, c, 3, e)
		}},
		{"output scale", ErrArgument, func() { GemmU8S8ToU8(2, a, 4, 0, pw, make([]uint8, 6), 3, ep) }},
		{"output zero", ErrArgument, func() {
			e := ep
			e.OutScale, e.OutZero = 1, 200
			GemmU8S8ToS8(2, a, 4, 0, pw, make([]int8, 6), 3, e)
		}},
		{"deep K", ErrShape, func() { PackInt8(1, Int8MaxK+1, make([]int8, Int8MaxK+1), Int8MaxK+1) }},
		{"short W", ErrShape, func() { PackInt8(3, 4, w[:11], 4) }},
		{"nil weight", ErrArgument, func() { GemmU8S8(2, a, 4, 0, nil, c, 3, ep) }},
		{"short row corrections", ErrShape, func() {
			e := ep
			e.RowAdd = []int32{1}
			GemmU8S8(2, a, 4, 0, pw, c, 3, e)
		}},
	}
	checkMisuse(t, cases)
}

func TestInt8GemmAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 7))
	tc := newInt8Case(r, 64, 96, 200, 3)
	pw := PackInt8(tc.n, tc.k, tc.w, tc.k)
	c := make([]float32, tc.m*tc.ldc)
	GemmU8S8(tc.m, tc.a, tc.lda, tc.zA, pw, c, tc.ldc, tc.ep)
	if n := testing.AllocsPerRun(20, func() { GemmU8S8(tc.m, tc.a, tc.lda, tc.zA, pw, c, tc.ldc, tc.ep) }); n != 0 {
		t.Errorf("GemmU8S8 allocates %v times a call", n)
	}
}

func TestMeasurePeakInt8(t *testing.T) {
	dp, mw := MeasurePeakInt8(1, 20*time.Millisecond)
	if caps.best >= AVX512 && caps.vnni {
		if dp <= 0 {
			t.Errorf("VPDPBUSD peak %v GOP/s on a CPU with VNNI", dp)
		}
	} else if dp != 0 {
		t.Errorf("VPDPBUSD peak %v GOP/s without VNNI, want 0", dp)
	}
	if (caps.best >= AVX2) != (mw > 0) {
		t.Errorf("VPMADDWD peak %v GOP/s at best level %v", mw, caps.best)
	}
	t.Logf("1 thread: VPDPBUSD %.0f GOP/s, VPMADDWD %.0f GOP/s", dp, mw)
}

// BenchmarkGemmU8S8 times the 1024³ product with float32 output and a
// bias, reporting GOP/s (two operations a multiply-add) beside the
// VPDPBUSD peak of the same number of threads.
func BenchmarkGemmU8S8(b *testing.B) {
	const m, n, k = 1024, 1024, 1024
	r := rand.New(rand.NewPCG(18, 8))
	tc := newInt8Case(r, m, n, k, 128)
	tc.lda, tc.ldc = k, n
	tc.a = tc.a[:m*k]
	for i := range tc.a {
		tc.a[i] = uint8(r.IntN(256))
	}
	pw := PackInt8(n, k, tc.w, k)
	c := make([]float32, m*n)
	GemmU8S8(m, tc.a, k, tc.zA, pw, c, n, tc.ep)
	b.ResetTimer()
	for range b.N {
		GemmU8S8(m, tc.a, k, tc.zA, pw, c, n, tc.ep)
	}
	b.ReportMetric(2*m*n*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
	b.StopTimer()
	dp, mw := MeasurePeakInt8(Threads(), 200*time.Millisecond)
	b.ReportMetric(dp, "vpdpbusd-GOP/s")
	b.ReportMetric(mw, "vpmaddwd-GOP/s")
}

// TestInt8GemmRowAdd adds a per-row correction to the sums, as a product
// of two activations does, at every level and output type.
func TestInt8GemmRowAdd(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(21, 8))
		for _, sz := range [][3]int{{1, 1, 1}, {13, 33, 17}, {29, 65, 131}} {
			for _, out := range []string{"f32", "u8", "s8"} {
				tc := newInt8Case(r, sz[0], sz[1], sz[2], int32(r.IntN(256)))
				tc.out = out
				if out == "s8" {
					tc.ep.OutZero = -5
				}
				tc.ep.RowAdd = make([]int32, sz[0])
				for i := range tc.ep.RowAdd {
					tc.ep.RowAdd[i] = int32(r.IntN(1<<20) - 1<<19)
				}
				tc.check(t, l)
			}
		}
	})
}

// TestRepackInt8 packs a second weight of the same size into the first's
// memory and gets PackInt8's panels and sums; another size gets new memory.
func TestRepackInt8(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	w1, w2 := make([]int8, 37*19), make([]int8, 37*19)
	for i := range w1 {
		w1[i], w2[i] = int8(r.IntN(256)-128), int8(r.IntN(256)-128)
	}
	p := PackInt8(37, 19, w1, 19)
	q := RepackInt8(p, 37, 19, w2, 19)
	want := PackInt8(37, 19, w2, 19)
	if q != p || !slices.Equal(q.data, want.data) || !slices.Equal(q.sums, want.sums) {
		t.Errorf("RepackInt8 of the same size differs from PackInt8 or moved")
	}
	if o := RepackInt8(p, 36, 19, w2, 19); o == p || o.N() != 36 {
		t.Errorf("RepackInt8 of another size reused the memory")
	}
}

// TestInt8FinishConformance runs the one-pass quantized epilogue of each
// level against its reference on every length up to 40 and lengths around
// the fast path's 64 columns, on one row and on three rows with gaps
// between them, with and without bias and residual, unsigned and signed
// ranges, the lower bound raised as ReLU raises it, sums at the extremes,
// and with and without the fast path's promise (which these scales keep).
func TestInt8FinishConformance(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 7))
	lengths := []int{63, 64, 65, 127, 128, 131, 200}
	for n := range 41 {
		lengths = append(lengths, n)
	}
	forEachLevel(t, func(t *testing.T, l Level) {
		finish := pick(l, int8FinishVariants)
		for _, n := range lengths {
			for _, rows := range []int{1, 3} {
				for _, bias := range []bool{false, true} {
					for _, res := range []bool{false, true} {
						for _, rng := range [][3]int32{{u8Min, u8Max, 117}, {s8Min, s8Max, -3}, {117, u8Max, 117}, {-3, s8Max, -3}} {
							accLd, ld := n+r.IntN(3), n+r.IntN(5)
							f := int8Finish{acc: make([]int32, rows*accLd), corr: make([]int32, n), cs: make([]float32, n),
								rows: rows, n: n, accLd: accLd, ld: ld,
								sr: 0.013, zr: 91, inv: 1 / float32(0.05), lo: rng[0], hi: rng[1], zo: rng[2]}
							for c := range f.acc {
								f.acc[c] = int32(r.Uint32())
								if c%5 != 0 {
									f.acc[c] >>= 12
								}
							}
							for c := range n {
								f.corr[c] = int32(r.IntN(1<<16)) - 1<<15
								f.cs[c] = 1e-4 * (1 + r.Float32())
							}
							if bias {
								f.bias = make([]float32, n)
								for c := range f.bias {
									f.bias[c] = float32(r.NormFloat64())
								}
							}
							f.fast = r.IntN(2) == 0
							size := rows * ld
							if res {
								f.rq = make([]uint8, size)
								for c := range f.rq {
									f.rq[c] = uint8(r.IntN(256))
								}
							}
							got, want := make([]uint8, size+3), make([]uint8, size+3)
							finish(got[:size], &f)
							int8FinishGo(want[:size], &f)
							if !slices.Equal(got, want) {
								t.Fatalf("n %d rows %d bias %v residual %v range %v fast %v: got %v, want %v", n, rows, bias, res, rng, f.fast, got, want)
							}
						}
					}
				}
			}
		}
	})
}

// TestInt8FastQuant checks the promise behind the epilogue's fast path on
// the scales it must refuse.
func TestInt8FastQuant(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tc := range []struct {
		csMax, biasMax, sr, inv float32
		want                    bool
	}{
		{2e-4, 3, 0.02, 20, true},    // typical: |y·inv| ≤ 8.6e6
		{0, 0, 0, 1e8, true},         // every sum dequantizes to 0
		{1, 0, 0, 1, false},          // 2³¹·1: past 2³⁰
		{2e-4, 0, 0, 4000, false},    // 4.3e5·4000
		{2e-4, 2e9, 0, 1, false},     // the bias alone
		{2e-4, 0, 1e7, 1, false},     // the residual alone
		{2e-4, inf, 0, 20, false},    // an infinite bias
		{2e-4, nan, 0, 20, false},    // a NaN bias
		{2e-4, 0, 0, inf, false},     // an output scale that underflowed
		{maxFloat32, 0, 0, 1, false}, // an overflowing product
	} {
		if got := int8FastQuant(tc.csMax, tc.biasMax, tc.sr, tc.inv); got != tc.want {
			t.Errorf("int8FastQuant(%v, %v, %v, %v) = %v, want %v", tc.csMax, tc.biasMax, tc.sr, tc.inv, got, tc.want)
		}
	}
}
