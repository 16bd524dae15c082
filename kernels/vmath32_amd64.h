// Float32 vector maths for the elementwise kernels: e^x, ln x, tanh x and
// erf x for eight float32 lanes in YMM registers (AVX2 with FMA) or sixteen
// in ZMM registers (AVX-512). Each macro performs the operations of its
// pure-Go reference in vmath32.go (expf32, logf32, tanhf32, erff32) in the
// same order with the same fused multiply-adds, so the results are the
// reference's bit for bit; the errors are documented there.
//
// The constants are 64 bytes, sixteen copies, so that 512-bit code can use
// them as memory operands too. Macros take their registers as arguments;
// the input register X is left as it was.

// F16 defines a 64-byte constant of one float32 (given by its bits) sixteen
// times.
#define F16(name, bits) \
	DATA name<>+0(SB)/4, bits; DATA name<>+4(SB)/4, bits; DATA name<>+8(SB)/4, bits; DATA name<>+12(SB)/4, bits; \
	DATA name<>+16(SB)/4, bits; DATA name<>+20(SB)/4, bits; DATA name<>+24(SB)/4, bits; DATA name<>+28(SB)/4, bits; \
	DATA name<>+32(SB)/4, bits; DATA name<>+36(SB)/4, bits; DATA name<>+40(SB)/4, bits; DATA name<>+44(SB)/4, bits; \
	DATA name<>+48(SB)/4, bits; DATA name<>+52(SB)/4, bits; DATA name<>+56(SB)/4, bits; DATA name<>+60(SB)/4, bits; \
	GLOBL name<>(SB), RODATA|NOPTR, $64

F16(v32One, $0x3f800000)    // 1
F16(v32Two, $0x40000000)    // 2
F16(v32Half, $0x3f000000)   // 0.5
F16(v32NegHalf, $0xbf000000) // −0.5
F16(v32Sign, $0x80000000)   // the sign bit
F16(v32Abs, $0x7fffffff)    // all but the sign bit
F16(v32Bias, $0x0000007f)   // the float32 exponent bias, as int32

F16(v32ExpMin, $0xc2d00000) // −104
F16(v32ExpMax, $0x42b20000) // 89
F16(v32Log2e, $0x3fb8aa3b)  // 1/ln2
F16(v32Ln2Hi, $0x3f317218)  // ln2 rounded to float32
F16(v32Ln2Lo, $0xb102e308)  // ln2 − v32Ln2Hi
F16(v32ExpP0, $0x3ab527a9)
F16(v32ExpP1, $0x3c091cbe)
F16(v32ExpP2, $0x3d2aac57)
F16(v32ExpP3, $0x3e2aaa49)
F16(v32ExpP4, $0x3efffffe)

F16(v32TanhSmall, $0x3f200000) // 0.625
F16(v32TanhSat, $0x410aa123)   // 8.664339742
F16(v32TanhQ0, $0x3b0d671f)
F16(v32TanhQ1, $0xbc0644af)
F16(v32TanhQ2, $0x3cb1d68c)
F16(v32TanhQ3, $0xbd5cf910)
F16(v32TanhQ4, $0x3e08883e)
F16(v32TanhQ5, $0xbeaaaaaa)

F16(v32ErfMax, $0x40800000)     // 4
F16(v32ErfSeven, $0x40e00000) // 7: the last piece

// erff32's eight pieces (vmath32.go): one table per coefficient, indexed
// by VPERMPS; the eight entries twice over, so that the 512-bit VPERMPS
// (a 4-bit index) reads the same values.
DATA v32ErfC<>+0(SB)/4, $0x3e800000
DATA v32ErfC<>+4(SB)/4, $0x3f400000
DATA v32ErfC<>+8(SB)/4, $0x3fa00000
DATA v32ErfC<>+12(SB)/4, $0x3fe00000
DATA v32ErfC<>+16(SB)/4, $0x40100000
DATA v32ErfC<>+20(SB)/4, $0x40300000
DATA v32ErfC<>+24(SB)/4, $0x40500000
DATA v32ErfC<>+28(SB)/4, $0x40700000
DATA v32ErfC<>+32(SB)/4, $0x3e800000
DATA v32ErfC<>+36(SB)/4, $0x3f400000
DATA v32ErfC<>+40(SB)/4, $0x3fa00000
DATA v32ErfC<>+44(SB)/4, $0x3fe00000
DATA v32ErfC<>+48(SB)/4, $0x40100000
DATA v32ErfC<>+52(SB)/4, $0x40300000
DATA v32ErfC<>+56(SB)/4, $0x40500000
DATA v32ErfC<>+60(SB)/4, $0x40700000
GLOBL v32ErfC<>(SB), RODATA|NOPTR, $64
DATA v32ErfR6<>+0(SB)/4, $0xbc930046
DATA v32ErfR6<>+4(SB)/4, $0x3c68f26d
DATA v32ErfR6<>+8(SB)/4, $0x3c236f8e
DATA v32ErfR6<>+12(SB)/4, $0xbb58ca99
DATA v32ErfR6<>+16(SB)/4, $0xbb3a1dba
DATA v32ErfR6<>+20(SB)/4, $0xb9bd868f
DATA v32ErfR6<>+24(SB)/4, $0x390f88b7
DATA v32ErfR6<>+28(SB)/4, $0x38bac388
DATA v32ErfR6<>+32(SB)/4, $0xbc930046
DATA v32ErfR6<>+36(SB)/4, $0x3c68f26d
DATA v32ErfR6<>+40(SB)/4, $0x3c236f8e
DATA v32ErfR6<>+44(SB)/4, $0xbb58ca99
DATA v32ErfR6<>+48(SB)/4, $0xbb3a1dba
DATA v32ErfR6<>+52(SB)/4, $0xb9bd868f
DATA v32ErfR6<>+56(SB)/4, $0x390f88b7
DATA v32ErfR6<>+60(SB)/4, $0x38bac388
GLOBL v32ErfR6<>(SB), RODATA|NOPTR, $64
DATA v32ErfR5<>+0(SB)/4, $0xbd0f39c8
DATA v32ErfR5<>+4(SB)/4, $0xbd189d0b
DATA v32ErfR5<>+8(SB)/4, $0x3c04918c
DATA v32ErfR5<>+12(SB)/4, $0x3c73993a
DATA v32ErfR5<>+16(SB)/4, $0x3b6a8f93
DATA v32ErfR5<>+20(SB)/4, $0xba31679f
DATA v32ErfR5<>+24(SB)/4, $0xba3c7992
DATA v32ErfR5<>+28(SB)/4, $0xb9b9e760
DATA v32ErfR5<>+32(SB)/4, $0xbd0f39c8
DATA v32ErfR5<>+36(SB)/4, $0xbd189d0b
DATA v32ErfR5<>+40(SB)/4, $0x3c04918c
DATA v32ErfR5<>+44(SB)/4, $0x3c73993a
DATA v32ErfR5<>+48(SB)/4, $0x3b6a8f93
DATA v32ErfR5<>+52(SB)/4, $0xba31679f
DATA v32ErfR5<>+56(SB)/4, $0xba3c7992
DATA v32ErfR5<>+60(SB)/4, $0xb9b9e760
GLOBL v32ErfR5<>(SB), RODATA|NOPTR, $64
DATA v32ErfR4<>+0(SB)/4, $0x3db64d29
DATA v32ErfR4<>+4(SB)/4, $0xbccba913
DATA v32ErfR4<>+8(SB)/4, $0xbd6d77d1
DATA v32ErfR4<>+12(SB)/4, $0xbca13243
DATA v32ErfR4<>+16(SB)/4, $0x3b3b10da
DATA v32ErfR4<>+20(SB)/4, $0x3b9ab01d
DATA v32ErfR4<>+24(SB)/4, $0x3b2d8ec0
DATA v32ErfR4<>+28(SB)/4, $0x3ab02ee1
DATA v32ErfR4<>+32(SB)/4, $0x3db64d29
DATA v32ErfR4<>+36(SB)/4, $0xbccba913
DATA v32ErfR4<>+40(SB)/4, $0xbd6d77d1
DATA v32ErfR4<>+44(SB)/4, $0xbca13243
DATA v32ErfR4<>+48(SB)/4, $0x3b3b10da
DATA v32ErfR4<>+52(SB)/4, $0x3b9ab01d
DATA v32ErfR4<>+56(SB)/4, $0x3b2d8ec0
DATA v32ErfR4<>+60(SB)/4, $0x3ab02ee1
GLOBL v32ErfR4<>(SB), RODATA|NOPTR, $64
DATA v32ErfR3<>+0(SB)/4, $0x3dd66886
DATA v32ErfR3<>+4(SB)/4, $0x3e2d6324
DATA v32ErfR3<>+8(SB)/4, $0x3d87ddf4
DATA v32ErfR3<>+12(SB)/4, $0xbc6007ca
DATA v32ErfR3<>+16(SB)/4, $0xbcd0f6c8
DATA v32ErfR3<>+20(SB)/4, $0xbc85083e
DATA v32ErfR3<>+24(SB)/4, $0xbc11b41f
DATA v32ErfR3<>+28(SB)/4, $0xbba59fac
DATA v32ErfR3<>+32(SB)/4, $0x3dd66886
DATA v32ErfR3<>+36(SB)/4, $0x3e2d6324
DATA v32ErfR3<>+40(SB)/4, $0x3d87ddf4
DATA v32ErfR3<>+44(SB)/4, $0xbc6007ca
DATA v32ErfR3<>+48(SB)/4, $0xbcd0f6c8
DATA v32ErfR3<>+52(SB)/4, $0xbc85083e
DATA v32ErfR3<>+56(SB)/4, $0xbc11b41f
DATA v32ErfR3<>+60(SB)/4, $0xbba59fac
GLOBL v32ErfR3<>(SB), RODATA|NOPTR, $64
DATA v32ErfR2<>+0(SB)/4, $0xbeabb31c
DATA v32ErfR2<>+4(SB)/4, $0xbdcd3ed5
DATA v32ErfR2<>+8(SB)/4, $0x3dad5279
DATA v32ErfR2<>+12(SB)/4, $0x3de9aa5c
DATA v32ErfR2<>+16(SB)/4, $0x3da20463
DATA v32ErfR2<>+20(SB)/4, $0x3d4236c1
DATA v32ErfR2<>+24(SB)/4, $0x3cee6017
DATA v32ErfR2<>+28(SB)/4, $0x3c9b563b
DATA v32ErfR2<>+32(SB)/4, $0xbeabb31c
DATA v32ErfR2<>+36(SB)/4, $0xbdcd3ed5
DATA v32ErfR2<>+40(SB)/4, $0x3dad5279
DATA v32ErfR2<>+44(SB)/4, $0x3de9aa5c
DATA v32ErfR2<>+48(SB)/4, $0x3da20463
DATA v32ErfR2<>+52(SB)/4, $0x3d4236c1
DATA v32ErfR2<>+56(SB)/4, $0x3cee6017
DATA v32ErfR2<>+60(SB)/4, $0x3c9b563b
GLOBL v32ErfR2<>(SB), RODATA|NOPTR, $64
DATA v32ErfR1<>+0(SB)/4, $0xbe398372
DATA v32ErfR1<>+4(SB)/4, $0xbed066e8
DATA v32ErfR1<>+8(SB)/4, $0xbecd8974
DATA v32ErfR1<>+12(SB)/4, $0xbe9583d4
DATA v32ErfR1<>+16(SB)/4, $0xbe46b9a4
DATA v32ErfR1<>+20(SB)/4, $0xbe072c4b
DATA v32ErfR1<>+24(SB)/4, $0xbdc1dfd0
DATA v32ErfR1<>+28(SB)/4, $0xbd91a293
DATA v32ErfR1<>+32(SB)/4, $0xbe398372
DATA v32ErfR1<>+36(SB)/4, $0xbed066e8
DATA v32ErfR1<>+40(SB)/4, $0xbecd8974
DATA v32ErfR1<>+44(SB)/4, $0xbe9583d4
DATA v32ErfR1<>+48(SB)/4, $0xbe46b9a4
DATA v32ErfR1<>+52(SB)/4, $0xbe072c4b
DATA v32ErfR1<>+56(SB)/4, $0xbdc1dfd0
DATA v32ErfR1<>+60(SB)/4, $0xbd91a293
GLOBL v32ErfR1<>(SB), RODATA|NOPTR, $64
DATA v32ErfLo<>+0(SB)/4, $0x31f750d7
DATA v32ErfLo<>+4(SB)/4, $0x327170da
DATA v32ErfLo<>+8(SB)/4, $0xb20f32da
DATA v32ErfLo<>+12(SB)/4, $0x3203fa2d
DATA v32ErfLo<>+16(SB)/4, $0x320e0c9a
DATA v32ErfLo<>+20(SB)/4, $0xb1642175
DATA v32ErfLo<>+24(SB)/4, $0x31c476b6
DATA v32ErfLo<>+28(SB)/4, $0xb277f363
DATA v32ErfLo<>+32(SB)/4, $0x31f750d7
DATA v32ErfLo<>+36(SB)/4, $0x327170da
DATA v32ErfLo<>+40(SB)/4, $0xb20f32da
DATA v32ErfLo<>+44(SB)/4, $0x3203fa2d
DATA v32ErfLo<>+48(SB)/4, $0x320e0c9a
DATA v32ErfLo<>+52(SB)/4, $0xb1642175
DATA v32ErfLo<>+56(SB)/4, $0x31c476b6
DATA v32ErfLo<>+60(SB)/4, $0xb277f363
GLOBL v32ErfLo<>(SB), RODATA|NOPTR, $64
DATA v32ErfHi<>+0(SB)/4, $0x3f8d7aa7
DATA v32ErfHi<>+4(SB)/4, $0x3f72bdba
DATA v32ErfHi<>+8(SB)/4, $0x3f3d028c
DATA v32ErfHi<>+12(SB)/4, $0x3f105602
DATA v32ErfHi<>+16(SB)/4, $0x3ee33903
DATA v32ErfHi<>+20(SB)/4, $0x3eba29c0
DATA v32ErfHi<>+24(SB)/4, $0x3e9d89ac
DATA v32ErfHi<>+28(SB)/4, $0x3e888888
DATA v32ErfHi<>+32(SB)/4, $0x3f8d7aa7
DATA v32ErfHi<>+36(SB)/4, $0x3f72bdba
DATA v32ErfHi<>+40(SB)/4, $0x3f3d028c
DATA v32ErfHi<>+44(SB)/4, $0x3f105602
DATA v32ErfHi<>+48(SB)/4, $0x3ee33903
DATA v32ErfHi<>+52(SB)/4, $0x3eba29c0
DATA v32ErfHi<>+56(SB)/4, $0x3e9d89ac
DATA v32ErfHi<>+60(SB)/4, $0x3e888888
GLOBL v32ErfHi<>(SB), RODATA|NOPTR, $64

F16(v32Mant, $0x007fffff)    // the mantissa bits
F16(v32Inf, $0x7f800000)     // +Inf
F16(v32NegInf, $0xff800000)  // −Inf
F16(v32NaN, $0x7fc00000)     // a quiet NaN
F16(v32MinNorm, $0x00800000) // 2⁻¹²⁶
F16(v32Two23, $0x4b000000)   // 2²³
F16(v32Neg23, $0xc1b80000)   // −23
F16(v32Sqrt2, $0x3fb504f3)   // √2 rounded down
F16(v32LogP0, $0xbd9c6752)
F16(v32LogP1, $0x3e02aff1)
F16(v32LogP2, $0xbe06c0f0)
F16(v32LogP3, $0x3e116c7f)
F16(v32LogP4, $0xbe2a3947)
F16(v32LogP5, $0x3e4cd00f)
F16(v32LogP6, $0xbe800113)
F16(v32LogP7, $0x3eaaaaaa)

// The macros below work on YMM (AVX2, eight lanes) or ZMM (AVX-512,
// sixteen lanes) registers alike where the instructions are the same; the
// AVX2 and AVX-512 forms (…Z) differ only where AVX-512 has a better
// instruction: VRNDSCALEPS for VROUNDPS, VSCALEFPS for the scaling by 2ⁿ
// (rounded once, as the two AVX2 multiplications are), and mask registers
// (K1, which those forms clobber) for VBLENDVPS.

// LOGPOLY(F, Z, D): D = ln(1+F) for F in [√½−1, √2−1] (logf32's
// polynomial), with Z = F·F computed.
#define LOGPOLY(F, Z, D) \
	VMULPS       F, F, Z;                 \
	VMOVUPS      v32LogP0<>(SB), D;       \
	VFMADD213PS  v32LogP1<>(SB), F, D;    \
	VFMADD213PS  v32LogP2<>(SB), F, D;    \
	VFMADD213PS  v32LogP3<>(SB), F, D;    \
	VFMADD213PS  v32LogP4<>(SB), F, D;    \
	VFMADD213PS  v32LogP5<>(SB), F, D;    \
	VFMADD213PS  v32LogP6<>(SB), F, D;    \
	VFMADD213PS  v32LogP7<>(SB), F, D;    \
	VFMADD213PS  v32NegHalf<>(SB), F, D;  \
	VFMADD213PS  F, Z, D

// LOGSPLIT(A, B, C): from A = x (subnormals scaled by 2²³) and C = −23
// where they were, else 0: B = the exponent k, A = the mantissa m in
// [1, 2).
#define LOGSPLIT(A, B, C) \
	VPSRLD       $23, A, B;               \
	VPSUBD       v32Bias<>(SB), B, B;     \
	VCVTDQ2PS    B, B;                    \
	VADDPS       C, B, B;                 \
	VANDPS       v32Mant<>(SB), A, A;     \
	VORPS        v32One<>(SB), A, A

// LOGSUM(A, B, C, D): D = ln(1+(A−1)) + B·ln2 once A = m in (√½, √2] and
// B = k. Clobbers A, C.
#define LOGSUM(A, B, C, D) \
	VSUBPS       v32One<>(SB), A, A;      \
	LOGPOLY(A, C, D);                     \
	VFMADD231PS  v32Ln2Lo<>(SB), B, D;    \
	VFMADD231PS  v32Ln2Hi<>(SB), B, D

// LOG32(X, Y, A, B, C, D, E): Y = ln X for eight float32 (logf32). Y must
// differ from X. Clobbers A–E.
#define LOG32(X, Y, A, B, C, D, E) \
	VMULPS       v32Two23<>(SB), X, A;    \
	VCMPPS       $0x11, v32MinNorm<>(SB), X, C; \
	VBLENDVPS    C, A, X, A;              \
	VANDPS       v32Neg23<>(SB), C, C;    \
	LOGSPLIT(A, B, C);                    \
	VCMPPS       $0x1e, v32Sqrt2<>(SB), A, C; \
	VMULPS       v32Half<>(SB), A, D;     \
	VBLENDVPS    C, D, A, A;              \
	VANDPS       v32One<>(SB), C, C;      \
	VADDPS       C, B, B;                 \
	LOGSUM(A, B, C, D);                   \
	VXORPS       C, C, C;                 \
	VCMPPS       $0x00, C, X, E;          \
	VBLENDVPS    E, v32NegInf<>(SB), D, D; \
	VCMPPS       $0x00, v32Inf<>(SB), X, E; \
	VBLENDVPS    E, v32Inf<>(SB), D, D;   \
	VCMPPS       $0x19, C, X, E;          \
	VBLENDVPS    E, v32NaN<>(SB), D, Y

// LOG32Z(X, Y, A, B, C, D, E): LOG32 for sixteen lanes.
#define LOG32Z(X, Y, A, B, C, D, E) \
	VMULPS       v32Two23<>(SB), X, A;    \
	VCMPPS       $0x11, v32MinNorm<>(SB), X, K1; \
	VMOVAPS      X, E;                    \
	VMOVAPS      A, K1, E;                \
	VXORPS       C, C, C;                 \
	VMOVUPS      v32Neg23<>(SB), K1, C;   \
	VMOVAPS      E, A;                    \
	LOGSPLIT(A, B, C);                    \
	VCMPPS       $0x1e, v32Sqrt2<>(SB), A, K1; \
	VMULPS       v32Half<>(SB), A, K1, A; \
	VADDPS       v32One<>(SB), B, K1, B;  \
	LOGSUM(A, B, C, D);                   \
	VXORPS       C, C, C;                 \
	VCMPPS       $0x00, C, X, K1;         \
	VMOVUPS      v32NegInf<>(SB), K1, D;  \
	VCMPPS       $0x00, v32Inf<>(SB), X, K1; \
	VMOVUPS      v32Inf<>(SB), K1, D;     \
	VCMPPS       $0x19, C, X, K1;         \
	VMOVUPS      v32NaN<>(SB), K1, D;     \
	VMOVAPS      D, Y

// EXPCLAMP(X, A, B): A = X clamped to [−104, 89], NaN kept (the constant
// is the first source of VMAXPS and VMINPS). Clobbers B.
#define EXPCLAMP(X, A, B) \
	VMOVUPS      v32ExpMin<>(SB), A;    \
	VMAXPS       X, A, A;               \
	VMOVUPS      v32ExpMax<>(SB), B;    \
	VMINPS       A, B, A

// EXP32CORE(X, Y, N, P, RND): for X already clamped, N = n as float32 and
// P = e^r, where X = n·ln2 + r; RND is VROUNDPS or VRNDSCALEPS. Y is
// scratch (it ends as r).
#define EXP32CORE(X, Y, N, P, RND) \
	VMULPS       v32Log2e<>(SB), X, N;  \
	RND          $0, N, N;              \
	VMOVAPS      X, Y;                  \
	VFNMADD231PS v32Ln2Hi<>(SB), N, Y;  \
	VFNMADD231PS v32Ln2Lo<>(SB), N, Y;  \
	VMOVUPS      v32ExpP0<>(SB), P;     \
	VFMADD213PS  v32ExpP1<>(SB), Y, P;  \
	VFMADD213PS  v32ExpP2<>(SB), Y, P;  \
	VFMADD213PS  v32ExpP3<>(SB), Y, P;  \
	VFMADD213PS  v32ExpP4<>(SB), Y, P;  \
	VFMADD213PS  v32One<>(SB), Y, P;    \
	VFMADD213PS  v32One<>(SB), Y, P

// EXP32(X, Y, A, B, C): Y = e^X for eight float32 (expf32). The scaling by
// 2ⁿ, n in [−150, 128], is two multiplications by 2^⌊n/2⌋ and
// 2^(n−⌊n/2⌋): the first is exact, so the result is rounded once, even
// where it is subnormal. Clobbers A, B, C.
#define EXP32(X, Y, A, B, C) \
	EXPCLAMP(X, A, B);                  \
	EXP32CORE(A, Y, B, C, VROUNDPS);    \
	VCVTPS2DQ    B, B;                  \
	VPSRAD       $1, B, A;              \
	VPSUBD       A, B, B;               \
	VPADDD       v32Bias<>(SB), A, A;   \
	VPSLLD       $23, A, A;             \
	VPADDD       v32Bias<>(SB), B, B;   \
	VPSLLD       $23, B, B;             \
	VMULPS       A, C, C;               \
	VMULPS       B, C, Y

// EXP32Z(X, Y, A, B, C): EXP32 for sixteen lanes. Clobbers A, B, C.
#define EXP32Z(X, Y, A, B, C) \
	EXPCLAMP(X, A, B);                  \
	EXP32CORE(A, Y, B, C, VRNDSCALEPS); \
	VSCALEFPS    B, C, Y

// EXP32N(X, Y, A, B): Y = e^X for X in [−87, 88], where the result is
// normal and 2ⁿ one exact multiplication; the same bits as EXP32 there.
// Clobbers A, B.
#define EXP32N(X, Y, A, B) \
	EXP32CORE(X, Y, A, B, VROUNDPS);   \
	VCVTPS2DQ    A, A;                 \
	VPADDD       v32Bias<>(SB), A, A;  \
	VPSLLD       $23, A, A;            \
	VMULPS       A, B, Y

// TANHPARTS(X, A, B, C, D, E, F, G, EXP): both pieces of tanhf32 for the
// lanes of X: A = |x|, C = the odd polynomial's x + x³·Q(x²), D =
// 1 − 2/(e^(2|x|) + 1) with EXP (EXP32 or EXP32Z) for the exponential.
// Clobbers B, E–G.
#define TANHPARTS(X, A, B, C, D, E, F, G, EXP) \
	VANDPS       v32Abs<>(SB), X, A;      \
	VMULPS       X, X, B;                 \
	VMOVUPS      v32TanhQ0<>(SB), C;      \
	VFMADD213PS  v32TanhQ1<>(SB), B, C;   \
	VFMADD213PS  v32TanhQ2<>(SB), B, C;   \
	VFMADD213PS  v32TanhQ3<>(SB), B, C;   \
	VFMADD213PS  v32TanhQ4<>(SB), B, C;   \
	VFMADD213PS  v32TanhQ5<>(SB), B, C;   \
	VMULPS       B, X, B;                 \
	VFMADD213PS  X, B, C;                 \
	VADDPS       A, A, B;                 \
	EXP(B, D, E, F, G);                   \
	VADDPS       v32One<>(SB), D, D;      \
	VMOVUPS      v32Two<>(SB), E;         \
	VDIVPS       D, E, E;                 \
	VMOVUPS      v32One<>(SB), D;         \
	VSUBPS       E, D, D

// TANH32(X, Y, A, B, C, D, E, F, G): Y = tanh X for eight float32
// (tanhf32): the large piece saturated to 1 beyond 8.664339742, given x's
// sign, and chosen from |x| ≥ 0.625 on. Y must differ from X. Clobbers A–G.
#define TANH32(X, Y, A, B, C, D, E, F, G) \
	TANHPARTS(X, A, B, C, D, E, F, G, EXP32); \
	VCMPPS       $0x1e, v32TanhSat<>(SB), A, E; \
	VBLENDVPS    E, v32One<>(SB), D, D;   \
	VANDPS       v32Sign<>(SB), X, E;     \
	VORPS        E, D, D;                 \
	VCMPPS       $0x1d, v32TanhSmall<>(SB), A, E; \
	VBLENDVPS    E, D, C, Y

// TANH32Z(X, Y, A, B, C, D, E, F, G): TANH32 for sixteen lanes.
#define TANH32Z(X, Y, A, B, C, D, E, F, G) \
	TANHPARTS(X, A, B, C, D, E, F, G, EXP32Z); \
	VCMPPS       $0x1e, v32TanhSat<>(SB), A, K1; \
	VMOVUPS      v32One<>(SB), K1, D;     \
	VANDPS       v32Sign<>(SB), X, E;     \
	VORPS        E, D, D;                 \
	VCMPPS       $0x1d, v32TanhSmall<>(SB), A, K1; \
	VMOVAPS      C, Y;                    \
	VMOVAPS      D, K1, Y

// ERF32(X, Y, A, B, C, D, E, F, G): Y = erf X (erff32) for the lanes of X,
// YMM or ZMM alike: VPERMPS takes the index's low 3 or 4 bits, and the
// tables repeat their eight entries. Y must differ from X. Clobbers A–E
// (F and G are unused).
#define ERF32(X, Y, A, B, C, D, E, F, G) \
	VANDPS       v32Abs<>(SB), X, A;      \
	VMOVUPS      v32ErfMax<>(SB), B;      \
	VMINPS       A, B, A;                 \
	VMULPS       v32Two<>(SB), A, B;      \
	VMINPS       v32ErfSeven<>(SB), B, B; \
	VCVTTPS2DQ   B, B;                    \
	VPERMPS      v32ErfC<>(SB), B, C;     \
	VSUBPS       C, A, C;                 \
	VPERMPS      v32ErfR6<>(SB), B, D;    \
	VPERMPS      v32ErfR5<>(SB), B, E;    \
	VFMADD213PS  E, C, D;                 \
	VPERMPS      v32ErfR4<>(SB), B, E;    \
	VFMADD213PS  E, C, D;                 \
	VPERMPS      v32ErfR3<>(SB), B, E;    \
	VFMADD213PS  E, C, D;                 \
	VPERMPS      v32ErfR2<>(SB), B, E;    \
	VFMADD213PS  E, C, D;                 \
	VPERMPS      v32ErfR1<>(SB), B, E;    \
	VFMADD213PS  E, C, D;                 \
	VPERMPS      v32ErfLo<>(SB), B, E;    \
	VFMADD213PS  E, C, D;                 \
	VMULPS       D, A, D;                 \
	VPERMPS      v32ErfHi<>(SB), B, E;    \
	VFMADD231PS  E, A, D;                 \
	VANDPS       v32Sign<>(SB), X, E;     \
	VORPS        E, D, Y

// ERF32Z is ERF32 on ZMM registers.
#define ERF32Z(X, Y, A, B, C, D, E, F, G) ERF32(X, Y, A, B, C, D, E, F, G)
