package amp

import "github.com/kilnml/kiln/autograd"

// Autocast returns a view of x (the same data) that starts a computation
// under BF16 autocast, like running the forward inside
// torch.autocast("cpu", dtype=torch.bfloat16):
//
//	out := model.Forward(amp.Autocast(x))
//
// The ops of the policy cast float32 operands to bfloat16 (to nearest
// even) and compute in BF16 with float32 accumulation, returning bfloat16
// results, so activations stay BF16 between them; every other op runs in
// its input dtype. The casts are differentiable, so float32 parameters get
// float32 gradients, while the BF16 tops of split parameters (SplitModule)
// get BF16 ones.
//
// The policy covers Linear, Matmul, BMM, Conv2d and Conv3d. Layer norm,
// softmax and losses widen BF16 inputs and compute in float32; batch norm
// computes in float32 with its float32 parameters and statistics and
// returns a BF16 input's dtype, as PyTorch's CPU autocast does.
//
// Autocast belongs to the computation started from x, not to the process:
// other goroutines, and computations started from unmarked tensors, are
// unaffected. Combine it with autograd.NoGrad for inference.
func Autocast(x *autograd.Tensor) *autograd.Tensor { return autograd.Autocast(x) }
