package kernels

import (
	"fmt"
	"math"
)

// ActFunc names an elementwise function of one float32 operand: the
// arithmetic of autograd's elementwise ops and the activations. Together
// with its parameters (Act) it is also what a fused graph op applies after a
// convolution or matrix product.
type ActFunc uint8

// The elementwise functions. A and B are the parameters in Act.
const (
	ActNeg       ActFunc = iota // −x
	ActExp                      // eˣ
	ActLog                      // ln x: NaN below 0, −Inf at 0
	ActSqrt                     // √x: NaN below 0
	ActPow                      // x^A
	ActAddScalar                // x + A
	ActMulScalar                // x · A
	ActReLU                     // max(x, 0)
	ActSigmoid                  // 1 / (1 + e⁻ˣ)
	ActTanh                     // tanh x
	ActHardTanh                 // x clamped to [A, B]
	ActSiLU                     // x · sigmoid(x)
	ActELU                      // x for x > 0, A·(eˣ − 1) otherwise
	ActGELU                     // x · Φ(x), with erf
	ActGELUTanh                 // PyTorch's tanh approximation of GELU
	ActClamp                    // min(max(x, A), B): torch.clamp, gradient inclusive of A and B
	actFuncCount
)

var actNames = [...]string{"Neg", "Exp", "Log", "Sqrt", "Pow", "AddScalar", "MulScalar", "ReLU", "Sigmoid",
	"Tanh", "HardTanh", "SiLU", "ELU", "GELU", "GELUTanh", "Clamp"}

func (f ActFunc) String() string {
	if f < actFuncCount {
		return actNames[f]
	}
	return fmt.Sprintf("ActFunc(%d)", int(f))
}

// actCost is the rough work per element handed to Parallel: transcendental
// functions cost tens of operations, the rest are memory bound.
var actCost = [...]int{
	ActNeg: 1, ActExp: 20, ActLog: 20, ActSqrt: 4, ActPow: 40, ActAddScalar: 1, ActMulScalar: 1,
	ActReLU: 1, ActSigmoid: 20, ActTanh: 20, ActHardTanh: 1, ActSiLU: 20, ActELU: 20, ActGELU: 30,
	ActGELUTanh: 30, ActClamp: 1,
}

// Act is an elementwise function with its parameters: Pow's exponent, the
// scalar of AddScalar and MulScalar, HardTanh's bounds (A ≤ B), Clamp's
// bounds (any order: A > B gives B everywhere but at NaN, as torch.clamp
// does), ELU's alpha. Unused parameters are ignored.
//
// Each function follows the float32 formula of PyTorch 1.13's vectorised
// CPU kernel step by step, so the roundings (and the cancellations, as in
// ELU's eˣ−1 near 0 or the sigmoid gradient (1−y)·y near saturation) are
// PyTorch's; the exponential, logarithm, tanh and erf inside are the
// float32 cores of vmath32.go (within an ulp or two, as PyTorch's SLEEF
// functions are), general powers are correctly rounded (evaluated in
// float64). Special
// values follow the vectorised kernels too: NaN in gives NaN out, ReLU and
// HardTanh and Clamp pass a NaN through, ReLU's gradient passes at NaN while
// HardTanh's and Clamp's are 0 there and ELU's NaN. The vector variants
// (activation_amd64.s) make the same roundings and agree with this
// reference bit for bit (Pow with a general exponent to an ulp).
type Act struct {
	Fn   ActFunc
	A, B float32
}

// ReadsOutput reports whether Backward computes the derivative from the
// forward's output y rather than its input x, as PyTorch's derivative
// formulas do for Exp, Sqrt, ReLU, Sigmoid and Tanh.
func (a Act) ReadsOutput() bool {
	switch a.Fn {
	case ActExp, ActSqrt, ActReLU, ActSigmoid, ActTanh:
		return true
	}
	return false
}

// ReadsInput reports whether Backward reads x.
func (a Act) ReadsInput() bool {
	switch a.Fn {
	case ActNeg, ActAddScalar, ActMulScalar:
		return false
	}
	return !a.ReadsOutput()
}

func (a Act) check(op string) {
	if a.Fn >= actFuncCount {
		fail(ErrArgument, op, "unknown function %v", a.Fn)
	}
}

// Forward sets dst[i] = f(src[i]). The slices must have the same length;
// dst may be src. Large slices are split across the worker pool.
func (a Act) Forward(dst, src []float32) {
	a.check("Act.Forward")
	if len(dst) != len(src) {
		fail(ErrShape, fmt.Sprintf("Act.Forward(%v)", a.Fn), "dst has %d elements, src %d", len(dst), len(src))
	}
	n := len(src)
	j := actJobs.get()
	j.a, j.dst, j.src = a, dst, src
	Parallel(n, n*actCost[a.Fn], j.fwd)
	j.release()
}

// Backward sets dx[i] = dy[i]·f′(x[i]) for the forward y = f(x). It reads x
// or y as ReadsOutput says (the other may be nil); Neg, AddScalar and
// MulScalar read neither. Every slice it reads must have dx's length; dx may
// be dy. Where PyTorch's derivative is zero it writes 0, not dy·0: ReLU at
// x ≤ 0, HardTanh outside (A, B) (its bounds included), Clamp outside
// [A, B] (its bounds excluded, so everywhere when A > B) and at NaN, Pow
// with exponent 0.
func (a Act) Backward(dx, dy, x, y []float32) {
	a.check("Act.Backward")
	n := len(dx)
	bad := len(dy) != n || (a.ReadsInput() && len(x) != n) || (a.ReadsOutput() && len(y) != n)
	if bad {
		fail(ErrShape, fmt.Sprintf("Act.Backward(%v)", a.Fn), "dx has %d elements, dy %d, x %d, y %d", n, len(dy), len(x), len(y))
	}
	j := actJobs.get()
	j.a, j.dst, j.src = a, dx, dy
	switch {
	case a.ReadsOutput():
		j.v = y
	case a.ReadsInput():
		j.v = x
	}
	Parallel(n, n*(actCost[a.Fn]+1), j.bwd)
	j.release()
}

// The variants of the elementwise kernels, indexed by level: the Generic
// ones are the reference code below, the others assembly. The AVX-512
// ones have kernels of their own for the transcendental functions and run
// the AVX2 kernels of the rest.
func actForwardFor(l Level) func(a Act, dst, src []float32) {
	return pick(l, [levelCount]func(Act, []float32, []float32){Generic: Act.forward, AVX2: actForwardAVX2,
		AVX512: actForwardAVX512})
}

func actBackwardFor(l Level) func(a Act, dx, dy, v []float32) {
	return pick(l, [levelCount]func(Act, []float32, []float32, []float32){Generic: Act.backward,
		AVX2: actBackwardAVX2, AVX512: actBackwardAVX512})
}

func dropoutFor(l Level) func(dst, src []float32, keep []uint8, scale float32) {
	return pick(l, [levelCount]func([]float32, []float32, []uint8, float32){Generic: dropoutSpan, AVX2: dropoutSpanAVX2})
}

var (
	actForwardImpl  = actForwardFor(level)
	actBackwardImpl = actBackwardFor(level)
	dropoutImpl     = dropoutFor(level)
)

// actJob holds one call's operands for the worker pool. Jobs are pooled and
// their span methods bound once, so a call allocates nothing.
type actJob struct {
	a           Act
	dst, src, v []float32 // Backward: dx, dy and x or y
	keep        []uint8
	scale       float32
	fwd, bwd    func(lo, hi int)
	drop        func(lo, hi int)
}

var actJobs = freeList[actJob]{New: func() *actJob {
	j := new(actJob)
	j.fwd, j.bwd, j.drop = j.forward, j.backward, j.dropout
	return j
}}

func (j *actJob) forward(lo, hi int) { actForwardImpl(j.a, j.dst[lo:hi], j.src[lo:hi]) }

func (j *actJob) backward(lo, hi int) {
	var v []float32
	if j.v != nil {
		v = j.v[lo:hi]
	}
	actBackwardImpl(j.a, j.dst[lo:hi], j.src[lo:hi], v)
}

func (j *actJob) dropout(lo, hi int) {
	var k []uint8
	if j.keep != nil {
		k = j.keep[lo:hi]
	}
	dropoutImpl(j.dst[lo:hi], j.src[lo:hi], k, j.scale)
}

// release drops the job's references to the caller's slices and returns
// it to the pool.
func (j *actJob) release() {
	j.dst, j.src, j.v, j.keep = nil, nil, nil, nil
	actJobs.put(j)
}

// The constants of PyTorch's GELU kernels, rounded to float32 as they are
// there.
const (
	actAlpha    float32 = 0.70710678118654752440                           // 1/√2
	actKBeta    float32 = math.Sqrt2 * (2 / math.SqrtPi) * 0.5             // √(2/π), tanh form
	actKBetaErf float32 = (2 / math.SqrtPi) * 0.70710678118654752440 * 0.5 // 1/√(2π), erf form
	actKKappa   float32 = 0.044715
)

// actExp, actErf and actTanh are the float32 cores of vmath32.go, which
// the vector variants compute bit for bit. PyTorch's vectorised kernels
// call SLEEF's expf and tanhf (within an ulp) and, for erf, a polynomial
// good to 1.5e-7 absolute; the cores are within an ulp or two, so Kiln's
// results differ from PyTorch's by about as much as PyTorch's from exact.
func actExp(x float32) float32 { return expf32(x) }

func actErf(x float32) float32 { return erff32(x) }

func actTanh(x float32) float32 { return tanhf32(x) }

func (a Act) forward(dst, src []float32) {
	dst = dst[:len(src)]
	switch a.Fn {
	case ActNeg:
		for i, x := range src {
			dst[i] = -x
		}
	case ActExp:
		for i, x := range src {
			dst[i] = actExp(x)
		}
	case ActLog:
		for i, x := range src {
			dst[i] = logf32(x)
		}
	case ActSqrt:
		for i, x := range src {
			dst[i] = float32(math.Sqrt(float64(x)))
		}
	case ActPow:
		actPow(dst, src, float64(a.A))
	case ActAddScalar:
		for i, x := range src {
			dst[i] = x + a.A
		}
	case ActMulScalar:
		for i, x := range src {
			dst[i] = x * a.A
		}
	case ActReLU:
		// x < 0 rather than x <= 0 keeps −0 and NaN, as clamp_min does.
		for i, x := range src {
			if x < 0 {
				x = 0
			}
			dst[i] = x
		}
	case ActSigmoid:
		for i, x := range src {
			dst[i] = 1 / (1 + actExp(-x))
		}
	case ActTanh:
		for i, x := range src {
			dst[i] = actTanh(x)
		}
	case ActHardTanh, ActClamp:
		// min(max(x, lo), hi) as torch.clamp computes it: a NaN stays
		// NaN, and lo > hi gives hi (HardTanh's bounds never cross).
		lo, hi := a.A, a.B
		for i, x := range src {
			if x < lo {
				x = lo
			}
			if x > hi {
				x = hi
			}
			dst[i] = x
		}
	case ActSiLU:
		for i, x := range src {
			dst[i] = x / (1 + actExp(-x))
		}
	case ActELU:
		alpha := a.A
		for i, x := range src {
			if !(x > 0) {
				x = (actExp(x) - 1) * alpha
			}
			dst[i] = x
		}
	case ActGELU:
		for i, x := range src {
			dst[i] = x * 0.5 * (1 + actErf(x*actAlpha))
		}
	case ActGELUTanh:
		for i, x := range src {
			cube := x * x * x
			inner := actKBeta * (x + float32(actKKappa*cube))
			dst[i] = 0.5 * x * (1 + actTanh(inner))
		}
	}
}

// actPow raises every element to e.
func actPow(dst, src []float32, e float64) {
	for i, x := range src {
		dst[i] = actPowElem(x, e)
	}
}

// actPowElem is x^e with the shortcuts PyTorch's pow takes for float32
// (exponents 0, 1, ±0.5, −1, 2, 3, −2); they decide the special values,
// such as rsqrt(−0) = −Inf where math.Pow(−0, −0.5) is +Inf.
func actPowElem(x float32, e float64) float32 {
	switch e {
	case 0:
		return 1 // even for NaN
	case 1:
		return x
	case 2:
		return x * x
	case 3:
		v := float64(x)
		return float32(v * v * v)
	case -2:
		v := float64(x)
		return float32(1 / (v * v))
	case 0.5:
		return float32(math.Sqrt(float64(x)))
	case -0.5:
		return float32(1 / math.Sqrt(float64(x)))
	case -1:
		return 1 / x
	}
	return float32(math.Pow(float64(x), e))
}

// backward computes dx from dy and v, which is y when ReadsOutput, else x.
func (a Act) backward(dx, dy, v []float32) {
	dy = dy[:len(dx)]
	if v != nil {
		v = v[:len(dx)]
	}
	switch a.Fn {
	case ActNeg:
		for i, g := range dy {
			dx[i] = -g
		}
	case ActExp:
		for i, g := range dy {
			dx[i] = g * v[i]
		}
	case ActLog:
		for i, g := range dy {
			dx[i] = g / v[i]
		}
	case ActSqrt:
		for i, g := range dy {
			dx[i] = g / (2 * v[i])
		}
	case ActPow:
		actPowBackward(dx, dy, v, float64(a.A))
	case ActAddScalar:
		copy(dx, dy)
	case ActMulScalar:
		for i, g := range dy {
			dx[i] = g * a.A
		}
	case ActReLU:
		for i, g := range dy {
			if v[i] <= 0 {
				g = 0
			}
			dx[i] = g
		}
	case ActSigmoid:
		for i, g := range dy {
			y := v[i]
			dx[i] = g * (1 - y) * y
		}
	case ActTanh:
		for i, g := range dy {
			y := v[i]
			dx[i] = g * (1 - y*y)
		}
	case ActHardTanh:
		lo, hi := a.A, a.B
		for i, g := range dy {
			// Written as PyTorch's vectorised kernel tests it, so a NaN
			// gets 0 (its scalar tail code would pass the gradient).
			if x := v[i]; !(x > lo && x < hi) {
				g = 0
			}
			dx[i] = g
		}
	case ActClamp:
		lo, hi := a.A, a.B
		for i, g := range dy {
			// PyTorch 1.13's clamp_backward: grad where
			// (x >= min) & (x <= max), else 0; so the bounds pass the
			// gradient, and NaN or crossed bounds (min > max) do not.
			if x := v[i]; !(x >= lo && x <= hi) {
				g = 0
			}
			dx[i] = g
		}
	case ActSiLU:
		for i, g := range dy {
			x := v[i]
			sig := 1 / (1 + actExp(-x))
			dx[i] = g * sig * (1 + float32(x*(1-sig)))
		}
	case ActELU:
		alpha := a.A
		for i, g := range dy {
			if x := v[i]; !(x > 0) {
				g = g * alpha * actExp(x)
			}
			dx[i] = g
		}
	case ActGELU:
		for i, g := range dy {
			x := v[i]
			cdf := 0.5 * (1 + actErf(x*actAlpha))
			pdf := actKBetaErf * actExp(x*x*-0.5)
			dx[i] = g * (cdf + float32(x*pdf))
		}
	case ActGELUTanh:
		for i, g := range dy {
			x := v[i]
			sq := x * x
			cube := sq * x
			t := actTanh(actKBeta * (x + float32(actKKappa*cube)))
			left := 0.5 * x
			right := 1 + t
			leftD := 0.5 * right
			tanhD := 1 - float32(t*t)
			innerD := actKBeta * (1 + float32(3*actKKappa*sq))
			rightD := left * tanhD * innerD
			dx[i] = g * (leftD + rightD)
		}
	}
}

// actPowBackward is dy·(e·x^(e−1)), rounded in float32 step by step as
// PyTorch's pow_backward computes it; exponent 0 gives zeros (not dy·0).
func actPowBackward(dx, dy, x []float32, e float64) {
	if e == 0 {
		clear(dx)
		return
	}
	fe := float32(e)
	for i, g := range dy {
		dx[i] = g * (fe * actPowElem(x[i], e-1))
	}
}

// Dropout sets dst[i] = src[i]·(keep[i]·scale): kept elements (keep[i] = 1)
// are scaled and dropped ones (keep[i] = 0) multiplied by 0, so a NaN or
// infinite element stays NaN, as PyTorch's input·mask does. A nil keep keeps
// every element, which with scale 0 is dropout with p = 1. It serves
// forward (src = x) and backward (src = dy) alike; dst may be src.
func Dropout(dst, src []float32, keep []uint8, scale float32) {
	n := len(src)
	if len(dst) != n || (keep != nil && len(keep) != n) {
		fail(ErrShape, "Dropout", "dst has %d elements, src %d, keep %d", len(dst), n, len(keep))
	}
	j := actJobs.get()
	j.dst, j.src, j.keep, j.scale = dst, src, keep, scale
	Parallel(n, n, j.drop)
	j.release()
}

// dropoutSpan is Dropout's reference kernel on one span.
func dropoutSpan(dst, src []float32, keep []uint8, scale float32) {
	dst = dst[:len(src)]
	if keep == nil {
		for i, x := range src {
			dst[i] = x * scale
		}
		return
	}
	keep = keep[:len(src)]
	for i, x := range src {
		dst[i] = x * (float32(keep[i]) * scale)
	}
}
