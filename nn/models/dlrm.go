package models

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// DLRMConfig describes a DLRM (facebookresearch/dlrm's DLRM_Net), in the
// terms of dlrm_s_pytorch.py's flags.
type DLRMConfig struct {
	// SparseFeatureSize is d, every table's row size and the bottom MLP's
	// output width (--arch-sparse-feature-size).
	SparseFeatureSize int
	// EmbeddingSizes holds each table's row count
	// (--arch-embedding-size); there must be at least one table.
	EmbeddingSizes []int
	// BottomMLP is the bottom MLP's widths, input first: [13, 512, 256,
	// 64] for 13 dense features (--arch-mlp-bot). Its last width must be
	// SparseFeatureSize.
	BottomMLP []int
	// TopMLP is the top MLP's output widths, [512, 256, 1]
	// (--arch-mlp-top); its input width follows from the interaction
	// (TopInput). The last width is normally 1.
	TopMLP []int
	// InteractionOp is "dot" (also meant by "") or "cat"
	// (--arch-interaction-op).
	InteractionOp string
	// InteractionItself keeps each feature's dot with itself
	// (--arch-interaction-itself); "dot" only.
	InteractionItself bool
	// LossThreshold, when above 0, clamps the probabilities to [t, 1−t]
	// (--loss-threshold); it must be below 0.5.
	LossThreshold float64
	// SparseTables gives the tables row-sparse gradients, as dlrm's
	// nn.EmbeddingBag(sparse=True) does.
	SparseTables bool
	// EmbeddingMode reduces a bag: "sum" (dlrm's, also meant by "") or
	// "mean".
	EmbeddingMode string
	// IncludeLastOffset says that each offsets tensor passed to Forward
	// ends with the end of its last bag (include_last_offset=True); dlrm
	// passes bag starts only.
	IncludeLastOffset bool
}

// features returns N, the number of interacting features: the tables and
// the bottom MLP's output.
func (c DLRMConfig) features() int { return len(c.EmbeddingSizes) + 1 }

// TopInput returns the top MLP's input width: d + N(N−1)/2 for "dot",
// d + N(N+1)/2 with InteractionItself, N·d for "cat", N being the number
// of tables plus one.
func (c DLRMConfig) TopInput() int {
	n, d := c.features(), c.SparseFeatureSize
	switch {
	case c.InteractionOp == "cat":
		return n * d
	case c.InteractionItself:
		return d + n*(n+1)/2
	}
	return d + n*(n-1)/2
}

// check returns the first problem with c, or nil.
func (c DLRMConfig) check() error {
	switch {
	case c.SparseFeatureSize <= 0:
		return fmt.Errorf("sparse feature size must be positive, got %d", c.SparseFeatureSize)
	case len(c.EmbeddingSizes) == 0:
		return errors.New("no embedding tables; DLRM needs at least one")
	case len(c.BottomMLP) < 2:
		return fmt.Errorf("bottom MLP needs an input and at least one layer width, got %v", c.BottomMLP)
	case len(c.TopMLP) < 1:
		return errors.New("top MLP needs at least one layer width, got none")
	case c.InteractionOp != "" && c.InteractionOp != "dot" && c.InteractionOp != "cat":
		return fmt.Errorf("interaction op must be \"dot\" or \"cat\", got %q", c.InteractionOp)
	case c.EmbeddingMode != "" && c.EmbeddingMode != "sum" && c.EmbeddingMode != "mean":
		return fmt.Errorf("embedding mode must be \"sum\" or \"mean\", got %q", c.EmbeddingMode)
	case !(c.LossThreshold >= 0 && c.LossThreshold < 0.5):
		return fmt.Errorf("loss threshold must be in [0, 0.5), got %v", c.LossThreshold)
	}
	for t, n := range c.EmbeddingSizes {
		if n <= 0 {
			return fmt.Errorf("embedding table %d (emb_l.%d) must have a positive number of rows, got %d", t, t, n)
		}
	}
	for i, w := range c.BottomMLP {
		if w <= 0 {
			return fmt.Errorf("bottom MLP width %d must be positive, got %d (in %v)", i, w, c.BottomMLP)
		}
	}
	for i, w := range c.TopMLP {
		if w <= 0 {
			return fmt.Errorf("top MLP width %d must be positive, got %d (in %v)", i, w, c.TopMLP)
		}
	}
	if last := c.BottomMLP[len(c.BottomMLP)-1]; last != c.SparseFeatureSize {
		return fmt.Errorf("bottom MLP output %d must equal the sparse feature size %d (bottom MLP %v)", last, c.SparseFeatureSize, c.BottomMLP)
	}
	return nil
}

// DLRM is facebookresearch/dlrm's DLRM_Net: a bottom MLP on the dense
// features, one embedding bag per sparse feature, their interaction, and a
// top MLP ending in a sigmoid. Its state dict names are DLRM_Net's
// ("emb_l.3.weight", "bot_l.0.weight", "top_l.2.bias", …), so a
// DLRM_Net.state_dict() saved as safetensors loads into it strictly.
type DLRM struct {
	nn.Base
	Config DLRMConfig
	// Emb is emb_l, the tables.
	Emb *nn.MergedEmbeddingBag
	// Bottom is bot_l: Linear and ReLU for every layer.
	Bottom *nn.Sequential
	// Top is top_l: Linear and ReLU, the last Linear followed by Sigmoid.
	Top *nn.Sequential
}

// NewDLRM builds a DLRM initialised as dlrm does, from g: each Linear
// layer's weight [m, n] from N(0, 2/(m+n)) and bias from N(0, 1/m), each
// table of n rows from U(−√(1/n), √(1/n)). It returns an error for a bad
// configuration.
func NewDLRM(g *autograd.Generator, cfg DLRMConfig) (*DLRM, error) {
	if g == nil {
		return nil, errors.New("models: NewDLRM: generator is nil")
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("models: NewDLRM: %w", err)
	}
	cfg.EmbeddingSizes = append([]int(nil), cfg.EmbeddingSizes...)
	cfg.BottomMLP = append([]int(nil), cfg.BottomMLP...)
	cfg.TopMLP = append([]int(nil), cfg.TopMLP...)
	m := &DLRM{Config: cfg}
	err := autograd.Try(func() {
		// DLRM_Net assigns emb_l, bot_l, top_l in this order, which is
		// its state dict's.
		m.Emb = register(&m.Base, "emb_l", nn.NewMergedEmbeddingBag(g, cfg.EmbeddingSizes, cfg.SparseFeatureSize,
			nn.MergedEmbeddingBagOptions{Mode: cfg.EmbeddingMode, Sparse: cfg.SparseTables, IncludeLastOffset: cfg.IncludeLastOffset,
				Init: func(g *autograd.Generator, t int, w *autograd.Tensor) {
					b := math.Sqrt(1 / float64(cfg.EmbeddingSizes[t]))
					nn.Uniform(g, w, -b, b)
				}}))
		m.Bottom = register(&m.Base, "bot_l", dlrmMLP(g, cfg.BottomMLP, false))
		m.Top = register(&m.Base, "top_l", dlrmMLP(g, append([]int{cfg.TopInput()}, cfg.TopMLP...), true))
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// dlrmMLP is dlrm's create_mlp: Linear and ReLU per layer, the last
// activation Sigmoid when sigmoidLast is set.
func dlrmMLP(g *autograd.Generator, widths []int, sigmoidLast bool) *nn.Sequential {
	s := nn.NewSequential()
	for i := 0; i+1 < len(widths); i++ {
		n, m := widths[i], widths[i+1]
		l := nn.NewLinear(g, n, m, nn.LinearOptions{})
		nn.Normal(g, l.Weight(), 0, math.Sqrt(2/float64(m+n)))
		nn.Normal(g, l.Bias(), 0, math.Sqrt(1/float64(m)))
		s.Append(l)
		if sigmoidLast && i+2 == len(widths) {
			s.Append(nn.NewSigmoid())
		} else {
			s.Append(nn.NewReLU())
		}
	}
	return s
}

// Forward maps dense features [B, BottomMLP[0]] and each table's bags
// (indices[t], 1-D Int64, split into B bags at offsets[t]; see
// nn.MergedEmbeddingBag.Forward) to probabilities [B, TopMLP[last]],
// clamped to [t, 1−t] when LossThreshold t is above 0. The lookups join
// the dense features' computation: when dense is in an arena
// (autograd.Arena.In) or under autocast (amp.Autocast), so are the
// lookups, so that the whole step's memory comes from the arena and
// bfloat16 tables give bfloat16 bags.
func (m *DLRM) Forward(dense *autograd.Tensor, indices, offsets []*autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(m, dense)()
	x := m.bottom(dense)
	return m.top(x, m.Emb.Forward(joined(dense, indices...), joined(dense, offsets...)))
}

// joined returns lookups in the dense features' computation: in its
// arena, if it has one, so that the bags and all computed from them take
// their memory from it too, and under its autocast, if on, so that
// bfloat16 tables give bfloat16 bags.
func joined(dense *autograd.Tensor, lookups ...*autograd.Tensor) []*autograd.Tensor {
	m := dense.Mode()
	if m.Arena() == nil && !m.Autocast() {
		return lookups
	}
	in := make([]*autograd.Tensor, len(lookups))
	for i, t := range lookups {
		if t == nil {
			continue
		}
		if a := m.Arena(); a != nil {
			t = a.In(t)
		}
		if m.Autocast() {
			t = autograd.Autocast(t)
		}
		in[i] = t
	}
	return in
}

// ForwardFixed is Forward for bags of one size L: indices is Int64
// [B, tables, L] (see nn.MergedEmbeddingBag.ForwardFixed).
func (m *DLRM) ForwardFixed(dense, indices *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(m, dense)()
	x := m.bottom(dense)
	return m.top(x, m.Emb.ForwardFixed(joined(dense, indices)[0]))
}

// ForwardPacked is Forward for every table's bags in one pair of tensors,
// an exported graph's multi-hot inputs: indices Int64 [N], the tables'
// indices concatenated in table order, and offsets Int64 [tables, B+1],
// where bag b of table t starts and, at B, where table t's bags end (see
// autograd.MergedEmbeddingBagPacked).
func (m *DLRM) ForwardPacked(dense, indices, offsets *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(m, dense)()
	x := m.bottom(dense)
	ly := func() []*autograd.Tensor {
		defer nn.Enter(m.Emb, indices)()
		lookups := joined(dense, indices, offsets)
		return autograd.MergedEmbeddingBagPacked(m.Emb.Weights(), lookups[0], lookups[1], m.Emb.Mode, m.Emb.Sparse)
	}()
	return m.top(x, ly)
}

func (m *DLRM) bottom(dense *autograd.Tensor) *autograd.Tensor {
	if in := m.Config.BottomMLP[0]; dense == nil || dense.NDim() != 2 || dense.Shape()[1] != in {
		var shape []int
		if dense != nil {
			shape = dense.Shape()
		}
		nn.Fail(autograd.ErrShape, "DLRM.Forward", "dense features must be [batch, %d] (the bottom MLP's input), got shape %v", in, shape)
	}
	return m.Bottom.Forward(dense)
}

// top is dlrm's interact_features followed by the top MLP and the loss
// threshold's clamp.
func (m *DLRM) top(x *autograd.Tensor, ly []*autograd.Tensor) *autograd.Tensor {
	if x.DType() == autograd.BFloat16 {
		// Under autocast the bottom MLP returns bfloat16, and so does the
		// merged lookup of bfloat16 tables; float32 bags (float32 tables,
		// or bfloat16 ones outside autocast or in a trace) are rounded to
		// bfloat16 here, what IPEX's bfloat16 tables return, as the
		// interaction takes one dtype: it and the top MLP stay BF16 (their
		// gradients flow back widened).
		ly = append([]*autograd.Tensor(nil), ly...)
		for t, e := range ly {
			if e.DType() == autograd.Float32 {
				ly[t] = autograd.Cast(e, autograd.BFloat16)
			}
		}
	}
	var z *autograd.Tensor
	if m.Config.InteractionOp == "cat" {
		z = autograd.Cat(append([]*autograd.Tensor{x}, ly...), 1)
	} else {
		z = autograd.Interaction(x, ly, m.Config.InteractionItself)
	}
	p := m.Top.Forward(z)
	if t := m.Config.LossThreshold; t > 0 {
		p = autograd.Clamp(p, t, 1-t) // torch.clamp(p, min=t, max=1−t)
	}
	return p
}
