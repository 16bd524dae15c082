// Package kiln is the front door to Kiln, a deep-learning toolkit in pure
// Go: the few calls a training or inference program needs beyond building
// its model.
//
// The work itself happens in the packages underneath: autograd (tensors
// and differentiable ops), nn (modules and layers), optim (optimizers),
// datasets (data sets and loaders) and kernels (the compute). Package kiln
// ties them together. Today it offers a training progress bar, Progress;
// kiln.Optimize, which prepares a model for fast CPU training or inference
// in one call (batch-norm folding, channels-last layouts, prepacked
// weights, BF16 split parameters, fused optimizers), is still to come.
package kiln
