// Package amp holds Kiln's BF16 mixed-precision training support: split
// master weights, and the plainer FP32-master-plus-BF16-copy mode.
//
// # Split master weights
//
// Split cuts each float32 of a parameter in two. The high 16 bits are a
// bfloat16 number, the Top tensor the model computes with; the low 16 bits
// are kept beside it in Bottom. Top is the float32 truncated (rounded toward
// zero), not rounded to nearest: that is what makes the cut lossless, since
// joining Top and Bottom gives back the float32's exact bits. An optimizer
// step joins the halves, updates in FP32 and splits the result again
// (SplitParam.Step), so the FP32 master is never lost, and Top plus Bottom
// take the 4 bytes a float32 took: no extra memory.
//
// Truncation keeps the exact top 16 bits whatever they mean: subnormals
// stay subnormal (or become zero when their set bits all lie in Bottom,
// with the sign kept), signed zeros keep their sign, infinities stay
// infinite, and NaN payload bits are carried over. A NaN whose payload bits
// all lie in the low half has a Top that reads as an infinity of the same
// sign; Join still restores the NaN. Compared with the round-to-nearest
// conversion the rest of Kiln uses (autograd.Cast), a truncated Top is off
// by less than one bfloat16 unit in the last place, toward zero, instead of
// half a unit.
//
// SplitModule swaps every float32 parameter of an nn.Module for its Top (the
// module looks its parameters up by name, so forward and backward see Top)
// and keeps the Bottoms in the returned SplitModel. Its StateDict and
// SaveStateDict give the joined FP32 values under the parameter names, so a
// checkpoint of a split model is the same file the FP32 model would save,
// and LoadStateDict/LoadTensors read FP32 (or any float) values back into
// split form.
//
// # Gradients
//
// Top is a bfloat16 leaf, and the autograd tape gives a leaf's gradient the
// leaf's dtype: Top.Grad() is bfloat16, the float32 gradient computed by the
// ops rounded to nearest even (several contributions are summed in float32
// and rounded after each addition). SplitParam.Step hands the optimizer's
// update function the joined FP32 parameter and that gradient widened to
// float32, span by span; a float32 gradient tensor is accepted as well.
//
// # Master copy
//
// MasterCopy is the non-split mode: the FP32 parameter stays the master and
// a separate bfloat16 Copy, rounded to nearest even, is what the model
// computes with. It costs 2 extra bytes per element and its Copy is the
// better-rounded BF16 weight; Refresh recomputes the Copy after the master
// changes.
//
// # Choosing parameters
//
// SplitModuleFunc, MasterCopyModule and CastModule (the inference form:
// bfloat16 weights rounded to nearest even, no FP32 kept) convert only the
// parameters a ParamFilter selects. AutocastParams selects what IPEX
// converts: the weights and biases of Conv2d, Conv3d and Linear, the layers
// Autocast runs in BF16. BatchNorm parameters stay float32, and the split
// optimizers update them in FP32 beside the split ones, in the same groups.
//
// The fused optimizers do not go through SplitParam.Step: optim's split
// forms (optim.NewSGDSplit and its siblings) take a SplitModel and join,
// step and split each span in one pass with vectorised kernels. The loops
// here serve the state dicts, MasterCopy and custom update functions.
package amp
