package autograd_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

// mergedLookup is the operands of a merged lookup over tables of the given
// row counts and d columns: B bags per table of 0 to 4 random rows (with
// repeats, and every third bag of table 1 empty) and the B+1 offsets of
// include_last_offset.
type mergedLookup struct {
	rows    []int
	d, b    int
	indices []*autograd.Tensor
	offsets []*autograd.Tensor // B+1 each
}

func newMergedLookup(g *autograd.Generator, rows []int, d, b int) mergedLookup {
	m := mergedLookup{rows: rows, d: d, b: b}
	for t, n := range rows {
		sizes := autograd.RandInt(g, 0, 5, b).Int64s()
		off := make([]int64, b+1)
		for i, s := range sizes {
			if t == 1 && i%3 == 0 {
				s = 0
			}
			off[i+1] = off[i] + s
		}
		m.offsets = append(m.offsets, autograd.FromInt64(off))
		m.indices = append(m.indices, autograd.RandInt(g, 0, int64(n), int(off[b])))
	}
	return m
}

// starts returns table t's offsets without the last, one per bag.
func (m mergedLookup) starts(t int) *autograd.Tensor {
	return autograd.FromInt64(slices.Clone(m.offsets[t].Int64s()[:m.b]))
}

// offsetsFor returns every table's offsets in the layout includeLast asks.
func (m mergedLookup) offsetsFor(includeLast bool) []*autograd.Tensor {
	if includeLast {
		return m.offsets
	}
	out := make([]*autograd.Tensor, len(m.rows))
	for t := range out {
		out[t] = m.starts(t)
	}
	return out
}

// mergedLoss is Σ_t sum(outs[t] * w[t]), one scalar over every output.
func mergedLoss(outs, w []*autograd.Tensor) *autograd.Tensor {
	var loss *autograd.Tensor
	for t, y := range outs {
		s := autograd.Sum(autograd.Mul(y, w[t]), nil, false)
		if loss == nil {
			loss = s
		} else {
			loss = autograd.Add(loss, s)
		}
	}
	return loss
}

// sameBitsT fails unless got and want hold the same bits.
func sameBitsT(t *testing.T, what string, got, want *autograd.Tensor) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	if fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) || got.DType() != want.DType() {
		t.Fatalf("%s: %v %v, want %v %v", what, got.DType(), got.Shape(), want.DType(), want.Shape())
	}
	g, w := got.Values(), want.Values()
	for i := range w {
		if math.Float64bits(g[i]) != math.Float64bits(w[i]) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, g[i], w[i])
		}
	}
}

// TestMergedEmbeddingBagMatchesEmbeddingBag checks that the merged lookup
// is T separate EmbeddingBag (or EmbeddingBagSparse) calls, bit for bit,
// forward and backward. A bfloat16 table's float32 output is EmbeddingBag's
// on the widened table, and EmbeddingBag's bfloat16 output rounded; its
// gradients are those of EmbeddingBag on the bfloat16 table. The output
// weights are bfloat16 values, so the separate bfloat16 lookups receive
// the same gradient.
func TestMergedEmbeddingBagMatchesEmbeddingBag(t *testing.T) {
	g := autograd.NewGenerator(41)
	m := newMergedLookup(g, []int{3, 11, 40, 7}, 5, 9)
	for _, dt := range []string{"float32", "bfloat16", "mixed"} {
		for _, mode := range []autograd.EmbeddingBagMode{autograd.BagSum, autograd.BagMean} {
			for _, includeLast := range []bool{false, true} {
				for _, sparse := range []bool{false, true} {
					name := fmt.Sprintf("%s/%v/last=%v/sparse=%v", dt, mode, includeLast, sparse)
					t.Run(name, func(t *testing.T) {
						var tables, refs, w []*autograd.Tensor
						for k, n := range m.rows {
							v := autograd.Randn(g, n, m.d)
							if dt == "bfloat16" || (dt == "mixed" && k%2 == 1) {
								v = autograd.Cast(v, autograd.BFloat16)
							}
							tables = append(tables, embLeaf(v))
							refs = append(refs, embLeaf(v))
							w = append(w, autograd.Cast(autograd.Cast(autograd.Randn(g, m.b, m.d), autograd.BFloat16), autograd.Float32))
						}
						outs := autograd.MergedEmbeddingBag(tables, m.indices, m.offsetsFor(includeLast), mode, includeLast, sparse)
						mergedLoss(outs, w).Backward()
						for k, ref := range refs {
							lookup := autograd.EmbeddingBag
							if sparse {
								lookup = autograd.EmbeddingBagSparse
							}
							want := lookup(m.indices[k], m.starts(k), ref, mode, nil)
							wk := w[k]
							if ref.DType() == autograd.BFloat16 {
								sameBitsT(t, fmt.Sprintf("table %d rounded output", k), autograd.Cast(outs[k], autograd.BFloat16), want)
								wide := autograd.Cast(ref, autograd.Float32)
								want = autograd.EmbeddingBag(m.indices[k], m.starts(k), wide, mode, nil)
								sameBitsT(t, fmt.Sprintf("table %d output", k), outs[k], want)
								wk = autograd.Cast(wk, autograd.BFloat16)
								want = lookup(m.indices[k], m.starts(k), ref, mode, nil)
							} else {
								sameBitsT(t, fmt.Sprintf("table %d output", k), outs[k], want)
							}
							autograd.Sum(autograd.Mul(want, wk), nil, false).Backward()
							if !sparse {
								sameBitsT(t, fmt.Sprintf("table %d gradient", k), tables[k].Grad(), ref.Grad())
								continue
							}
							got, exp := tables[k].SparseGrad(), ref.SparseGrad()
							if tables[k].Grad() != nil || got == nil || !slices.Equal(got.Indices, exp.Indices) {
								t.Fatalf("table %d: sparse gradient %v (dense %v), want rows %v", k, got, tables[k].Grad(), exp.Indices)
							}
							sameBitsT(t, fmt.Sprintf("table %d sparse gradient", k), got.Values, exp.Values)
						}
					})
				}
			}
		}
	}
}

// TestMergedEmbeddingBagFixed checks the [B, T, L] layout against the
// offsets layout with bags of L.
func TestMergedEmbeddingBagFixed(t *testing.T) {
	g := autograd.NewGenerator(43)
	rows := []int{4, 9, 30}
	const b, l, d = 6, 3, 4
	idx := autograd.Empty(autograd.Int64, b, len(rows), l)
	iv := idx.Int64s()
	var tables, refs, flat, offs []*autograd.Tensor
	for k, n := range rows {
		v := autograd.Randn(g, n, d)
		tables, refs = append(tables, embLeaf(v)), append(refs, embLeaf(v))
		f := autograd.RandInt(g, 0, int64(n), b*l)
		off := make([]int64, b)
		for s := range b {
			copy(iv[(s*len(rows)+k)*l:], f.Int64s()[s*l:(s+1)*l])
			off[s] = int64(s * l)
		}
		flat, offs = append(flat, f), append(offs, autograd.FromInt64(off))
	}
	for _, sparse := range []bool{false, true} {
		got := autograd.MergedEmbeddingBagFixed(tables, idx, autograd.BagMean, sparse)
		want := autograd.MergedEmbeddingBag(refs, flat, offs, autograd.BagMean, false, sparse)
		w := []*autograd.Tensor{autograd.Randn(g, b, d), autograd.Randn(g, b, d), autograd.Randn(g, b, d)}
		mergedLoss(got, w).Backward()
		mergedLoss(want, w).Backward()
		for k := range rows {
			sameBitsT(t, fmt.Sprintf("sparse=%v output %d", sparse, k), got[k], want[k])
			if sparse {
				sameBitsT(t, fmt.Sprintf("sparse gradient %d", k), tables[k].SparseGrad().Dense(), refs[k].SparseGrad().Dense())
			} else {
				sameBitsT(t, fmt.Sprintf("gradient %d", k), tables[k].Grad(), refs[k].Grad())
			}
			tables[k].ZeroGrad()
			refs[k].ZeroGrad()
		}
	}
}

func TestMergedEmbeddingBagGradCheck(t *testing.T) {
	g := autograd.NewGenerator(47)
	m := newMergedLookup(g, []int{5, 8, 6}, 3, 7)
	for _, mode := range []autograd.EmbeddingBagMode{autograd.BagSum, autograd.BagMean} {
		for _, includeLast := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/last=%v", mode, includeLast), func(t *testing.T) {
				ins := []*autograd.Tensor{embLeaf(autograd.Randn(g, 5, 3)), embLeaf(autograd.Randn(g, 8, 3)), embLeaf(autograd.Randn(g, 6, 3))}
				f := func(xs ...*autograd.Tensor) *autograd.Tensor {
					return autograd.Cat(autograd.MergedEmbeddingBag(xs, m.indices, m.offsetsFor(includeLast), mode, includeLast, false), 1)
				}
				if err := autograd.GradCheck(f, ins, autograd.GradCheckOptions{}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestMergedEmbeddingBagGradientsGoWhereAsked: a table that does not
// require a gradient gets none, even with its output in the loss, nor does
// one whose output the loss does not use, and a retained graph's second Backward sees only its own
// output gradients.
func TestMergedEmbeddingBagGradientsGoWhereAsked(t *testing.T) {
	g := autograd.NewGenerator(53)
	m := newMergedLookup(g, []int{4, 6, 5}, 2, 4)
	frozen := autograd.Randn(g, 4, 2)
	tables := []*autograd.Tensor{frozen, embLeaf(autograd.Randn(g, 6, 2)), embLeaf(autograd.Randn(g, 5, 2))}
	outs := autograd.MergedEmbeddingBag(tables, m.indices, m.offsets, autograd.BagSum, true, false)
	mergedLoss(outs[:2], []*autograd.Tensor{autograd.Ones(4, 2), autograd.Ones(4, 2)}).BackwardRetainGraph()
	if frozen.Grad() != nil || tables[2].Grad() != nil || tables[1].Grad() == nil {
		t.Fatalf("gradients %v %v %v, want only table 1's", frozen.Grad(), tables[1].Grad(), tables[2].Grad())
	}
	g1 := slices.Clone(tables[1].Grad().Float32s())
	autograd.Sum(outs[2], nil, false).Backward()
	if tables[2].Grad() == nil || !slices.Equal(tables[1].Grad().Float32s(), g1) {
		t.Fatalf("second backward: table 1 gradient %v (was %v), table 2 %v", tables[1].Grad(), g1, tables[2].Grad())
	}
	// Indices from a NoGrad computation put the lookup in it: nothing is
	// recorded.
	ni := slices.Clone(m.indices)
	ni[0] = autograd.NoGrad(ni[0])
	y := autograd.MergedEmbeddingBag(tables, ni, m.offsets, autograd.BagMean, true, true)
	if y[1].RequiresGrad() {
		t.Errorf("NoGrad output requires grad")
	}
}

func TestMergedEmbeddingBagZeroBatch(t *testing.T) {
	tables := []*autograd.Tensor{embLeaf(autograd.Ones(3, 2)), embLeaf(autograd.Cast(autograd.Ones(5, 2), autograd.BFloat16))}
	none := autograd.FromInt64([]int64{})
	for _, c := range []struct {
		name string
		outs []*autograd.Tensor
	}{
		{"offsets", autograd.MergedEmbeddingBag(tables, []*autograd.Tensor{none, none}, []*autograd.Tensor{none, none}, autograd.BagSum, false, true)},
		{"last offset", autograd.MergedEmbeddingBag(tables, []*autograd.Tensor{none, none}, []*autograd.Tensor{autograd.FromInt64([]int64{0}), autograd.FromInt64([]int64{0})}, autograd.BagMean, true, false)},
		{"fixed", autograd.MergedEmbeddingBagFixed(tables, autograd.Empty(autograd.Int64, 0, 2, 3), autograd.BagSum, false)},
	} {
		for k, y := range c.outs {
			if fmt.Sprint(y.Shape()) != "[0 2]" || y.DType() != autograd.Float32 {
				t.Errorf("%s: output %d is %v %v, want float32 [0 2]", c.name, k, y.DType(), y.Shape())
			}
		}
		mergedLoss(c.outs, []*autograd.Tensor{autograd.Zeros(0, 2), autograd.Zeros(0, 2)}).Backward()
	}
}

func TestMergedEmbeddingBagGolden(t *testing.T) {
	set := golden.Load(t, "merged_embedding.safetensors")
	const tables = 4
	get := func(name string, k int) *autograd.Tensor { return set.Get(t, fmt.Sprintf("%s.%d", name, k)) }
	var gout []*autograd.Tensor
	for k := range tables {
		gout = append(gout, get("gout", k))
	}
	for _, mode := range []autograd.EmbeddingBagMode{autograd.BagSum, autograd.BagMean} {
		for _, layout := range []string{"offsets", "last offset", "fixed"} {
			for _, sparse := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%s/sparse=%v", mode, layout, sparse), func(t *testing.T) {
					var w, idx, off []*autograd.Tensor
					for k := range tables {
						w = append(w, embLeaf(get("W", k)))
						o := get("offsets", k)
						if layout == "offsets" {
							o = autograd.FromInt64(slices.Clone(o.Int64s()[:o.Numel()-1]))
						}
						idx, off = append(idx, get("idx", k)), append(off, o)
					}
					c := mode.String()
					var outs []*autograd.Tensor
					if layout == "fixed" {
						c = "fixed_" + c
						outs = autograd.MergedEmbeddingBagFixed(w, set.Get(t, "fixed.idx"), mode, sparse)
					} else {
						outs = autograd.MergedEmbeddingBag(w, idx, off, mode, layout == "last offset", sparse)
					}
					mergedLoss(outs, gout).Backward()
					for k := range tables {
						golden.AssertClose(t, fmt.Sprintf("out %d", k), outs[k], get(c+".out", k), mergedGoldenRTol)
						grad := w[k].Grad()
						if sparse {
							grad = w[k].SparseGrad().Dense()
						}
						golden.AssertClose(t, fmt.Sprintf("grad %d", k), grad, get(c+".grad", k), mergedGoldenRTol)
					}
				})
			}
		}
	}
}

// mergedGoldenRTol is the tolerance against nn.EmbeddingBag, which sums
// in float32 in its own order: Kiln sums bags and dense gradient rows in
// float64 and rounds once, and a sparse gradient's repeated rows in
// float32 in index order. Outputs agree to ~1e-6 relative. A gradient row
// that many bags add to can cancel to far below its terms, leaving ~1e-7
// of the largest gradient as error, which golden.Close's scale term
// allows; 1e-6 would be too tight for those, 1e-5 leaves a margin.
const mergedGoldenRTol = 1e-5

func TestMergedEmbeddingBagBadInputs(t *testing.T) {
	w := []*autograd.Tensor{autograd.Zeros(5, 3), autograd.Zeros(7, 3)}
	i64 := func(v ...int64) *autograd.Tensor { return autograd.FromInt64(v) }
	idx := []*autograd.Tensor{i64(0, 4, 1), i64(6, 6)}
	off := []*autograd.Tensor{i64(0, 2), i64(0, 1)}
	bagged := func(tables, indices, offsets []*autograd.Tensor, includeLast bool) func() {
		return func() { autograd.MergedEmbeddingBag(tables, indices, offsets, autograd.BagSum, includeLast, false) }
	}
	fixed := func(tables []*autograd.Tensor, indices *autograd.Tensor) func() {
		return func() { autograd.MergedEmbeddingBagFixed(tables, indices, autograd.BagMean, true) }
	}
	cases := []struct {
		name string
		f    func()
		kind error
		want string
	}{
		{"no tables", bagged(nil, nil, nil, false), autograd.ErrArgument, "MergedEmbeddingBag: no tables"},
		{"nil table", bagged([]*autograd.Tensor{w[0], nil}, idx, off, false), autograd.ErrArgument, "table 1 is nil"},
		{"table dtype", bagged([]*autograd.Tensor{w[0], autograd.Empty(autograd.Int64, 7, 3)}, idx, off, false), autograd.ErrDType, "table 1 has dtype int64; MergedEmbeddingBag supports float32 and bfloat16"},
		{"table rank", bagged([]*autograd.Tensor{autograd.Zeros(15)}, idx[:1], off[:1], false), autograd.ErrShape, "table 0 must be 2-D [rows, dim], got shape [15]"},
		{"dim differs", bagged([]*autograd.Tensor{w[0], autograd.Zeros(7, 4)}, idx, off, false), autograd.ErrShape, "table 1 has dimension 4 (shape [7 4]) but table 0 has 3"},
		{"mode max", func() { autograd.MergedEmbeddingBag(w, idx, off, autograd.BagMax, false, false) }, autograd.ErrArgument, "mode max is not supported; want BagSum or BagMean"},
		{"index counts", bagged(w, idx[:1], off, false), autograd.ErrShape, "2 tables need 2 index and offset tensors, got 1 indices and 2 offsets"},
		{"nil indices", bagged(w, []*autograd.Tensor{idx[0], nil}, off, false), autograd.ErrArgument, "table 1: indices is nil"},
		{"int32 indices", bagged(w, []*autograd.Tensor{autograd.FromInt32([]int32{0}), idx[1]}, off, false), autograd.ErrDType, "table 0: indices have dtype int32; MergedEmbeddingBag needs int64 indices"},
		{"float offsets", bagged(w, idx, []*autograd.Tensor{off[0], autograd.Zeros(2)}, false), autograd.ErrDType, "table 1: offsets have dtype float32"},
		{"2-D indices", bagged(w, []*autograd.Tensor{autograd.FromInt64([]int64{0, 1}, 1, 2), idx[1]}, off, false), autograd.ErrShape, "table 0: indices must be 1-D, got shape [1 2]"},
		{"index too big", bagged(w, []*autograd.Tensor{idx[0], i64(6, 7)}, off, false), autograd.ErrIndex, "table 1: index 7 (bag 1, position 1 of the indices) is out of range for a table of 7 rows"},
		{"negative index", bagged(w, []*autograd.Tensor{i64(0, -1, 1), idx[1]}, off, false), autograd.ErrIndex, "table 0: index -1 (bag 0, position 1 of the indices) is out of range for a table of 5 rows"},
		{"first offset", bagged(w, idx, []*autograd.Tensor{off[0], i64(1, 1)}, false), autograd.ErrArgument, "table 1: offsets[0] must be 0 (the first bag starts at the first index), got 1"},
		{"decreasing", bagged(w, idx, []*autograd.Tensor{i64(0, 2, 1), i64(0, 1, 2)}, false), autograd.ErrShape, "table 0: offsets must be non-decreasing, got offsets[2] = 1 after offsets[1] = 2"},
		{"beyond", bagged(w, idx, []*autograd.Tensor{off[0], i64(0, 3)}, false), autograd.ErrShape, "table 1: offsets[1] = 3 (the start of bag 1) is beyond the 2 indices"},
		{"empty offsets", bagged(w, idx, []*autograd.Tensor{off[0], i64()}, false), autograd.ErrShape, "table 1: offsets are empty but indices [2] hold 2 indices"},
		{"batch differs", bagged(w, idx, []*autograd.Tensor{off[0], i64(0, 1, 1)}, false), autograd.ErrShape, "table 1 has 3 bags (offsets [3]) but table 0 has 2"},
		{"last offset short", bagged(w, idx, []*autograd.Tensor{i64(0, 2, 3), i64(0, 1)}, true), autograd.ErrShape, "table 1: the last offset, offsets[1] = 1, must equal the number of indices 2 with includeLastOffset"},
		{"last offset missing", bagged(w, idx, []*autograd.Tensor{i64(0, 2, 3), i64()}, true), autograd.ErrShape, "table 1: offsets are empty; with includeLastOffset"},
		{"last offset beyond", bagged(w, idx, []*autograd.Tensor{i64(0, 4, 3), i64(0, 1, 2)}, true), autograd.ErrShape, "table 0: offsets[1] = 4 (the start of bag 1) is beyond the 3 indices"},
		{"fixed nil", fixed(w, nil), autograd.ErrArgument, "MergedEmbeddingBagFixed: indices is nil"},
		{"fixed dtype", fixed(w, autograd.Zeros(2, 2, 1)), autograd.ErrDType, "indices have dtype float32; MergedEmbeddingBagFixed needs int64 indices"},
		{"fixed tables", fixed(w, autograd.Empty(autograd.Int64, 2, 3, 1)), autograd.ErrShape, "indices must be [batch, 2 tables, bag size], got shape [2 3 1]"},
		{"fixed index", fixed(w, autograd.FromInt64([]int64{0, 1, 2, 3, 4, 5, 6, 7}, 2, 2, 2)), autograd.ErrIndex, "table 0: index 5 (sample 1, position 1 of its bag) is out of range for a table of 5 rows"},
	}
	for _, c := range cases {
		checkFails(t, c.name, c.f, c.kind, c.want)
	}
}

// checkFails runs f as subtest name and fails unless it panics with an
// *autograd.Error of kind whose message contains want.
func checkFails(t *testing.T, name string, f func(), kind error, want string) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		err := autograd.Try(f)
		var e *autograd.Error
		if !errors.Is(err, kind) || !errors.As(err, &e) || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %v containing %q", err, kind, want)
		}
	})
}

// Two tables of different sizes, three samples: one bag per sample in
// each, the middle bag of the first table empty.
func ExampleMergedEmbeddingBag() {
	user := autograd.FromFloat32([]float32{1, 10, 2, 20, 3, 30}, 3, 2).SetRequiresGrad(true)
	item := autograd.FromFloat32([]float32{-1, 1, 5, 5}, 2, 2).SetRequiresGrad(true)
	indices := []*autograd.Tensor{autograd.FromInt64([]int64{0, 2, 1}), autograd.FromInt64([]int64{1, 0, 1, 1})}
	offsets := []*autograd.Tensor{autograd.FromInt64([]int64{0, 2, 2}), autograd.FromInt64([]int64{0, 1, 2})}
	outs := autograd.MergedEmbeddingBag([]*autograd.Tensor{user, item}, indices, offsets, autograd.BagMean, false, true)
	fmt.Println(outs[0].Values(), outs[1].Values())
	autograd.Sum(autograd.Add(outs[0], outs[1]), nil, false).Backward()
	g := item.SparseGrad()
	fmt.Println(g.Indices, g.Values.Values())
	// Output:
	// [2 20 0 0 2 20] [5 5 -1 1 5 5]
	// [0 1] [1 1 2 2]
}

// TestMergedEmbeddingBagSparseTablesInParallel checks the sparse
// gradients of a lookup large enough to split its tables across the
// workers, one table read twice: each is what EmbeddingBagSparse gives,
// the shared table's rows summed in lookup order.
func TestMergedEmbeddingBagSparseTablesInParallel(t *testing.T) {
	g := autograd.NewGenerator(43)
	m := newMergedLookup(g, []int{900, 700, 1200, 800, 700, 500}, 32, 400)
	var tables, refs, w []*autograd.Tensor
	for k, n := range m.rows {
		if k == 4 { // table 1 again
			tables, refs = append(tables, tables[1]), append(refs, refs[1])
		} else {
			v := autograd.Randn(g, n, m.d)
			tables, refs = append(tables, embLeaf(v)), append(refs, embLeaf(v))
		}
		w = append(w, autograd.Randn(g, m.b, m.d))
	}
	outs := autograd.MergedEmbeddingBag(tables, m.indices, m.offsets, autograd.BagSum, true, true)
	mergedLoss(outs, w).Backward()
	for k, ref := range refs {
		y := autograd.EmbeddingBagSparse(m.indices[k], m.starts(k), ref, autograd.BagSum, nil)
		autograd.Sum(autograd.Mul(y, w[k]), nil, false).Backward() // lookup k's rows after lookup k−1's
	}
	for k := range tables {
		got, want := tables[k].SparseGrad(), refs[k].SparseGrad()
		if got == nil || !slices.Equal(got.Indices, want.Indices) {
			t.Fatalf("table %d: sparse gradient rows %v, want %v", k, got, want.Indices)
		}
		sameBitsT(t, fmt.Sprintf("table %d sparse gradient", k), got.Values, want.Values)
	}
}

// TestMergedEmbeddingBagAutocast: under autocast, bfloat16 tables give
// bfloat16 bags, bit for bit the float32 bags cast to bfloat16, and the
// tables the gradients of that cast's path, dense and sparse, with or
// without an arena; a mix of float32 and bfloat16 tables keeps float32
// bags.
func TestMergedEmbeddingBagAutocast(t *testing.T) {
	g := autograd.NewGenerator(43)
	m := newMergedLookup(g, []int{3, 11, 40, 7}, 5, 9)
	for _, sparse := range []bool{false, true} {
		for _, inArena := range []bool{false, true} {
			var tables, refs, grads []*autograd.Tensor
			for _, n := range m.rows {
				v := autograd.Cast(autograd.Randn(g, n, m.d), autograd.BFloat16)
				tables, refs = append(tables, embLeaf(v)), append(refs, embLeaf(v))
				grads = append(grads, autograd.Cast(autograd.Randn(g, m.b, m.d), autograd.BFloat16))
			}
			arena := autograd.NewArena(0)
			indices := make([]*autograd.Tensor, len(m.indices))
			for k, idx := range m.indices {
				indices[k] = autograd.Autocast(idx)
				if inArena {
					indices[k] = arena.In(indices[k])
				}
			}
			outs := autograd.MergedEmbeddingBag(tables, indices, m.offsets, autograd.BagSum, true, sparse)
			wide := autograd.MergedEmbeddingBag(refs, m.indices, m.offsets, autograd.BagSum, true, sparse)
			want := make([]*autograd.Tensor, len(wide))
			for k, y := range wide {
				want[k] = autograd.Cast(y, autograd.BFloat16)
				sameBitsT(t, fmt.Sprintf("sparse %v arena %v: table %d bags", sparse, inArena, k), outs[k], want[k])
			}
			autograd.Backward(outs, grads)
			autograd.Backward(want, grads)
			for k := range tables {
				what := fmt.Sprintf("sparse %v arena %v: table %d gradient", sparse, inArena, k)
				if !sparse {
					sameBitsT(t, what, tables[k].Grad(), refs[k].Grad())
					continue
				}
				got, exp := tables[k].SparseGrad(), refs[k].SparseGrad()
				if got == nil || exp == nil || !slices.Equal(got.Indices, exp.Indices) {
					t.Fatalf("%s: rows %v, want %v", what, got, exp)
				}
				sameBitsT(t, what, got.Values, exp.Values)
			}
			arena.Reset()
		}
	}
	mixed := []*autograd.Tensor{autograd.Randn(g, 3, m.d), autograd.Cast(autograd.Randn(g, 11, m.d), autograd.BFloat16)}
	idx := []*autograd.Tensor{autograd.Autocast(m.indices[0]), autograd.Autocast(m.indices[1])}
	for k, y := range autograd.MergedEmbeddingBag(mixed, idx, m.offsets[:2], autograd.BagSum, true, false) {
		if y.DType() != autograd.Float32 {
			t.Errorf("mixed tables under autocast: bag %d has dtype %v, want float32", k, y.DType())
		}
	}
}
