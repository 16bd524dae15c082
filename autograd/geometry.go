package autograd

import "github.com/kilnml/kiln/kernels"

// The kernel shapes of autograd's ops, for code that calls the kernels
// itself on memory it manages (package graph's compiled plans) and must
// call them exactly as the op does. Each validates its operands as the op
// would and panics with the op's *Error when they are wrong, so the
// geometry is worked out in one place.

// ConvGeometry returns the kernel shape of Conv2d (w 4-D) or Conv3d (w
// 5-D) of x, w and b with opt. ChannelsLast is left false: the op picks
// the layout from x's and w's formats, and the result's format tells it.
func ConvGeometry(x, w, b *Tensor, opt ConvOptions) kernels.ConvShape {
	op, nsp := "Conv2d", 2
	if w != nil && w.NDim() == 5 {
		op, nsp = "Conv3d", 3
	}
	s, _ := convGeometry(op, nsp, x, w, b, opt)
	return s
}

// PoolGeometry returns the kernel shape of op ("MaxPool2d" or
// "AvgPool2d") on x with opt.
func PoolGeometry(op string, x *Tensor, opt PoolOptions) kernels.Pool2dShape {
	s, _ := poolGeometry(op, x, opt, op == "MaxPool2d")
	return s
}

// AdaptiveAvgPool2dGeometry returns the kernel shape of
// AdaptiveAvgPool2d(x, outH, outW).
func AdaptiveAvgPool2dGeometry(x *Tensor, outH, outW int) kernels.Pool2dShape {
	s, _ := adaptivePoolGeometry(x, outH, outW)
	return s
}

// BatchNormEval returns the kernel shape of an evaluation-mode BatchNorm
// of x and the per-channel mean and 1/sqrt(var+eps) it normalises with,
// computed from the running statistics as BatchNorm computes them.
func BatchNormEval(x, runningMean, runningVar, weight, bias *Tensor, eps float64) (s kernels.BatchNormShape, mean, invStd []float64) {
	const op = "BatchNorm"
	if x == nil {
		Fail(op, "input is nil")
	}
	s = bnShape(op, x, runningMean, runningVar, weight, bias, false, 0, eps)
	mean, invStd = bnStatistics(op, s, nil, x.shape, runningMean, runningVar, false, 0, eps)
	return s, mean, invStd
}

// SoftmaxGeometry returns the kernel shape of Softmax or LogSoftmax of x
// along dim, which the kernels run on x's contiguous form.
func SoftmaxGeometry(x *Tensor, dim int) kernels.SoftmaxShape {
	if x == nil {
		Fail("Softmax", "input is nil")
	}
	d := softmaxDim("Softmax", x.shape, dim)
	o, n, in := softmaxSplit(x.shape, Contiguous, d)
	return kernels.SoftmaxShape{Outer: o, N: n, Inner: in}
}

// MatmulGeometry returns how Matmul (or BMM) of a and b lays out its
// products: a is read as [batch..., n, k] and b as [batch..., k, m] (a 1-D
// operand as one row or column), aOff, bOff and cOff are the offsets of
// each batch's matrices in a, b and the result (row-major), and
// oneRight reports that b is a single matrix, which the op multiplies
// with every row of a in one product.
func MatmulGeometry(a, b *Tensor) (n, k, m int, aOff, bOff, cOff []int, oneRight bool) {
	const op = "Matmul"
	if a == nil || b == nil || a.NDim() == 0 || b.NDim() == 0 {
		Fail(op, "both arguments need at least 1 dimension")
	}
	as, bs := a.shape, b.shape
	if a.NDim() == 1 {
		as = []int{1, as[0]}
	}
	if b.NDim() == 1 {
		bs = []int{bs[0], 1}
	}
	n, k, m = as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	if bs[len(bs)-2] != k {
		Fail(op, "shapes %v and %v cannot be multiplied", a.shape, b.shape)
	}
	aBatch, bBatch := as[:len(as)-2], bs[:len(bs)-2]
	batch := matmulBatch(op, a, b, aBatch, bBatch)
	aOff = matmulOffsets(op, aBatch, batch, n*k)
	bOff = matmulOffsets(op, bBatch, batch, k*m)
	cOff = matmulOffsets(op, batch, batch, n*m)
	return n, k, m, aOff, bOff, cOff, len(bBatch) == 0
}
