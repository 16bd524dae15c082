// Package kernels holds Kiln's raw compute on slices: matrix multiply,
// convolution helpers, elementwise maths, reductions, dtype conversion and
// the worker pool that splits a kernel's work across cores.
//
// Kernels know nothing of tensors, shapes or autograd: they take slices,
// sizes and leading dimensions, in the style of BLAS. Every kernel has a
// pure-Go reference implementation; faster variants, where present, are
// chosen once at start from the CPU's features and must agree with the
// reference.
package kernels
