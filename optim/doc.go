// Package optim holds Kiln's optimizers and learning-rate schedules.
//
// Optimizers follow PyTorch 1.13's torch.optim: parameters are split into
// groups with their own hyper-parameters, Step updates every parameter that
// has a gradient, and StateDict/LoadStateDict save and restore the state
// (momentum buffers and so on) keyed by parameter number as PyTorch does.
// Each parameter's update is one fused pass over its memory, done by a
// kernel in package kernels.
//
// SGD, Adam and AdamW, Adagrad, Lamb and LARS share one skeleton: the
// groups, learning rates, ZeroGrad, state dicts and their checks, and the
// split-BF16 form are the same code for all of them, so they behave alike
// (and one conformance suite tests them alike); each optimizer adds its
// hyper-parameters, its per-parameter state and its update. Each has
// constructors over FP32 parameters (NewSGD, NewSGDGroups) and over a model
// split into BF16 weights and FP32 masters by amp.SplitModule (NewSGDSplit,
// NewSGDSplitGroups), and each is a Splittable: SplitForm rebuilds a
// trained FP32 optimizer over the split model, state and all, which is how
// kiln.Optimize switches a training run to BF16.
//
// Constructors and LoadStateDict return an *Error when the options,
// parameters or state dict do not fit; methods misused by the program (a
// group index out of range, a sparse gradient an optimizer cannot take)
// panic with one, which autograd.Try turns into an error.
//
// Schedulers (StepLR, MultiStepLR, CosineAnnealingLR, LinearLR) adjust the
// groups' learning rates with PyTorch's recursive formulas; call the
// scheduler's Step after the optimizer's, once per epoch or iteration.
package optim
