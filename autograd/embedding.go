package autograd

import (
	"fmt"

	"github.com/kilnml/kiln/kernels"
)

// EmbeddingBagMode is how EmbeddingBag reduces the rows of a bag, PyTorch's
// mode argument.
type EmbeddingBagMode int

const (
	// BagSum adds the rows (mode="sum").
	BagSum EmbeddingBagMode = iota
	// BagMean averages the rows (mode="mean", PyTorch's default).
	BagMean
	// BagMax takes the featurewise maximum (mode="max").
	BagMax
)

// String returns PyTorch's name of the mode: "sum", "mean" or "max".
func (m EmbeddingBagMode) String() string {
	switch m {
	case BagSum:
		return "sum"
	case BagMean:
		return "mean"
	case BagMax:
		return "max"
	}
	return fmt.Sprintf("EmbeddingBagMode(%d)", int(m))
}

// embeddingTable validates an embedding weight: a float32 or bfloat16
// [num, dim] matrix.
func embeddingTable(op string, weight *Tensor) (num, dim int) {
	if weight == nil {
		Fail(op, "weight is nil")
	}
	if weight.dtype != Float32 && weight.dtype != BFloat16 {
		failDType(op, "weight has dtype %v; %s supports float32 and bfloat16 tables", weight.dtype, op)
	}
	if weight.NDim() != 2 {
		failShape(op, "weight must be 2-D [num, dim], got shape %v", weight.shape)
	}
	return weight.shape[0], weight.shape[1]
}

// embeddingIndices validates an Int64 index tensor against a table of num
// rows and returns the indices in row-major logical order.
func embeddingIndices(op, what string, t *Tensor, num int) []int64 {
	if t == nil {
		Fail(op, "%s is nil", what)
	}
	if t.dtype != Int64 {
		failDType(op, "%s has dtype %v; %s needs int64 indices", what, t.dtype, op)
	}
	if t.format != Contiguous {
		t = t.reformat(Contiguous)
	}
	idx := t.Int64s()
	for i, v := range idx {
		if v < 0 || v >= int64(num) {
			failIndex(op, "index %d (at position %d of %s %v) is out of range for a table of %d rows", v, i, what, t.shape, num)
		}
	}
	return idx
}

// Embedding looks up rows of weight ([num, dim]) by the Int64 indices (any
// shape), like torch.nn.functional.embedding: the result is
// [indices..., dim], contiguous, of weight's dtype (float32 or bfloat16).
// Every index must lie in [0, num). The gradient of weight adds the output
// gradient's rows into the rows that were read (dense, accumulated in
// float64); indices get none.
//
// A bfloat16 table (a split parameter's Top) gets a bfloat16 gradient, as
// in PyTorch, but each row is summed in float64 and rounded once, so it is
// the float32 gradient rounded to nearest even; PyTorch 1.13 sums in
// bfloat16, losing small gradients of frequent rows. The output gradient
// may be float32 or bfloat16.
func Embedding(indices, weight *Tensor) *Tensor {
	return embeddingLookup("Embedding", indices, weight, -1, false)
}

// EmbeddingPadding is Embedding with torch's padding_idx: the row
// paddingIdx (negative counts from the end) is looked up as usual but
// receives no gradient.
func EmbeddingPadding(indices, weight *Tensor, paddingIdx int64) *Tensor {
	const op = "EmbeddingPadding"
	return embeddingLookup(op, indices, weight, paddingRow(op, weight, paddingIdx), false)
}

// EmbeddingSparse is Embedding with torch's sparse=True: when weight is a
// leaf, Backward gives it a row-sparse gradient (Tensor.SparseGrad: the
// rows that were read, each once, duplicates summed in float32 in index
// order) instead of a dense [num, dim] one, so an optimizer step touches
// only those rows. Its values are float32 for a bfloat16 table too
// (PyTorch keeps them bfloat16): the split optimizers update the FP32
// masters from them, and rounding them would only lose precision. A weight
// made by another op gets the dense gradient, which is what flows through
// that op. A leaf cannot hold both kinds: Backward panics when a sparse
// gradient meets a dense one.
func EmbeddingSparse(indices, weight *Tensor) *Tensor {
	return embeddingLookup("EmbeddingSparse", indices, weight, -1, true)
}

// EmbeddingSparsePadding is EmbeddingSparse with padding_idx, as
// EmbeddingPadding is Embedding: the padding row is not in the sparse
// gradient.
func EmbeddingSparsePadding(indices, weight *Tensor, paddingIdx int64) *Tensor {
	const op = "EmbeddingSparsePadding"
	return embeddingLookup(op, indices, weight, paddingRow(op, weight, paddingIdx), true)
}

// paddingRow validates a padding index against weight's rows and returns
// it non-negative.
func paddingRow(op string, weight *Tensor, paddingIdx int64) int64 {
	num, _ := embeddingTable(op, weight)
	if paddingIdx < -int64(num) || paddingIdx >= int64(num) {
		failIndex(op, "padding index %d is out of range for a table of %d rows", paddingIdx, num)
	}
	if paddingIdx < 0 {
		paddingIdx += int64(num)
	}
	return paddingIdx
}

// embeddingType checks Embedding's operands but for the values of the
// indices and returns the result's type: a row of weight per index.
func embeddingType(op string, indices, weight *Tensor) TensorType {
	_, dim := embeddingTable(op, weight)
	if indices == nil {
		Fail(op, "indices is nil")
	}
	return TensorType{DType: weight.dtype, Shape: append(cloneInts(indices.shape), dim)}
}

func init() {
	registerInfer(func(op string, _ any, in []*Tensor) []TensorType {
		return []TensorType{embeddingType(op, in[0], in[1])}
	}, "Embedding")
	registerInfer(func(op string, attrs any, in []*Tensor) []TensorType {
		attrs.(embeddingBagAttrs).mode()
		return []TensorType{embeddingBagType(op, in[0], in[1], in[2])}
	}, "EmbeddingBag")
	defineEager("Embedding", embeddingAttrs{}, func(a any, in []*Tensor) []*Tensor {
		if p := a.(embeddingAttrs).PaddingIdx; p >= 0 {
			return one(EmbeddingPadding(in[0], in[1], int64(p)))
		}
		return one(Embedding(in[0], in[1]))
	})
	defineEager("EmbeddingBag", embeddingBagAttrs{}, func(a any, in []*Tensor) []*Tensor {
		return one(EmbeddingBag(in[0], in[1], in[2], a.(embeddingBagAttrs).mode(), in[3]))
	})
}

// The attribute structs of Embedding (a negative padding index for none)
// and EmbeddingBag (the mode's String).
type (
	embeddingAttrs    struct{ PaddingIdx int }
	embeddingBagAttrs struct{ Mode string }
)

// mode is the EmbeddingBagMode a names, failing for another name.
func (a embeddingBagAttrs) mode() EmbeddingBagMode {
	for m := BagSum; m <= BagMax; m++ {
		if m.String() == a.Mode {
			return m
		}
	}
	Fail("EmbeddingBag", "mode %q is not one of sum, mean, max", a.Mode)
	return 0
}

func embeddingLookup(op string, indices, weight *Tensor, skip int64, sparse bool) *Tensor {
	t := embeddingType(op, indices, weight)
	num, dim := weight.shape[0], weight.shape[1]
	idx := embeddingIndices(op, "indices", indices, num)
	out := empty(op, t.DType, t.Shape)
	if weight.dtype == BFloat16 {
		kernels.EmbeddingForwardBF16(dim, idx, weight.BFloat16s(), out.BFloat16s())
	} else {
		kernels.EmbeddingForward(dim, idx, weight.Float32s(), out.Float32s())
	}
	if traced(indices, weight) && !sparse {
		trace("Embedding", embeddingAttrs{int(skip)}, []*Tensor{indices, weight}, []*Tensor{out})
	}
	return record(op+"Backward", out, []*Tensor{indices, weight}, func(g *Tensor) []*Tensor {
		if !weight.requiresGrad {
			return []*Tensor{nil, nil}
		}
		dy := widenedF32(op+"Backward", "output gradient", g)
		if sparse && weight.IsLeaf() {
			accumulateSparse(op+"Backward", weight, idx, skip, func(i int) []float32 { return dy[i*dim : (i+1)*dim] })
			return []*Tensor{nil, nil}
		}
		gw := Empty(weight.dtype, num, dim)
		if weight.dtype == BFloat16 {
			kernels.EmbeddingBackwardBF16(num, dim, idx, dy, skip, gw.BFloat16s())
		} else {
			kernels.EmbeddingBackward(num, dim, idx, dy, skip, gw.Float32s())
		}
		return []*Tensor{nil, gw}
	})
}

// widenedF32 returns t's elements as float32 in row-major order, widening
// a bfloat16 t: the kernels read gradients and per-sample weights as
// float32 whatever the table's dtype. what names t in the error.
func widenedF32(op, what string, t *Tensor) []float32 {
	switch t.dtype {
	case Float32:
		return t.ContiguousFloat32s()
	case BFloat16:
		return t.castTo(Float32).ContiguousFloat32s()
	}
	failDType(op, "%s has dtype %v; want float32 or bfloat16", what, t.dtype)
	return nil
}

// embeddingBagType checks EmbeddingBag's table and the layout of its input
// and offsets but for their values, and returns the result's type: a row
// of weight per bag.
func embeddingBagType(op string, input, offsets, weight *Tensor) TensorType {
	_, dim := embeddingTable(op, weight)
	if input == nil {
		Fail(op, "input is nil")
	}
	switch input.NDim() {
	case 1:
		if offsets == nil {
			failShape(op, "offsets are required for 1-D input %v", input.shape)
		}
		if offsets.dtype != Int64 {
			failDType(op, "offsets have dtype %v; %s needs int64 offsets", offsets.dtype, op)
		}
		if offsets.NDim() != 1 {
			failShape(op, "offsets must be 1-D, got shape %v", offsets.shape)
		}
		return TensorType{DType: weight.dtype, Shape: []int{offsets.shape[0], dim}}
	case 2:
		if offsets != nil {
			failShape(op, "offsets must be nil for 2-D input %v, whose rows are the bags", input.shape)
		}
		return TensorType{DType: weight.dtype, Shape: []int{input.shape[0], dim}}
	}
	failShape(op, "input must be 1-D (with offsets) or 2-D [bags, size], got shape %v", input.shape)
	return TensorType{}
}

// embeddingBagOffsets validates the indices of EmbeddingBag's input, whose
// layout embeddingBagType has checked, against num rows and returns them
// with the bag starts.
func embeddingBagOffsets(op string, input, offsets *Tensor, num int) (idx, starts []int64) {
	idx = embeddingIndices(op, "input", input, num)
	if input.NDim() == 2 {
		bags, size := input.shape[0], input.shape[1]
		starts = make([]int64, bags)
		for b := range starts {
			starts[b] = int64(b * size)
		}
		return idx, starts
	}
	starts = offsets.Int64s()
	n := int64(len(idx))
	if len(starts) == 0 {
		if n > 0 {
			failShape(op, "offsets are empty but input %v holds %d indices", input.shape, n)
		}
		return idx, starts
	}
	if starts[0] != 0 {
		Fail(op, "offsets[0] must be 0 (the first bag starts at the first index), got %d", starts[0])
	}
	for b := 1; b < len(starts); b++ {
		if starts[b] < starts[b-1] {
			failShape(op, "offsets must be non-decreasing, got offsets[%d] = %d after offsets[%d] = %d", b, starts[b], b-1, starts[b-1])
		}
	}
	if last := starts[len(starts)-1]; last > n {
		failShape(op, "offsets[%d] = %d is beyond the input's length %d", len(starts)-1, last, n)
	}
	return idx, starts
}

// EmbeddingBag reduces bags of rows of weight ([num, dim]) without
// materialising the rows, like torch.nn.functional.embedding_bag with
// include_last_offset=False. input is a 1-D Int64 tensor of indices whose
// bags start at offsets (1-D Int64: offsets[0] = 0, non-decreasing, none
// beyond the input's length; bag b runs to the next offset, the last to the
// end), or a 2-D [bags, size] Int64 tensor whose rows are the bags, with nil
// offsets. The result is [bags, dim]; an empty bag gives zeros in every
// mode.
//
// BagSum adds the rows, each scaled by its per-sample weight when
// perSampleWeights (float32, input's shape) is given; BagMean averages
// them; BagMax takes each feature's maximum (ties keep the first row).
// perSampleWeights is only allowed with BagSum. Gradients flow to weight
// (for BagMax only to the row each maximum came from) and to
// perSampleWeights (the dot product of the bag's output gradient with the
// row).
//
// weight may be bfloat16 (a split parameter's Top): the result is then
// bfloat16, each bag reduced from the widened rows in float64 and rounded
// once, the float32 op's result on the widened table rounded to nearest
// even. Per-sample weights may then be float32 or bfloat16 (PyTorch wants
// the table's dtype; a float32 one is only more precise) and get a
// gradient of their own dtype. The table's gradient is as Embedding
// describes. PyTorch 1.13 rejects a bfloat16 weight in embedding_bag on
// the CPU; the dtypes here follow its embedding's: bfloat16 out.
func EmbeddingBag(input, offsets, weight *Tensor, mode EmbeddingBagMode, perSampleWeights *Tensor) *Tensor {
	return embeddingBag("EmbeddingBag", input, offsets, weight, mode, perSampleWeights, false)
}

// EmbeddingBagSparse is EmbeddingBag with torch's sparse=True: a leaf
// weight gets a row-sparse gradient, as EmbeddingSparse describes, holding
// the rows of non-empty bags. Each position's row is its bag's output
// gradient scaled in float32 (by its per-sample weight, or by the
// reciprocal of the bag's size for BagMean), the rows of a repeated index
// summed in index order. As in PyTorch, BagMax has no sparse form.
func EmbeddingBagSparse(input, offsets, weight *Tensor, mode EmbeddingBagMode, perSampleWeights *Tensor) *Tensor {
	const op = "EmbeddingBagSparse"
	if mode == BagMax {
		Fail(op, "mode max does not support sparse gradients (PyTorch: \"max mode does not support sparse weights\"); use BagSum or BagMean, or EmbeddingBag")
	}
	return embeddingBag(op, input, offsets, weight, mode, perSampleWeights, true)
}

func embeddingBag(op string, input, offsets, weight *Tensor, mode EmbeddingBagMode, perSampleWeights *Tensor, sparse bool) *Tensor {
	if mode != BagSum && mode != BagMean && mode != BagMax {
		Fail(op, "unknown mode %v; want BagSum, BagMean or BagMax", mode)
	}
	t := embeddingBagType(op, input, offsets, weight)
	num, dim := weight.shape[0], weight.shape[1]
	idx, starts := embeddingBagOffsets(op, input, offsets, num)
	psw := bagSampleWeights(op, perSampleWeights, input, weight, mode)
	bags := t.Shape[0]
	out := empty(op, t.DType, t.Shape)
	bf16 := weight.dtype == BFloat16
	var argmax []int64
	switch {
	case mode == BagMax:
		argmax = make([]int64, bags*dim)
		if bf16 {
			kernels.EmbeddingBagMaxBF16(dim, idx, starts, weight.BFloat16s(), out.BFloat16s(), argmax)
		} else {
			kernels.EmbeddingBagMax(dim, idx, starts, weight.Float32s(), out.Float32s(), argmax)
		}
	case bf16:
		kernels.EmbeddingBagSumBF16(dim, idx, starts, weight.BFloat16s(), psw, mode == BagMean, out.BFloat16s())
	default:
		kernels.EmbeddingBagSum(dim, idx, starts, weight.Float32s(), psw, mode == BagMean, out.Float32s())
	}
	if traced(input, offsets, weight, perSampleWeights) && !sparse {
		trace("EmbeddingBag", embeddingBagAttrs{mode.String()}, []*Tensor{input, offsets, weight, perSampleWeights}, []*Tensor{out})
	}
	return record(op+"Backward", out, []*Tensor{input, offsets, weight, perSampleWeights}, func(g *Tensor) []*Tensor {
		dy := widenedF32(op+"Backward", "output gradient", g)
		var gw, gp *Tensor
		switch {
		case weight.requiresGrad && sparse && weight.IsLeaf():
			accumulateBagSparse(op+"Backward", weight, idx, starts, dy, psw, mode == BagMean)
		case weight.requiresGrad && bf16:
			gw = Empty(BFloat16, num, dim)
			if mode == BagMax {
				kernels.EmbeddingBagMaxBackwardBF16(num, dim, argmax, dy, gw.BFloat16s())
			} else {
				kernels.EmbeddingBagBackwardBF16(num, dim, idx, starts, dy, psw, mode == BagMean, gw.BFloat16s())
			}
		case weight.requiresGrad:
			gw = Zeros(num, dim)
			if mode == BagMax {
				kernels.EmbeddingBagMaxBackward(num, dim, argmax, dy, gw.Float32s())
			} else {
				kernels.EmbeddingBagBackward(num, dim, idx, starts, dy, psw, mode == BagMean, gw.Float32s())
			}
		}
		if perSampleWeights != nil && perSampleWeights.requiresGrad {
			gp = Zeros(perSampleWeights.shape...)
			if bf16 {
				kernels.EmbeddingBagWeightsGradBF16(dim, idx, starts, weight.BFloat16s(), dy, gp.Float32s())
			} else {
				kernels.EmbeddingBagWeightsGrad(dim, idx, starts, weight.Float32s(), dy, gp.Float32s())
			}
			gp = gp.castTo(perSampleWeights.dtype)
		}
		return []*Tensor{nil, nil, gw, gp}
	})
}

// bagSampleWeights validates EmbeddingBag's per-sample weights and returns
// them as float32 (nil for none). A float32 table takes float32 weights, as
// PyTorch does; a bfloat16 table also takes float32 ones, widening
// bfloat16 ones (they are as many as the indices, not the table).
func bagSampleWeights(op string, perSampleWeights, input, weight *Tensor, mode EmbeddingBagMode) []float32 {
	if perSampleWeights == nil {
		return nil
	}
	if mode != BagSum {
		Fail(op, "per-sample weights are only supported with BagSum, got mode %v", mode)
	}
	switch {
	case perSampleWeights.dtype == Float32:
	case perSampleWeights.dtype == BFloat16 && weight.dtype == BFloat16:
	case weight.dtype == BFloat16:
		failDType(op, "per-sample weights have dtype %v; a bfloat16 table takes float32 or bfloat16 per-sample weights", perSampleWeights.dtype)
	default:
		failDType(op, "per-sample weights have dtype %v; a %v table takes %v per-sample weights", perSampleWeights.dtype, weight.dtype, weight.dtype)
	}
	if !sameShape(perSampleWeights.shape, input.shape) {
		failShape(op, "per-sample weights have shape %v, want the input's shape %v", perSampleWeights.shape, input.shape)
	}
	return widenedF32(op, "per-sample weights", perSampleWeights)
}

// accumulateBagSparse adds EmbeddingBagSparse's row-sparse gradient to
// the leaf weight.
func accumulateBagSparse(op string, weight *Tensor, idx, starts []int64, dy, psw []float32, mean bool) {
	dim := weight.shape[1]
	bag := make([]int, len(idx))
	for b := range starts {
		for i := range bagLen(starts, b, len(idx)) {
			bag[int(starts[b])+i] = b
		}
	}
	row := make([]float32, dim)
	accumulateSparse(op, weight, idx, -1, func(i int) []float32 {
		b := bag[i]
		src := dy[b*dim : (b+1)*dim]
		switch {
		case psw != nil:
			for j, v := range src {
				row[j] = v * psw[i]
			}
		case mean:
			// PyTorch multiplies by the reciprocal of the bag's size.
			inv := 1 / float32(bagLen(starts, b, len(idx)))
			for j, v := range src {
				row[j] = v * inv
			}
		default:
			return src // read before the next row is asked for
		}
		return row
	})
}

// bagLen is the number of positions in bag b of n.
func bagLen(starts []int64, b, n int) int {
	if b+1 < len(starts) {
		return int(starts[b+1] - starts[b])
	}
	return n - int(starts[b])
}
