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
//	expf32   0.90 ulp; subnormal results are rounded once
//	tanhf32  1.31 ulp; ±1 beyond |x| > 8.664339742 as SLEEF's tanhf
//	erff32   0.60 ulp for |x| ≥ 2⁻¹²⁰; 1.05 below, where a·p (see
//	         erff32) is subnormal
//
// The polynomials are fitted (weighted least squares iterated toward
// minimax, coefficients rounded to float32 one at a time with the rest
// refitted) to relative errors of 3e-9 (e^r), 2e-10 (tanh) and 3e-9
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

// erff32's pieces: on [i/4, (i+1)/4], i = 0…15, with t = a − erfC[i],
// erf(a)/a = erfHi[i] + erfLo[i] + t·R(t), R of degree 4 with
// coefficients erfR5[i] (highest) to erfR1[i]; relative error 3e-9.
var (
	erfC  = [16]float32{0.125, 0.375, 0.625, 0.875, 1.125, 1.375, 1.625, 1.875, 2.125, 2.375, 2.625, 2.875, 3.125, 3.375, 3.625, 3.875}
	erfR5 = [16]float32{-0.019417190924286842, -0.046229034662246704, -0.04647929593920708, -0.025569915771484375, -0.0006675621261820197, 0.014400639571249485, 0.016941199079155922, 0.012035598047077656, 0.005889271851629019, 0.001668240176513791, -0.00031295252847485244, -0.0008294500294141471, -0.0008166557527147233, -0.0006557717570103705, -0.0004236441745888442, -0.0002534663653932512}
	erfR4 = [16]float32{0.10605541616678238, 0.06270058453083038, 0.0019775540567934513, -0.044404126703739166, -0.06033782288432121, -0.05043986439704895, -0.02978455275297165, -0.011271421797573566, -0.00012585159856826067, 0.004376632161438465, 0.005041772965341806, 0.004213028121739626, 0.0031312082428485155, 0.0022354191169142723, 0.0015895559918135405, 0.0011447613360360265}
	erfR3 = [16]float32{0.05537658929824829, 0.14298562705516815, 0.17534559965133667, 0.151602640748024, 0.09623029828071594, 0.039032962173223495, -0.0013748692581430078, -0.021311236545443535, -0.026270216330885887, -0.023638062179088593, -0.01869300939142704, -0.014001158066093922, -0.010334773920476437, -0.007674913387745619, -0.005785476416349411, -0.004435030743479729}
	erfR2 = [16]float32{-0.3656423091888428, -0.2884953022003174, -0.16526482999324799, -0.03973090276122093, 0.05419181287288666, 0.104267418384552, 0.11707470566034317, 0.10740139335393906, 0.08886346966028214, 0.06987150758504868, 0.053959887474775314, 0.04175369814038277, 0.03269627317786217, 0.025998355820775032, 0.02099066972732544, 0.01718602143228054}
	erfR1 = [16]float32{-0.09315494447946548, -0.25944608449935913, -0.37389740347862244, -0.42438942193984985, -0.4190261960029602, -0.3776134252548218, -0.32101351022720337, -0.2642749547958374, -0.2150581032037735, -0.1754595786333084, -0.14465762674808502, -0.120876245200634, -0.10237826406955719, -0.08778756111860275, -0.07609924674034119, -0.06659720093011856}
	erfLo = [16]float32{9.577342474642592e-09, 2.728353010184037e-08, 3.5642127027557535e-09, -1.2480780853252327e-08, -2.4499783535247843e-08, 2.922329045418337e-10, 1.2830286166831684e-08, -1.3469453108427842e-08, -1.4836902817449982e-09, 1.1701516200446349e-08, -1.4473007681203853e-08, 7.840287530314072e-09, -7.467576002007092e-10, -3.601083209403555e-09, 9.027326441923833e-09, -3.264153614068732e-09}
	erfHi = [16]float32{1.1225296258926392, 1.0776450634002686, 0.9971854090690613, 0.896085798740387, 0.7896784543991089, 0.6895782351493835, 0.6021192073822021, 0.5290613770484924, 0.4693392813205719, 0.42072296142578125, 0.3808741569519043, 0.34780943393707275, 0.31999683380126953, 0.29629576206207275, 0.2758619785308838, 0.25806450843811035}
)

// erff32 returns erf x; NaN gives NaN and ±Inf ±1. With a = min(|x|, 4)
// and i = ⌊4a⌋ (15 at most) it evaluates the piece p = erfLo[i] + t·R(t)
// and returns a·erfHi[i] + a·p with one rounding at the end, and the sign
// of x. The vector code looks the coefficients up with VPERMPS, so sixteen
// pieces of degree 5 cost fewer operations than an exponential and two
// polynomials, and the split of the constant term keeps the error near
// half an ulp where a·(erf(a)/a) would be near one and a half.
func erff32(x float32) float32 {
	a := abs32(x)
	if a != a {
		return x
	}
	a = min(a, 4)
	i := int(min(a*4, 15))
	t := a - erfC[i]
	r := fma32(erfR5[i], t, erfR4[i])
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
