package kernels

import (
	"fmt"
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

// gemmCase is one product of the GEMM conformance suite.
type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	bias           int // 0 none, 1 per column, 2 per row
	act            *Act
	packed         bool // through PackB and SgemmPacked
}

func (gc gemmCase) String() string {
	s := fmt.Sprintf("tA=%v tB=%v %d×%d×%d alpha=%v beta=%v", gc.transA, gc.transB, gc.m, gc.n, gc.k, gc.alpha, gc.beta)
	if gc.bias != 0 {
		s += fmt.Sprintf(" bias=%d", gc.bias)
	}
	if gc.act != nil {
		s += " act=" + gc.act.Fn.String()
	}
	if gc.packed {
		s += " packed"
	}
	return s
}

// nanPadded returns n random values inside a NaN-filled buffer whose rows
// (cols used of every ld) are random too: a kernel that reads a padding
// element or past either end into its sums turns the result into NaN.
func nanPadded(r *rand.Rand, rows, cols, ld int) []float32 {
	const pad = 37
	n := 0
	if rows > 0 && cols > 0 {
		n = (rows-1)*ld + cols
	}
	buf := make([]float32, n+2*pad)
	for i := range buf {
		buf[i] = float32(math.NaN())
	}
	s := buf[pad : pad+n : pad+n]
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			s[i*ld+j] = float32(r.NormFloat64())
		}
	}
	return s
}

func absAll(s []float32) []float32 {
	out := make([]float32, len(s))
	for i, v := range s {
		if v != v {
			v = 0
		}
		out[i] = float32(math.Abs(float64(v)))
	}
	return out
}

// runGemmCase runs gc at level l and compares it with naiveGemm plus the
// epilogue, allowing the float32 summation error of k products: (k+4)·2⁻²³
// times the sum of the magnitudes of every term (the naive product of the
// absolute values).
func runGemmCase(t *testing.T, l Level, r *rand.Rand, gc gemmCase) {
	t.Helper()
	m, n, k := gc.m, gc.n, gc.k
	ar, ac := m, k
	if gc.transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if gc.transB {
		br, bc = n, k
	}
	// Padded leading dimensions, one of them a 4 KiB multiple when wide.
	lda, ldb, ldc := ac+3, bc, n+5
	if bc > 1000 {
		ldb = 1024 * ((bc + 1023) / 1024)
	}
	a := nanPadded(r, ar, ac, lda)
	b := nanPadded(r, br, bc, ldb)
	c, checkGuards := guarded(t, (m-1)*ldc+n)
	for i := range c {
		c[i] = guardValue // the padding columns of C must keep it
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			if gc.beta == 0 {
				c[i*ldc+j] = float32(math.NaN()) // beta 0 must not read C
			} else {
				c[i*ldc+j] = float32(r.NormFloat64())
			}
		}
	}
	var ep Epilogue
	if gc.bias != 0 {
		nb := n
		if gc.bias == 2 {
			nb, ep.BiasPerRow = m, true
		}
		ep.Bias = randSlice(r, nb)
	}
	if gc.act != nil {
		ep.Act, ep.Activate = *gc.act, true
	}

	want := append([]float32(nil), c...)
	naiveGemm(gc.transA, gc.transB, m, n, k, gc.alpha, a, lda, b, ldb, gc.beta, want, ldc)
	bound := absAll(c)
	naiveGemm(gc.transA, gc.transB, m, n, k, float32(math.Abs(float64(gc.alpha))), absAll(a), lda, absAll(b), ldb,
		float32(math.Abs(float64(gc.beta))), bound, ldc)
	for i := 0; i < m; i++ {
		row := want[i*ldc : i*ldc+n]
		for j := range row {
			if ep.Bias != nil {
				var bi float32
				if ep.BiasPerRow {
					bi = ep.Bias[i]
				} else {
					bi = ep.Bias[j]
				}
				row[j] += bi
				bound[i*ldc+j] += float32(math.Abs(float64(bi)))
			}
		}
		if ep.Activate {
			ep.Act.forward(row, row)
		}
	}

	if gc.packed {
		pb := packBEntry(pick(l, packBVariants), gc.transB, k, n, b, ldb)
		sgemmPackedEntry(pick(l, sgemmPackedVariants), gc.transA, m, gc.alpha, a, lda, pb, gc.beta, c, ldc, ep)
	} else {
		sgemmEntry(pick(l, sgemmVariants), gc.transA, gc.transB, m, n, k, gc.alpha, a, lda, b, ldb, gc.beta, c, ldc, ep)
	}

	checkGuards()
	for i := 0; i < m; i++ {
		for j := 0; j < ldc && i*ldc+j < len(c); j++ {
			got, w := c[i*ldc+j], want[i*ldc+j]
			if j >= n {
				if got != guardValue {
					t.Fatalf("%v: padding C[%d][%d] overwritten: %v", gc, i, j, got)
				}
				continue
			}
			// Activations are 1.2-Lipschitz at most (GELU), so the bound
			// of the product carries over.
			tol := float64(k+4) * 0x1p-23 * 1.2 * float64(bound[i*ldc+j])
			if math.IsNaN(float64(w)) != math.IsNaN(float64(got)) || math.Abs(float64(got-w)) > tol {
				t.Fatalf("%v: C[%d][%d] = %v, want %v (tolerance %.3g)", gc, i, j, got, w, tol)
			}
		}
	}
}

var gemmTrans = [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}}

// TestSgemmConformance holds every GEMM variant to the naive float64
// product: all transpositions, alpha/beta (beta 0 with NaN in C), tile
// edges (multiples of the 6×16, 12×16 and 12×32 tiles ±1), every suite size along each
// dimension, several K and column blocks, and shapes the worker pool
// splits by rows, by columns or (small C, long K) along K.
func TestSgemmConformance(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(7, uint64(l)))
		ab := [][2]float32{{1, 0}, {-0.75, 1}, {1.5, -0.5}}
		for _, tr := range gemmTrans {
			for _, m := range []int{1, 5, 6, 7, 12, 13, 23} {
				for _, n := range []int{1, 15, 16, 17, 33, 48, 65} {
					for _, k := range []int{1, 8, 9, 257} {
						for _, x := range ab {
							runGemmCase(t, l, r, gemmCase{transA: tr[0], transB: tr[1], m: m, n: n, k: k, alpha: x[0], beta: x[1]})
						}
					}
				}
			}
		}
		for si, s := range suiteSizes(8) {
			for i, tr := range gemmTrans {
				x := ab[(si+i)%len(ab)]
				for _, mnk := range [][3]int{{s, 19, 11}, {7, s, 10}, {13, 17, s}} {
					runGemmCase(t, l, r, gemmCase{transA: tr[0], transB: tr[1], m: mnk[0], n: mnk[1], k: mnk[2], alpha: x[0], beta: x[1]})
				}
			}
		}
		for i, tr := range gemmTrans {
			for _, mnk := range [][3]int{{67, 400, 600}, {200, 13, 70}, {9, 300, 70}, {130, 97, 513}, {25, 1030, 20}, {3, 2100, 9}, {1100, 21, 9}, {500, 16, 5}, {1100, 13, 9}, {29, 37, 1601}, {5, 70, 900}, {50, 64, 70}, {37, 96, 800}, {25, 32, 9}, {130, 128, 20}} {
				x := ab[i%len(ab)]
				runGemmCase(t, l, r, gemmCase{transA: tr[0], transB: tr[1], m: mnk[0], n: mnk[1], k: mnk[2], alpha: x[0], beta: x[1]})
			}
		}
		// k = 0 and alpha = 0 leave beta·C, reading neither A nor B.
		for _, mnk := range [][3]int{{5, 17, 0}, {7, 33, 9}} {
			runGemmCase(t, l, r, gemmCase{m: mnk[0], n: mnk[1], k: mnk[2], alpha: 0, beta: 0.5})
			runGemmCase(t, l, r, gemmCase{m: mnk[0], n: mnk[1], k: mnk[2], alpha: 0, beta: 0})
		}
	})
}

// TestSgemmEpilogueConformance checks the fused bias and activation, alone
// and together, on the direct and prepacked paths.
func TestSgemmEpilogueConformance(t *testing.T) {
	acts := []*Act{nil, {Fn: ActReLU}, {Fn: ActGELU}, {Fn: ActSiLU}, {Fn: ActSigmoid}, {Fn: ActHardTanh, A: -0.5, B: 0.5}}
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(8, uint64(l)))
		i := 0
		for _, packed := range []bool{false, true} {
			for bias := 0; bias <= 2; bias++ {
				for _, act := range acts {
					for _, mnk := range [][3]int{{1, 1, 1}, {7, 17, 9}, {13, 33, 300}, {64, 50, 40}, {6, 400, 3}, {401, 13, 4}, {50, 64, 30}} {
						tr := gemmTrans[i%len(gemmTrans)]
						beta := []float32{0, 0.5}[i%2]
						i++
						runGemmCase(t, l, r, gemmCase{transA: tr[0], transB: tr[1], m: mnk[0], n: mnk[1], k: mnk[2],
							alpha: 1.25, beta: beta, bias: bias, act: act, packed: packed})
					}
				}
			}
		}
	})
}

// TestSgemmPackedConformance runs the conformance shapes through PackB and
// SgemmPacked.
func TestSgemmPackedConformance(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(9, uint64(l)))
		for i, tr := range gemmTrans {
			for _, mnk := range [][3]int{{1, 1, 1}, {5, 15, 8}, {6, 16, 9}, {7, 17, 257}, {13, 33, 1}, {97, 31, 513}, {67, 400, 300}, {200, 13, 70}, {1030, 40, 5}} {
				beta := []float32{0, 1, -0.5}[i%3]
				runGemmCase(t, l, r, gemmCase{transA: tr[0], transB: tr[1], m: mnk[0], n: mnk[1], k: mnk[2], alpha: 0.5, beta: beta, packed: true})
			}
		}
	})
}

// TestPackedMatchesSgemm checks PackedMatchesSgemm's promise: where it
// holds, SgemmPacked's result is Sgemm's bit for bit (Linear layers of
// frozen graphs rely on it), and a long K under a small C is where it
// does not.
func TestPackedMatchesSgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 15))
	shapes := [][3]int{{1, 1000, 2048}, {16, 1000, 2048}, {7, 33, 300}, {128, 768, 768}, {3, 5, 40000}, {64, 64, 9000}}
	for _, mnk := range shapes {
		m, n, k := mnk[0], mnk[1], mnk[2]
		matches := PackedMatchesSgemm(m, n, k)
		// Inference-sized layers match wherever there is a blocked GEMM; a
		// K of 40000 under a 3×5 C splits across two or more threads.
		switch {
		case level < AVX2 && matches:
			t.Fatalf("%d×%d×%d: reported a match without the blocked GEMM", m, n, k)
		case level >= AVX2 && m == 16 && !matches:
			t.Fatalf("%d×%d×%d: an inference layer's product does not match", m, n, k)
		case level >= AVX2 && k == 40000 && Threads() > 1 && matches:
			t.Fatalf("%d×%d×%d: a K split reported as a match", m, n, k)
		}
		if !matches {
			continue
		}
		a, b := randSlice(r, m*k), randSlice(r, n*k)
		want, got := randSlice(r, m*n), make([]float32, m*n)
		copy(got, want)
		Sgemm(false, true, m, n, k, 1, a, k, b, k, 1, want, n)
		SgemmPacked(false, m, 1, a, k, PackB(true, k, n, b, k), 1, got, n, Epilogue{})
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%d×%d×%d: element %d is %v packed, %v by Sgemm", m, n, k, i, got[i], want[i])
			}
		}
	}
}

// TestPackBSameAtEveryLevel checks that every packer writes the same
// layout, zero padding included, so a PackedB is usable by any variant.
func TestPackBSameAtEveryLevel(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	for _, transB := range []bool{false, true} {
		for _, kn := range [][2]int{{1, 1}, {7, 15}, {8, 16}, {9, 17}, {300, 33}, {513, 48}} {
			k, n := kn[0], kn[1]
			ld := n + 2
			if transB {
				ld = k + 2
			}
			rows := k
			if transB {
				rows = n
			}
			b := randSlice(r, (rows-1)*ld+ld-2)
			want := packBEntry(packBGeneric, transB, k, n, b, ld)
			forEachLevel(t, func(t *testing.T, l Level) {
				got := packBEntry(pick(l, packBVariants), transB, k, n, b, ld)
				if got.k != want.k || got.n != want.n || got.kc != want.kc || got.nr != want.nr || len(got.data) != len(want.data) {
					t.Fatalf("transB=%v %d×%d: layout %+v, want %+v", transB, k, n, got, want)
				}
				for i := range want.data {
					if math.Float32bits(got.data[i]) != math.Float32bits(want.data[i]) {
						t.Fatalf("transB=%v %d×%d: packed[%d] = %v, want %v", transB, k, n, i, got.data[i], want.data[i])
					}
				}
			})
		}
	}
}

// ReLU in the epilogue passes NaN through, as clamp_min does.
func TestSgemmEpilogueReLUKeepsNaN(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		for _, n := range []int{1, 16} {
			a := []float32{float32(math.NaN()), -1, 2}
			b := make([]float32, 3*n)
			for i := range b {
				b[i] = 1
			}
			c := make([]float32, 3*n)
			sgemmEntry(pick(l, sgemmVariants), false, false, 3, n, 1, 1, a, 1, b, n, 0, c, n, Epilogue{Act: Act{Fn: ActReLU}, Activate: true})
			if !math.IsNaN(float64(c[0])) || c[n] != 0 || c[2*n] != 2 {
				t.Fatalf("n=%d: ReLU epilogue gave %v, %v, %v; want NaN, 0, 2", n, c[0], c[n], c[2*n])
			}
		}
	})
}

func TestSgemmEpilogueRejectsShortBias(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("short bias did not panic")
		}
	}()
	SgemmEpilogue(false, false, 2, 3, 1, 1, make([]float32, 2), 1, make([]float32, 3), 3, 0, make([]float32, 6), 3, Epilogue{Bias: make([]float32, 2)})
}

// The fast GEMM entry points allocate nothing per call: packing space and
// the call's state come from pools.
func TestSgemmAllocs(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	if level == Generic {
		t.Skip("the Generic reference copies a transposed B per call")
	}
	r := rand.New(rand.NewPCG(12, 13))
	for _, sz := range []int{40, 200} {
		a, b, c := randSlice(r, sz*sz), randSlice(r, sz*sz), randSlice(r, sz*sz)
		bias := randSlice(r, sz)
		pb := PackB(true, sz, sz, b, sz)
		ep := Epilogue{Bias: bias, Act: Act{Fn: ActGELU}, Activate: true}
		calls := map[string]func(){
			"Sgemm":         func() { Sgemm(false, true, sz, sz, sz, 1, a, sz, b, sz, 0.5, c, sz) },
			"SgemmEpilogue": func() { SgemmEpilogue(true, false, sz, sz, sz, 1, a, sz, b, sz, 0, c, sz, ep) },
			"SgemmPacked":   func() { SgemmPacked(false, sz, 1, a, sz, pb, 0, c, sz, ep) },
		}
		// A long K with a small C takes the K split on two threads or more.
		const longK = 2000
		ka, kb, kcOut := randSlice(r, 30*longK), randSlice(r, longK*20), randSlice(r, 30*20)
		calls["Sgemm split K"] = func() { Sgemm(false, false, 30, 20, longK, 1, ka, longK, kb, 20, 0, kcOut, 20) }
		for name, f := range calls {
			f()
			if got := testing.AllocsPerRun(20, f); got != 0 {
				t.Errorf("%s %d³: %v allocations per call", name, sz, got)
			}
		}
	}
}
