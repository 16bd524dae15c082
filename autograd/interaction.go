package autograd

import (
	"strconv"

	"github.com/kilnml/kiln/kernels"
)

// Interaction is DLRM's dot feature interaction (facebookresearch/dlrm,
// interact_features with arch_interaction_op="dot"): for each sample, the
// bottom MLP's output x followed by the dot products of every pair of the
// sample's feature vectors, x and the embedding outputs ly. x and each
// ly[t] are [B, d]; the result is [B, d+P] with, after x's d values, the
// dots <f_i, f_j> for i = 1…T, j = 0…i−1 (f_0 = x, f_t = ly[t−1]), the
// order of dlrm's Z[:, li, lj]. With self (dlrm's arch_interaction_itself)
// each vector's dot with itself is kept too, j = 0…i, so P is
// (T+1)(T+2)/2 instead of T(T+1)/2.
//
// Only the kept dots are computed, never the [B, F, F] Gram matrix that
// dlrm's bmm forms, each accumulated in float32 in a fixed order (see
// kernels.InteractionForward): the bits do not depend on the thread
// count, and differ from PyTorch's bmm by float32 rounding only.
//
// All operands are float32, or all bfloat16: with bfloat16 operands the
// interaction is computed in float32 from their widened values and
// rounded once to a bfloat16 result, and their gradients are bfloat16
// too, rounded likewise (see kernels.InteractionForwardBF16). Every operand
// that requires a gradient gets one. dlrm always has at least one table,
// so an empty ly is an error.
func Interaction(x *Tensor, ly []*Tensor, self bool) *Tensor {
	const op = "Interaction"
	feats := interactionOperands(op, x, ly)
	B, d := x.shape[0], x.shape[1]
	s := kernels.InteractionShape{Batch: B, Dim: d, Features: len(feats), Self: self}
	// The backward closure keeps the operands' data, not the tensors,
	// which would hold the tape that made them.
	need, modes := make([]bool, len(feats)), make([]Mode, len(feats))
	for f, t := range feats {
		need[f], modes[f] = t.requiresGrad, t.mode.arenaMode()
	}
	// Every kernel writes every element of the output and the gradients.
	out := resultIn(op, modeOf(feats...), x.dtype, []int{B, s.Width()}, Contiguous, false)
	var backward func(g *Tensor) []*Tensor
	if x.dtype == BFloat16 {
		data := interactionData(feats, (*Tensor).BFloat16s)
		kernels.InteractionForwardBF16(s, data, out.BFloat16s())
		backward = func(g *Tensor) []*Tensor {
			grads := interactionGrads(need, func(f int) []uint16 { return gradSlice[uint16](modes[f], B*d) })
			kernels.InteractionBackwardBF16(s, data, rowMajor(g).BFloat16s(), grads)
			return interactionGradTensors(BFloat16, grads, modes, B, d)
		}
	} else {
		data := interactionData(feats, (*Tensor).Float32s)
		kernels.InteractionForward(s, data, out.Float32s())
		backward = func(g *Tensor) []*Tensor {
			grads := interactionGrads(need, func(f int) []float32 { return gradSlice[float32](modes[f], B*d) })
			kernels.InteractionBackward(s, data, g.ContiguousFloat32s(), grads)
			return interactionGradTensors(Float32, grads, modes, B, d)
		}
	}
	if traced(feats...) {
		trace(op, interactionAttrs{self}, feats, []*Tensor{out})
	}
	return record(op+"Backward", out, feats, backward)
}

// interactionData returns the row-major data of the operands feats, all
// of data's dtype.
func interactionData[T any](feats []*Tensor, data func(*Tensor) []T) [][]T {
	out := make([][]T, len(feats))
	for f, t := range feats {
		out[f] = data(rowMajor(t))
	}
	return out
}

// interactionGrads returns a gradient matrix from alloc(f) for each
// operand f that needs one, nil for the others.
func interactionGrads[T any](need []bool, alloc func(f int) []T) [][]T {
	grads := make([][]T, len(need))
	for f, n := range need {
		if n {
			grads[f] = alloc(f)
		}
	}
	return grads
}

// interactionGradTensors wraps the gradient matrices ([B, d] each, nil
// for none) as tensors of dtype, each in its operand's arena mode.
func interactionGradTensors[T any](dtype DType, grads [][]T, modes []Mode, B, d int) []*Tensor {
	res := make([]*Tensor, len(grads))
	for f, g := range grads {
		if g != nil {
			res[f] = &Tensor{dtype: dtype, shape: []int{B, d}, data: g, mode: modes[f]}
		}
	}
	return res
}

// interactionAttrs are Interaction's attributes in a graph: its operands
// are x then the ly.
type interactionAttrs struct{ Self bool }

// interactionType checks Interaction's operands (x then the ly) and
// returns its result's type.
func interactionType(op string, in []*Tensor, self bool) TensorType {
	if len(in) == 0 {
		Fail(op, "no operands; want x then the embedding outputs")
	}
	feats := interactionOperands(op, in[0], in[1:])
	s := kernels.InteractionShape{Batch: in[0].shape[0], Dim: in[0].shape[1], Features: len(feats), Self: self}
	return TensorType{DType: in[0].dtype, Shape: []int{s.Batch, s.Width()}}
}

func init() {
	registerInfer(func(op string, attrs any, in []*Tensor) []TensorType {
		return []TensorType{interactionType(op, in, attrs.(interactionAttrs).Self)}
	}, "Interaction")
	defineEager("Interaction", interactionAttrs{}, func(a any, in []*Tensor) []*Tensor {
		if len(in) == 0 {
			Fail("Interaction", "no operands; want x then the embedding outputs")
		}
		return one(Interaction(in[0], in[1:], a.(interactionAttrs).Self))
	})
	defineBind("Interaction", func(attrs any, ins, outs []*Tensor, _ []bool) func() {
		y, x := outs[0], ins[0]
		if y.format != Contiguous {
			return nil
		}
		s := kernels.InteractionShape{Batch: x.shape[0], Dim: x.shape[1], Features: len(ins), Self: attrs.(interactionAttrs).Self}
		switch y.dtype {
		case Float32:
			if data := interactionBound(ins, Float32, (*Tensor).Float32s); data != nil {
				yd := y.Float32s()
				return func() { kernels.InteractionForward(s, data, yd) }
			}
		case BFloat16:
			if data := interactionBound(ins, BFloat16, (*Tensor).BFloat16s); data != nil {
				yd := y.BFloat16s()
				return func() { kernels.InteractionForwardBF16(s, data, yd) }
			}
		}
		return nil
	})
}

// interactionBound returns the data of a bound Interaction's operands, or
// nil unless all are contiguous and of dtype dt.
func interactionBound[T any](ins []*Tensor, dt DType, data func(*Tensor) []T) [][]T {
	out := make([][]T, len(ins))
	for f, t := range ins {
		if t == nil || t.dtype != dt || t.format != Contiguous {
			return nil
		}
		out[f] = data(t)
	}
	return out
}

// interactionOperands checks Interaction's operands and returns them as
// one list, x first.
func interactionOperands(op string, x *Tensor, ly []*Tensor) []*Tensor {
	if len(ly) == 0 {
		Fail(op, "ly is empty; the interaction needs at least one embedding output")
	}
	feats := append([]*Tensor{x}, ly...)
	for f, t := range feats {
		if !isFloatMatrix(t) {
			failFloatMatrix(op, interactionName(f), t, "[batch, dim]")
		}
		if f == 0 {
			continue
		}
		if t.dtype != x.dtype {
			failDType(op, "%s has dtype %v but x has %v; cast one of them", interactionName(f), t.dtype, x.dtype)
		}
		if t.shape[0] != x.shape[0] {
			failShape(op, "%s has batch size %d (shape %v) but x has %d (shape %v)", interactionName(f), t.shape[0], t.shape, x.shape[0], x.shape)
		}
		if t.shape[1] != x.shape[1] {
			failShape(op, "%s has dimension %d (shape %v) but x has %d (shape %v); every feature vector must have x's length", interactionName(f), t.shape[1], t.shape, x.shape[1], x.shape)
		}
	}
	return feats
}

// interactionName names feature f in errors: x, then ly[t].
func interactionName(f int) string {
	if f == 0 {
		return "x"
	}
	return "ly[" + strconv.Itoa(f-1) + "]"
}

// isFloatMatrix reports whether t is a 2-D float32 or bfloat16 tensor.
func isFloatMatrix(t *Tensor) bool {
	return t != nil && (t.dtype == Float32 || t.dtype == BFloat16) && t.NDim() == 2
}

// failFloatMatrix fails with what keeps t, called name in errors, from
// being a 2-D float32 or bfloat16 tensor; dims names its dimensions
// ("[rows, dim]"). Callers test isFloatMatrix first, so that naming t
// costs nothing when it is one.
func failFloatMatrix(op, name string, t *Tensor, dims string) {
	switch {
	case t == nil:
		Fail(op, "%s is nil", name)
	case t.dtype != Float32 && t.dtype != BFloat16:
		failDType(op, "%s has dtype %v; %s supports float32 and bfloat16", name, t.dtype, op)
	default:
		failShape(op, "%s must be 2-D %s, got shape %v", name, dims, t.shape)
	}
}
