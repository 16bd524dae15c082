package autograd

import (
	"slices"
	"strconv"

	"github.com/kilnml/kiln/kernels"
)

// MergedEmbeddingBag looks up one bag per sample in each of several
// tables, as DLRM's emb_l does with one nn.EmbeddingBag per sparse feature
// (IPEX's MergedEmbeddingBag): table t (a float32 or bfloat16 [rows_t, d]
// matrix; every table has the same d, any rows) is read with the 1-D
// Int64 indices[t], whose bags start at offsets[t] (1-D Int64, from 0,
// non-decreasing, none beyond the indices). Without includeLastOffset
// offsets[t] has one entry per bag and the last bag runs to the end of
// indices[t]; with it (torch's include_last_offset=True) it has one more,
// which must equal len(indices[t]). Every table has the same number of
// bags B. The result is T float32 [B, d] tensors, in the tables' order.
//
// mode is BagSum or BagMean; a bag's rows are summed in float64, divided
// by the bag's size for BagMean, and rounded once, and an empty bag is
// zeros. A bfloat16 table's rows are widened as they are read: its result
// is float32, bit for bit what EmbeddingBag gives for the widened table
// (and EmbeddingBag on the bfloat16 table gives it rounded to bfloat16).
// Under autocast (indices or offsets from an Autocast computation), when
// every table is bfloat16, the results are bfloat16: those float32 bags
// rounded to nearest even, as Cast rounds, as IPEX's bfloat16 tables
// give; being traced, the lookup keeps float32 results.
// All bags of all tables are summed in one kernel call split across the
// workers, with the same bits at any thread count, after every index and
// offset of every table has been checked: a bad one panics naming the
// table, the bag and the value.
//
// Gradients reach every table that requires one. With sparse, a leaf
// table gets a row-sparse gradient, as EmbeddingBagSparse gives (or its
// fused update, see SetSparseUpdate), a few tables at a time split across
// the workers as their outputs' gradients arrive (a table looked up twice
// once both have, its lookups in order); otherwise (or for a table made by
// another op) it gets a dense one as EmbeddingBag's, once every output's
// gradient has arrived: float32 for a float32 table, bfloat16 for a
// bfloat16 one.
// For BagMean each row's gradient is its bag's output gradient divided by
// the bag's size. A table that does not require a gradient gets none
// (though, as with a multi-output torch.autograd.Function, every output
// requires one when any table does), nor does one whose output took no
// part in the loss. Either way the gradients are bit for bit those of T
// separate EmbeddingBag (or EmbeddingBagSparse) calls.
//
// A trace records one MergedEmbeddingBag node, sparse or not: a graph
// computes no gradients.
func MergedEmbeddingBag(tables, indices, offsets []*Tensor, mode EmbeddingBagMode, includeLastOffset, sparse bool) []*Tensor {
	const op = "MergedEmbeddingBag"
	dim := mergedTables(op, tables, mode)
	if len(indices) != len(tables) || len(offsets) != len(tables) {
		failShape(op, "%d tables need %d index and offset tensors, got %d indices and %d offsets", len(tables), len(tables), len(indices), len(offsets))
	}
	bags := make([]kernels.MergedBagTable, len(tables))
	mergedBags(op, tables, indices, offsets, includeLastOffset, bags)
	lookups := append(append([]*Tensor(nil), indices...), offsets...)
	outs := mergedBag(op, tables, lookups, bags, dim, mode, sparse)
	// sparse changes only the gradients, which a graph never computes, so
	// a model with sparse tables traces as one with dense ones.
	if traced(tables...) || traced(lookups...) {
		ins := append(append([]*Tensor(nil), tables...), lookups...)
		trace(op, mergedBagAttrs{Mode: mode.String(), IncludeLastOffset: includeLastOffset}, ins, outs)
	}
	return outs
}

// mergedBags checks every table's indices and offsets and sets bags[t]'s
// Idx and Offsets to them, allocating nothing: a compiled graph runs it
// before each lookup.
func mergedBags(op string, tables, indices, offsets []*Tensor, includeLast bool, bags []kernels.MergedBagTable) {
	for t, w := range tables {
		idx, starts := mergedOffsets(op, t, w.shape[0], indices[t], offsets[t], includeLast)
		if t > 0 && len(starts) != len(bags[0].Offsets) {
			failShape(op, "table %d has %d bags (offsets %v) but table 0 has %d; every table needs one bag per sample", t, len(starts), offsets[t].shape, len(bags[0].Offsets))
		}
		bags[t].Idx, bags[t].Offsets = idx, starts
	}
}

// MergedEmbeddingBagFixed is MergedEmbeddingBag for bags of one size L,
// the layout of DLRM's fixed-size lookups: indices is an Int64 [B, T, L]
// tensor whose [b, t, :] are sample b's L rows of table t.
func MergedEmbeddingBagFixed(tables []*Tensor, indices *Tensor, mode EmbeddingBagMode, sparse bool) []*Tensor {
	const op = "MergedEmbeddingBagFixed"
	dim := mergedTables(op, tables, mode)
	fixedLayout(op, tables, indices)
	bags := fixedBagTables(indices.shape)
	fixedBags(op, tables, indices, bags)
	outs := mergedBag(op, tables, []*Tensor{indices}, bags, dim, mode, sparse)
	if traced(indices) || traced(tables...) {
		trace(op, mergedBagFixedAttrs{Mode: mode.String()}, append(append([]*Tensor(nil), tables...), indices), outs)
	}
	return outs
}

// fixedLayout checks the dtype and shape of MergedEmbeddingBagFixed's
// indices for tables.
func fixedLayout(op string, tables []*Tensor, indices *Tensor) {
	if indices == nil {
		Fail(op, "indices is nil")
	}
	if indices.dtype != Int64 {
		failDType(op, "indices have dtype %v; %s needs int64 indices", indices.dtype, op)
	}
	if indices.NDim() != 3 || indices.shape[1] != len(tables) {
		failShape(op, "indices must be [batch, %d tables, bag size], got shape %v", len(tables), indices.shape)
	}
}

// fixedBagTables returns each table's index and bag-start storage for
// fixed-size bags of indices of shape [B, T, L].
func fixedBagTables(shape []int) []kernels.MergedBagTable {
	B, T, L := shape[0], shape[1], shape[2]
	bags := make([]kernels.MergedBagTable, T)
	for t := range bags {
		bags[t] = kernels.MergedBagTable{Idx: make([]int64, B*L), Offsets: make([]int64, B)}
	}
	return bags
}

// fixedBags checks the [B, T, L] indices against the tables and copies
// table t's into bags[t] (from fixedBagTables), allocating nothing.
func fixedBags(op string, tables []*Tensor, indices *Tensor, bags []kernels.MergedBagTable) {
	B, T, L := indices.shape[0], indices.shape[1], indices.shape[2]
	all := indices.Int64s()
	for t, w := range tables {
		idx, starts := bags[t].Idx, bags[t].Offsets
		for b := range B {
			starts[b] = int64(b * L)
			row := all[(b*T+t)*L : (b*T+t+1)*L]
			for i, r := range row {
				if r < 0 || r >= int64(w.shape[0]) {
					failIndex(op, "table %d: index %d (sample %d, position %d of its bag) is out of range for a table of %d rows", t, r, b, i, w.shape[0])
				}
			}
			copy(idx[b*L:], row)
		}
	}
}

// mergedTables checks the tables and the mode of a merged lookup and
// returns the tables' common dimension.
func mergedTables(op string, tables []*Tensor, mode EmbeddingBagMode) int {
	if mode != BagSum && mode != BagMean {
		Fail(op, "mode %v is not supported; want BagSum or BagMean", mode)
	}
	if len(tables) == 0 {
		Fail(op, "no tables")
	}
	dim := 0
	for t, w := range tables {
		if !isFloatMatrix(w) {
			failFloatMatrix(op, "table "+strconv.Itoa(t), w, "[rows, dim]")
		}
		if t == 0 {
			dim = w.shape[1]
		} else if w.shape[1] != dim {
			failShape(op, "table %d has dimension %d (shape %v) but table 0 has %d; every table needs the same", t, w.shape[1], w.shape, dim)
		}
	}
	return dim
}

// mergedOffsets checks table t's indices (against its rows) and offsets
// and returns the indices with the start of each bag.
func mergedOffsets(op string, t, rows int, indices, offsets *Tensor, includeLast bool) (idx, starts []int64) {
	mergedLayout(op, t, indices, "indices")
	mergedLayout(op, t, offsets, "offsets")
	idx, starts = indices.Int64s(), offsets.Int64s()
	n := int64(len(idx))
	if includeLast {
		if len(starts) == 0 {
			failShape(op, "table %d: offsets are empty; with includeLastOffset they need one entry per bag and the end", t)
		}
		// PyTorch ignores indices past the last offset in a sum but counts
		// them in a mean's divisor; they can only be a mistake.
		if last := starts[len(starts)-1]; last != n {
			failShape(op, "table %d: the last offset, offsets[%d] = %d, must equal the number of indices %d with includeLastOffset", t, len(starts)-1, last, n)
		}
	} else if len(starts) == 0 && n > 0 {
		failShape(op, "table %d: offsets are empty but indices %v hold %d indices", t, indices.shape, n)
	}
	if len(starts) > 0 && starts[0] != 0 {
		Fail(op, "table %d: offsets[0] must be 0 (the first bag starts at the first index), got %d", t, starts[0])
	}
	for b := 1; b < len(starts); b++ {
		if starts[b] < starts[b-1] {
			failShape(op, "table %d: offsets must be non-decreasing, got offsets[%d] = %d after offsets[%d] = %d", t, b, starts[b], b-1, starts[b-1])
		}
		if starts[b] > n {
			failShape(op, "table %d: offsets[%d] = %d (the start of bag %d) is beyond the %d indices", t, b, starts[b], b, n)
		}
	}
	if includeLast {
		starts = starts[:len(starts)-1]
	}
	mergedIndices(op, t, rows, idx, starts, 0)
	return idx, starts
}

// mergedIndices checks that table t's indices idx, in bags starting at
// starts (checked), lie in its rows; base is idx[0]'s position in the
// indices the caller was given, for the messages.
func mergedIndices(op string, t, rows int, idx, starts []int64, base int64) {
	for b := range starts {
		for i := starts[b]; i < starts[b]+int64(bagLen(starts, b, len(idx))); i++ {
			if r := idx[i]; r < 0 || r >= int64(rows) {
				failIndex(op, "table %d: index %d (bag %d, position %d of the indices) is out of range for a table of %d rows", t, r, b, base+i, rows)
			}
		}
	}
}

// mergedLayout checks that table t's indices or offsets (what) are a 1-D
// Int64 tensor.
func mergedLayout(op string, t int, v *Tensor, what string) {
	if v == nil {
		Fail(op, "table %d: %s is nil", t, what)
	}
	if v.dtype != Int64 {
		failDType(op, "table %d: %s have dtype %v; %s needs int64 %s", t, what, v.dtype, op, what)
	}
	if v.NDim() != 1 {
		failShape(op, "table %d: %s must be 1-D, got shape %v", t, what, v.shape)
	}
}

// mergedBag runs a merged lookup whose operands are checked: bags holds
// each table's indices and bag starts, taken from the tensors in lookups.
//
// The tape's nodes have one result each, so the lookup records one node
// over the tables whose result is an empty token, and each output a node
// over the token that hands its gradient to the lookup's backward, which
// runs after all of them and computes every dense table gradient at once
// (a sparse leaf's gradient is taken in the output's node).
// (Splitting one [T, B, d] result instead would send a gradient of that
// size back from each of the T outputs.)
func mergedBag(op string, tables, lookups []*Tensor, bags []kernels.MergedBagTable, dim int, mode EmbeddingBagMode, sparse bool) []*Tensor {
	B := len(bags[0].Offsets)
	outs := make([]*Tensor, len(tables))
	// The outputs share one allocation, each a cache line further from a
	// page boundary than the one before: T outputs of their own would all
	// start on page boundaries, and row b of each would then fall in the
	// same few sets of the L1 cache, as it does for DLRM's interaction,
	// which reads row b of every output together (its forward ran 35 %
	// faster on matrices so skewed). The kernel writes every bag, an empty
	// one as zeros.
	//
	// Under autocast, bfloat16 tables' bags are bfloat16 (as IPEX's
	// bfloat16 tables give): the float32 sums rounded to nearest even, as
	// Cast would round them. (A trace, or a mix of float32 and bfloat16
	// tables, keeps float32 bags, which the caller casts as it needs.)
	size := numel(op, []int{B, dim})
	m := modeOf(append(append([]*Tensor(nil), tables...), lookups...)...)
	narrow := m.autocast && !m.trace.active()
	for _, w := range tables {
		narrow = narrow && w.dtype == BFloat16
	}
	am := m.arenaMode()
	if narrow {
		stride := size + 32
		slab := arenaSlice[uint16](am, numel(op, []int{len(tables), stride}), false, false)
		for t := range tables {
			bags[t].OutBF16 = slab[t*stride : t*stride+size : t*stride+size]
			outs[t] = &Tensor{dtype: BFloat16, shape: []int{B, dim}, data: bags[t].OutBF16}
		}
	} else {
		stride := size + 16
		slab := arenaSlice[float32](am, numel(op, []int{len(tables), stride}), false, false)
		for t := range tables {
			bags[t].Out = slab[t*stride : t*stride+size : t*stride+size]
			outs[t] = &Tensor{dtype: Float32, shape: []int{B, dim}, data: bags[t].Out}
		}
	}
	for t, w := range tables {
		if w.dtype == BFloat16 {
			bags[t].WeightBF16 = w.BFloat16s()
		} else {
			bags[t].Weight = w.Float32s()
		}
	}
	kernels.MergedEmbeddingBag(dim, bags, mode == BagMean)
	for t := range bags {
		// The backward needs only the indices and bags: the closure must
		// not keep the outputs alive.
		bags[t].Out, bags[t].OutBF16, bags[t].Weight, bags[t].WeightBF16 = nil, nil, nil, nil
	}

	// dys[t] is output t's gradient, set by its node; free[t] says the
	// op may hand its memory back once done with it. Sparse leaf tables
	// read by one lookup each take their rows (or their fused update) as
	// soon as a few outputs' gradients have arrived, pending[:] at a time,
	// split across the workers: under autocast the gradients arrive one
	// by one, each widened into fresh memory, and holding all of them
	// until the end would hold every table's. The rest (a table looked up
	// twice, in the lookups' order; dense ones) wait for the lookup's own
	// backward, which runs after every output's.
	dys, dyModes := make([][]float32, len(tables)), make([]Mode, len(tables))
	free := make([]bool, len(tables))
	var pending []int
	shared := make([]bool, len(tables))
	for t, w := range tables {
		shared[t] = slices.Index(tables, w) != t || slices.Index(tables[t+1:], w) >= 0
	}
	n := len(tables) + len(lookups)
	mean := mode == BagMean
	// takeSparse accumulates the lookups in groups, one group a task, each
	// group's in order, and hands back the gradients' memory.
	takeSparse := func(groups [][]int) {
		work := 0
		for _, g := range groups {
			for _, t := range g {
				work += len(bags[t].Idx) * dim
			}
		}
		parallelTasks(len(groups), work, func(k int) {
			for _, t := range groups[k] {
				accumulateBagSparse(op+"Backward", tables[t], bags[t].Idx, bags[t].Offsets, dys[t], nil, mean)
			}
		})
		for _, g := range groups {
			for _, t := range g {
				if free[t] {
					releaseSlice(dyModes[t], dys[t])
				}
				dys[t], free[t] = nil, false
			}
		}
	}
	takePending := func() {
		groups := make([][]int, len(pending))
		for k, t := range pending {
			groups[k] = []int{t}
		}
		pending = pending[:0]
		takeSparse(groups)
	}
	token := record(op+"Backward", Zeros(0), append(append(make([]*Tensor, 0, n), tables...), lookups...), func(*Tensor) []*Tensor {
		grads := make([]*Tensor, n)
		takePending()
		var groups [][]int // tables looked up more than once
		for t, w := range tables {
			if !sparse || !w.IsLeaf() || !w.requiresGrad || dys[t] == nil {
				continue
			}
			k := slices.IndexFunc(groups, func(g []int) bool { return tables[g[0]] == w })
			if k < 0 {
				k, groups = len(groups), append(groups, nil)
			}
			groups[k] = append(groups[k], t)
		}
		takeSparse(groups)
		for t, w := range tables {
			dy, idx, starts := dys[t], bags[t].Idx, bags[t].Offsets
			switch {
			case dy == nil || !w.requiresGrad:
			case w.dtype == BFloat16:
				grads[t] = Empty(BFloat16, w.shape...)
				kernels.EmbeddingBagBackwardBF16(w.shape[0], dim, idx, starts, dy, nil, mean, grads[t].BFloat16s())
			default:
				grads[t] = Zeros(w.shape...)
				kernels.EmbeddingBagBackward(w.shape[0], dim, idx, starts, dy, nil, mean, grads[t].Float32s())
			}
			if dy != nil && free[t] {
				releaseSlice(dyModes[t], dy)
			}
			dys[t], free[t] = nil, false // a retained graph's next Backward starts afresh
		}
		return grads
	})
	// The outputs' nodes, for gradFree: the closures must not keep the
	// outputs (their data) alive.
	nodes := make([]*node, len(outs))
	for t := range outs {
		outs[t] = recordKeeping(op+"OutputBackward", outs[t], []*Tensor{token}, func(g *Tensor) []*Tensor {
			w := tables[t]
			if !w.requiresGrad {
				return []*Tensor{Zeros(0)}
			}
			var dy []float32
			if g.dtype == BFloat16 {
				// Widened into gradient memory of the op's own; the
				// bfloat16 gradient is done with.
				dy = castGrad(rowMajor(g), Float32).Float32s()
				if nodes[t].gradFree {
					releaseGrad(g)
				}
			} else {
				dy = widenedF32(op+"Backward", "output gradient", g)
			}
			if len(dy) == 0 {
				return []*Tensor{Zeros(0)} // an empty batch leaves the tables without a gradient
			}
			dys[t], dyModes[t], free[t] = dy, g.mode.arenaMode(), g.dtype != Float32 || nodes[t].gradFree
			if sparse && w.IsLeaf() && !shared[t] {
				if pending = append(pending, t); len(pending) >= 2*kernels.Threads() {
					takePending()
				}
			}
			return []*Tensor{Zeros(0)}
		})
		nodes[t] = outs[t].node
	}
	return outs
}

// parallelTasks runs fn(k) for every k in [0, n) on the worker pool, work
// being the rough cost of all of them; a panic in any (a Kiln error) is
// raised again on the caller once all are done, the first by k.
func parallelTasks(n, work int, fn func(k int)) {
	panics := make([]any, n)
	kernels.Parallel(n, work, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			func() {
				defer func() { panics[k] = recover() }()
				fn(k)
			}()
		}
	})
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
}

// The attributes of MergedEmbeddingBag and MergedEmbeddingBagFixed in a
// graph: the mode's String, and torch's include_last_offset. A
// MergedEmbeddingBag node's operands are the T tables, then the T indices,
// then the T offsets; a MergedEmbeddingBagFixed node's the T tables, then
// the [B, T, L] indices. Either has T results.
type (
	mergedBagAttrs struct {
		Mode              string
		IncludeLastOffset bool
	}
	mergedBagFixedAttrs struct{ Mode string }
)

// mergedMode is the mode a merged lookup's attributes name, failing for
// any but sum and mean.
func mergedMode(op, name string) EmbeddingBagMode {
	switch name {
	case "sum":
		return BagSum
	case "mean":
		return BagMean
	}
	Fail(op, "mode %q is not one of sum, mean", name)
	return 0
}

// mergedSplit splits a MergedEmbeddingBag node's operands into its
// tables, indices and offsets.
func mergedSplit(op string, in []*Tensor) (tables, indices, offsets []*Tensor) {
	if len(in) == 0 || len(in)%3 != 0 {
		failShape(op, "got %d operands; want T tables, then T indices, then T offsets", len(in))
	}
	T := len(in) / 3
	return in[:T], in[T : 2*T], in[2*T:]
}

// fixedSplit splits a MergedEmbeddingBagFixed node's operands into its
// tables and indices.
func fixedSplit(op string, in []*Tensor) (tables []*Tensor, indices *Tensor) {
	if len(in) < 2 {
		failShape(op, "got %d operands; want T ≥ 1 tables, then the [batch, T, bag size] indices", len(in))
	}
	return in[:len(in)-1], in[len(in)-1]
}

// mergedTypes are a merged lookup's T results: float32 [bags, dim].
func mergedTypes(tables int, bags, dim int) []TensorType {
	r := make([]TensorType, tables)
	for t := range r {
		r[t] = TensorType{DType: Float32, Shape: []int{bags, dim}}
	}
	return r
}

// bindMerged returns the kernel's tables over tables and outs, or nil
// when an output is not a contiguous float32 [bags, dim] matrix.
func bindMerged(tables, outs []*Tensor) []kernels.MergedBagTable {
	if len(outs) != len(tables) {
		return nil
	}
	bags := make([]kernels.MergedBagTable, len(tables))
	for t, w := range tables {
		if outs[t].dtype != Float32 || outs[t].format != Contiguous {
			return nil
		}
		bags[t].Out = outs[t].Float32s()
		if w.dtype == BFloat16 {
			bags[t].WeightBF16 = w.BFloat16s()
		} else {
			bags[t].Weight = w.Float32s()
		}
	}
	return bags
}

func init() {
	const op, fixed = "MergedEmbeddingBag", "MergedEmbeddingBagFixed"
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		a := attrs.(mergedBagAttrs)
		tables, indices, offsets := mergedSplit(op, in)
		dim := mergedTables(op, tables, mergedMode(op, a.Mode))
		bags := 0
		for t := range tables {
			mergedLayout(op, t, indices[t], "indices")
			mergedLayout(op, t, offsets[t], "offsets")
			b := offsets[t].shape[0]
			if a.IncludeLastOffset {
				if b == 0 {
					failShape(op, "table %d: offsets are empty; with include_last_offset they need one entry per bag and the end", t)
				}
				b--
			}
			if t > 0 && b != bags {
				failShape(op, "table %d has %d bags (offsets %v) but table 0 has %d; every table needs one bag per sample", t, b, offsets[t].shape, bags)
			}
			bags = b
		}
		return mergedTypes(len(tables), bags, dim)
	}, op)
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		tables, indices := fixedSplit(fixed, in)
		dim := mergedTables(fixed, tables, mergedMode(fixed, attrs.(mergedBagFixedAttrs).Mode))
		fixedLayout(fixed, tables, indices)
		return mergedTypes(len(tables), indices.shape[0], dim)
	}, fixed)
	defineEager(op, mergedBagAttrs{}, func(attrs any, in []*Tensor) []*Tensor {
		a := attrs.(mergedBagAttrs)
		tables, indices, offsets := mergedSplit(op, in)
		return MergedEmbeddingBag(tables, indices, offsets, mergedMode(op, a.Mode), a.IncludeLastOffset, false)
	})
	defineEager(fixed, mergedBagFixedAttrs{}, func(attrs any, in []*Tensor) []*Tensor {
		tables, indices := fixedSplit(fixed, in)
		return MergedEmbeddingBagFixed(tables, indices, mergedMode(fixed, attrs.(mergedBagFixedAttrs).Mode), false)
	})
	// The bound forms check every index and offset on each run, as the
	// eager op does, with its messages, into storage made once.
	defineBind(op, func(attrs any, ins, outs []*Tensor, _ []bool) func() {
		a := attrs.(mergedBagAttrs)
		tables, indices, offsets := mergedSplit(op, ins)
		mean := mergedMode(op, a.Mode) == BagMean
		dim := mergedTables(op, tables, BagSum)
		bags := bindMerged(tables, outs)
		if bags == nil {
			return nil
		}
		return func() {
			mergedBags(op, tables, indices, offsets, a.IncludeLastOffset, bags)
			kernels.MergedEmbeddingBag(dim, bags, mean)
		}
	})
	defineBind(fixed, func(attrs any, ins, outs []*Tensor, _ []bool) func() {
		tables, indices := fixedSplit(fixed, ins)
		mean := mergedMode(fixed, attrs.(mergedBagFixedAttrs).Mode) == BagMean
		dim := mergedTables(fixed, tables, BagSum)
		fixedLayout(fixed, tables, indices)
		bags := bindMerged(tables, outs)
		if bags == nil {
			return nil
		}
		for t, s := range fixedBagTables(indices.shape) {
			bags[t].Idx, bags[t].Offsets = s.Idx, s.Offsets
		}
		return func() {
			fixedBags(fixed, tables, indices, bags)
			kernels.MergedEmbeddingBag(dim, bags, mean)
		}
	})
}
