package kernels

import "math"

// The float32 transcendental cores of the elementwise kernels: e^x, tanh x
// and erf x evaluated in float32 with fused multiply-adds, step by step as
// the assembly of vmath32_amd64.h does, so that the pure-Go reference and
// every vector variant return the same bits.
//
// Maximum errors against the correctly rounded result over all float32
// inputs, measured exhaustively (TestVMath32Exhaustive) and held on a
// sample in make test (TestVMath32ULP):
//
//	expf32   1 ulp (normal results; subnormal results are rounded once)
//	tanhf32  2 ulp, ±1 beyond |x| > 8.664339742 as SLEEF's tanhf
//	erff32   1 ulp where |erf x| ≥ 2⁻¹²⁶, and ±1 from |x| ≥ 3.92
//
// The polynomials are fitted (weighted least squares iterated toward
// minimax, coefficients rounded to float32 one at a time from the constant
// term with the rest refitted) to errors of 3e-9 (e^r), 2e-10 (tanh),
// 1e-9 and 2e-9 (erf's two pieces), well below float32's half ulp of 6e-8:
// the ulp of error comes from the float32 arithmetic around them.

// expf32 coefficients: e^r = 1 + r·(1 + r·P(r)) on |r| ≤ ln2/2.
const (
	expP0 float32 = 0.0013821023749187589
	expP1 float32 = 0.00836866907775402
	expP2 float32 = 0.04166826233267784
	expP3 float32 = 0.1666652113199234
	expP4 float32 = 0.4999999403953552

	expLog2e float32 = 1.4426950216293335
	expLn2Hi float32 = 0.6931471824645996      // ln2 rounded to float32
	expLn2Lo float32 = -1.9046542121259336e-09 // ln2 − expLn2Hi, rounded
	expMin   float32 = -104                    // e^x rounds to 0 below
	expMax   float32 = 89                      // and to +Inf above
)

// expf32 returns e^x: NaN for NaN, 0 below −103.97, +Inf above 88.72, with
// subnormal results rounded once. x = n·ln2 + r with |r| ≤ ln2/2 (Cody and
// Waite's two-part ln2), e^r = 1 + r·(1 + r·P(r)), and the scaling by 2ⁿ
// rounds once, as VSCALEFPS does and as the AVX2 code gets by scaling in
// two exact-until-the-last steps.
func expf32(x float32) float32 {
	if x != x {
		return x
	}
	x = min(max(x, expMin), expMax)
	n := float32(math.RoundToEven(float64(x * expLog2e)))
	r := fma32(n, -expLn2Hi, x)
	r = fma32(n, -expLn2Lo, r)
	p := fma32(expP0, r, expP1)
	p = fma32(p, r, expP2)
	p = fma32(p, r, expP3)
	p = fma32(p, r, expP4)
	y := fma32(fma32(p, r, 1), r, 1)
	return float32(math.Ldexp(float64(y), int(n)))
}

// tanhf32 coefficients: tanh x = x + x³·Q(x²) on |x| < 0.625.
const (
	tanhQ0 float32 = 0.0021576357539743185
	tanhQ1 float32 = -0.008195086382329464
	tanhQ2 float32 = 0.02170874923467636
	tanhQ3 float32 = -0.05394846200942993
	tanhQ4 float32 = 0.13333222270011902
	tanhQ5 float32 = -0.3333333134651184

	tanhSmall float32 = 0.625
	tanhSat   float32 = 8.664339742 // SLEEF's tanhf is ±1 beyond
)

// tanhf32 returns tanh x: the odd polynomial for |x| < 0.625, beyond it
// 1 − 2/(e^(2|x|) + 1) with the sign of x, and ±1 beyond |x| > 8.664339742,
// where PyTorch's vectorised tanh (SLEEF) saturates, so that 1 − tanh² is
// exactly 0 there as in PyTorch. NaN gives NaN.
func tanhf32(x float32) float32 {
	a := abs32(x)
	if !(a >= tanhSmall) { // NaN too
		z := x * x
		q := fma32(tanhQ0, z, tanhQ1)
		q = fma32(q, z, tanhQ2)
		q = fma32(q, z, tanhQ3)
		q = fma32(q, z, tanhQ4)
		q = fma32(q, z, tanhQ5)
		return fma32(x*z, q, x)
	}
	t := float32(1)
	if a <= tanhSat {
		t = 1 - 2/(expf32(a+a)+1)
	}
	return math.Float32frombits(math.Float32bits(t) | math.Float32bits(x)&(1<<31))
}

// erff32 coefficients: erf x = x + x·S(x²) on |x| < 1, and
// erf x = ±(1 − e^(−a²)·L(a − 2.5)), a = |x|, on 1 ≤ a ≤ 4.
const (
	erfS0 float32 = 7.920368079794571e-05
	erfS1 float32 = -0.0008030761382542551
	erfS2 float32 = 0.005190733820199966
	erfS3 float32 = -0.02685512602329254
	erfS4 float32 = 0.11283618211746216
	erfS5 float32 = -0.3761262893676758
	erfS6 float32 = 0.12837916612625122

	erfL0 float32 = 0.00010684485459933057
	erfL1 float32 = 0.00022507121320813894
	erfL2 float32 = 0.0005433333572000265
	erfL3 float32 = -0.0006611205171793699
	erfL4 float32 = 0.002302482258528471
	erfL5 float32 = -0.008132271468639374
	erfL6 float32 = 0.02491462230682373
	erfL7 float32 = -0.07434218376874924
	erfL8 float32 = 0.21080760657787323

	erfSmall float32 = 1
	erfMid   float32 = 2.5 // L's centre
	erfMax   float32 = 4   // erf rounds to ±1 from 3.92 on
)

// erff32 returns erf x; NaN gives NaN and ±Inf ±1.
func erff32(x float32) float32 {
	a := abs32(x)
	if !(a >= erfSmall) { // NaN too
		z := x * x
		s := fma32(erfS0, z, erfS1)
		s = fma32(s, z, erfS2)
		s = fma32(s, z, erfS3)
		s = fma32(s, z, erfS4)
		s = fma32(s, z, erfS5)
		s = fma32(s, z, erfS6)
		return fma32(x, s, x)
	}
	a = min(a, erfMax)
	u := a - erfMid
	l := fma32(erfL0, u, erfL1)
	l = fma32(l, u, erfL2)
	l = fma32(l, u, erfL3)
	l = fma32(l, u, erfL4)
	l = fma32(l, u, erfL5)
	l = fma32(l, u, erfL6)
	l = fma32(l, u, erfL7)
	l = fma32(l, u, erfL8)
	e := expf32(-(a * a))
	t := fma32(-e, l, 1)
	return math.Float32frombits(math.Float32bits(t) | math.Float32bits(x)&(1<<31))
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }
