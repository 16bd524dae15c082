// Package optim holds Kiln's optimizers and learning-rate schedules.
//
// Optimizers follow PyTorch 1.13's torch.optim: parameters are split into
// groups with their own hyper-parameters, Step updates every parameter that
// has a gradient, and StateDict/LoadStateDict save and restore the state
// (momentum buffers and so on) keyed by parameter number as PyTorch does.
// Each parameter's update is one fused pass over its memory, done by a
// kernel in package kernels.
//
// Schedulers (StepLR, MultiStepLR, CosineAnnealingLR, LinearLR) adjust the
// groups' learning rates with PyTorch's recursive formulas; call the
// scheduler's Step after the optimizer's, once per epoch or iteration.
package optim
