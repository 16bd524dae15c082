// Vector maths for the AVX2 elementwise kernels (activation_amd64.s,
// softmax_amd64.s): exp, expm1, log, tanh and erf of float32 data.
//
// The transcendental cores run in float64, four lanes at a time, and round
// once to float32 at the end. Their float64 error (about 1e-16 relative) is
// so far below float32's half ulp (3e-8) that the float32 results equal the
// correctly rounded ones the pure-Go reference computes with package math
// (checked exhaustively over the float32 ranges the kernels see). A kernel
// built from them therefore rounds like the reference, step by step, and
// the cancellations PyTorch's formulas make (ELU's eˣ−1, GELU's 1+erf,
// tanh's 1−y²) amplify no extra error. Evaluating in float32 would be about
// twice as fast but leaves results an ulp off in a few percent of cases,
// which those cancellations turn into relative errors above the 1e-5 the
// PyTorch golden tests allow.
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

// erf(x) = x·S(x²) for |x| ≤ 0.75: S of degree 9, error 7e-17.
D4(erfS0, $0xbe810e8eff067571) // -1.2708358055900849e-07
D4(erfS1, $0x3ebaeabe20e77a55) // 1.604376055667737e-06
D4(erfS2, $0xbeef3e98b474c00c) // -1.4898546977976122e-05
D4(erfS3, $0x3f1f997a70596815) // 0.00012054261977692577
D4(erfS4, $0xbf4c02d5993acc3a) // -0.0008548300706564601
D4(erfS5, $0x3f7565bcb5c5e855) // 0.00522397723067954
D4(erfS6, $0xbf9b82ce3092b024) // -0.026866170611057907
D4(erfS7, $0x3fbce2f21a0286f3) // 0.1128379167080558
D4(erfS8, $0xbfd812746b03781c) // -0.37612638903181206
D4(erfS9, $0x3ff20dd750429b6d) // 1.1283791670955126

// erfc(a) = e^(−a²)·t·L(t), t = 1/(1 + 0.3a), for 0.75 ≤ a ≤ 4 (beyond 4,
// erf rounds to ±1 in float32): L of degree 12, error 2e-16.
D4(erfL0, $0xbf9fb71176b81db6) // -0.030971787329716803
D4(erfL1, $0x3fce56fb46999268) // 0.23702946612606302
D4(erfL2, $0xbfe868ca1bbac5fe) // -0.7627916852563315
D4(erfL3, $0x3ff5a39d93efca90) // 1.3524451998497717
D4(erfL4, $0xbff8ef64ff68965c) // -1.5584459282776129
D4(erfL5, $0x3ff5bb3df211c3a4) // 1.3582133727870564
D4(erfL6, $0xbfe75abcc2a04aac) // -0.7298263360301767
D4(erfL7, $0x3fdd4e03b8de8b24) // 0.45788662961619964
D4(erfL8, $0x3f7887384235ce49) // 0.005988330612456468
D4(erfL9, $0x3fc6520b5cc8b01e) // 0.17437879591432276
D4(erfL10, $0x3fc41dee738fcfe5) // 0.1571634353891788
D4(erfL11, $0x3fc5b881b9cd3d98) // 0.16969319889402068
D4(erfL12, $0x3fc5a9916696e131) // 0.16923730382200966

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
D4(dErfP, $0x3fd3333333333333)      // 0.3
D4(dErfT, $0x3fe8000000000000)      // 0.75
D4(dErfMax, $0x4010000000000000)    // 4

F8(fOne, $0x3f800000)      // 1
F8(fHalf, $0x3f000000)     // 0.5
F8(fTwo, $0x40000000)      // 2
F8(fSign, $0x80000000)     // float32 sign bit
F8(fAbs, $0x7fffffff)      // all but the sign bit
F8(fInf, $0x7f800000)      // +Inf
F8(fNegInf, $0xff800000)   // −Inf
F8(fNaN, $0x7fc00000)      // quiet NaN
F8(fTanhSat, $0x410aa123)  // 8.664339742: SLEEF's tanhf is ±1 beyond

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

// DEXPM1(X, Q, S, T): Q = e^X − 1 for four float64, accurate near 0 too.
// Clobbers X, S, T.
#define DEXPM1(X, Q, S, T) \
	DEXPPARTS(X, Q, S, T);      \
	VSUBPD dOne<>(SB), S, T;    \
	VFMADD213PD T, S, Q

// DLOG(X, R, A, B, C, D): R = ln X for four positive, finite float64;
// other lanes get garbage, which LOGF replaces. Clobbers A–D.
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

// DERF: Y9 = erf(Y8) for four float64, with Y8 kept and Y10–Y15
// clobbered. Both regions are evaluated and blended: x·S(x²) inside
// |x| ≤ 0.75, ±(1 − e^(−a²)·t·L(t)) outside, with a = min(|x|, 4) so the
// exponential cannot underflow (and a NaN stays NaN).
#define DERF \
	VMULPD       Y8, Y8, Y10;            \
	VMOVUPD      erfS0<>(SB), Y9;        \
	VFMADD213PD  erfS1<>(SB), Y10, Y9;   \
	VFMADD213PD  erfS2<>(SB), Y10, Y9;   \
	VFMADD213PD  erfS3<>(SB), Y10, Y9;   \
	VFMADD213PD  erfS4<>(SB), Y10, Y9;   \
	VFMADD213PD  erfS5<>(SB), Y10, Y9;   \
	VFMADD213PD  erfS6<>(SB), Y10, Y9;   \
	VFMADD213PD  erfS7<>(SB), Y10, Y9;   \
	VFMADD213PD  erfS8<>(SB), Y10, Y9;   \
	VFMADD213PD  erfS9<>(SB), Y10, Y9;   \
	VMULPD       Y8, Y9, Y9;             \
	VANDPD       dAbs<>(SB), Y8, Y10;    \
	VMOVUPD      dErfMax<>(SB), Y11;     \
	VMINPD       Y10, Y11, Y11;          \
	VCMPPD       $0x12, dErfT<>(SB), Y10, Y10; \
	VMOVUPD      dErfP<>(SB), Y12;       \
	VFMADD213PD  dOne<>(SB), Y11, Y12;   \
	VMOVUPD      dOne<>(SB), Y13;        \
	VDIVPD       Y12, Y13, Y12;          \
	VMULPD       Y11, Y11, Y11;          \
	VXORPD       dSign<>(SB), Y11, Y11;  \
	DEXP(Y11, Y13, Y14, Y15);            \
	VMULPD       Y12, Y13, Y13;          \
	VMOVUPD      erfL0<>(SB), Y11;       \
	VFMADD213PD  erfL1<>(SB), Y12, Y11;  \
	VFMADD213PD  erfL2<>(SB), Y12, Y11;  \
	VFMADD213PD  erfL3<>(SB), Y12, Y11;  \
	VFMADD213PD  erfL4<>(SB), Y12, Y11;  \
	VFMADD213PD  erfL5<>(SB), Y12, Y11;  \
	VFMADD213PD  erfL6<>(SB), Y12, Y11;  \
	VFMADD213PD  erfL7<>(SB), Y12, Y11;  \
	VFMADD213PD  erfL8<>(SB), Y12, Y11;  \
	VFMADD213PD  erfL9<>(SB), Y12, Y11;  \
	VFMADD213PD  erfL10<>(SB), Y12, Y11; \
	VFMADD213PD  erfL11<>(SB), Y12, Y11; \
	VFMADD213PD  erfL12<>(SB), Y12, Y11; \
	VMOVUPD      dOne<>(SB), Y12;        \
	VFNMADD231PD Y11, Y13, Y12;          \
	VANDPD       dSign<>(SB), Y8, Y11;   \
	VORPD        Y11, Y12, Y12;          \
	VBLENDVPD    Y10, Y9, Y12, Y9

// EXPF(YIN, XIN, YOUT, XOUT): YOUT = e^YIN for eight float32 (XIN and XOUT
// name the low halves of YIN and YOUT, which must differ). Clobbers Y8–Y12.
#define EXPF(YIN, XIN, YOUT, XOUT) \
	VCVTPS2PD    XIN, Y8;              \
	DEXP(Y8, Y9, Y10, Y11);            \
	VCVTPD2PSY   Y9, XOUT;             \
	VEXTRACTF128 $1, YIN, X8;          \
	VCVTPS2PD    X8, Y8;               \
	DEXP(Y8, Y9, Y10, Y11);            \
	VCVTPD2PSY   Y9, X9;               \
	VINSERTF128  $1, X9, YOUT, YOUT

// TANHHALF: Y9 = tanh(Y8) for four float64 ≥ 0, as expm1(2x)/(expm1(2x)+2).
#define TANHHALF \
	VADDPD  Y8, Y8, Y8;           \
	DEXPM1(Y8, Y9, Y10, Y11);     \
	VADDPD  dTwo<>(SB), Y9, Y10;  \
	VDIVPD  Y10, Y9, Y9

// TANHF(YIN, XIN, YOUT, XOUT): YOUT = tanh YIN for eight float32, ±1 beyond
// |x| > 8.664339742 as SLEEF's tanhf (and the reference) saturate. YIN and
// YOUT must differ. Clobbers Y8–Y14.
#define TANHF(YIN, XIN, YOUT, XOUT) \
	VANDPS       fAbs<>(SB), YIN, Y13;      \
	VCVTPS2PD    X13, Y8;                   \
	TANHHALF;                               \
	VCVTPD2PSY   Y9, XOUT;                  \
	VEXTRACTF128 $1, Y13, X8;               \
	VCVTPS2PD    X8, Y8;                    \
	TANHHALF;                               \
	VCVTPD2PSY   Y9, X9;                    \
	VINSERTF128  $1, X9, YOUT, YOUT;        \
	VCMPPS       $0x1e, fTanhSat<>(SB), Y13, Y13; \
	VBLENDVPS    Y13, fOne<>(SB), YOUT, YOUT; \
	VANDPS       fSign<>(SB), YIN, Y14;     \
	VORPS        Y14, YOUT, YOUT

// ERFF(YIN, XIN, YOUT, XOUT): YOUT = erf YIN for eight float32. YIN and
// YOUT must differ. Clobbers Y8–Y15.
#define ERFF(YIN, XIN, YOUT, XOUT) \
	VCVTPS2PD    XIN, Y8;      \
	DERF;                      \
	VCVTPD2PSY   Y9, XOUT;     \
	VEXTRACTF128 $1, YIN, X8;  \
	VCVTPS2PD    X8, Y8;       \
	DERF;                      \
	VCVTPD2PSY   Y9, X9;       \
	VINSERTF128  $1, X9, YOUT, YOUT

// LOGF(YIN, XIN, YOUT, XOUT): YOUT = ln YIN for eight float32: −Inf at ±0,
// +Inf at +Inf, NaN below 0 and at NaN. YIN and YOUT must differ. Clobbers
// Y8–Y13.
#define LOGF(YIN, XIN, YOUT, XOUT) \
	VCVTPS2PD    XIN, Y8;                  \
	DLOG(Y8, Y9, Y10, Y11, Y12, Y13);      \
	VCVTPD2PSY   Y9, XOUT;                 \
	VEXTRACTF128 $1, YIN, X8;              \
	VCVTPS2PD    X8, Y8;                   \
	DLOG(Y8, Y9, Y10, Y11, Y12, Y13);      \
	VCVTPD2PSY   Y9, X9;                   \
	VINSERTF128  $1, X9, YOUT, YOUT;       \
	VXORPS       Y8, Y8, Y8;               \
	VCMPPS       $0x00, Y8, YIN, Y9;       \
	VBLENDVPS    Y9, fNegInf<>(SB), YOUT, YOUT; \
	VCMPPS       $0x00, fInf<>(SB), YIN, Y9; \
	VBLENDVPS    Y9, fInf<>(SB), YOUT, YOUT; \
	VCMPPS       $0x19, Y8, YIN, Y9;       \
	VBLENDVPS    Y9, fNaN<>(SB), YOUT, YOUT
