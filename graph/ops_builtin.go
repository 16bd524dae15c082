package graph

import (
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/opbind"
)

// builtinOp is what a graph checks of a node of an op autograd defines
// (internal/opbind) before the op's own type inference sees it.
type builtinOp struct {
	ins, outs arity
	optional  []int
}

var (
	one1   = builtinOp{ins: exactly(1), outs: exactly(1)}
	two1   = builtinOp{ins: exactly(2), outs: exactly(1)}
	biased = builtinOp{ins: exactly(3), outs: exactly(1), optional: []int{2}}
)

// builtins are the ops autograd defines, by name. The running statistics
// of a BatchNorm may be absent too: inference names them.
var builtins = map[string]builtinOp{
	"Conv2d": biased, "Conv3d": biased, "Linear": biased, "Matmul": two1, "BMM": two1,
	"BatchNorm": {ins: exactly(5), outs: exactly(1), optional: []int{1, 2, 3, 4}},
	"LayerNorm": {ins: exactly(3), outs: exactly(1), optional: []int{1, 2}},
	"ReLU":      one1, "Sigmoid": one1, "Tanh": one1, "SiLU": one1, "Neg": one1, "Exp": one1, "Log": one1,
	"Sqrt": one1, "HardTanh": one1, "Clamp": one1, "ELU": one1, "GELU": one1, "Pow": one1, "AddScalar": one1, "MulScalar": one1,
	"Dropout": one1, "Identity": one1, "Clone": one1, "Cast": one1, "To": one1,
	"Add": two1, "Sub": two1, "Mul": two1, "Div": two1,
	"MaxPool2d": one1, "AvgPool2d": one1, "AdaptiveAvgPool2d": one1, "Sum": one1, "Mean": one1,
	"Reshape": one1, "Flatten": one1, "Permute": one1, "Softmax": one1, "LogSoftmax": one1,
	"Cat":       {ins: arity{1, -1}, outs: exactly(1)},
	"Split":     {ins: exactly(1), outs: arity{1, -1}},
	"Embedding": two1,
	// The per-channel forms take their scales as a second operand.
	"Quantize": one1, "Dequantize": one1, "FakeQuantize": one1,
	"QuantizePerChannel": two1, "DequantizePerChannel": two1, "FakeQuantizePerChannel": two1,
	// EmbeddingBag(input, offsets, weight, per_sample_weights).
	"EmbeddingBag": {ins: exactly(4), outs: exactly(1), optional: []int{1, 3}},
	// MergedEmbeddingBag(tables..., indices..., offsets...) with T of each
	// (T = operands/3), one float32 [bags, dim] result per table;
	// MergedEmbeddingBagFixed(tables..., indices) with [B, T, L] indices.
	// MergedEmbeddingBagPacked(tables..., indices, offsets): multi-hot
	// bags of every table in one i64[N] indices, every table's indices
	// concatenated in table order, and one i64[T, B+1] offsets, where
	// offsets[t][b] is the position in indices where bag b of table t
	// starts and offsets[t][B] where table t's last bag ends (so
	// offsets[0][0] = 0, offsets[t][B] = offsets[t+1][0], offsets[T-1][B]
	// = N; empty bags allowed). N is free: other numbers of indices run
	// on one plan. DLRM's emb_l; its inference checks that the counts fit.
	"MergedEmbeddingBag":       {ins: arity{3, -1}, outs: arity{1, -1}},
	"MergedEmbeddingBagFixed":  {ins: arity{2, -1}, outs: arity{1, -1}},
	"MergedEmbeddingBagPacked": {ins: arity{3, -1}, outs: arity{1, -1}},
	// Interaction(x, ly...): DLRM's dot interaction of x and the tables'
	// results.
	"Interaction": {ins: arity{2, -1}, outs: exactly(1)},
}

func init() {
	for name, b := range builtins {
		d, ok := opbind.Lookup[*autograd.Tensor, autograd.TensorType](name)
		if !ok || d.Eager == nil || d.Infer == nil {
			panic("graph: autograd does not describe op " + name)
		}
		registerOp(&opImpl{name: name, ins: b.ins, outs: b.outs, optional: b.optional, attrs: d.AttrType(),
			infer: func(attrs any, ins []*sig) ([]sig, error) { return inferWith(d.Infer, attrs, ins) },
			eager: d.Eager, compile: bindCompiled(d.Bind)})
	}
}
