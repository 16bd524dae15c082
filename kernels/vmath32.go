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
//	expf32   0.90 ulp (0.891 at −5.848642); subnormal results are rounded once
//	tanhf32  1.37 ulp (1.362 at 0.63000596); ±1 beyond |x| > 8.664339742
//	         as SLEEF's tanhf
//	erff32   1.13 ulp (1.121 at 2.069773e-38), where a·p (see erff32) is
//	         subnormal; 0.79 for |x| ≥ 2⁻¹²⁰ (every 61st input)
//	logf32   0.93 ulp (0.930 at 1.5662055)
//
// The polynomials are fitted (weighted least squares iterated toward
// minimax, coefficients rounded to float32 one at a time with the rest
// refitted) to relative errors of 3e-9 (e^r), 2e-10 (tanh) and 8e-9
// (erf's pieces), far below float32's half ulp of 6e-8: the error comes
// from the float32 arithmetic around them.

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

// erff32's pieces: on [i/2, (i+1)/2], i = 0…7, with t = a − erfC[i],
// erf(a)/a = erfHi[i] + erfLo[i] + t·R(t), R of degree 5 with
// coefficients erfR6[i] (highest) to erfR1[i]; relative error 8e-9.
var (
	erfC  = [8]float32{0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75}
	erfR6 = [8]float32{-0.017944466322660446, 0.014217955060303211, 0.009975327178835869, -0.003307974198833108, -0.002839906606823206, -0.0003614914312493056, 0.00013688472972717136, 8.905591676011682e-05}
	erfR5 = [8]float32{-0.03496721386909485, -0.037259142845869064, 0.008091341704130173, 0.014868075028061867, 0.003579114330932498, -0.0006767454906366765, -0.0007189746247604489, -0.00035458337515592575}
	erfR4 = [8]float32{0.08901435881853104, -0.024860894307494164, -0.05797559395432472, -0.019677286967635155, 0.002854397986084223, 0.004720701370388269, 0.002648279070854187, 0.001344170537777245}
	erfR3 = [8]float32{0.10469155013561249, 0.16932350397109985, 0.06634131073951721, -0.013673732057213783, -0.025508299469947815, -0.016239281743764877, -0.008893041871488094, -0.005054434761404991}
	erfR2 = [8]float32{-0.3353508710861206, -0.10021749883890152, 0.08462996035814285, 0.11409446597099304, 0.07910992950201035, 0.04741549864411354, 0.029098553583025932, 0.018962016329169273}
	erfR1 = [8]float32{-0.18116548657417297, -0.40703511238098145, -0.4014393091201782, -0.29202139377593994, -0.19406753778457642, -0.13200490176677704, -0.09466516971588135, -0.07111086696386337}
	erfLo = [8]float32{7.197836549011072e-09, 1.4053705754690782e-08, -8.335257817293495e-09, 7.682086966553925e-09, 8.268353113294324e-09, -3.319738484108825e-09, 5.717846640607149e-09, -1.4432631978422705e-08}
	erfHi = [8]float32{1.105305552482605, 0.9482074975967407, 0.7383201122283936, 0.5638123750686646, 0.4437943398952484, 0.3635997772216797, 0.30769097805023193, 0.2666666507720947}
)

// erff32 returns erf x; NaN gives NaN and ±Inf ±1. With a = min(|x|, 4)
// and i = ⌊2a⌋ (7 at most) it evaluates the piece p = erfLo[i] + t·R(t)
// and returns a·erfHi[i] + a·p with one rounding at the end, and the sign
// of x. The vector code looks the coefficients up with one VPERMPS each
// (eight pieces fill a YMM register), so the pieces cost fewer operations
// than an exponential and two polynomials, and the split of the constant
// term keeps the error near half an ulp where a·(erf(a)/a) would be near
// one and a half.
func erff32(x float32) float32 {
	a := abs32(x)
	if a != a {
		return x
	}
	a = min(a, 4)
	i := int(min(a*2, 7))
	t := a - erfC[i]
	r := fma32(erfR6[i], t, erfR5[i])
	r = fma32(r, t, erfR4[i])
	r = fma32(r, t, erfR3[i])
	r = fma32(r, t, erfR2[i])
	r = fma32(r, t, erfR1[i])
	p := fma32(r, t, erfLo[i])
	e := fma32(a, erfHi[i], a*p)
	return math.Float32frombits(math.Float32bits(e) | math.Float32bits(x)&(1<<31))
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// logf32 coefficients: ln(1+f) = f − f²/2 + f³·P(f) on
// [√½ − 1, √2 − 1].
const (
	logP0 float32 = -0.07636894285678864
	logP1 float32 = 0.1276242882013321
	logP2 float32 = -0.13159537315368652
	logP3 float32 = 0.14201544225215912
	logP4 float32 = -0.1662341207265854
	logP5 float32 = 0.2000124305486679
	logP6 float32 = -0.2500081956386566
	logP7 float32 = 0.3333333134651184

	logSqrt2 float32 = 1.4142135381698608 // √2 rounded down
)

// logf32 returns ln x: −Inf at ±0, +Inf at +Inf, NaN below 0 and at NaN.
// x = 2ᵏ·m with m in (√½, √2] (subnormal x scaled by 2²³ first), f = m − 1
// exactly, ln(1+f) = f + f²·(f·P(f) − ½), and k·ln2 added in two parts.
func logf32(x float32) float32 {
	switch {
	case !(x >= 0):
		return float32(math.NaN())
	case x == 0:
		return float32(math.Inf(-1))
	case x > math.MaxFloat32:
		return x
	}
	k := float32(0)
	if x < 0x1p-126 {
		x *= 0x1p23
		k = -23
	}
	b := math.Float32bits(x)
	k += float32(int32(b>>23) - 127)
	m := math.Float32frombits(b&0x007fffff | 0x3f800000)
	if m > logSqrt2 {
		m *= 0.5
		k++
	}
	f := m - 1
	p := fma32(logP0, f, logP1)
	p = fma32(p, f, logP2)
	p = fma32(p, f, logP3)
	p = fma32(p, f, logP4)
	p = fma32(p, f, logP5)
	p = fma32(p, f, logP6)
	p = fma32(p, f, logP7)
	q := fma32(p, f, -0.5)
	y := fma32(q, f*f, f)
	y = fma32(k, expLn2Lo, y)
	return fma32(k, expLn2Hi, y)
}
