// Package kiln is the front door to Kiln, a deep-learning toolkit in pure
// Go: the few calls a training or inference program needs beyond building
// its model.
//
// The work itself happens in the packages underneath: autograd (tensors
// and differentiable ops), nn (modules and layers), amp (BF16 mixed
// precision), optim (optimizers), datasets (data sets and loaders) and
// kernels (the compute). Package kiln ties them together.
//
// Optimize prepares a model for fast CPU inference or training in one
// call, like Intel's ipex.optimize. For an evaluation model it folds
// batch norms into the layers before them, removes dropout, lays
// convolution weights out channels-last and packs them once for the GEMM
// (Prepack) or, with DType(autograd.BFloat16), casts convolution and
// linear weights and embedding tables to BF16:
//
//	nn.Eval(model)
//	res, err := kiln.Optimize(model, kiln.DType(autograd.BFloat16))
//	logits := model.Forward(amp.Autocast(autograd.NoGrad(x)))
//
// For a training model it lays the weights out channels-last and, in BF16,
// splits each convolution, linear and embedding weight into the BF16 half
// the model computes with and the low half of its FP32 master, and
// rebuilds the optimizer as its fused split form:
//
//	res, err := kiln.Optimize(model, kiln.DType(autograd.BFloat16), kiln.WithOptimizer(sgd))
//	opt := res.Optimizer // step this one from now on, forwards from amp.Autocast inputs
//
// Progress draws a training progress bar with the running loss, accuracy
// and throughput.
package kiln
