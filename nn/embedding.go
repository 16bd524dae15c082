package nn

import "github.com/kilnml/kiln/autograd"

// EmbeddingOptions configures NewEmbedding.
type EmbeddingOptions struct {
	// PaddingIdx, when set, names a row that is initialised to zeros and
	// receives no gradient (padding_idx). Negative values count from the
	// end, as in PyTorch.
	PaddingIdx *int64
	// Sparse gives the weight a row-sparse gradient (sparse=True): only
	// the rows a batch read, for SGD and Adagrad to update. See
	// autograd.EmbeddingSparse.
	Sparse bool
}

// Embedding looks up rows of a [Num, Dim] table by Int64 index
// (torch.nn.Embedding). Its parameter is "weight" [Num, Dim], initialised
// from N(0, 1), float32 until amp makes it bfloat16 (a split Top or a
// cast), when Forward returns bfloat16 rows.
type Embedding struct {
	Base
	Num, Dim int
	// PaddingIdx is the normalised (non-negative) padding row, or nil.
	PaddingIdx *int64
	// Sparse is EmbeddingOptions.Sparse.
	Sparse bool
}

// NewEmbedding returns an Embedding of num rows of size dim.
func NewEmbedding(g *autograd.Generator, num, dim int, opt EmbeddingOptions) *Embedding {
	checkGen("NewEmbedding", g)
	if num < 0 || dim < 0 {
		Fail(autograd.ErrArgument, "NewEmbedding", "negative size: num=%d dim=%d", num, dim)
	}
	e := &Embedding{Num: num, Dim: dim, Sparse: opt.Sparse}
	if opt.PaddingIdx != nil {
		p := *opt.PaddingIdx
		if p < -int64(num) || p >= int64(num) {
			Fail(autograd.ErrIndex, "NewEmbedding", "padding index %d must be within the %d embeddings", p, num)
		}
		if p < 0 {
			p += int64(num)
		}
		e.PaddingIdx = &p
	}
	w := Normal(g, e.RegisterParameter("weight", autograd.Zeros(num, dim)), 0, 1)
	if e.PaddingIdx != nil {
		row := w.Float32s()[int(*e.PaddingIdx)*dim:][:dim]
		clear(row)
	}
	return e
}

// Weight returns the [Num, Dim] table.
func (e *Embedding) Weight() *autograd.Tensor { return e.param("weight") }

// Forward returns the rows named by indices (Int64, any shape), shaped
// [indices..., Dim].
func (e *Embedding) Forward(indices *autograd.Tensor) *autograd.Tensor {
	defer Enter(e, indices)()
	switch {
	case e.PaddingIdx != nil && e.Sparse:
		return autograd.EmbeddingSparsePadding(indices, e.Weight(), *e.PaddingIdx)
	case e.PaddingIdx != nil:
		return autograd.EmbeddingPadding(indices, e.Weight(), *e.PaddingIdx)
	case e.Sparse:
		return autograd.EmbeddingSparse(indices, e.Weight())
	}
	return autograd.Embedding(indices, e.Weight())
}

// EmbeddingBagOptions configures NewEmbeddingBag.
type EmbeddingBagOptions struct {
	// Mode reduces each bag: "mean" (PyTorch's default, also meant by
	// ""), "sum" or "max".
	Mode string
	// Sparse gives the weight a row-sparse gradient (sparse=True), as
	// EmbeddingOptions.Sparse does; mode "max" has none, as in PyTorch.
	Sparse bool
}

// EmbeddingBag sums, averages or takes the maximum of bags of rows of a
// [Num, Dim] table without materialising the rows
// (torch.nn.EmbeddingBag). Its parameter is "weight", initialised from
// N(0, 1); when amp makes it bfloat16, Forward returns bfloat16 bags
// reduced in wider precision. It takes several inputs, so it is not a
// Layer.
type EmbeddingBag struct {
	Base
	Num, Dim int
	Mode     autograd.EmbeddingBagMode
	// Sparse is EmbeddingBagOptions.Sparse.
	Sparse bool
}

// NewEmbeddingBag returns an EmbeddingBag of num rows of size dim.
func NewEmbeddingBag(g *autograd.Generator, num, dim int, opt EmbeddingBagOptions) *EmbeddingBag {
	checkGen("NewEmbeddingBag", g)
	if num < 0 || dim < 0 {
		Fail(autograd.ErrArgument, "NewEmbeddingBag", "negative size: num=%d dim=%d", num, dim)
	}
	modes := map[string]autograd.EmbeddingBagMode{"": autograd.BagMean, "mean": autograd.BagMean, "sum": autograd.BagSum, "max": autograd.BagMax}
	mode, ok := modes[opt.Mode]
	if !ok {
		Fail(autograd.ErrArgument, "NewEmbeddingBag", "mode must be \"sum\", \"mean\" or \"max\", got %q", opt.Mode)
	}
	if opt.Sparse && mode == autograd.BagMax {
		Fail(autograd.ErrArgument, "NewEmbeddingBag", "mode \"max\" does not support sparse gradients (Sparse); use \"sum\" or \"mean\"")
	}
	e := &EmbeddingBag{Num: num, Dim: dim, Mode: mode, Sparse: opt.Sparse}
	Normal(g, e.RegisterParameter("weight", autograd.Zeros(num, dim)), 0, 1)
	return e
}

// Weight returns the [Num, Dim] table.
func (e *EmbeddingBag) Weight() *autograd.Tensor { return e.param("weight") }

// Forward reduces bags of rows to [bags, Dim]. input is a 1-D Int64 tensor
// of indices split into bags at offsets (1-D Int64, bag starts), or a 2-D
// [bags, size] Int64 tensor with nil offsets. perSampleWeights, same shape
// as input, weighs each row (BagSum only) and may be nil.
func (e *EmbeddingBag) Forward(input, offsets, perSampleWeights *autograd.Tensor) *autograd.Tensor {
	defer Enter(e, input)()
	if e.Sparse {
		return autograd.EmbeddingBagSparse(input, offsets, e.Weight(), e.Mode, perSampleWeights)
	}
	return autograd.EmbeddingBag(input, offsets, e.Weight(), e.Mode, perSampleWeights)
}
