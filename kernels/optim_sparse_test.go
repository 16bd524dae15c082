package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// sparseCase is a [num, dim] table, a sparse gradient over some of its rows
// and the same gradient densified (zero in the other rows).
type sparseCase struct {
	num, dim int
	rows     SparseRows
	dense    []float32
}

func newSparseCase(rng *rand.Rand, num, dim int) sparseCase {
	var rows []int64
	for r := range int64(num) {
		if rng.IntN(2) == 0 {
			rows = append(rows, r)
		}
	}
	vals := make([]float32, len(rows)*dim)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	dense := make([]float32, num*dim)
	for k, r := range rows {
		copy(dense[int(r)*dim:], vals[k*dim:(k+1)*dim])
	}
	return sparseCase{num: num, dim: dim, rows: SparseRows{Dim: dim, Rows: rows, Values: vals}, dense: dense}
}

// randTable returns n random values followed by guard values that no
// kernel may write.
func randTable(rng *rand.Rand, n int, lo float64) []float32 {
	t := make([]float32, n+4)
	for i := range n {
		t[i] = float32(lo + rng.Float64())
	}
	for i := n; i < len(t); i++ {
		t[i] = 1234.5
	}
	return t
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// sparseDims cover rows shorter than a vector, tails and rows longer than a
// split scratch span.
var sparseDims = []int{1, 3, 8, 17, 33, 64, 1031}

// Sparse SGD must leave the table exactly as the dense step with the
// densified gradient does: that step changes no untouched row (zero
// gradient, no weight decay), and each touched row runs the same span
// routine. Sparse Adagrad follows PyTorch's sparse roundings, checked
// against a literal reference. The split forms must give the same FP32
// masters.
func TestSparseStepsMatchDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sgds := []SGDConfig{{LR: 0.1}, {LR: 0.03, Maximize: true}}
	adagrads := []AdagradConfig{{NegLR: -0.1, Eps: 1e-10}, {NegLR: -0.05, Eps: 1e-3, Maximize: true}}
	for _, dim := range sparseDims {
		for _, num := range []int{1, 7, 3001} {
			sc := newSparseCase(rng, num, dim)
			n := num * dim
			for ci, c := range sgds {
				t.Run(fmt.Sprintf("SGD%d/%dx%d", ci, num, dim), func(t *testing.T) {
					p := randTable(rng, n, -0.5)
					want := slices.Clone(p)
					SGD(want[:n], sc.dense, nil, c, false)
					got := slices.Clone(p)
					SGDSparse(got[:n], sc.rows, c)
					if i := sameBits(got, want); i >= 0 {
						t.Fatalf("element %d: sparse %v, dense %v", i, got[i], want[i])
					}
					for threads := 1; threads <= 3; threads++ { // chunks of rows share a step
						top, bottom := splitOf(p[:n])
						withThreads(threads, func() { SGDSparseSplit(top, bottom, sc.rows, c) })
						if i := sameBits(joinOf(top, bottom), want[:n]); i >= 0 {
							t.Fatalf("split, %d threads: element %d differs from the FP32 step", threads, i)
						}
					}
				})
			}
			for ci, c := range adagrads {
				t.Run(fmt.Sprintf("Adagrad%d/%dx%d", ci, num, dim), func(t *testing.T) {
					p, s := randTable(rng, n, -0.5), randTable(rng, n, 0.1)
					wantP, wantS := slices.Clone(p), slices.Clone(s)
					adagradSparseReference(wantP, wantS, sc.rows, c)
					gotP, gotS := slices.Clone(p), slices.Clone(s)
					AdagradSparse(gotP[:n], gotS[:n], sc.rows, c)
					if i := sameBits(gotP, wantP); i >= 0 {
						t.Fatalf("param element %d: %v, reference %v", i, gotP[i], wantP[i])
					}
					if i := sameBits(gotS, wantS); i >= 0 {
						t.Fatalf("sum element %d: %v, reference %v", i, gotS[i], wantS[i])
					}
					top, bottom := splitOf(p[:n])
					splitS := slices.Clone(s)
					AdagradSparseSplit(top, bottom, splitS[:n], sc.rows, c)
					if i := sameBits(joinOf(top, bottom), wantP[:n]); i >= 0 {
						t.Fatalf("split: param element %d differs from the FP32 step", i)
					}
					if i := sameBits(splitS, wantS); i >= 0 {
						t.Fatalf("split: sum element %d differs from the FP32 step", i)
					}
				})
			}
		}
	}
}

func splitOf(p []float32) (top, bottom []uint16) {
	top, bottom = make([]uint16, len(p)), make([]uint16, len(p))
	SplitBF16(top, bottom, p)
	return top, bottom
}

func joinOf(top, bottom []uint16) []float32 {
	p := make([]float32, len(top))
	JoinBF16(p, top, bottom)
	return p
}

func TestSparseStepsRejectBadRows(t *testing.T) {
	p := make([]float32, 12) // a [4, 3] table
	sum := make([]float32, 12)
	row := func(rows ...int64) SparseRows {
		return SparseRows{Dim: 3, Rows: rows, Values: make([]float32, 3*len(rows))}
	}
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"out of range", func() { SGDSparse(p, row(4), SGDConfig{LR: 1}) }, "row index out of range"},
		{"negative", func() { AdagradSparse(p, sum, row(-1), AdagradConfig{Eps: 1}) }, "row index out of range"},
		{"duplicate", func() { SGDSparse(p, row(1, 1), SGDConfig{LR: 1}) }, "not ascending and unique"},
		{"unsorted", func() { AdagradSparse(p, sum, row(2, 0), AdagradConfig{Eps: 1}) }, "not ascending and unique"},
		{"ragged table", func() { SGDSparse(p[:11], row(0), SGDConfig{LR: 1}) }, "not a multiple of the row length"},
		{"values", func() {
			SGDSparse(p, SparseRows{Dim: 3, Rows: []int64{0}, Values: make([]float32, 2)}, SGDConfig{LR: 1})
		}, "one row per row index"},
		{"momentum", func() { SGDSparse(p, row(0), SGDConfig{LR: 1, Momentum: 0.9}) }, "momentum needs the dense step"},
		{"split momentum", func() {
			top, bottom := splitOf(p)
			SGDSparseSplit(top, bottom, row(0), SGDConfig{LR: 1, Momentum: 0.9})
		}, "momentum needs the dense step"},
		{"adagrad weight decay", func() { AdagradSparse(p, sum, row(0), AdagradConfig{Eps: 1, WeightDecay: 0.1}) }, "weight decay is not defined"},
		{"sum length", func() { AdagradSparse(p, sum[:9], row(0), AdagradConfig{Eps: 1}) }, "param and sum differ in length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if e, ok := r.(*Error); !ok || !strings.Contains(e.Error(), c.want) {
					t.Fatalf("panic %v, want one containing %q", r, c.want)
				}
			}()
			c.f()
		})
	}
}

// adagradSparseReference follows PyTorch 1.13's sparse Adagrad literally,
// one tensor operation at a time: state_sum.add_(values.pow(2)),
// std = sqrt(sum) + eps, param.add_(values / std, alpha=NegLR), the last
// a fused multiply-add.
func adagradSparseReference(p, s []float32, r SparseRows, c AdagradConfig) {
	for k, row := range r.Rows {
		for j := range r.Dim {
			i := int(row)*r.Dim + j
			d := r.Values[k*r.Dim+j]
			if c.Maximize {
				d = -d
			}
			s[i] += float32(d * d)
			std := float32(math.Sqrt(float64(s[i]))) + c.Eps
			p[i] = float32(math.FMA(float64(d/std), float64(c.NegLR), float64(p[i])))
		}
	}
}

// TestAdagradSparseConformance runs every level's sparse Adagrad row update
// against the reference adagradSparseSpan bit for bit (see
// checkAdagradLevels).
func TestAdagradSparseConformance(t *testing.T) {
	checkAdagradLevels(t, adagradSparseSpanFor, adagradSparseSpan, 45, true)
}
