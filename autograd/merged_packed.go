package autograd

import "github.com/kilnml/kiln/kernels"

// MergedEmbeddingBagPacked is MergedEmbeddingBag with every table's bags
// in one pair of tensors, the multi-hot input of an exported DLRM graph:
//
//   - indices is a 1-D Int64 [N] tensor holding table 0's indices, then
//     table 1's, and so on: every table's indices concatenated in table
//     order;
//   - offsets is an Int64 [T, B+1] tensor: offsets[t][b] is the position
//     in indices where bag b of table t starts and offsets[t][B] where
//     table t's last bag ends. So offsets[0][0] = 0, offsets[t][B] =
//     offsets[t+1][0] (the tables' indices are contiguous, in order),
//     offsets[T-1][B] = N, and each row is non-decreasing; a bag may be
//     empty.
//
// Table t's bags are those of MergedEmbeddingBag with table t's indices
// indices[offsets[t][0] : offsets[t][B]] and its bags starting at
// offsets[t][:B] − offsets[t][0] (includeLastOffset false): the results
// and the gradients are theirs bit for bit, and so are the rules for
// mode, bfloat16 tables and sparse. An offset that breaks the layout, or
// an index out of its table's rows, panics naming the table, the bag and
// the value.
//
// A trace records one MergedEmbeddingBagPacked node.
func MergedEmbeddingBagPacked(tables []*Tensor, indices, offsets *Tensor, mode EmbeddingBagMode, sparse bool) []*Tensor {
	const op = "MergedEmbeddingBagPacked"
	dim := mergedTables(op, tables, mode)
	packedLayout(op, tables, indices, offsets)
	bags := packedBagTables(offsets.shape)
	packedBags(op, tables, indices, offsets, bags)
	lookups := []*Tensor{indices, offsets}
	outs := mergedBag(op, tables, lookups, bags, dim, mode, sparse)
	if traced(lookups...) || traced(tables...) {
		trace(op, mergedBagPackedAttrs{Mode: mode.String()}, append(append([]*Tensor(nil), tables...), lookups...), outs)
	}
	return outs
}

// packedLayout checks the dtypes and shapes of MergedEmbeddingBagPacked's
// indices and offsets for tables.
func packedLayout(op string, tables []*Tensor, indices, offsets *Tensor) {
	for _, v := range []struct {
		what string
		x    *Tensor
		dims int
	}{{"indices", indices, 1}, {"offsets", offsets, 2}} {
		switch {
		case v.x == nil:
			Fail(op, "%s is nil", v.what)
		case v.x.dtype != Int64:
			failDType(op, "%s have dtype %v; %s needs int64 %s", v.what, v.x.dtype, op, v.what)
		case v.x.NDim() != v.dims:
			failShape(op, "%s must be %d-D, got shape %v", v.what, v.dims, v.x.shape)
		}
	}
	if offsets.shape[0] != len(tables) || offsets.shape[1] < 1 {
		failShape(op, "offsets must be [%d tables, batch+1], got shape %v", len(tables), offsets.shape)
	}
}

// packedBagTables returns each table's bag-start storage for offsets of
// shape [T, B+1].
func packedBagTables(shape []int) []kernels.MergedBagTable {
	bags := make([]kernels.MergedBagTable, shape[0])
	for t := range bags {
		bags[t].Offsets = make([]int64, shape[1]-1)
	}
	return bags
}

// packedBags checks indices and offsets (whose layout packedLayout has
// checked) against the tables and sets bags[t] (from packedBagTables) to
// table t's indices, a slice of indices, and its bag starts rebased to
// them, allocating nothing: a compiled graph runs it before each lookup.
func packedBags(op string, tables []*Tensor, indices, offsets *Tensor, bags []kernels.MergedBagTable) {
	B := offsets.shape[1] - 1
	idx, off := indices.Int64s(), offsets.Int64s()
	n := int64(len(idx))
	end := int64(0) // where the previous table's bags end
	for t, w := range tables {
		row := off[t*(B+1) : (t+1)*(B+1)]
		switch {
		case t == 0 && row[0] != 0:
			Fail(op, "table 0: offsets[0][0] must be 0 (the first bag starts at the first index), got %d", row[0])
		case row[0] != end:
			failShape(op, "table %d: offsets[%d][0] = %d must equal offsets[%d][%d] = %d, where table %d's bags end: the tables' indices follow one another in table order", t, t, row[0], t-1, B, end, t-1)
		}
		for b := 1; b <= B; b++ {
			if row[b] < row[b-1] {
				failShape(op, "table %d: offsets must be non-decreasing, got offsets[%d][%d] = %d after offsets[%d][%d] = %d", t, t, b, row[b], t, b-1, row[b-1])
			}
			if row[b] > n {
				failShape(op, "table %d: offsets[%d][%d] = %d (the end of bag %d) is beyond the %d indices", t, t, b, row[b], b-1, n)
			}
		}
		start, starts := row[0], bags[t].Offsets
		end = row[B]
		for b := range starts {
			starts[b] = row[b] - start
		}
		bags[t].Idx = idx[start:end]
		mergedIndices(op, t, w.shape[0], bags[t].Idx, starts, start)
	}
	if end != n {
		failShape(op, "table %d: the last offset, offsets[%d][%d] = %d, must equal the number of indices %d", len(tables)-1, len(tables)-1, B, end, n)
	}
}

// packedSplit splits a MergedEmbeddingBagPacked node's operands into its
// tables, indices and offsets.
func packedSplit(op string, in []*Tensor) (tables []*Tensor, indices, offsets *Tensor) {
	if len(in) < 3 {
		failShape(op, "got %d operands; want T ≥ 1 tables, then the [N] indices and the [T, batch+1] offsets", len(in))
	}
	k := len(in) - 2
	return in[:k], in[k], in[k+1]
}

// A MergedEmbeddingBagPacked node's operands are the T tables, then the
// [N] indices and the [T, B+1] offsets; its attribute is the mode's
// String; it has T float32 [B, dim] results. The number of indices N is
// free: a compiled graph runs other N on the same plan, binding the
// lookup again.
type mergedBagPackedAttrs struct{ Mode string }

func init() {
	const op = "MergedEmbeddingBagPacked"
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		tables, indices, offsets := packedSplit(op, in)
		dim := mergedTables(op, tables, mergedMode(op, attrs.(mergedBagPackedAttrs).Mode))
		packedLayout(op, tables, indices, offsets)
		return mergedTypes(len(tables), offsets.shape[1]-1, dim)
	}, op)
	defineEager(op, mergedBagPackedAttrs{}, func(attrs any, in []*Tensor) []*Tensor {
		tables, indices, offsets := packedSplit(op, in)
		return MergedEmbeddingBagPacked(tables, indices, offsets, mergedMode(op, attrs.(mergedBagPackedAttrs).Mode), false)
	})
	// The bound form checks every index and offset on each run, as the
	// eager op does, with its messages, into storage made once.
	defineBind(op, func(attrs any, ins, outs []*Tensor, _ []bool) func() {
		tables, indices, offsets := packedSplit(op, ins)
		mean := mergedMode(op, attrs.(mergedBagPackedAttrs).Mode) == BagMean
		dim := mergedTables(op, tables, BagSum)
		packedLayout(op, tables, indices, offsets)
		bags := bindMerged(tables, outs)
		if bags == nil {
			return nil
		}
		for t, s := range packedBagTables(offsets.shape) {
			bags[t].Offsets = s.Offsets
		}
		return func() {
			packedBags(op, tables, indices, offsets, bags)
			kernels.MergedEmbeddingBag(dim, bags, mean)
		}
	})
}
