package autograd_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// dyadic returns a [rows, dim] tensor of small multiples of 1/8, whose sums
// are exact in float32 whatever the order, so sparse gradients (summed in
// float32) and dense ones (summed in float64) can be compared exactly.
func dyadic(g *autograd.Generator, rows, dim int) *autograd.Tensor {
	v := make([]float32, rows*dim)
	for i := range v {
		v[i] = float32(g.IntN(33)-16) / 8
	}
	return autograd.FromFloat32(v, rows, dim)
}

func idx(v ...int64) *autograd.Tensor { return autograd.FromInt64(v, len(v)) }

// TestSparseLookupsMatchDense: every sparse lookup's gradient, densified,
// is the dense lookup's gradient, and names exactly the rows that got one.
func TestSparseLookupsMatchDense(t *testing.T) {
	const num, dim = 9, 5
	g := autograd.NewGenerator(4)
	in := idx(3, 1, 3, 8, 0, 3, 1)
	in2 := autograd.FromInt64(in.Int64s(), 1, 7)
	offsets := idx(0, 2, 2, 3) // bag 1 is empty; sizes are powers of 2 for exact means
	psw := autograd.Reshape(dyadic(g, 1, 7), 7)
	cases := []struct {
		name          string
		dense, sparse func(w *autograd.Tensor) *autograd.Tensor
		rows          []int64
	}{
		{"Embedding", func(w *autograd.Tensor) *autograd.Tensor { return autograd.Embedding(in, w) },
			func(w *autograd.Tensor) *autograd.Tensor { return autograd.EmbeddingSparse(in, w) }, []int64{0, 1, 3, 8}},
		{"padding", func(w *autograd.Tensor) *autograd.Tensor { return autograd.EmbeddingPadding(in, w, -6) },
			func(w *autograd.Tensor) *autograd.Tensor { return autograd.EmbeddingSparsePadding(in, w, -6) }, []int64{0, 1, 8}},
		{"2-D indices", func(w *autograd.Tensor) *autograd.Tensor { return autograd.Embedding(in2, w) },
			func(w *autograd.Tensor) *autograd.Tensor { return autograd.EmbeddingSparse(in2, w) }, []int64{0, 1, 3, 8}},
	}
	for _, mode := range []autograd.EmbeddingBagMode{autograd.BagSum, autograd.BagMean} {
		cases = append(cases, struct {
			name          string
			dense, sparse func(w *autograd.Tensor) *autograd.Tensor
			rows          []int64
		}{"bag " + mode.String(),
			func(w *autograd.Tensor) *autograd.Tensor { return autograd.EmbeddingBag(in, offsets, w, mode, nil) },
			func(w *autograd.Tensor) *autograd.Tensor {
				return autograd.EmbeddingBagSparse(in, offsets, w, mode, nil)
			}, nil})
	}
	cases = append(cases, struct {
		name          string
		dense, sparse func(w *autograd.Tensor) *autograd.Tensor
		rows          []int64
	}{"bag weighted",
		func(w *autograd.Tensor) *autograd.Tensor {
			return autograd.EmbeddingBag(in, offsets, w, autograd.BagSum, psw)
		},
		func(w *autograd.Tensor) *autograd.Tensor {
			return autograd.EmbeddingBagSparse(in, offsets, w, autograd.BagSum, psw)
		}, nil})
	table := embDistinct(g, num, dim)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wd, ws := embLeaf(table), embLeaf(table)
			yd, ys := c.dense(wd), c.sparse(ws)
			if !slices.Equal(yd.Float32s(), ys.Float32s()) {
				t.Fatalf("forward differs: %v, dense %v", ys, yd)
			}
			dy := autograd.Reshape(dyadic(g, yd.Numel()/dim, dim), yd.Shape()...)
			yd.Backward(dy)
			ys.Backward(dy)
			sg := ws.SparseGrad()
			if sg == nil || ws.Grad() != nil || wd.SparseGrad() != nil {
				t.Fatalf("sparse lookup: SparseGrad %v, Grad %v; dense lookup: SparseGrad %v", sg, ws.Grad(), wd.SparseGrad())
			}
			if got, want := sg.Dense().Float32s(), wd.Grad().Float32s(); !slices.Equal(got, want) {
				t.Errorf("densified sparse gradient\n%v\nwant the dense one\n%v", got, want)
			}
			if !slices.IsSorted(sg.Indices) || len(slices.Compact(slices.Clone(sg.Indices))) != len(sg.Indices) {
				t.Errorf("indices %v are not sorted and unique", sg.Indices)
			}
			if c.rows != nil && !slices.Equal(sg.Indices, c.rows) {
				t.Errorf("indices %v, want %v", sg.Indices, c.rows)
			}
			if got := sg.Values.Shape(); !slices.Equal(got, []int{len(sg.Indices), dim}) {
				t.Errorf("values shape %v for %d rows", got, len(sg.Indices))
			}
		})
	}
}

// TestSparseGradAccumulates: gradients of several Backward calls are
// concatenated and coalesced when read, each row summed in lookup order;
// a gradient already read is not changed by later ones; ZeroGrad and
// SetGrad drop it.
func TestSparseGradAccumulates(t *testing.T) {
	w := autograd.Zeros(4, 2).SetRequiresGrad(true)
	autograd.EmbeddingSparse(idx(2, 0), w).Backward(autograd.FromFloat32([]float32{1e8, 1e8, 1, 2}, 2, 2))
	first := w.SparseGrad()
	if !slices.Equal(first.Indices, []int64{0, 2}) || !slices.Equal(first.Values.Float32s(), []float32{1, 2, 1e8, 1e8}) {
		t.Fatalf("first gradient: %v %v", first.Indices, first.Values)
	}
	autograd.EmbeddingSparse(idx(2, 2), w).Backward(autograd.FromFloat32([]float32{1, 1, -1e8, -1e8}, 2, 2))
	sg := w.SparseGrad()
	// Row 2: (1e8 + 1) − 1e8 in float32 is 0, as PyTorch's coalesce gives.
	if !slices.Equal(sg.Indices, []int64{0, 2}) || !slices.Equal(sg.Values.Float32s(), []float32{1, 2, 0, 0}) {
		t.Errorf("accumulated gradient: %v %v", sg.Indices, sg.Values)
	}
	if !slices.Equal(first.Values.Float32s(), []float32{1, 2, 1e8, 1e8}) {
		t.Errorf("a later Backward changed an earlier SparseGrad: %v", first.Values)
	}
	if w.SparseGrad() != sg {
		t.Error("reading the gradient twice coalesced it twice")
	}
	w.ZeroGrad()
	if w.SparseGrad() != nil {
		t.Error("ZeroGrad kept the sparse gradient")
	}
	w.SetSparseGrad(sg)
	w.SetGrad(autograd.Zeros(4, 2))
	if w.SparseGrad() != nil || w.Grad() == nil {
		t.Error("SetGrad did not replace the sparse gradient with the dense one")
	}
	w.SetSparseGrad(sg)
	if w.SparseGrad() != sg || w.Grad() != nil {
		t.Error("SetSparseGrad did not replace the dense gradient")
	}
}

// TestSparseLookupOfNonLeaf: a weight made by another op gets the dense
// gradient, which flows on to the leaf.
func TestSparseLookupOfNonLeaf(t *testing.T) {
	w := autograd.Ones(3, 2).SetRequiresGrad(true)
	autograd.EmbeddingSparse(idx(1, 1), autograd.MulScalar(w, 2)).Backward(autograd.Ones(2, 2))
	if w.SparseGrad() != nil || !slices.Equal(w.Grad().Float32s(), []float32{0, 0, 4, 4, 0, 0}) {
		t.Errorf("leaf behind the op: Grad %v, SparseGrad %v", w.Grad(), w.SparseGrad())
	}
}

func TestSparseGradErrors(t *testing.T) {
	lookup := func(w *autograd.Tensor) { autograd.EmbeddingSparse(idx(1), w).Backward(autograd.Ones(1, 2)) }
	dense := func(w *autograd.Tensor) { autograd.Embedding(idx(1), w).Backward(autograd.Ones(1, 2)) }
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"dense after sparse", func() { w := autograd.Zeros(3, 2).SetRequiresGrad(true); lookup(w); dense(w) },
			"Backward: tensor [3 2] has a sparse gradient (from a sparse embedding lookup); it cannot also receive a dense one"},
		{"sparse after dense", func() { w := autograd.Zeros(3, 2).SetRequiresGrad(true); dense(w); lookup(w) },
			"EmbeddingSparseBackward: tensor [3 2] already has a dense gradient"},
		{"bag max", func() {
			autograd.EmbeddingBagSparse(idx(1), idx(0), autograd.Zeros(3, 2).SetRequiresGrad(true), autograd.BagMax, nil)
		}, "EmbeddingBagSparse: mode max does not support sparse gradients"},
		{"index out of range", func() { autograd.NewSparseGrad(3, []int64{3}, autograd.Zeros(1, 2)) }, "index 3 (at position 0) is out of range for a tensor of 3 rows"},
		{"values rows", func() { autograd.NewSparseGrad(3, []int64{0, 1}, autograd.Zeros(1, 2)) }, "values have shape [1 2], want [2, dim]"},
		{"values dtype", func() { autograd.NewSparseGrad(3, []int64{0}, autograd.FromInt64([]int64{1, 2}, 1, 2)) }, "values has dtype int64"},
		{"negative rows", func() { autograd.NewSparseGrad(-1, nil, autograd.Zeros(0, 2)) }, "NewSparseGrad: shape [-1 2]: negative dimension -1"},
		{"dense shape overflowing", func() { autograd.NewSparseGrad(1<<62, nil, autograd.Zeros(0, 1<<10)) },
			"NewSparseGrad: shape [4611686018427387904 1024]: element count overflows"},
		{"set shape", func() {
			autograd.Zeros(4, 2).SetSparseGrad(autograd.NewSparseGrad(3, []int64{0}, autograd.Zeros(1, 2)))
		}, "SetSparseGrad: sparse gradient of shape [3 2] does not match tensor [4 2]"},
		{"set dtype", func() {
			autograd.FromInt64(make([]int64, 6), 3, 2).SetSparseGrad(autograd.NewSparseGrad(3, []int64{0}, autograd.Zeros(1, 2)))
		}, "needs a float32 or bfloat16 tensor, not int64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(c.f)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestNewSparseGradCoalesces: repeated indices in any order become sorted
// unique rows, each the float32 sum of its rows in the order given.
func TestNewSparseGradCoalesces(t *testing.T) {
	vals := autograd.FromFloat32([]float32{1, 1e8, 2, 3, 5, -1e8}, 6, 1)
	sg := autograd.NewSparseGrad(5, []int64{4, 1, 0, 1, 4, 1}, vals)
	want := []string{"[0 1 4]", "[2 0 6]"} // row 1: (1e8 + 3) − 1e8 in float32
	if got := []string{fmt.Sprint(sg.Indices), fmt.Sprint(sg.Values.Float32s())}; !slices.Equal(got, want) {
		t.Errorf("coalesced to %v, want %v", got, want)
	}
	if got := sg.Dense().Float32s(); !slices.Equal(got, []float32{2, 0, 0, 0, 6}) {
		t.Errorf("Dense: %v", got)
	}
}

// TestSparseUpdateTakesEachLookup: the gradients a sparse update takes,
// in memory that later lookups reuse, carry each lookup's own sums.
func TestSparseUpdateTakesEachLookup(t *testing.T) {
	w := embLeaf(autograd.Zeros(10, 3))
	var got [][]float32
	w.SetSparseUpdate(func(g *autograd.SparseGrad) {
		got = append(got, append([]float32(nil), g.Values.Float32s()...))
	})
	for k, idx := range [][]int64{{4, 1, 4}, {2, 7}} {
		y := autograd.EmbeddingSparse(autograd.FromInt64(idx), w)
		autograd.Sum(autograd.Mul(y, autograd.Scalar(float32(k+1))), nil, false).Backward()
	}
	want := [][]float32{{1, 1, 1, 2, 2, 2}, {2, 2, 2, 2, 2, 2}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gradients %v, want %v", got, want)
	}
}

// TestNewSparseGradHugeTable coalesces for a table too tall for Kiln's
// packed sort keys (rows beyond 2⁴⁰), which sorts positions instead: the
// same sums in the same order.
func TestNewSparseGradHugeTable(t *testing.T) {
	vals := autograd.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 4, 2)
	for _, num := range []int{1 << 20, 1 << 41} {
		g := autograd.NewSparseGrad(num, []int64{9, 1<<19 + 3, 9, 0}, vals)
		if got := fmt.Sprint(g.Indices, g.Values.Float32s()); got != "[0 9 524291] [7 8 6 8 3 4]" {
			t.Errorf("num %d: %s", num, got)
		}
	}
}

// TestNewSparseGradLong coalesces lookups long enough for the radix sort,
// with few duplicates (uniform rows) and many (skewed rows), on tables of
// one row to 2³⁹ rows: each row is the sum of its values in the order
// given, checked against sums made one position at a time.
func TestNewSparseGradLong(t *testing.T) {
	g := autograd.NewGenerator(5)
	for _, n := range []int{255, 256, 2049} {
		for _, num := range []int{1, 3, 100_000, 1 << 22, 1 << 39} {
			for _, skew := range []bool{false, true} {
				indices := make([]int64, n)
				for i := range indices {
					r := int64(g.IntN(min(num, 1<<30)))
					if skew { // a few hot rows: the cube of a uniform draw, scaled
						u := g.Float64()
						r = int64(u * u * u * float64(min(num, 50)))
					}
					indices[i] = r * int64(num/min(num, 1<<30))
				}
				const dim = 3
				vals := make([]float32, n*dim)
				for i := range vals {
					vals[i] = float32(g.Float64()*2 - 1)
				}
				sums := map[int64][]float32{}
				for i, r := range indices {
					if s, ok := sums[r]; ok {
						for j := range dim {
							s[j] += vals[i*dim+j]
						}
					} else {
						sums[r] = slices.Clone(vals[i*dim : (i+1)*dim])
					}
				}
				rows := slices.Sorted(maps.Keys(sums))
				var want []float32
				for _, r := range rows {
					want = append(want, sums[r]...)
				}
				sg := autograd.NewSparseGrad(num, indices, autograd.FromFloat32(vals, n, dim))
				if !slices.Equal(sg.Indices, rows) || !slices.Equal(sg.Values.Float32s(), want) {
					t.Errorf("n %d, %d rows, skewed %v: coalesced to %d rows, want %d, or the sums differ", n, num, skew, len(sg.Indices), len(rows))
				}
			}
		}
	}
}

// TestSparseGradLookupsSumInOrder: two lookups' gradients, read only after
// both, sum each row in lookup order, as one lookup of all the positions
// does: row 1 is (1 + 1e8) − 1e8, 0 in float32, where 1 + (1e8 − 1e8)
// would be 1.
func TestSparseGradLookupsSumInOrder(t *testing.T) {
	w := autograd.Zeros(3, 1).SetRequiresGrad(true)
	autograd.EmbeddingSparse(idx(1, 2, 1), w).Backward(autograd.FromFloat32([]float32{1, 5, 1e8}, 3, 1))
	autograd.EmbeddingSparse(idx(1), w).Backward(autograd.FromFloat32([]float32{-1e8}, 1, 1))
	one := autograd.NewSparseGrad(3, []int64{1, 2, 1, 1}, autograd.FromFloat32([]float32{1, 5, 1e8, -1e8}, 4, 1))
	sg := w.SparseGrad()
	if got, want := fmt.Sprint(sg.Indices, sg.Values.Float32s()), fmt.Sprint(one.Indices, one.Values.Float32s()); got != want || want != "[1 2] [0 5]" {
		t.Errorf("two lookups coalesced to %s, one lookup to %s, want [1 2] [0 5]", got, want)
	}
}
