// Package kernels holds Kiln's raw compute on slices: matrix multiply,
// convolution helpers, elementwise maths, reductions, dtype conversion and
// the worker pool that splits a kernel's work across cores.
//
// Kernels know nothing of tensors, shapes or autograd: they take slices,
// sizes and leading dimensions, in the style of BLAS. Every kernel has a
// pure-Go reference implementation; faster variants, where present, are
// chosen once at start from the CPU's features and must agree with the
// reference.
//
// # Argument convention
//
// Every exported kernel follows these rules; a new kernel does too.
//
// Destination position. Kernels that map slices onto slices element by
// element or by strides (Binary, BinaryScalar, BinaryStrided, AddReLU, Act's
// methods, Dropout, F32ToBF16, BF16ToF32, JoinBF16, SplitBF16, StridedCopy,
// StridedSum) put their destination first, like copy(dst, src); an operation
// selector (BinOp) or an element count may precede it, and scalars follow the
// sources. The operator kernels of a layer (GEMM, convolution, pooling, batch
// and layer norm, softmax, embeddings, losses) take, in order: the geometry (a
// shape descriptor, or sizes such as m, n, k or rows, n or num, dim), the
// inputs, then options (scalars such as scale or eps, flags such as
// countIncludePad or batchStats), and their outputs last, as BLAS puts C
// last; an Epilogue, which says what happens to the output as it is written,
// follows the output. Optimizer kernels update in place: the parameter first,
// then its gradient and state, then the configuration. Backward kernels name
// their outputs dx, dw, ... and a nil one is skipped where the doc says so.
//
// Shape descriptors and configurations. A shape descriptor (ConvShape,
// Pool2dShape, BatchNormShape, SoftmaxShape, CrossEntropyShape) is passed by
// pointer and only read; configurations (SGDConfig, AdamConfig, Epilogue,
// ConvEpilogue, ...) are passed by value.
//
// Outputs are the caller's. No kernel allocates an output: every result is
// written into a slice the caller passes and that slice is overwritten (not
// accumulated into) unless the doc says otherwise. The constructors of
// prepacked operands (PackB, PackConvWeights, PrepareConvWeightsBF16,
// PackInt8) are the only exported functions that return new memory; a
// native BF16 convolution given prepared weights packs each of their
// layouts, once, on the first forward that reads it. The suffix Into is not
// used in this package.
//
// Dtype suffixes. A BF16 suffix names the bfloat16 variant of the kernel of
// the same name, with the same argument order: its bfloat16 operands are
// []uint16, and it writes float32 where the float32 kernel accumulates
// (GemmBF16, ConvForwardBF16, ConvBackwardWeightBF16, ...) or bfloat16 where
// the operation is elementwise (BinaryBF16, Act.ForwardBF16, ...). A To
// suffix after BF16 (GemmBF16To, ConvForwardBF16To, ...) means the result is
// written as bfloat16 too, accumulated in float32 and rounded once; it never
// means allocation. Conversions are named XToY(dst, src) for slices and
// YFromX(v) for one value.
//
// Misuse. A kernel called with arguments that do not fit (slices shorter than
// the geometry needs, operands of different lengths, an unknown operation)
// panics with an *Error whose Kind is ErrShape, ErrIndex, ErrArgument or
// ErrUnsupported; autograd.Try turns such a panic into an error.
package kernels
