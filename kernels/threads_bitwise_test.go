package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// threadCounts are the pool sizes the thread-count tests compare with
// one thread: even and odd splits, and more workers than this machine
// has cores (a 16- or 64-core server's partitions).
var threadCounts = []int{2, 3, 16, 64}

// sameAtEveryThreadCount runs f at one thread and at each of
// threadCounts, and reports any output that differs in a bit.
func sameAtEveryThreadCount(t *testing.T, what string, f func() [][]float32) {
	t.Helper()
	var want [][]float32
	withThreads(1, func() { want = f() })
	for _, threads := range threadCounts {
		var got [][]float32
		withThreads(threads, func() { got = f() })
		for o := range want {
			if i := firstDiff(got[o], want[o]); i >= 0 {
				t.Errorf("%s, output %d at %d threads: element %d = %g, 1 thread %g", what, o, threads, i, got[o][i], want[o][i])
			}
		}
	}
}

// firstDiff returns the first index where a and b differ in bits, or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
			return i
		}
	}
	return -1
}

// Convolutions give the same bits at every thread count, forward and
// backward, on every path large enough to run in parallel: the direct
// AVX-512 forward, backward-data and weight gradient, the implicit GEMM
// (pointwise, strided, 7×7 stem), depthwise, groups, and channels-first.
func TestConvThreadsBitwise(t *testing.T) {
	cases := []convCase{
		{"direct 3x3", 2, 64, 64, 1, [3]int{1, 24, 24}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
		{"direct 3x3 batch 1", 1, 32, 64, 1, [3]int{1, 11, 48}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
		{"3x3 14", 3, 64, 64, 1, [3]int{1, 14, 14}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
		{"pointwise", 2, 64, 96, 1, [3]int{1, 14, 14}, one3, one3, [3]int{}, one3},
		{"3x3 stride 2", 2, 32, 48, 1, [3]int{1, 28, 28}, [3]int{1, 3, 3}, [3]int{1, 2, 2}, [3]int{0, 1, 1}, one3},
		{"stem 7x7", 1, 3, 64, 1, [3]int{1, 56, 56}, [3]int{1, 7, 7}, [3]int{1, 2, 2}, [3]int{0, 3, 3}, one3},
		{"groups", 2, 32, 64, 4, [3]int{1, 20, 20}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
		{"depthwise", 2, 64, 64, 64, [3]int{1, 28, 28}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	}
	r := rand.New(rand.NewPCG(23, 64))
	for _, c := range cases {
		for _, cl := range []bool{true, false} {
			s := c.shape(cl)
			x := randSlice(r, s.xLen())
			w := randSlice(r, s.wLen())
			b := randSlice(r, s.O)
			dy := randSlice(r, s.yLen())
			name := c.name + map[bool]string{true: " nhwc", false: " nchw"}[cl]
			sameAtEveryThreadCount(t, name, func() [][]float32 {
				y, dx, dw, db := make([]float32, s.yLen()), make([]float32, s.xLen()), make([]float32, s.wLen()), make([]float32, s.O)
				ConvForward(&s, x, w, b, y)
				ConvBackwardData(&s, dy, w, dx)
				ConvBackwardWeight(&s, x, dy, dw)
				ConvBackwardBias(&s, dy, db)
				return [][]float32{y, dx, dw, db}
			})
		}
	}
}

// Batch-norm statistics and pooling give the same bits at every thread
// count (at the process's level: make test runs the package at each),
// at batch 1 (where a split over images has one unit) and 8.
func TestNormPoolThreadsBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 65))
	for _, n := range []int{1, 8} {
		for _, cl := range []bool{true, false} {
			ps := Pool2dShape{N: n, C: 64, H: 28, W: 28, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1, ChannelsLast: cl}
			ps.OutH, ps.OutW = PoolOutSize(ps.H, 3, 2, 1, 1, false), PoolOutSize(ps.W, 3, 2, 1, 1, false)
			x := randSlice(r, n*64*28*28)
			dy := randSlice(r, n*64*ps.OutH*ps.OutW)
			sameAtEveryThreadCount(t, "pooling", func() [][]float32 {
				y, idx, dx := make([]float32, len(dy)), make([]int32, len(dy)), make([]float32, len(x))
				MaxPool2d(&ps, x, y, idx)
				MaxPool2dBackward(&ps, dy, idx, dx)
				ay, adx := make([]float32, len(dy)), make([]float32, len(x))
				AvgPool2d(&ps, x, false, ay)
				AvgPool2dBackward(&ps, dy, false, adx)
				return [][]float32{y, dx, ay, adx}
			})
			bs := BatchNormShape{Outer: n * 28 * 28, C: 64, Inner: 1}
			if !cl {
				bs = BatchNormShape{Outer: n, C: 64, Inner: 28 * 28}
			}
			sameAtEveryThreadCount(t, "batch-norm statistics", func() [][]float32 {
				mean, variance := make([]float64, 64), make([]float64, 64)
				BatchNormStats(&bs, x, mean, variance)
				out := make([]float32, 0, 256)
				for c := range mean {
					out = append(out, float32(mean[c]), float32(mean[c]-float64(float32(mean[c]))), float32(variance[c]), float32(variance[c]-float64(float32(variance[c]))))
				}
				return [][]float32{out}
			})
		}
	}
	// Sums over all but the channels of a large channels-last tensor
	// (a bias gradient), with many and with few channels, and over the
	// rows of a channels-first one: each splits a kept or a summed
	// dimension, whichever the shape calls for.
	src := randSlice(r, 8*56*56*64)
	for _, c := range []struct {
		name                string
		shape, dstSt, srcSt []int
		outN                int
	}{
		{"64 channels", []int{8 * 56 * 56, 64}, []int{0, 1}, []int{64, 1}, 64},
		{"3 channels", []int{8 * 56 * 56 * 64 / 3, 3}, []int{0, 1}, []int{3, 1}, 3},
		{"channels-first", []int{8, 64, 56 * 56}, []int{0, 1, 0}, []int{64 * 56 * 56, 56 * 56, 1}, 64},
		{"all", []int{8 * 56 * 56 * 64}, []int{0}, []int{1}, 1},
	} {
		sameAtEveryThreadCount(t, "strided sum, "+c.name, func() [][]float32 {
			dst := make([]float32, c.outN)
			StridedSum(dst, src, c.shape, c.dstSt, c.srcSt, 1)
			return [][]float32{slices.Clone(dst)}
		})
	}
}

// BFloat16 convolutions and products give the same bits at every thread
// count too: the direct and packed-in-place paths (3×3 at 56 and 28
// columns, batch 1 and 4), the stem, and a weight gradient long enough to
// cut its pixels into chunks.
func TestBF16ThreadsBitwise(t *testing.T) {
	cases := []convCase{
		{"3x3 56", 1, 64, 64, 1, [3]int{1, 56, 56}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
		{"3x3 28 batch 4", 4, 128, 128, 1, [3]int{1, 28, 28}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
		{"pointwise", 2, 64, 256, 1, [3]int{1, 14, 14}, one3, one3, [3]int{}, one3},
		{"stem", 1, 3, 64, 1, [3]int{1, 64, 64}, [3]int{1, 7, 7}, [3]int{1, 2, 2}, [3]int{0, 3, 3}, one3},
	}
	r := rand.New(rand.NewPCG(23, 66))
	for _, c := range cases {
		s := c.shape(true)
		x, _ := randBF16(r, s.xLen())
		w, _ := randBF16(r, s.wLen())
		dy, _ := randBF16(r, s.yLen())
		b := randSlice(r, s.O)
		sameAtEveryThreadCount(t, "bfloat16 "+c.name, func() [][]float32 {
			y, dx, dw := make([]float32, s.yLen()), make([]float32, s.xLen()), make([]float32, s.wLen())
			ConvForwardBF16(&s, x, w, b, y)
			ConvBackwardDataBF16(&s, dy, w, dx)
			ConvBackwardWeightBF16(&s, x, dy, dw)
			return [][]float32{y, dx, dw}
		})
	}
	for _, sh := range []struct{ m, n, k int }{{49, 2048, 512}, {1, 1000, 2048}, {64, 576, 6272}} {
		a, _ := randBF16(r, sh.m*sh.k)
		bm, _ := randBF16(r, sh.k*sh.n)
		sameAtEveryThreadCount(t, fmt.Sprintf("GemmBF16 %d×%d×%d", sh.m, sh.n, sh.k), func() [][]float32 {
			c := make([]float32, sh.m*sh.n)
			GemmBF16(false, false, sh.m, sh.n, sh.k, 1, a, sh.k, bm, sh.n, 0, c, sh.n)
			return [][]float32{c}
		})
	}
}
