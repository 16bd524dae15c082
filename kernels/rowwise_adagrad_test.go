package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// rowWiseAdagradReference follows dlrm's RWSAdagrad step literally, one
// tensor operation at a time on float32 values: momentum.add_(sparse of
// grad_values.pow(2).mean(1)) with the mean a float32 sum in column order
// divided by dim, std = sqrt(momentum) + eps, param.add_(grad_values / std,
// alpha=NegLR), the last a fused multiply-add.
func rowWiseAdagradReference(p, h []float32, r SparseRows, c AdagradConfig) {
	for k, row := range r.Rows {
		g := slices.Clone(r.Values[k*r.Dim : (k+1)*r.Dim])
		if c.Maximize {
			for j := range g {
				g[j] = -g[j]
			}
		}
		sq := make([]float32, len(g))
		for j, v := range g {
			sq[j] = float32(v * v) // pow(2): rounded, never fused into the sum
		}
		var sum float32
		for _, v := range sq {
			sum += v
		}
		mean := sum / float32(r.Dim)
		h[row] += mean
		std := float32(math.Sqrt(float64(h[row]))) + c.Eps
		for j, v := range g {
			i := int(row)*r.Dim + j
			p[i] = float32(math.FMA(float64(v/std), float64(c.NegLR), float64(p[i])))
		}
	}
}

// TestRowWiseAdagradSparse checks the kernel against the literal reference
// bit for bit at 1, 2 and 3 threads (tables large enough to be split), the
// split form against the FP32 form, and that untouched rows, their state
// and the guard values past both slices stay as they were.
func TestRowWiseAdagradSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 3))
	configs := []AdagradConfig{
		{NegLR: -0.1, Eps: 1e-10},
		{NegLR: -0.05, Eps: 1e-3, Maximize: true},
		{NegLR: -0.01, Eps: 1e-10}, // h starts at 0 below: √0 + eps on rows with zero gradients
	}
	for _, dim := range sparseDims {
		for _, num := range []int{1, 7, 3001} {
			sc := newSparseCase(rng, num, dim)
			if num == 7 && len(sc.rows.Rows) > 0 {
				// A zero gradient row: its mean square is 0.
				clear(sc.rows.Values[:dim])
			}
			n := num * dim
			for ci, c := range configs {
				t.Run(fmt.Sprintf("config%d/%dx%d", ci, num, dim), func(t *testing.T) {
					p, h := randTable(rng, n, -0.5), randTable(rng, num, 0.1)
					if ci == 2 {
						clear(h[:num])
					}
					wantP, wantH := slices.Clone(p), slices.Clone(h)
					rowWiseAdagradReference(wantP, wantH, sc.rows, c)
					for _, threads := range []int{1, 2, 3} {
						gotP, gotH := slices.Clone(p), slices.Clone(h)
						withThreads(threads, func() { RowWiseAdagradSparse(gotP[:n], gotH[:num], sc.rows, c) })
						if i := sameBits(gotP, wantP); i >= 0 {
							t.Fatalf("%d threads: param element %d: %v, reference %v", threads, i, gotP[i], wantP[i])
						}
						if i := sameBits(gotH, wantH); i >= 0 {
							t.Fatalf("%d threads: state of row %d: %v, reference %v", threads, i, gotH[i], wantH[i])
						}
					}
					top, bottom := splitOf(p[:n])
					splitH := slices.Clone(h)
					RowWiseAdagradSparseSplit(top, bottom, splitH[:num], sc.rows, c)
					if i := sameBits(joinOf(top, bottom), wantP[:n]); i >= 0 {
						t.Fatalf("split: param element %d differs from the FP32 step", i)
					}
					if i := sameBits(splitH, wantH); i >= 0 {
						t.Fatalf("split: state of row %d differs from the FP32 step", i)
					}
					touched := map[int64]bool{}
					for _, r := range sc.rows.Rows {
						touched[r] = true
					}
					for r := range num {
						if touched[int64(r)] {
							continue
						}
						if i := sameBits(wantP[r*dim:(r+1)*dim], p[r*dim:(r+1)*dim]); i >= 0 || wantH[r] != h[r] {
							t.Fatalf("untouched row %d changed", r)
						}
					}
				})
			}
		}
	}
}

// TestRowWiseAdagradSparseValues pins one row's update to hand-computed
// numbers: g = (3, 4), mean square 12.5, h 0.5 → 13, std √13.
func TestRowWiseAdagradSparseValues(t *testing.T) {
	p := []float32{1, 1, 5, 6} // a [2, 2] table
	h := []float32{7, 0.5}
	RowWiseAdagradSparse(p, h, SparseRows{Dim: 2, Rows: []int64{1}, Values: []float32{3, 4}}, AdagradConfig{NegLR: -0.5, Eps: 0})
	std := math.Sqrt(13)
	want := []float32{1, 1, float32(5 - 0.5*3/std), float32(6 - 0.5*4/std)}
	if h[0] != 7 || h[1] != 13 {
		t.Errorf("state %v, want [7 13]", h)
	}
	for i := range p {
		if math.Abs(float64(p[i]-want[i])) > 1e-6 {
			t.Errorf("element %d: %v, want %v", i, p[i], want[i])
		}
	}
}

func TestRowWiseAdagradSparseRejects(t *testing.T) {
	p := make([]float32, 12) // a [4, 3] table
	h := make([]float32, 4)
	row := func(rows ...int64) SparseRows {
		return SparseRows{Dim: 3, Rows: rows, Values: make([]float32, 3*len(rows))}
	}
	top, bottom := splitOf(p)
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"out of range", func() { RowWiseAdagradSparse(p, h, row(4), AdagradConfig{Eps: 1}) }, "row index out of range"},
		{"duplicate", func() { RowWiseAdagradSparse(p, h, row(1, 1), AdagradConfig{Eps: 1}) }, "not ascending and unique"},
		{"unsorted", func() { RowWiseAdagradSparse(p, h, row(2, 0), AdagradConfig{Eps: 1}) }, "not ascending and unique"},
		{"ragged table", func() { RowWiseAdagradSparse(p[:11], h, row(0), AdagradConfig{Eps: 1}) }, "not a multiple of the row length"},
		{"state length", func() { RowWiseAdagradSparse(p, h[:3], row(0), AdagradConfig{Eps: 1}) }, "one value per table row"},
		{"element-wise state", func() { RowWiseAdagradSparse(p, make([]float32, 12), row(0), AdagradConfig{Eps: 1}) }, "one value per table row"},
		{"weight decay", func() { RowWiseAdagradSparse(p, h, row(0), AdagradConfig{Eps: 1, WeightDecay: 0.1}) }, "weight decay is not defined"},
		{"split bottom", func() { RowWiseAdagradSparseSplit(top, bottom[:9], h, row(0), AdagradConfig{Eps: 1}) }, "top and bottom differ in length"},
		{"split state", func() { RowWiseAdagradSparseSplit(top, bottom, h[:2], row(0), AdagradConfig{Eps: 1}) }, "one value per table row"},
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
