package autograd_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// packed returns m's bags in MergedEmbeddingBagPacked's layout: every
// table's indices concatenated, and [T, B+1] offsets into them.
func (m mergedLookup) packed() (indices, offsets *autograd.Tensor) {
	var idx, off []int64
	for t := range m.rows {
		base := int64(len(idx))
		for _, o := range m.offsets[t].Int64s() {
			off = append(off, base+o)
		}
		idx = append(idx, m.indices[t].Int64s()...)
	}
	return autograd.FromInt64(idx, len(idx)), autograd.FromInt64(off, len(m.rows), m.b+1)
}

// TestMergedEmbeddingBagPackedMatchesMerged checks the packed layout
// against MergedEmbeddingBag on the same bags (include_last_offset), bit
// for bit, outputs and dense and sparse gradients, for float32, bfloat16
// and mixed tables, sum and mean, with empty bags.
func TestMergedEmbeddingBagPackedMatchesMerged(t *testing.T) {
	g := autograd.NewGenerator(59)
	m := newMergedLookup(g, []int{3, 11, 40, 7}, 5, 9)
	indices, offsets := m.packed()
	for _, dt := range []string{"float32", "bfloat16", "mixed"} {
		for _, mode := range []autograd.EmbeddingBagMode{autograd.BagSum, autograd.BagMean} {
			for _, sparse := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/sparse=%v", dt, mode, sparse), func(t *testing.T) {
					var tables, refs, w []*autograd.Tensor
					for k, n := range m.rows {
						v := autograd.Randn(g, n, m.d)
						if dt == "bfloat16" || (dt == "mixed" && k%2 == 1) {
							v = autograd.Cast(v, autograd.BFloat16)
						}
						tables, refs = append(tables, embLeaf(v)), append(refs, embLeaf(v))
						w = append(w, autograd.Randn(g, m.b, m.d))
					}
					got := autograd.MergedEmbeddingBagPacked(tables, indices, offsets, mode, sparse)
					want := autograd.MergedEmbeddingBag(refs, m.indices, m.offsets, mode, true, sparse)
					mergedLoss(got, w).Backward()
					mergedLoss(want, w).Backward()
					for k := range m.rows {
						sameBitsT(t, fmt.Sprintf("output %d", k), got[k], want[k])
						if !sparse {
							sameBitsT(t, fmt.Sprintf("gradient %d", k), tables[k].Grad(), refs[k].Grad())
							continue
						}
						gs, ws := tables[k].SparseGrad(), refs[k].SparseGrad()
						if tables[k].Grad() != nil || gs == nil || !slices.Equal(gs.Indices, ws.Indices) {
							t.Fatalf("table %d: sparse gradient %v (dense %v), want rows %v", k, gs, tables[k].Grad(), ws.Indices)
						}
						sameBitsT(t, fmt.Sprintf("sparse gradient %d", k), gs.Values, ws.Values)
					}
				})
			}
		}
	}
}

func TestMergedEmbeddingBagPackedZeroBatch(t *testing.T) {
	tables := []*autograd.Tensor{embLeaf(autograd.Ones(3, 2)), embLeaf(autograd.Cast(autograd.Ones(5, 2), autograd.BFloat16))}
	outs := autograd.MergedEmbeddingBagPacked(tables, autograd.FromInt64([]int64{}, 0), autograd.FromInt64([]int64{0, 0}, 2, 1), autograd.BagMean, false)
	for k, y := range outs {
		if fmt.Sprint(y.Shape()) != "[0 2]" || y.DType() != autograd.Float32 {
			t.Errorf("output %d is %v %v, want float32 [0 2]", k, y.DType(), y.Shape())
		}
	}
	mergedLoss(outs, []*autograd.Tensor{autograd.Zeros(0, 2), autograd.Zeros(0, 2)}).Backward()
}

func TestMergedEmbeddingBagPackedBadInputs(t *testing.T) {
	w := []*autograd.Tensor{autograd.Zeros(5, 3), autograd.Zeros(7, 3)}
	// Table 0: bags {0, 4} and {1}; table 1: bags {6} and {6}.
	idx := autograd.FromInt64([]int64{0, 4, 1, 6, 6}, 5)
	off := func(v ...int64) *autograd.Tensor { return autograd.FromInt64(v, 2, len(v)/2) }
	good := off(0, 2, 3, 3, 4, 5)
	packed := func(tables []*autograd.Tensor, indices, offsets *autograd.Tensor) func() {
		return func() { autograd.MergedEmbeddingBagPacked(tables, indices, offsets, autograd.BagSum, false) }
	}
	if err := autograd.Try(packed(w, idx, good)); err != nil {
		t.Fatalf("good operands: %v", err)
	}
	cases := []struct {
		name string
		f    func()
		kind error
		want string
	}{
		{"no tables", packed(nil, idx, good), autograd.ErrArgument, "MergedEmbeddingBagPacked: no tables"},
		{"dim differs", packed([]*autograd.Tensor{w[0], autograd.Zeros(7, 4)}, idx, good), autograd.ErrShape, "table 1 has dimension 4 (shape [7 4]) but table 0 has 3"},
		{"mode max", func() { autograd.MergedEmbeddingBagPacked(w, idx, good, autograd.BagMax, false) }, autograd.ErrArgument, "mode max is not supported"},
		{"nil indices", packed(w, nil, good), autograd.ErrArgument, "MergedEmbeddingBagPacked: indices is nil"},
		{"nil offsets", packed(w, idx, nil), autograd.ErrArgument, "MergedEmbeddingBagPacked: offsets is nil"},
		{"int32 indices", packed(w, autograd.FromInt32([]int32{0}, 1), good), autograd.ErrDType, "indices have dtype int32; MergedEmbeddingBagPacked needs int64 indices"},
		{"float offsets", packed(w, idx, autograd.Zeros(2, 3)), autograd.ErrDType, "offsets have dtype float32"},
		{"2-D indices", packed(w, autograd.FromInt64([]int64{0, 1}, 1, 2), good), autograd.ErrShape, "indices must be 1-D, got shape [1 2]"},
		{"1-D offsets", packed(w, idx, autograd.FromInt64([]int64{0, 5}, 2)), autograd.ErrShape, "offsets must be 2-D, got shape [2]"},
		{"offsets tables", packed(w, idx, autograd.FromInt64([]int64{0, 2, 5}, 1, 3)), autograd.ErrShape, "offsets must be [2 tables, batch+1], got shape [1 3]"},
		{"offsets no end", packed(w, idx, autograd.FromInt64([]int64{}, 2, 0)), autograd.ErrShape, "offsets must be [2 tables, batch+1], got shape [2 0]"},
		{"first offset", packed(w, idx, off(1, 2, 3, 3, 4, 5)), autograd.ErrArgument, "table 0: offsets[0][0] must be 0 (the first bag starts at the first index), got 1"},
		{"decreasing", packed(w, idx, off(0, 2, 1, 1, 4, 5)), autograd.ErrShape, "table 0: offsets must be non-decreasing, got offsets[0][2] = 1 after offsets[0][1] = 2"},
		{"decreasing table 1", packed(w, idx, off(0, 2, 3, 3, 2, 5)), autograd.ErrShape, "table 1: offsets must be non-decreasing, got offsets[1][1] = 2 after offsets[1][0] = 3"},
		{"gap", packed(w, idx, off(0, 2, 3, 4, 4, 5)), autograd.ErrShape, "table 1: offsets[1][0] = 4 must equal offsets[0][2] = 3, where table 0's bags end"},
		{"overlap", packed(w, idx, off(0, 2, 3, 2, 4, 5)), autograd.ErrShape, "table 1: offsets[1][0] = 2 must equal offsets[0][2] = 3"},
		{"beyond", packed(w, idx, off(0, 2, 3, 3, 4, 6)), autograd.ErrShape, "table 1: offsets[1][2] = 6 (the end of bag 1) is beyond the 5 indices"},
		{"short", packed(w, idx, off(0, 2, 3, 3, 4, 4)), autograd.ErrShape, "table 1: the last offset, offsets[1][2] = 4, must equal the number of indices 5"},
		{"index too big", packed(w, autograd.FromInt64([]int64{0, 4, 1, 6, 7}, 5), good), autograd.ErrIndex, "table 1: index 7 (bag 1, position 4 of the indices) is out of range for a table of 7 rows"},
		{"index of the next table", packed(w, autograd.FromInt64([]int64{0, 4, 6, 6, 6}, 5), good), autograd.ErrIndex, "table 0: index 6 (bag 1, position 2 of the indices) is out of range for a table of 5 rows"},
		{"negative index", packed(w, autograd.FromInt64([]int64{0, -1, 1, 6, 6}, 5), good), autograd.ErrIndex, "table 0: index -1 (bag 0, position 1 of the indices) is out of range for a table of 5 rows"},
	}
	for _, c := range cases {
		checkFails(t, c.name, c.f, c.kind, c.want)
	}
}
