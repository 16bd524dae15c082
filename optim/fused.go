package optim

import (
	"slices"
	"sync/atomic"

	"github.com/kilnml/kiln/autograd"
)

// FuseSparse makes opt update each of params inside the backward pass,
// as IPEX's MergedEmbeddingBagWithSGD and WithAdaGrad do: when a sparse
// lookup (a sparse MergedEmbeddingBag, EmbeddingBagSparse,
// EmbeddingSparse) hands a table its gradient, opt applies its step to
// that table at once, at the table's group's current learning rate, and
// the table keeps no gradient for Step. The results are the bits the
// unfused sparse gradient and Step give; what goes is holding every
// table's gradient until Step.
//
// opt must be an SGD (without momentum), Adagrad or RowWiseAdagrad (the
// optimizers with sparse steps), and params some of its parameters: 2-D
// tables. For split BF16 training, fuse the optimizer kiln.Optimize
// returns, over the tables it holds (their tops).
//
// Each table may be looked up once between two Steps (or ZeroGrads):
// accumulating gradients over several backward passes cannot be fused,
// and a second gradient fails the backward pass naming the table.
func FuseSparse(opt Optimizer, params ...*autograd.Tensor) error {
	f, ok := opt.(interface {
		fuseSparse(params []*autograd.Tensor) error
	})
	if !ok || opt == nil {
		return errorf("FuseSparse", "optimizer %T has no sparse step to fuse (use SGD, Adagrad or RowWiseAdagrad)", opt)
	}
	return f.fuseSparse(params)
}

// sparseKinds are the optimizers whose steps take sparse gradients.
var sparseKinds = []string{"SGD", "Adagrad", "RowWiseAdagrad"}

func (b *base[G, O, S]) fuseSparse(params []*autograd.Tensor) error {
	op := b.kind.name + ".FuseSparse"
	if !slices.Contains(sparseKinds, b.kind.name) {
		return errorf(op, "%s has no sparse step to fuse (use SGD, Adagrad or RowWiseAdagrad)", b.kind.name)
	}
	type place struct{ g, i int }
	places := make([]place, len(params))
	for k, p := range params {
		places[k] = place{-1, -1}
		for gi := range b.groups {
			if i := slices.Index(b.groups[gi].params, p); i >= 0 {
				places[k] = place{gi, i}
			}
		}
		switch {
		case p == nil:
			return errorf(op, "parameter %d is nil", k)
		case places[k].g < 0:
			return errorf(op, "parameter %d (shape %v) is not one of the optimizer's", k, p.Shape())
		case p.NDim() != 2:
			return errorf(op, "parameter %d has shape %v; fused sparse updates are for 2-D tables", k, p.Shape())
		}
	}
	if b.stepped == nil {
		b.stepped = map[*autograd.Tensor]*atomic.Bool{}
	}
	for k, p := range params {
		gi, i := places[k].g, places[k].i
		g := &b.groups[gi]
		stepped := b.stepped[p]
		if stepped == nil {
			stepped = new(atomic.Bool)
			b.stepped[p] = stepped
		}
		p.SetSparseUpdate(func(sg *autograd.SparseGrad) {
			if stepped.Swap(true) {
				fail(op, "group %d parameter %d (shape %v) received a second sparse gradient before Step or ZeroGrad: a fused update cannot accumulate gradients (look each table up once per step, or do not fuse it)", gi, i, p.Shape())
			}
			// The unfused path, at once: the same gradient, the same step.
			p.SetSparseGrad(sg)
			b.kind.step(&g.opts, &g.state[i], param{Tensor: p, split: g.splits[i], name: &b.kind.name, group: int32(gi), index: int32(i)})
			p.ZeroGrad()
		})
	}
	return nil
}
