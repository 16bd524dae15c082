package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemmBF16 runs GemmBF16 against the reference on sizes around the
// tile (12×32), the depth pair and the blocks, every transposition, and
// alpha/beta choices, with guard cells around C's rows. The two sum the
// same exact products in a different order, so they agree to a few ulps
// of the sum of magnitudes.
func TestGemmBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	type shape struct{ m, n, k int }
	shapes := []shape{{1, 1, 1}, {1, 32, 2}, {12, 32, 7}, {13, 33, 3}, {11, 31, 64}, {25, 65, 33}, {47, 100, 257},
		{12, 512, 9}, {36, 96, 600}, {5, 17, 1}, {130, 40, 520}, {24, 40, 1101}, {400, 40, 700}}
	for _, sh := range shapes {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}} {
				name := fmt.Sprintf("%dx%dx%d/t%v/a%v", sh.m, sh.n, sh.k, tr, ab)
				checkGemmBF16(t, r, name, sh.m, sh.n, sh.k, tr[0], tr[1], ab[0], ab[1])
			}
		}
	}
}

func checkGemmBF16(t *testing.T, r *rand.Rand, name string, m, n, k int, ta, tb bool, alpha, beta float32) {
	t.Helper()
	lda, ldb := k+3, n+5
	if ta {
		lda = m + 3
	}
	if tb {
		ldb = k + 5
	}
	arows, brows := m, k
	if ta {
		arows = k
	}
	if tb {
		brows = n
	}
	a, b := bf16Rand(r, arows*lda), bf16Rand(r, brows*ldb)
	ldc := n + 2
	c0 := make([]float32, m*ldc)
	for i := range c0 {
		c0[i] = float32(r.NormFloat64())
	}
	want := append([]float32(nil), c0...)
	ref := sbgemmArgs{transA: ta, transB: tb, m: m, n: n, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: want, ldc: ldc}
	ref.generic(0, m)
	got := append([]float32(nil), c0...)
	GemmBF16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, got, ldc)
	for i := range m {
		for j := range ldc {
			g, w := got[i*ldc+j], want[i*ldc+j]
			if j >= n {
				if g != c0[i*ldc+j] {
					t.Fatalf("%s: wrote C[%d][%d] past n", name, i, j)
				}
				continue
			}
			var mag float64
			for p := range k {
				mag += math.Abs(float64(F32FromBF16(ref.aAt(i, p)) * F32FromBF16(ref.bAt(p, j))))
			}
			tol := 4*float64(k+2)*0x1p-24*(math.Abs(float64(alpha))*mag+math.Abs(float64(beta*c0[i*ldc+j]))) + 1e-30
			if math.Abs(float64(g-w)) > tol {
				t.Fatalf("%s: C[%d][%d] = %v, reference %v (tolerance %.3g)", name, i, j, g, w, tol)
			}
		}
	}
}

func bf16Rand(r *rand.Rand, n int) []uint16 {
	x := make([]uint16, n)
	for i := range x {
		x[i] = BF16FromF32(float32(r.NormFloat64()))
	}
	return x
}

func TestGemmBF16BadSizes(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a short A did not panic")
		}
	}()
	GemmBF16(false, false, 4, 4, 4, 1, make([]uint16, 15), 4, make([]uint16, 16), 4, 0, make([]float32, 16), 4)
}

func BenchmarkGemmBF16(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range []int{256, 1024, 2048} {
		a, bb := bf16Rand(r, s*s), bf16Rand(r, s*s)
		c := make([]float32, s*s)
		b.Run(fmt.Sprint(s), func(b *testing.B) {
			for b.Loop() {
				GemmBF16(false, false, s, s, s, 1, a, s, bb, s, 0, c, s)
			}
			b.ReportMetric(2*float64(s)*float64(s)*float64(s)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGemmBF16Kernel times the micro-kernel alone on L1-resident
// panels: the instruction's own rate on this CPU.
func BenchmarkGemmBF16Kernel(b *testing.B) {
	if !sbgemmAsm() {
		b.Skip("no AVX512_BF16")
	}
	kp := 128
	a := make([]uint16, kp*24)
	bp := make([]uint16, kp*64)
	c := make([]float32, 12*32)
	for b.Loop() {
		for range 100 {
			sbgemmKernel12x32(kp, &a[0], &bp[0], &c[0], 32, 1, 12, 1, 0)
		}
	}
	b.ReportMetric(100*2*12*32*2*float64(kp)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// TestGemmBF16To checks the BF16-output product against GemmBF16's float32
// result rounded to nearest even, bit for bit, leaving the row padding of
// C alone; a C too short for its rows panics.
func TestGemmBF16To(t *testing.T) {
	r := rand.New(rand.NewPCG(83, 84))
	for _, sh := range [][3]int{{1, 1, 1}, {13, 33, 7}, {25, 65, 258}, {3, 40, 2}} {
		for _, tr := range [][2]bool{{false, false}, {true, true}} {
			m, n, k := sh[0], sh[1], sh[2]
			lda, ldb := k, n
			if tr[0] {
				lda = m
			}
			if tr[1] {
				ldb = k
			}
			a, b := bf16Rand(r, m*k), bf16Rand(r, k*n)
			want := make([]float32, m*n)
			GemmBF16(tr[0], tr[1], m, n, k, 0.5, a, lda, b, ldb, 0, want, n)
			ldc := n + 3
			c := make([]uint16, m*ldc)
			for i := range c {
				c[i] = 0xbeef
			}
			GemmBF16To(tr[0], tr[1], m, n, k, 0.5, a, lda, b, ldb, c, ldc)
			for i := range m {
				for j := range ldc {
					got := c[i*ldc+j]
					if j >= n {
						if got != 0xbeef {
							t.Fatalf("%v/%v: padding C[%d,%d] overwritten", sh, tr, i, j)
						}
						continue
					}
					if w := BF16FromF32(want[i*n+j]); got != w {
						t.Fatalf("%v/%v: C[%d,%d] = %#x, want %#x", sh, tr, i, j, got, w)
					}
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a short C did not panic")
		}
	}()
	GemmBF16To(false, false, 2, 3, 1, 1, make([]uint16, 2), 1, make([]uint16, 3), 3, make([]uint16, 5), 3)
}
