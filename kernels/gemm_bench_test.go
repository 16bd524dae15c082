package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The GEMM benchmarks report GFLOP/s (2mnk per product). Threads() is in
// each name: run once with KILN_NUM_THREADS=1 and once with 2 to compare.
// Square sizes, and deep-learning shapes m×n×k: a batch-64 linear layer
// (64×1024×1024), a transformer FFN (512×4096×512), a convolution as GEMM
// (2048×512×256) and a narrow DLRM output (128×13×512).
var gemmBenchShapes = []struct {
	name    string
	m, n, k int
}{
	{"256", 256, 256, 256},
	{"512", 512, 512, 512},
	{"1024", 1024, 1024, 1024},
	{"2048", 2048, 2048, 2048},
	{"64x1024x1024", 64, 1024, 1024},
	{"512x4096x512", 512, 4096, 512},
	{"2048x512x256", 2048, 512, 256},
	{"128x13x512", 128, 13, 512},
}

func reportGFLOPS(b *testing.B, m, n, k int) {
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkSgemm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, sh := range gemmBenchShapes {
		m, n, k := sh.m, sh.n, sh.k
		a, bb, c := randSlice(r, m*k), randSlice(r, k*n), randSlice(r, m*n)
		for _, l := range Levels() {
			if l == Generic && m*n*k > 1<<28 {
				continue // the reference takes seconds per product here
			}
			impl := pick(l, sgemmVariants)
			b.Run(fmt.Sprintf("%s/%v/threads=%d", sh.name, l, Threads()), func(b *testing.B) {
				for b.Loop() {
					sgemmEntry(impl, false, false, m, n, k, 1, a, k, bb, n, 0, c, n, Epilogue{})
				}
				reportGFLOPS(b, m, n, k)
			})
		}
	}
}

// BenchmarkSgemmTrans covers the transposed operands of a linear layer's
// forward (x·Wᵀ) and weight gradient (gᵀ·x).
func BenchmarkSgemmTrans(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	const m, n, k = 512, 1024, 1024
	a, bb, c := randSlice(r, m*k), randSlice(r, k*n), randSlice(r, m*n)
	for _, tr := range gemmTrans {
		lda, ldb := k, n
		if tr[0] {
			lda = m
		}
		if tr[1] {
			ldb = k
		}
		b.Run(fmt.Sprintf("tA=%v,tB=%v/threads=%d", tr[0], tr[1], Threads()), func(b *testing.B) {
			for b.Loop() {
				Sgemm(tr[0], tr[1], m, n, k, 1, a, lda, bb, ldb, 0, c, n)
			}
			reportGFLOPS(b, m, n, k)
		})
	}
}

// BenchmarkSgemmFused compares a linear layer with bias and activation
// fused into the GEMM, with B prepacked, and done as separate passes.
func BenchmarkSgemmFused(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, sh := range gemmBenchShapes[4:7] {
		m, n, k := sh.m, sh.n, sh.k
		a, w, c := randSlice(r, m*k), randSlice(r, n*k), randSlice(r, m*n)
		bias := randSlice(r, n)
		for _, act := range []ActFunc{ActReLU, ActGELU} {
			ep := Epilogue{Bias: bias, Act: Act{Fn: act}, Activate: true}
			b.Run(fmt.Sprintf("%s/%v/separate/threads=%d", sh.name, act, Threads()), func(b *testing.B) {
				for b.Loop() {
					Sgemm(false, true, m, n, k, 1, a, k, w, k, 0, c, n)
					for i := 0; i < m; i++ {
						row := c[i*n : (i+1)*n]
						for j := range row {
							row[j] += bias[j]
						}
					}
					ep.Act.Forward(c, c)
				}
				reportGFLOPS(b, m, n, k)
			})
			b.Run(fmt.Sprintf("%s/%v/fused/threads=%d", sh.name, act, Threads()), func(b *testing.B) {
				for b.Loop() {
					SgemmEpilogue(false, true, m, n, k, 1, a, k, w, k, 0, c, n, ep)
				}
				reportGFLOPS(b, m, n, k)
			})
			pb := PackB(true, k, n, w, k)
			b.Run(fmt.Sprintf("%s/%v/prepacked/threads=%d", sh.name, act, Threads()), func(b *testing.B) {
				for b.Loop() {
					SgemmPacked(false, m, 1, a, k, pb, 0, c, n, ep)
				}
				reportGFLOPS(b, m, n, k)
			})
		}
	}
}
