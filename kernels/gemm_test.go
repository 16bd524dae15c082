package kernels

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// naiveGemm is the textbook triple loop in float64, the yardstick for every
// Sgemm variant.
func naiveGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for p := 0; p < k; p++ {
				ai, bi := i*lda+p, p*ldb+j
				if transA {
					ai = p*lda + i
				}
				if transB {
					bi = j*ldb + p
				}
				av, bv := a[ai], b[bi]
				s += float64(av) * float64(bv)
			}
			old := 0.0
			if beta != 0 {
				old = float64(beta) * float64(c[i*ldc+j])
			}
			c[i*ldc+j] = float32(float64(alpha)*s + old)
		}
	}
}

const guard = float32(-12345.5)

func TestSgemmMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 2, 3, 7, 16, 17, 31, 64}
	for _, transA := range []bool{false, true} {
		for _, transB := range []bool{false, true} {
			for _, m := range sizes {
				for _, n := range sizes {
					for _, k := range []int{1, 5, 33} {
						for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}} {
							checkSgemm(t, r, transA, transB, m, n, k, ab[0], ab[1])
						}
					}
				}
			}
		}
	}
}

func checkSgemm(t *testing.T, r *rand.Rand, transA, transB bool, m, n, k int, alpha, beta float32) {
	t.Helper()
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	lda, ldb, ldc := ac+3, bc+1, n+2 // padded rows catch stride mistakes
	a := randSlice(r, ar*lda)
	b := randSlice(r, br*ldb)
	c := randSlice(r, m*ldc+8)
	want := append([]float32(nil), c...)
	for i := m * ldc; i < len(c); i++ {
		c[i], want[i] = guard, guard
	}
	// Padding columns of C must stay untouched too.
	for i := 0; i < m; i++ {
		for j := n; j < ldc; j++ {
			c[i*ldc+j], want[i*ldc+j] = guard, guard
		}
	}
	naiveGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
	Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	for i := range c {
		if math.Abs(float64(c[i]-want[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("tA=%v tB=%v m=%d n=%d k=%d alpha=%v beta=%v: c[%d]=%v want %v", transA, transB, m, n, k, alpha, beta, i, c[i], want[i])
		}
	}
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func TestSgemmBetaZeroIgnoresNaN(t *testing.T) {
	c := []float32{float32(math.NaN())}
	Sgemm(false, false, 1, 1, 1, 1, []float32{2}, 1, []float32{3}, 1, 0, c, 1)
	if c[0] != 6 {
		t.Fatalf("c = %v, want 6", c[0])
	}
}

func TestSgemmRejectsShortSlices(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("short A did not panic")
		}
	}()
	Sgemm(false, false, 2, 2, 2, 1, make([]float32, 3), 2, make([]float32, 4), 2, 0, make([]float32, 4), 2)
}

func TestParallelCoversRange(t *testing.T) {
	for _, n := range []int{1, 2, 3, 100, 1001} {
		seen := make([]int32, n)
		Parallel(n, 1<<30, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		for i, v := range seen {
			if v != 1 {
				t.Fatalf("n=%d: index %d visited %d times", n, i, v)
			}
		}
	}
}

func TestBF16RoundTrip(t *testing.T) {
	src := []float32{0, 1, -1.5, 3.1415927, 1e-40, float32(math.Inf(-1))}
	h := make([]uint16, len(src))
	back := make([]float32, len(src))
	F32ToBF16(h, src)
	BF16ToF32(back, h)
	for i, v := range src {
		// A subnormal keeps fewer significant bits, so it is held to an
		// absolute bound of half its last place.
		tol := math.Max(math.Abs(float64(v))/128, 0x1p-134)
		if d := math.Abs(float64(back[i] - v)); d > tol {
			t.Errorf("%v -> %v", v, back[i])
		}
	}
	if back[4] == 0 {
		t.Errorf("subnormal flushed to zero; the reference keeps subnormals")
	}
}

// A Parallel inside a Parallel's task must finish even when every worker is
// busy with outer chunks.
func TestParallelNested(t *testing.T) {
	var total atomic.Int64
	done := make(chan struct{})
	go func() {
		Parallel(8, 1<<30, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				Parallel(100, 1<<30, func(lo, hi int) { total.Add(int64(hi - lo)) })
			}
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("nested Parallel deadlocked")
	}
	if total.Load() != 800 {
		t.Fatalf("visited %d, want 800", total.Load())
	}
}

// TestSgemmAgreesWithGonum holds Sgemm to a second, independent reference:
// gonum's BLAS, on the transposition and alpha/beta combinations BLAS
// users rely on.
func TestSgemmAgreesWithGonum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		for _, mnk := range [][3]int{{1, 1, 1}, {5, 7, 3}, {33, 17, 65}, {64, 48, 31}} {
			m, n, k := mnk[0], mnk[1], mnk[2]
			ar, ac := m, k
			if tr[0] {
				ar, ac = k, m
			}
			br, bc := k, n
			if tr[1] {
				br, bc = n, k
			}
			a, b := randSlice(r, ar*ac), randSlice(r, br*bc)
			c := randSlice(r, m*n)
			want := blas32.General{Rows: m, Cols: n, Stride: n, Data: append([]float32(nil), c...)}
			blas32.Gemm(gonumTrans(tr[0]), gonumTrans(tr[1]), 0.75,
				blas32.General{Rows: ar, Cols: ac, Stride: ac, Data: a},
				blas32.General{Rows: br, Cols: bc, Stride: bc, Data: b}, -0.5, want)
			Sgemm(tr[0], tr[1], m, n, k, 0.75, a, ac, b, bc, -0.5, c, n)
			for i := range c {
				if d := math.Abs(float64(c[i] - want.Data[i])); d > 1e-4*(1+math.Abs(float64(want.Data[i]))) {
					t.Fatalf("trans %v %d×%d×%d: element %d = %v, gonum %v", tr, m, n, k, i, c[i], want.Data[i])
				}
			}
		}
	}
}

func gonumTrans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}
