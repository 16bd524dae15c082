// Float32 vector maths for the elementwise kernels: e^x, tanh x and erf x
// for eight float32 lanes in YMM registers (AVX2 with FMA). Each macro
// performs the operations of its pure-Go reference in vmath32.go (expf32,
// tanhf32, erff32) in the same order with the same fused multiply-adds, so
// the results are the reference's bit for bit; the errors are documented
// there.
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

F16(v32ErfMid, $0x40200000) // 2.5
F16(v32ErfMax, $0x40800000) // 4
F16(v32ErfS0, $0x38a61a27)
F16(v32ErfS1, $0xba528587)
F16(v32ErfS2, $0x3baa1708)
F16(v32ErfS3, $0xbcdbff48)
F16(v32ErfS4, $0x3de716a8)
F16(v32ErfS5, $0xbec093a0)
F16(v32ErfS6, $0x3e0375d4)
F16(v32ErfL0, $0x38e011e5)
F16(v32ErfL1, $0x396c0118)
F16(v32ErfL2, $0x3a0e6e7c)
F16(v32ErfL3, $0xba2d4f0c)
F16(v32ErfL4, $0x3b16e53e)
F16(v32ErfL5, $0xbc053d38)
F16(v32ErfL6, $0x3ccc19c0)
F16(v32ErfL7, $0xbd9840b7)
F16(v32ErfL8, $0x3e57ddf3)

// EXP32CORE(X, Y, N, P): for X already clamped, N = n as float32 and
// P = e^r, where X = n·ln2 + r. Y is scratch (it ends as r).
#define EXP32CORE(X, Y, N, P) \
	VMULPS       v32Log2e<>(SB), X, N;  \
	VROUNDPS     $0, N, N;              \
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

// EXP32(X, Y, A, B, C): Y = e^X for eight float32 (expf32). NaN stays NaN
// through the clamp (the constant is the first source of VMAXPS/VMINPS).
// The scaling by 2ⁿ, n in [−150, 128], is two multiplications by 2^⌊n/2⌋
// and 2^(n−⌊n/2⌋): the first is exact, so the result is rounded once, even
// where it is subnormal. Clobbers A, B, C.
#define EXP32(X, Y, A, B, C) \
	VMOVUPS      v32ExpMin<>(SB), A;    \
	VMAXPS       X, A, A;               \
	VMOVUPS      v32ExpMax<>(SB), B;    \
	VMINPS       A, B, A;               \
	EXP32CORE(A, Y, B, C);              \
	VCVTPS2DQ    B, B;                  \
	VPSRAD       $1, B, A;              \
	VPSUBD       A, B, B;               \
	VPADDD       v32Bias<>(SB), A, A;   \
	VPSLLD       $23, A, A;             \
	VPADDD       v32Bias<>(SB), B, B;   \
	VPSLLD       $23, B, B;             \
	VMULPS       A, C, C;               \
	VMULPS       B, C, Y

// EXP32N(X, Y, A, B): Y = e^X for X in [−87, 88], where the result is
// normal and 2ⁿ one exact multiplication; the same bits as EXP32 there.
// Clobbers A, B.
#define EXP32N(X, Y, A, B) \
	EXP32CORE(X, Y, A, B);             \
	VCVTPS2DQ    A, A;                 \
	VPADDD       v32Bias<>(SB), A, A;  \
	VPSLLD       $23, A, A;            \
	VMULPS       A, B, Y

// TANH32(X, Y, A, B, C, D, E, F, G): Y = tanh X for eight float32
// (tanhf32). Y must differ from X. Clobbers A–G.
#define TANH32(X, Y, A, B, C, D, E, F, G) \
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
	EXP32(B, D, E, F, G);                 \
	VADDPS       v32One<>(SB), D, D;      \
	VMOVUPS      v32Two<>(SB), E;         \
	VDIVPS       D, E, E;                 \
	VMOVUPS      v32One<>(SB), D;         \
	VSUBPS       E, D, D;                 \
	VCMPPS       $0x1e, v32TanhSat<>(SB), A, E; \
	VBLENDVPS    E, v32One<>(SB), D, D;   \
	VANDPS       v32Sign<>(SB), X, E;     \
	VORPS        E, D, D;                 \
	VCMPPS       $0x1d, v32TanhSmall<>(SB), A, E; \
	VBLENDVPS    E, D, C, Y

// ERF32(X, Y, A, B, C, D, E, F, G): Y = erf X for eight float32 (erff32).
// Y must differ from X. Clobbers A–G.
#define ERF32(X, Y, A, B, C, D, E, F, G) \
	VANDPS       v32Abs<>(SB), X, A;      \
	VMULPS       X, X, B;                 \
	VMOVUPS      v32ErfS0<>(SB), C;       \
	VFMADD213PS  v32ErfS1<>(SB), B, C;    \
	VFMADD213PS  v32ErfS2<>(SB), B, C;    \
	VFMADD213PS  v32ErfS3<>(SB), B, C;    \
	VFMADD213PS  v32ErfS4<>(SB), B, C;    \
	VFMADD213PS  v32ErfS5<>(SB), B, C;    \
	VFMADD213PS  v32ErfS6<>(SB), B, C;    \
	VFMADD213PS  X, X, C;                 \
	VMINPS       v32ErfMax<>(SB), A, B;   \
	VSUBPS       v32ErfMid<>(SB), B, D;   \
	VMOVUPS      v32ErfL0<>(SB), E;       \
	VFMADD213PS  v32ErfL1<>(SB), D, E;    \
	VFMADD213PS  v32ErfL2<>(SB), D, E;    \
	VFMADD213PS  v32ErfL3<>(SB), D, E;    \
	VFMADD213PS  v32ErfL4<>(SB), D, E;    \
	VFMADD213PS  v32ErfL5<>(SB), D, E;    \
	VFMADD213PS  v32ErfL6<>(SB), D, E;    \
	VFMADD213PS  v32ErfL7<>(SB), D, E;    \
	VFMADD213PS  v32ErfL8<>(SB), D, E;    \
	VMULPS       B, B, D;                 \
	VXORPS       v32Sign<>(SB), D, D;     \
	EXP32N(D, F, B, G);                   \
	VFNMADD213PS v32One<>(SB), E, F;      \
	VANDPS       v32Sign<>(SB), X, B;     \
	VORPS        B, F, F;                 \
	VCMPPS       $0x1d, v32One<>(SB), A, B; \
	VBLENDVPS    B, F, C, Y
