package optim

import (
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// Sparse gradients (autograd.EmbeddingSparse, nn.EmbeddingOptions.Sparse)
// name a few rows of a [num, dim] table. SGD, Adagrad and RowWiseAdagrad
// update only those rows, as torch.optim (and dlrm's rwsadagrad) do for
// sparse gradients; the other optimizers need every element's gradient
// and refuse them.

// sparseRows returns the kernels' view of a coalesced sparse gradient.
func sparseRows(sg *autograd.SparseGrad) kernels.SparseRows {
	return kernels.SparseRows{Dim: sg.Shape()[1], Rows: sg.Indices, Values: sg.Values.Float32s()}
}

// checkSparseDecay panics for a parameter with a sparse gradient in a
// group with weight decay: the L2 term would touch every row, which is
// what a sparse step avoids, and PyTorch rejects it too.
func (q param) checkSparseDecay(weightDecay float64) {
	if weightDecay != 0 {
		fail(*q.name+".Step", "group %d parameter %d has a sparse gradient, and weight_decay %v is not compatible with sparse gradients (use weight_decay 0 for the embedding's group)", q.group, q.index, weightDecay)
	}
}

// rejectSparse panics for a parameter with a sparse gradient, for the
// optimizers whose update needs the whole gradient.
func (q param) rejectSparse() {
	if q.SparseGrad() != nil {
		fail(*q.name+".Step", "group %d parameter %d has a sparse gradient; %s does not support sparse gradients (use SGD, Adagrad or RowWiseAdagrad, or a dense embedding)", q.group, q.index, *q.name)
	}
}
