package nn

import (
	"strconv"

	"github.com/kilnml/kiln/autograd"
)

// MergedEmbeddingBagOptions configures NewMergedEmbeddingBag.
type MergedEmbeddingBagOptions struct {
	// Mode reduces each bag: "sum" (dlrm's choice, also meant by "") or
	// "mean". Unlike EmbeddingBagOptions, "" means "sum".
	Mode string
	// Sparse gives every table a row-sparse gradient (sparse=True).
	Sparse bool
	// IncludeLastOffset says that each offsets tensor passed to Forward
	// has one entry more than there are bags, the end of the last bag
	// (torch's include_last_offset=True).
	IncludeLastOffset bool
	// Init, when set, fills table t in place of the N(0, 1) draw: a model
	// with its own initialisation (dlrm's U(±√(1/n))) then draws each
	// table once, which for DLRM's hundreds of millions of entries is
	// seconds.
	Init func(g *autograd.Generator, t int, w *autograd.Tensor)
}

// MergedEmbeddingBag is a list of EmbeddingBag tables of one dimension and
// any row counts, looked up together by one autograd.MergedEmbeddingBag
// op (IPEX's MergedEmbeddingBag; dlrm's emb_l, an nn.ModuleList of
// nn.EmbeddingBag). Its children are the tables, named "0", "1", …, so
// held under "emb_l" its parameters are "emb_l.0.weight", "emb_l.1.weight",
// … as in a PyTorch state dict. Tables start from N(0, 1), as
// nn.EmbeddingBag's do, unless the options' Init fills them.
type MergedEmbeddingBag struct {
	Base
	Tables []*EmbeddingBag
	Dim    int
	Mode   autograd.EmbeddingBagMode
	// Sparse and IncludeLastOffset are the options'.
	Sparse, IncludeLastOffset bool
}

// NewMergedEmbeddingBag returns one table of rows[t] rows of size dim for
// each entry of rows. It needs at least one table, positive row counts and
// a positive dim.
func NewMergedEmbeddingBag(g *autograd.Generator, rows []int, dim int, opt MergedEmbeddingBagOptions) *MergedEmbeddingBag {
	const op = "NewMergedEmbeddingBag"
	checkGen(op, g)
	modes := map[string]autograd.EmbeddingBagMode{"": autograd.BagSum, "sum": autograd.BagSum, "mean": autograd.BagMean}
	mode, ok := modes[opt.Mode]
	if !ok {
		Fail(autograd.ErrArgument, op, "mode must be \"sum\" or \"mean\", got %q", opt.Mode)
	}
	if len(rows) == 0 {
		Fail(autograd.ErrArgument, op, "no tables")
	}
	if dim <= 0 {
		Fail(autograd.ErrArgument, op, "dimension must be positive, got %d", dim)
	}
	for t, n := range rows {
		if n <= 0 {
			Fail(autograd.ErrArgument, op, "table %d must have a positive number of rows, got %d", t, n)
		}
	}
	m := &MergedEmbeddingBag{Dim: dim, Mode: mode, Sparse: opt.Sparse, IncludeLastOffset: opt.IncludeLastOffset}
	name := map[autograd.EmbeddingBagMode]string{autograd.BagSum: "sum", autograd.BagMean: "mean"}[mode]
	for t, n := range rows {
		var e *EmbeddingBag
		if opt.Init == nil {
			e = NewEmbeddingBag(g, n, dim, EmbeddingBagOptions{Mode: name, Sparse: opt.Sparse})
		} else {
			e = &EmbeddingBag{Num: n, Dim: dim, Mode: mode, Sparse: opt.Sparse}
			opt.Init(g, t, e.RegisterParameter("weight", autograd.Zeros(n, dim)))
		}
		m.RegisterModule(strconv.Itoa(t), e)
		m.Tables = append(m.Tables, e)
	}
	return m
}

// Len returns the number of tables.
func (m *MergedEmbeddingBag) Len() int { return len(m.Tables) }

// Weights returns the tables' [rows, Dim] weights, in order.
func (m *MergedEmbeddingBag) Weights() []*autograd.Tensor {
	ws := make([]*autograd.Tensor, len(m.Tables))
	for t, e := range m.Tables {
		ws[t] = e.Weight()
	}
	return ws
}

// Forward looks up table t with the 1-D Int64 indices[t] split into bags
// at offsets[t] (see autograd.MergedEmbeddingBag, and IncludeLastOffset)
// and returns one float32 [bags, Dim] tensor per table, all from one op.
// Every table needs the same number of bags.
func (m *MergedEmbeddingBag) Forward(indices, offsets []*autograd.Tensor) []*autograd.Tensor {
	var first *autograd.Tensor
	if len(indices) > 0 {
		first = indices[0]
	}
	defer Enter(m, first)()
	if len(indices) != len(m.Tables) || len(offsets) != len(m.Tables) {
		Fail(autograd.ErrShape, "MergedEmbeddingBag.Forward", "%d tables need %d index and offset tensors, got %d indices and %d offsets", len(m.Tables), len(m.Tables), len(indices), len(offsets))
	}
	return autograd.MergedEmbeddingBag(m.Weights(), indices, offsets, m.Mode, m.IncludeLastOffset, m.Sparse)
}

// ForwardFixed looks up bags of one size L: indices is an Int64 [B, T, L]
// tensor whose [b, t, :] are sample b's rows of table t (see
// autograd.MergedEmbeddingBagFixed).
func (m *MergedEmbeddingBag) ForwardFixed(indices *autograd.Tensor) []*autograd.Tensor {
	defer Enter(m, indices)()
	return autograd.MergedEmbeddingBagFixed(m.Weights(), indices, m.Mode, m.Sparse)
}
