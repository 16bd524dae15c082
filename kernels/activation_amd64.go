//go:build amd64 && !noasm

package kernels

// The AVX2 elementwise kernels of activation_amd64.s. Forward kernels set
// dst[i] = f(src[i]) and backward kernels dx[i] = dy[i]·f′(v[i]); a, b and c
// are the function's parameters or constants (see actForwardAVX2). Every
// kernel handles any length, tails included, and allows dst = src and
// dx = dy.

//go:noescape
func actNegAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actAddScalarAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actMulScalarAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actReLUAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actHardTanhAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actSqrtAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actSquareAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actRecipAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actExpAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actLogAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actSigmoidAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actTanhAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actSiLUAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actELUAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actGELUAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actGELUTanhAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actCubeAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actInvSquareAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actRsqrtAVX2(dst, src []float32, a, b, c float32)

//go:noescape
func actPowAVX2(dst, src []float32, e float64) int

//go:noescape
func actExpBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actLogBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actSqrtBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actReLUBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actSigmoidBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actTanhBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actHardTanhBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actScaleBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actSiLUBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actELUBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actGELUBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actGELUTanhBwdAVX2(dx, dy, v []float32, a, b, c float32)

//go:noescape
func dropoutAVX2(dst, src []float32, keep []uint8, scale float32)

var (
	actForwardAVX2  = actForwardAsm
	actBackwardAVX2 = actBackwardAsm
	dropoutSpanAVX2 = dropoutAsm
)

// actChunk is the most elements one assembly call handles: about 50 µs of
// the costliest kernel, since assembly is not preempted and a long call
// would hold up the garbage collector.
const actChunk = 1 << 13

// actUnaryKernel and actBinaryKernel are the shapes of the forward and
// backward assembly kernels.
type (
	actUnaryKernel  func(dst, src []float32, a, b, c float32)
	actBinaryKernel func(dx, dy, v []float32, a, b, c float32)
)

// actRun calls k on chunks of src, streaming the output of a large span.
func actRun(k actUnaryKernel, dst, src []float32, a, b, c float32) {
	dst = dst[:len(src)]
	lo := 0
	if len(src) >= streamMinElems {
		buf := getScratchF32(streamBlock) // pooled: an array passed to k would move to the heap
		lo = streamHead(dst)
		k(dst[:lo], src[:lo], a, b, c)
		for ; lo+streamBlock <= len(src); lo += streamBlock {
			k(buf.s, src[lo:lo+streamBlock], a, b, c)
			streamStore(dst[lo:lo+streamBlock], buf.s)
		}
		storeFence()
		buf.put()
	}
	for ; lo < len(src); lo += actChunk {
		hi := min(lo+actChunk, len(src))
		k(dst[lo:hi], src[lo:hi], a, b, c)
	}
}

// actRunBwd calls k on chunks of dx.
func actRunBwd(k actBinaryKernel, dx, dy, v []float32, a, b, c float32) {
	dy, v = dy[:len(dx)], v[:len(dx)]
	for lo := 0; lo < len(dx); lo += actChunk {
		hi := min(lo+actChunk, len(dx))
		k(dx[lo:hi], dy[lo:hi], v[lo:hi], a, b, c)
	}
}

// actForwardAsm is the AVX2 variant of Act.forward.
func actForwardAsm(a Act, dst, src []float32) {
	var k actUnaryKernel
	p, q := a.A, a.B
	switch a.Fn {
	case ActNeg:
		k = actNegAVX2
	case ActExp:
		k = actExpAVX2
	case ActLog:
		k = actLogAVX2
	case ActSqrt:
		k = actSqrtAVX2
	case ActPow:
		actPowAsm(dst, src, float64(a.A))
		return
	case ActAddScalar:
		k = actAddScalarAVX2
	case ActMulScalar:
		k = actMulScalarAVX2
	case ActReLU:
		k = actReLUAVX2
	case ActSigmoid:
		k = actSigmoidAVX2
	case ActTanh:
		k = actTanhAVX2
	case ActHardTanh:
		k = actHardTanhAVX2
	case ActClamp:
		// HardTanh's kernel is Clamp's while the bounds are in order;
		// crossed bounds take the reference loop.
		if !(p <= q) {
			a.forward(dst, src)
			return
		}
		k = actHardTanhAVX2
	case ActSiLU:
		k = actSiLUAVX2
	case ActELU:
		k = actELUAVX2
	case ActGELU:
		k, p = actGELUAVX2, actAlpha
	case ActGELUTanh:
		k, p, q = actGELUTanhAVX2, actKBeta, actKKappa
	default:
		a.forward(dst, src)
		return
	}
	actRun(k, dst, src, p, q, 0)
}

// actPowAsm is actPow with the exponents of actPowElem's shortcuts mapped to
// their kernels, and the general one to actPowAVX2, which leaves the
// vectors holding special values (x ≤ 0, Inf, NaN) to actPowElem. The
// kernels are called directly, not through a func value, so that a stack
// buffer passed as dst stays on the stack.
func actPowAsm(dst, src []float32, e float64) {
	dst = dst[:len(src)]
	if e == 0 || e == 1 {
		actPow(dst, src, e)
		return
	}
	for lo := 0; lo < len(src); lo += actChunk {
		hi := min(lo+actChunk, len(src))
		d, s := dst[lo:hi], src[lo:hi]
		switch e {
		case 2:
			actSquareAVX2(d, s, 0, 0, 0)
		case 3:
			actCubeAVX2(d, s, 0, 0, 0)
		case -2:
			actInvSquareAVX2(d, s, 0, 0, 0)
		case 0.5:
			actSqrtAVX2(d, s, 0, 0, 0)
		case -0.5:
			actRsqrtAVX2(d, s, 0, 0, 0)
		case -1:
			actRecipAVX2(d, s, 0, 0, 0)
		default:
			for i := 0; i < len(s); {
				i += actPowAVX2(d[i:], s[i:], e)
				if i < len(s) {
					j := min(i+8, len(s))
					actPow(d[i:j], s[i:j], e)
					i = j
				}
			}
		}
	}
}

// actPowScratch is the stack buffer Pow's backward computes x^(e−1) in.
const actPowScratch = 1024

// actBackwardAsm is the AVX2 variant of Act.backward.
func actBackwardAsm(a Act, dx, dy, v []float32) {
	var k actBinaryKernel
	p, q, r := a.A, a.B, float32(0)
	switch a.Fn {
	case ActNeg:
		actRun(actNegAVX2, dx, dy[:len(dx)], 0, 0, 0)
		return
	case ActMulScalar:
		actRun(actMulScalarAVX2, dx, dy[:len(dx)], a.A, 0, 0)
		return
	case ActAddScalar:
		copy(dx, dy[:len(dx)])
		return
	case ActPow:
		actPowBackwardAsm(dx, dy, v, float64(a.A))
		return
	case ActExp:
		k = actExpBwdAVX2
	case ActLog:
		k = actLogBwdAVX2
	case ActSqrt:
		k = actSqrtBwdAVX2
	case ActReLU:
		k = actReLUBwdAVX2
	case ActSigmoid:
		k = actSigmoidBwdAVX2
	case ActTanh:
		k = actTanhBwdAVX2
	case ActHardTanh:
		k = actHardTanhBwdAVX2
	case ActSiLU:
		k = actSiLUBwdAVX2
	case ActELU:
		k = actELUBwdAVX2
	case ActGELU:
		k, p, q = actGELUBwdAVX2, actAlpha, actKBetaErf
	case ActGELUTanh:
		k, p, q, r = actGELUTanhBwdAVX2, actKBeta, actKKappa, 3*actKKappa
	default:
		a.backward(dx, dy, v)
		return
	}
	actRunBwd(k, dx, dy, v, p, q, r)
}

// actPowBackwardAsm is actPowBackward: x^(e−1) into a stack buffer (dx may
// be dy, so it cannot hold it), then dy·(e·x^(e−1)).
func actPowBackwardAsm(dx, dy, x []float32, e float64) {
	if e == 0 {
		clear(dx)
		return
	}
	dy, x = dy[:len(dx)], x[:len(dx)]
	var buf [actPowScratch]float32
	for lo := 0; lo < len(dx); lo += actPowScratch {
		hi := min(lo+actPowScratch, len(dx))
		p := buf[:hi-lo]
		actPowAsm(p, x[lo:hi], e-1)
		actScaleBwdAVX2(dx[lo:hi], dy[lo:hi], p, float32(e), 0, 0)
	}
}

// dropoutAsm is the AVX2 variant of dropoutSpan.
func dropoutAsm(dst, src []float32, keep []uint8, scale float32) {
	if keep == nil {
		actRun(actMulScalarAVX2, dst, src, scale, 0, 0)
		return
	}
	dst, keep = dst[:len(src)], keep[:len(src)]
	for lo := 0; lo < len(src); lo += actChunk {
		hi := min(lo+actChunk, len(src))
		dropoutAVX2(dst[lo:hi], src[lo:hi], keep[lo:hi], scale)
	}
	tail := len(src) &^ 7
	dropoutSpan(dst[tail:], src[tail:], keep[tail:], scale)
}

// The AVX-512 kernels of activation_avx512_amd64.s, for the functions
// built on e^x, ln x, tanh and erf; the others run their AVX2 kernels.

//go:noescape
func actExpAVX512(dst, src []float32, a, b, c float32)

//go:noescape
func actLogAVX512(dst, src []float32, a, b, c float32)

//go:noescape
func actSigmoidAVX512(dst, src []float32, a, b, c float32)

//go:noescape
func actTanhAVX512(dst, src []float32, a, b, c float32)

//go:noescape
func actSiLUAVX512(dst, src []float32, a, b, c float32)

//go:noescape
func actELUAVX512(dst, src []float32, a, b, c float32)

//go:noescape
func actGELUAVX512(dst, src []float32, a, b, c float32)

//go:noescape
func actGELUTanhAVX512(dst, src []float32, a, b, c float32)

//go:noescape
func actSiLUBwdAVX512(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actELUBwdAVX512(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actGELUBwdAVX512(dx, dy, v []float32, a, b, c float32)

//go:noescape
func actGELUTanhBwdAVX512(dx, dy, v []float32, a, b, c float32)

var (
	actForwardAVX512  = actForwardAsm512
	actBackwardAVX512 = actBackwardAsm512
)

// actForwardAsm512 is the AVX-512 variant of Act.forward.
func actForwardAsm512(a Act, dst, src []float32) {
	var k actUnaryKernel
	p, q := a.A, a.B
	switch a.Fn {
	case ActExp:
		k = actExpAVX512
	case ActLog:
		k = actLogAVX512
	case ActSigmoid:
		k = actSigmoidAVX512
	case ActTanh:
		k = actTanhAVX512
	case ActSiLU:
		k = actSiLUAVX512
	case ActELU:
		k = actELUAVX512
	case ActGELU:
		k, p = actGELUAVX512, actAlpha
	case ActGELUTanh:
		k, p, q = actGELUTanhAVX512, actKBeta, actKKappa
	default:
		actForwardAsm(a, dst, src)
		return
	}
	actRun(k, dst, src, p, q, 0)
}

// actBackwardAsm512 is the AVX-512 variant of Act.backward.
func actBackwardAsm512(a Act, dx, dy, v []float32) {
	var k actBinaryKernel
	p, q, r := a.A, a.B, float32(0)
	switch a.Fn {
	case ActSiLU:
		k = actSiLUBwdAVX512
	case ActELU:
		k = actELUBwdAVX512
	case ActGELU:
		k, p, q = actGELUBwdAVX512, actAlpha, actKBetaErf
	case ActGELUTanh:
		k, p, q, r = actGELUTanhBwdAVX512, actKBeta, actKKappa, 3*actKKappa
	default:
		actBackwardAsm(a, dx, dy, v)
		return
	}
	actRunBwd(k, dx, dy, v, p, q, r)
}
