// Float64 vector maths for the AVX2 elementwise kernels
// (activation_amd64.s, softmax_amd64.s): the logarithm and exponential
// inside general powers, four lanes at a time, rounded once to float32 at the end,
// so they equal the correctly rounded results the pure-Go reference gets
// from package math. The float32 wrappers EXPF, LOGF, TANHF and ERFF call
// the float32 cores of vmath32_amd64.h instead.
//
// Register use: the double cores (D*) take their registers as arguments;
// the float32 wrappers (*F) use Y8–Y15 as scratch, so kernels keep their
// live values in Y0–Y7 and reload any tail mask after calling one.

// D4 defines a 32-byte constant: one float64 (given by its bits) four
// times, usable as a memory operand of packed double instructions.
#define D4(name, bits) DATA name<>+0(SB)/8, bits; DATA name<>+8(SB)/8, bits; DATA name<>+16(SB)/8, bits; DATA name<>+24(SB)/8, bits; GLOBL name<>(SB), RODATA|NOPTR, $32

// F8 defines a 32-byte constant of one float32 (given by its bits) eight
// times.
#define F8(name, bits) DATA name<>+0(SB)/4, bits; DATA name<>+4(SB)/4, bits; DATA name<>+8(SB)/4, bits; DATA name<>+12(SB)/4, bits; DATA name<>+16(SB)/4, bits; DATA name<>+20(SB)/4, bits; DATA name<>+24(SB)/4, bits; DATA name<>+28(SB)/4, bits; GLOBL name<>(SB), RODATA|NOPTR, $32

// expm1(r) = r + r²·P(r) on |r| ≤ ln2/2: P of degree 9, a Chebyshev fit
// with error 1e-16 (coefficients highest degree first).
D4(expC0, $0x3e5af38a9b0ec855) // 2.510038549551032e-08
D4(expC1, $0x3e9289185613a3d6) // 2.7620088445409746e-07
D4(expC2, $0x3ec71de0dae63bb3) // 2.7557268459997064e-06
D4(expC3, $0x3efa019b90d2ae7a) // 2.4801521295954376e-05
D4(expC4, $0x3f2a01a01a7c41d5) // 0.00019841269863053618
D4(expC5, $0x3f56c16c1788bd90) // 0.0013888888917213717
D4(expC6, $0x3f811111111109b3) // 0.008333333333330062
D4(expC7, $0x3fa5555555553d63) // 0.04166666666662413
D4(expC8, $0x3fc5555555555556) // 0.16666666666666669
D4(expC9, $0x3fe0000000000001) // 0.5000000000000001

// log(m) = 2s + 2s·z·P(z), s = (m−1)/(m+1), z = s², m in [√½, √2]: P of
// degree 6 with error 2e-16.
D4(logC0, $0x3fb2b5f68a50d903) // 0.07308903576708663
D4(logC1, $0x3fb39fdcceb4bb45) // 0.07665805861027504
D4(logC2, $0x3fb7462b91b8df65) // 0.09091446216268435
D4(logC3, $0x3fbc71c62d5e53e0) // 0.11111105544689748
D4(logC4, $0x3fc2492492dfd86c) // 0.14285714313126918
D4(logC5, $0x3fc9999999995273) // 0.19999999999949444
D4(logC6, $0x3fd5555555555558) // 0.3333333333333335

D4(dExpMin, $0xc069000000000000)    // -200: e^x is 0 in float32 below −104
D4(dExpMax, $0x4069000000000000)    // 200: e^x is +Inf in float32 above 89
D4(dMagic, $0x4338000000000000)     // 1.5·2^52: adding it rounds to an integer in the low bits
D4(dLog2e, $0x3ff71547652b82fe)     // 1/ln2
D4(dLn2hi, $0x3fe62e42fee00000)     // ln2 to 21 bits, so k·ln2hi is exact
D4(dLn2lo, $0x3dea39ef35793c76)     // ln2 − ln2hi
D4(dOne, $0x3ff0000000000000)       // 1; also 1023<<52, the exponent bias in place
D4(dTwo, $0x4000000000000000)       // 2
D4(dHalf, $0x3fe0000000000000)      // 0.5
D4(dSqrt2, $0x3ff6a09e667f3bcd)     // √2
D4(dTwo52, $0x4330000000000000)     // 2^52
D4(dTwo52Bias, $0x43300000000003ff) // 2^52 + 1023
D4(dMant, $0x000fffffffffffff)      // float64 mantissa bits
D4(dSign, $0x8000000000000000)      // float64 sign bit
D4(dAbs, $0x7fffffffffffffff)       // all but the sign bit

F8(fOne, $0x3f800000)      // 1
F8(fHalf, $0x3f000000)     // 0.5
F8(fTwo, $0x40000000)      // 2
F8(fSign, $0x80000000)     // float32 sign bit
F8(fAbs, $0x7fffffff)      // all but the sign bit
F8(fInf, $0x7f800000)      // +Inf
F8(fNegInf, $0xff800000)   // −Inf
F8(fNaN, $0x7fc00000)      // quiet NaN

// tailMask<>+32−4r holds r all-ones int32 lanes followed by zeros: the mask
// of VMASKMOVPS for a tail of r < 8 elements.
DATA tailMask<>+0(SB)/8, $0xffffffffffffffff
DATA tailMask<>+8(SB)/8, $0xffffffffffffffff
DATA tailMask<>+16(SB)/8, $0xffffffffffffffff
DATA tailMask<>+24(SB)/8, $0xffffffffffffffff
DATA tailMask<>+32(SB)/8, $0
DATA tailMask<>+40(SB)/8, $0
DATA tailMask<>+48(SB)/8, $0
DATA tailMask<>+56(SB)/8, $0
GLOBL tailMask<>(SB), RODATA|NOPTR, $64

// TAILMASK(n, reg, ymm): ymm = the mask of the first n (< 8) lanes, with reg
// left pointing at it so it can be reloaded after a core clobbers ymm.
#define TAILMASK(n, reg, ymm) \
	LEAQ  tailMask<>+32(SB), reg; \
	SHLQ  $2, n;                  \
	SUBQ  n, reg;                 \
	SHRQ  $2, n;                  \
	VMOVDQU (reg), ymm

// DEXPPARTS(X, Q, S, T): splits the four float64 in X (clamped to ±200,
// NaN kept) as X = k·ln2 + r, |r| ≤ ln2/2, leaving Q = expm1(r) and
// S = 2^k. Clobbers X and T.
#define DEXPPARTS(X, Q, S, T) \
	VMOVUPD      dExpMin<>(SB), T; \
	VMAXPD       X, T, X;          \
	VMOVUPD      dExpMax<>(SB), T; \
	VMINPD       X, T, X;          \
	VMOVUPD      dMagic<>(SB), T;  \
	VMOVUPD      dLog2e<>(SB), S;  \
	VFMADD213PD  T, X, S;          \
	VSUBPD       T, S, Q;          \
	VPSLLQ       $52, S, S;        \
	VPADDQ       dOne<>(SB), S, S; \
	VFNMADD231PD dLn2hi<>(SB), Q, X; \
	VFNMADD231PD dLn2lo<>(SB), Q, X; \
	VMOVUPD      expC0<>(SB), Q;   \
	VFMADD213PD  expC1<>(SB), X, Q; \
	VFMADD213PD  expC2<>(SB), X, Q; \
	VFMADD213PD  expC3<>(SB), X, Q; \
	VFMADD213PD  expC4<>(SB), X, Q; \
	VFMADD213PD  expC5<>(SB), X, Q; \
	VFMADD213PD  expC6<>(SB), X, Q; \
	VFMADD213PD  expC7<>(SB), X, Q; \
	VFMADD213PD  expC8<>(SB), X, Q; \
	VFMADD213PD  expC9<>(SB), X, Q; \
	VMULPD       X, X, T;          \
	VFMADD213PD  X, T, Q

// DEXP(X, Q, S, T): Q = e^X for four float64. Clobbers X, S, T.
#define DEXP(X, Q, S, T) \
	DEXPPARTS(X, Q, S, T); \
	VFMADD213PD S, S, Q

// DLOG(X, R, A, B, C, D): R = ln X for four positive, finite float64;
// other lanes get garbage. Clobbers A–D.
#define DLOG(X, R, A, B, C, D) \
	VPSRLQ      $52, X, A;             \
	VPOR        dTwo52<>(SB), A, A;    \
	VSUBPD      dTwo52Bias<>(SB), A, A; \
	VANDPD      dMant<>(SB), X, B;     \
	VORPD       dOne<>(SB), B, B;      \
	VCMPPD      $0x1e, dSqrt2<>(SB), B, C; \
	VANDPD      dOne<>(SB), C, D;      \
	VADDPD      D, A, A;               \
	VMULPD      dHalf<>(SB), B, D;     \
	VBLENDVPD   C, D, B, B;            \
	VSUBPD      dOne<>(SB), B, B;      \
	VADDPD      dTwo<>(SB), B, C;      \
	VDIVPD      C, B, B;               \
	VADDPD      B, B, C;               \
	VMULPD      B, B, B;               \
	VMOVUPD     logC0<>(SB), R;        \
	VFMADD213PD logC1<>(SB), B, R;     \
	VFMADD213PD logC2<>(SB), B, R;     \
	VFMADD213PD logC3<>(SB), B, R;     \
	VFMADD213PD logC4<>(SB), B, R;     \
	VFMADD213PD logC5<>(SB), B, R;     \
	VFMADD213PD logC6<>(SB), B, R;     \
	VMULPD      C, B, B;               \
	VFMADD213PD C, B, R;               \
	VFMADD231PD dLn2lo<>(SB), A, R;    \
	VFMADD231PD dLn2hi<>(SB), A, R

// EXPF, LOGF, TANHF and ERFF (YIN, XIN, YOUT, XOUT): YOUT = e^YIN,
// ln YIN, tanh YIN or erf YIN for eight float32, with the float32 cores of
// vmath32_amd64.h (XIN and XOUT, the low halves, are unused). YIN is kept
// and must differ from YOUT. EXPF clobbers Y8–Y10, LOGF Y8–Y12, TANHF and
// ERFF Y8–Y14.
#define EXPF(YIN, XIN, YOUT, XOUT) EXP32(YIN, YOUT, Y8, Y9, Y10)
#define LOGF(YIN, XIN, YOUT, XOUT) LOG32(YIN, YOUT, Y8, Y9, Y10, Y11, Y12)
#define TANHF(YIN, XIN, YOUT, XOUT) TANH32(YIN, YOUT, Y8, Y9, Y10, Y11, Y12, Y13, Y14)
#define ERFF(YIN, XIN, YOUT, XOUT) ERF32(YIN, YOUT, Y8, Y9, Y10, Y11, Y12, Y13, Y14)

