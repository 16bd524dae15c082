package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// stridedLayout returns dense strides for shape with its dimensions laid
// out in the order perm (outermost first), plus pad extra elements after
// each row of the innermost dimension so the layout is not dense.
func stridedLayout(shape, perm []int, pad int) (strides []int, size int) {
	strides = make([]int, len(shape))
	s := 1
	for i := len(perm) - 1; i >= 0; i-- {
		strides[perm[i]] = s
		s *= shape[perm[i]]
		if i == len(perm)-1 {
			s += pad * btoi(shape[perm[i]] > 0)
		}
	}
	return strides, max(s, 1)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stridedEach calls f with the offsets of every multi-index of shape.
func stridedEach(shape []int, strides [][]int, f func(offs []int)) {
	idx := make([]int, len(shape))
	for _, n := range shape {
		if n == 0 {
			return
		}
	}
	offs := make([]int, len(strides))
	for {
		for k := range offs {
			offs[k] = 0
			for i := range idx {
				offs[k] += idx[i] * strides[k][i]
			}
		}
		f(offs)
		d := len(shape) - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

func stridedRandShape(r *rand.Rand, maxRank int, sizes []int) []int {
	shape := make([]int, r.IntN(maxRank+1))
	for i := range shape {
		shape[i] = sizes[r.IntN(len(sizes))]
	}
	return shape
}

func TestStridedCopyMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	shapes := [][]int{{64, 33, 17}, {2, 40000}, {40000, 2}, {3, 5, 7, 11, 13}}
	for range 300 {
		shapes = append(shapes, stridedRandShape(r, 5, []int{0, 1, 1, 2, 3, 5, 7}))
	}
	for _, shape := range shapes {
		dstStrides, dstN := stridedLayout(shape, r.Perm(len(shape)), 0)
		srcStrides, srcN := stridedLayout(shape, r.Perm(len(shape)), r.IntN(3))
		if len(shape) > 0 && r.IntN(4) == 0 {
			srcStrides[r.IntN(len(shape))] = 0 // broadcast
		}
		src := randSlice(r, srcN)
		dst := make([]float32, dstN+4)
		for i := range dst {
			dst[i] = guard
		}
		want := append([]float32(nil), dst...)
		stridedEach(shape, [][]int{dstStrides, srcStrides}, func(o []int) { want[o[0]] = src[o[1]] })
		StridedCopy(dst, src, shape, dstStrides, srcStrides)
		for i := range want {
			if dst[i] != want[i] {
				t.Fatalf("shape %v dst strides %v src strides %v: element %d = %v, want %v", shape, dstStrides, srcStrides, i, dst[i], want[i])
			}
		}
	}
}

func TestStridedSumMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type tc struct {
		shape   []int
		reduced []bool
	}
	cases := []tc{
		{[]int{300, 200}, []bool{true, true}},           // one big sum: partial sums per worker
		{[]int{300, 200}, []bool{true, false}},          // columns
		{[]int{300, 200}, []bool{false, true}},          // rows
		{[]int{2, 40000}, []bool{false, true}},          // few long rows
		{[]int{40000, 2}, []bool{true, false}},          // few long columns
		{[]int{1, 3, 70000}, []bool{true, true, false}}, // large output, no long kept loop
		{[]int{8, 64, 9, 9}, []bool{false, false, true, true}},
		{[]int{3, 0, 4}, []bool{false, true, false}}, // empty sums
	}
	for range 300 {
		shape := stridedRandShape(r, 5, []int{0, 1, 2, 3, 5, 7})
		red := make([]bool, len(shape))
		for i := range red {
			red[i] = r.IntN(2) == 0
		}
		cases = append(cases, tc{shape, red})
	}
	for _, c := range cases {
		// dst is contiguous over the kept dimensions, as in a reduction.
		dstStrides := make([]int, len(c.shape))
		outN := 1
		for i := len(c.shape) - 1; i >= 0; i-- {
			if !c.reduced[i] {
				dstStrides[i] = outN
				outN *= c.shape[i]
			}
		}
		srcStrides, srcN := stridedLayout(c.shape, r.Perm(len(c.shape)), r.IntN(2))
		src := randSlice(r, srcN)
		acc := make([]float64, outN)
		count := 1
		for i, n := range c.shape {
			if c.reduced[i] {
				count *= n
			}
		}
		stridedEach(c.shape, [][]int{dstStrides, srcStrides}, func(o []int) { acc[o[0]] += float64(src[o[1]]) })
		for _, scale := range []float64{1, 1 / float64(count)} {
			dst := make([]float32, outN+3)
			for i := range dst {
				dst[i] = guard
			}
			StridedSum(dst, src, c.shape, dstStrides, srcStrides, scale)
			for i, v := range acc {
				want := v * scale
				if got := float64(dst[i]); !(math.Abs(got-want) <= 1e-6*(1+math.Abs(want))) && !(math.IsNaN(want) && math.IsNaN(got)) {
					t.Fatalf("shape %v reduced %v scale %v: element %d = %v, want %v", c.shape, c.reduced, scale, i, got, want)
				}
			}
			for i := outN; i < len(dst); i++ {
				if dst[i] != guard {
					t.Fatalf("shape %v reduced %v: wrote past the output at %d", c.shape, c.reduced, i)
				}
			}
		}
	}
}

func TestStridedSumEmptyMeanIsNaN(t *testing.T) {
	dst := []float32{7, 7}
	StridedSum(dst, nil, []int{0, 2}, []int{0, 1}, []int{2, 1}, math.Inf(1))
	if !math.IsNaN(float64(dst[0])) || !math.IsNaN(float64(dst[1])) {
		t.Fatalf("mean over nothing = %v, want NaN", dst)
	}
	StridedSum(dst, nil, []int{0, 2}, []int{0, 1}, []int{2, 1}, 1)
	if dst[0] != 0 || dst[1] != 0 {
		t.Fatalf("sum over nothing = %v, want 0", dst)
	}
}

func TestStridedKernelsRejectBadOperands(t *testing.T) {
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"copy short dst", func() { StridedCopy(make([]float32, 5), make([]float32, 6), []int{2, 3}, []int{3, 1}, []int{3, 1}) }, "dst has 5 elements"},
		{"copy short src", func() { StridedCopy(make([]float32, 6), make([]float32, 5), []int{2, 3}, []int{3, 1}, []int{1, 2}) }, "src has 5 elements"},
		{"copy stride count", func() { StridedCopy(make([]float32, 6), make([]float32, 6), []int{2, 3}, []int{1}, []int{3, 1}) }, "dst has 1 strides for 2 dimensions"},
		{"negative stride", func() { StridedCopy(make([]float32, 6), make([]float32, 6), []int{2, 3}, []int{3, 1}, []int{-3, 1}) }, "negative size or stride"},
		{"sum not dense", func() { StridedSum(make([]float32, 9), make([]float32, 6), []int{2, 3}, []int{0, 3}, []int{3, 1}, 1) }, "do not lay out"},
		{"sum short dst", func() { StridedSum(make([]float32, 2), make([]float32, 6), []int{2, 3}, []int{0, 1}, []int{3, 1}, 1) }, "dst has 2 elements"},
		{"batched offsets", func() {
			SgemmBatched(false, false, 1, 1, 1, 1, make([]float32, 1), []int{0, 0}, 1, make([]float32, 1), []int{0}, 1, 0, make([]float32, 1), []int{0, 0}, 1)
		}, "2 A, 1 B and 2 C offsets"},
		{"batched offset range", func() {
			SgemmBatched(false, false, 1, 1, 1, 1, make([]float32, 1), []int{3}, 1, make([]float32, 1), []int{0}, 1, 0, make([]float32, 1), []int{0}, 1)
		}, "entry 0 offsets (3, 0, 0)"},
	}
	for _, c := range cases {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Errorf("%s: panic %v, want it to contain %q", c.name, r, c.want)
				}
			}()
			c.f()
		}()
	}
}

// stridedLevelShapes are the layouts the vector variants treat specially
// (transposes between channels-first and channels-last, spatial sums of
// channels-last data) with channel counts from the suite's sizes, plus
// random ones.
func stridedLevelShapes(r *rand.Rand) [][]int {
	var shapes [][]int
	for _, c := range suiteSizes(8) {
		shapes = append(shapes, []int{2, c, 3, 5}, []int{1, c, 9, 8})
	}
	shapes = append(shapes, []int{2, 64, 28, 28}, []int{1, 8, 300, 20}, []int{3, 40000})
	for range 100 {
		shapes = append(shapes, stridedRandShape(r, 5, []int{1, 2, 3, 5, 8, 9, 17}))
	}
	return shapes
}

func TestStridedLevels(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(71, 72))
		cp, sum := pick(l, stridedCopyVariants), pick(l, stridedSumVariants)
		for _, shape := range stridedLevelShapes(r) {
			perms := [][]int{r.Perm(len(shape)), r.Perm(len(shape))}
			if len(shape) == 4 {
				perms = [][]int{{0, 1, 2, 3}, {0, 2, 3, 1}} // contiguous and channels-last
				if r.IntN(2) == 0 {
					perms[0], perms[1] = perms[1], perms[0]
				}
			}
			dstStrides, dstN := stridedLayout(shape, perms[0], 0)
			srcStrides, srcN := stridedLayout(shape, perms[1], r.IntN(2))
			src := vecRand(r, srcN, 0)
			name := fmt.Sprintf("shape %v dst %v src %v", shape, dstStrides, srcStrides)

			want := make([]float32, dstN)
			poolGarbage(want)
			stridedCopyGeneric(want, src, shape, dstStrides, srcStrides)
			got, ok := guarded(t, dstN)
			poolGarbage(got)
			cp(got, src, shape, dstStrides, srcStrides)
			ok()
			sameBits32(t, "copy "+name, got, want)
			if l == Generic {
				// The 16-bit copy is the same walk: it moves the top halves
				// of the float32 copy's elements and leaves the rest (all
				// ones here, a NaN's bits in float32) alone.
				top := func(v float32) uint16 { return uint16(math.Float32bits(v) >> 16) }
				wantF := make([]float32, dstN)
				for i := range wantF {
					wantF[i] = math.Float32frombits(^uint32(0))
				}
				stridedCopyGeneric(wantF, src, shape, dstStrides, srcStrides)
				src16, got16 := make([]uint16, srcN), make([]uint16, dstN)
				for i, v := range src {
					src16[i] = top(v)
				}
				for i := range got16 {
					got16[i] = ^uint16(0)
				}
				StridedCopyBF16(got16, src16, shape, dstStrides, srcStrides)
				for i, v := range wantF {
					if got16[i] != top(v) {
						t.Fatalf("StridedCopyBF16 %s: element %d is %#x, want %#x", name, i, got16[i], top(v))
					}
				}
			}

			// Sum over a random subset of dimensions into a dense output.
			red := make([]bool, len(shape))
			for i := range red {
				red[i] = r.IntN(2) == 0
			}
			if len(shape) == 4 && r.IntN(2) == 0 {
				red = []bool{false, false, true, true} // spatial sum
			}
			sumStrides := make([]int, len(shape))
			outN := 1
			for i := len(shape) - 1; i >= 0; i-- {
				if !red[i] {
					sumStrides[i] = outN
					outN *= shape[i]
				}
			}
			wantSum := make([]float32, outN)
			stridedSumGeneric(wantSum, src, shape, sumStrides, srcStrides, outN, 0.5)
			gotSum, ok := guarded(t, outN)
			sum(gotSum, src, shape, sumStrides, srcStrides, outN, 0.5)
			ok()
			for i := range wantSum {
				g, w := float64(gotSum[i]), float64(wantSum[i])
				if d := math.Abs(g - w); !(d <= 2.5e-7*math.Abs(w)+1e-9) {
					t.Fatalf("sum %s reduced %v: element %d = %v, want %v", name, red, i, g, w)
				}
			}
		}
	})
}

func TestStridedDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	if level == Generic {
		t.Skip("the pure-Go reference allocates; only the vector path promises not to")
	}
	r := rand.New(rand.NewPCG(73, 74))
	shape := []int{4, 64, 28, 28}
	n := 4 * 64 * 28 * 28
	src, dst, out := vecRand(r, n, 0), make([]float32, n), make([]float32, 4*64)
	contig, _ := stridedLayout(shape, []int{0, 1, 2, 3}, 0)
	cl, _ := stridedLayout(shape, []int{0, 2, 3, 1}, 0)
	spatial, all := []int{64, 1, 0, 0}, []int{0, 0, 0, 0}
	src16, dst16 := make([]uint16, n), make([]uint16, n)
	for name, f := range map[string]func(){
		"bfloat16 copy channels-last to contiguous": func() { StridedCopyBF16(dst16, src16, shape, contig, cl) },
		"copy channels-last to contiguous":          func() { StridedCopy(dst, src, shape, contig, cl) },
		"copy contiguous":                           func() { StridedCopy(dst, src, shape, contig, contig) },
		"sum spatial channels-last":                 func() { StridedSum(out, src, shape, spatial, cl, 1) },
		"sum all":                                   func() { StridedSum(out[:1], src, shape, all, contig, 1) },
	} {
		f()
		if a := testing.AllocsPerRun(5, f); a != 0 {
			t.Errorf("%s allocates %v times per call", name, a)
		}
	}
}

// BenchmarkStrided times the strided kernels on a 32×64×28×28 batch: a
// channels-last to contiguous copy (a transposing walk), a spatial sum of
// the channels-last layout (sums across memory runs), a sum of rows of 4
// (a kept loop too short to split) and a full sum.
func BenchmarkStrided(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	shape := []int{32, 64, 28, 28}
	n := 32 * 64 * 28 * 28
	src, dst := randSlice(r, n), make([]float32, n)
	contig, _ := stridedLayout(shape, []int{0, 1, 2, 3}, 0)
	cl, _ := stridedLayout(shape, []int{0, 2, 3, 1}, 0)
	b.Run("copy-cl-to-contiguous", func(b *testing.B) {
		m := startMeter()
		for b.Loop() {
			StridedCopy(dst, src, shape, contig, cl)
		}
		m.report(b, float64(8*n))
	})
	b.Run("copy-contiguous-to-cl", func(b *testing.B) {
		m := startMeter()
		for b.Loop() {
			StridedCopy(dst, src, shape, cl, contig)
		}
		m.report(b, float64(8*n))
	})
	b.Run("sum-hw-channels-last", func(b *testing.B) {
		out := make([]float32, 32*64)
		m := startMeter()
		for b.Loop() {
			StridedSum(out, src, shape, []int{64, 1, 0, 0}, cl, 1)
		}
		m.report(b, float64(4*n))
	})
	b.Run("sum-rows-4-columns", func(b *testing.B) {
		out := make([]float32, 4)
		m := startMeter()
		for b.Loop() {
			StridedSum(out, src, []int{n / 4, 4}, []int{0, 1}, []int{4, 1}, 1)
		}
		m.report(b, float64(4*n))
	})
	b.Run("sum-all", func(b *testing.B) {
		out := make([]float32, 1)
		m := startMeter()
		for b.Loop() {
			StridedSum(out, src, shape, []int{0, 0, 0, 0}, contig, 1)
		}
		m.report(b, float64(4*n))
	})
}
