//go:build amd64 && !noasm

#include "textflag.h"
#include "vmath32_amd64.h"
#include "vmath_amd64.h"
#include "elementwise_amd64.h"

// AVX2 variants of the elementwise functions (Act). Each kernel follows its
// reference in activation.go operation by operation, in the same order and
// without fusing a multiply into an add, so its float32 roundings are the
// reference's; the transcendental functions come from vmath_amd64.h.
// Tails shorter than a vector go through the same code with masked loads
// and stores, so every element is computed alike wherever it lies.

F8(fNegHalf, $0xbf000000) // −0.5

// ---- loops ----------------------------------------------------------------

// FWDARGS and BWDARGS load the arguments of the forward kernels,
// func(dst, src []float32, a, b, c float32), and of the backward ones,
// func(dx, dy, v []float32, a, b, c float32), into the loops' registers.
#define FWDARGS \
	MOVQ         dst_base+0(FP), DI \
	MOVQ         src_base+24(FP), SI \
	MOVQ         src_len+32(FP), CX \
	VBROADCASTSS a+48(FP), Y6 \
	VBROADCASTSS b+52(FP), Y7

#define BWDARGS \
	MOVQ         dx_base+0(FP), DI \
	MOVQ         dy_base+24(FP), DX \
	MOVQ         v_base+48(FP), SI \
	MOVQ         dx_len+8(FP), CX \
	VBROADCASTSS a+72(FP), Y6 \
	VBROADCASTSS b+76(FP), Y7 \
	MOVL         c+80(FP), R9

// UNARY32(BODY): dst[i] = BODY(src[i]) for the cheap functions, four
// vectors per iteration. BODY(R, T) works in place on R with scratch T and
// may read Y5 (zero), Y6 and Y7 (the parameters a and b).
// In: DI = dst, SI = src, CX = n.
#define UNARY32(BODY) \
	VXORPS  Y5, Y5, Y5;    \
	SUBQ    $32, CX;       \
	JL      u32one;        \
u32loop:                   \
	LOAD4(SI, Y0, Y1, Y2, Y3); \
	BODY(Y0, Y8);          \
	BODY(Y1, Y8);          \
	BODY(Y2, Y8);          \
	BODY(Y3, Y8);          \
	STORE4(DI, Y0, Y1, Y2, Y3); \
	ADDQ    $128, SI;      \
	ADDQ    $128, DI;      \
	SUBQ    $32, CX;       \
	JGE     u32loop;       \
u32one:                    \
	ADDQ    $24, CX;       \
	JL      u32tail;       \
u32loop8:                  \
	VMOVUPS (SI), Y0;      \
	BODY(Y0, Y8);          \
	VMOVUPS Y0, (DI);      \
	ADDQ    $32, SI;       \
	ADDQ    $32, DI;       \
	SUBQ    $8, CX;        \
	JGE     u32loop8;      \
u32tail:                   \
	ADDQ    $8, CX;        \
	JZ      u32done;       \
	TAILMASK(CX, R8, Y15); \
	VMASKMOVPS (SI), Y15, Y0; \
	BODY(Y0, Y8);          \
	VMASKMOVPS Y0, Y15, (DI); \
u32done:                   \
	VZEROUPPER;            \
	RET

// UNARY8(BODY): dst[i] = BODY(src[i]) for the costly functions, one vector
// per iteration. BODY maps Y0 to Y1 with scratch Y2–Y5 and Y8–Y15 and may
// read Y6 and Y7 (the parameters a and b).
#define UNARY8(BODY) \
	SUBQ    $8, CX;        \
	JL      u8tail;        \
u8loop:                    \
	VMOVUPS (SI), Y0;      \
	BODY;                  \
	VMOVUPS Y1, (DI);      \
	ADDQ    $32, SI;       \
	ADDQ    $32, DI;       \
	SUBQ    $8, CX;        \
	JGE     u8loop;        \
u8tail:                    \
	ADDQ    $8, CX;        \
	JZ      u8done;        \
	TAILMASK(CX, R8, Y15); \
	VMASKMOVPS (SI), Y15, Y0; \
	BODY;                  \
	VMOVDQU (R8), Y15;     \
	VMASKMOVPS Y1, Y15, (DI); \
u8done:                    \
	VZEROUPPER;            \
	RET

// BINARY32(BODY): dx[i] = BODY(v[i], dy[i]) for the cheap derivatives.
// BODY(V, G, T) leaves its result in G, with scratch T (and V), and may
// read Y4 (one), Y5 (zero), Y6 and Y7 (a and b).
// In: DI = dx, SI = v, DX = dy, CX = n.
#define BINARY32(BODY) \
	VMOVUPS fOne<>(SB), Y4; \
	VXORPS  Y5, Y5, Y5;    \
	SUBQ    $32, CX;       \
	JL      b32one;        \
b32loop:                   \
	LOAD4(SI, Y0, Y1, Y2, Y3); \
	LOAD4(DX, Y8, Y9, Y10, Y11); \
	BODY(Y0, Y8, Y12);     \
	BODY(Y1, Y9, Y12);     \
	BODY(Y2, Y10, Y12);    \
	BODY(Y3, Y11, Y12);    \
	STORE4(DI, Y8, Y9, Y10, Y11); \
	ADDQ    $128, SI;      \
	ADDQ    $128, DX;      \
	ADDQ    $128, DI;      \
	SUBQ    $32, CX;       \
	JGE     b32loop;       \
b32one:                    \
	ADDQ    $24, CX;       \
	JL      b32tail;       \
b32loop8:                  \
	VMOVUPS (SI), Y0;      \
	VMOVUPS (DX), Y8;      \
	BODY(Y0, Y8, Y12);     \
	VMOVUPS Y8, (DI);      \
	ADDQ    $32, SI;       \
	ADDQ    $32, DX;       \
	ADDQ    $32, DI;       \
	SUBQ    $8, CX;        \
	JGE     b32loop8;      \
b32tail:                   \
	ADDQ    $8, CX;        \
	JZ      b32done;       \
	TAILMASK(CX, R8, Y15); \
	VMASKMOVPS (SI), Y15, Y0; \
	VMASKMOVPS (DX), Y15, Y8; \
	BODY(Y0, Y8, Y12);     \
	VMASKMOVPS Y8, Y15, (DI); \
b32done:                   \
	VZEROUPPER;            \
	RET

// BINARY8(BODY): dx[i] = BODY(v[i], dy[i]) for the costly derivatives. BODY
// reads Y0 (v) and Y2 (dy) and leaves the result in Y1, with scratch Y3–Y5
// and Y8–Y15; it may read Y6 and Y7 (a and b) and R9 (c's bits).
#define BINARY8(BODY) MAP8X2(BODY, Y2, Y1)

// DMAP(DBODY): Y1 = DBODY(Y0) computed in float64: DBODY maps Y8 to Y9
// (scratch Y10–Y13) and runs on each half.
#define DMAP(DBODY) \
	VCVTPS2PD    X0, Y8;   \
	DBODY;                 \
	VCVTPD2PSY   Y9, X1;   \
	VEXTRACTF128 $1, Y0, X8; \
	VCVTPS2PD    X8, Y8;   \
	DBODY;                 \
	VCVTPD2PSY   Y9, X9;   \
	VINSERTF128  $1, X9, Y1, Y1

// ---- forward bodies -------------------------------------------------------

#define NEG(R, T) VXORPS fSign<>(SB), R, R
#define ADDS(R, T) VADDPS Y6, R, R
#define MULS(R, T) VMULPS Y6, R, R
#define SQRTS(R, T) VSQRTPS R, R
#define SQUARE(R, T) VMULPS R, R, R

// x < 0 → 0 (not x ≤ 0), so −0 and NaN pass, as in clamp_min.
#define RELU(R, T) \
	VCMPPS  $0x11, Y5, R, T; \
	VANDNPS R, T, R

// x < a → a, else x > b → b; NaN passes.
#define HARDTANH(R, T) \
	VCMPPS    $0x11, Y6, R, T; \
	VBLENDVPS T, Y6, R, R;     \
	VCMPPS    $0x1e, Y7, R, T; \
	VBLENDVPS T, Y7, R, R

#define RECIP(R, T) \
	VMOVUPS fOne<>(SB), T; \
	VDIVPS  R, T, R

#define EXPBODY EXPF(Y0, X0, Y1, X1)
#define LOGBODY LOGF(Y0, X0, Y1, X1)
#define TANHBODY TANHF(Y0, X0, Y1, X1)

// 1 / (1 + e^−x)
#define SIGMOIDBODY \
	VXORPS  fSign<>(SB), Y0, Y2; \
	EXPF(Y2, X2, Y3, X3);        \
	VADDPS  fOne<>(SB), Y3, Y3;  \
	VMOVUPS fOne<>(SB), Y1;      \
	VDIVPS  Y3, Y1, Y1

// x / (1 + e^−x)
#define SILUBODY \
	VXORPS  fSign<>(SB), Y0, Y2; \
	EXPF(Y2, X2, Y3, X3);        \
	VADDPS  fOne<>(SB), Y3, Y3;  \
	VDIVPS  Y3, Y0, Y1

// x > 0 ? x : (e^x − 1)·a
#define ELUBODY \
	EXPF(Y0, X0, Y3, X3);          \
	VSUBPS    fOne<>(SB), Y3, Y3;  \
	VMULPS    Y6, Y3, Y3;          \
	VXORPS    Y2, Y2, Y2;          \
	VCMPPS    $0x1e, Y2, Y0, Y2;   \
	VBLENDVPS Y2, Y0, Y3, Y1

// (x·0.5)·(1 + erf(x·a)), a = 1/√2
#define GELUBODY \
	VMULPS Y6, Y0, Y2;           \
	ERFF(Y2, X2, Y3, X3);        \
	VADDPS fOne<>(SB), Y3, Y3;   \
	VMULPS fHalf<>(SB), Y0, Y1;  \
	VMULPS Y3, Y1, Y1

// (0.5·x)·(1 + tanh(a·(x + b·x³))), a = √(2/π), b = 0.044715
#define GELUTANHBODY \
	VMULPS Y0, Y0, Y2;           \
	VMULPS Y0, Y2, Y2;           \
	VMULPS Y7, Y2, Y2;           \
	VADDPS Y2, Y0, Y2;           \
	VMULPS Y6, Y2, Y2;           \
	TANHF(Y2, X2, Y3, X3);       \
	VADDPS fOne<>(SB), Y3, Y3;   \
	VMULPS fHalf<>(SB), Y0, Y1;  \
	VMULPS Y3, Y1, Y1

// Pow's shortcuts that the reference computes in float64.
#define DCUBE \
	VMULPD Y8, Y8, Y9; \
	VMULPD Y8, Y9, Y9
#define DINVSQUARE \
	VMULPD  Y8, Y8, Y9;         \
	VMOVUPD dOne<>(SB), Y10;    \
	VDIVPD  Y9, Y10, Y9
#define DRSQRT \
	VSQRTPD Y8, Y9;             \
	VMOVUPD dOne<>(SB), Y10;    \
	VDIVPD  Y9, Y10, Y9
#define CUBEBODY DMAP(DCUBE)
#define INVSQUAREBODY DMAP(DINVSQUARE)
#define RSQRTBODY DMAP(DRSQRT)

// x^e = e^(e·ln x) for x > 0, e in Y7 as float64.
#define DPOW \
	DLOG(Y8, Y9, Y10, Y11, Y12, Y13); \
	VMULPD Y7, Y9, Y9;                \
	DEXP(Y9, Y10, Y11, Y12);          \
	VMOVAPD Y10, Y9
#define POWBODY DMAP(DPOW)

// ---- backward bodies ------------------------------------------------------

#define EXPB(V, G, T) VMULPS V, G, G
#define LOGB(V, G, T) VDIVPS V, G, G

// dy / (2·y)
#define SQRTB(V, G, T) \
	VADDPS V, V, T; \
	VDIVPS T, G, G

// v ≤ 0 → 0; NaN passes the gradient.
#define RELUB(V, G, T) \
	VCMPPS  $0x12, Y5, V, T; \
	VANDNPS G, T, G

// dy·(1 − y)·y
#define SIGMOIDB(V, G, T) \
	VSUBPS V, Y4, T; \
	VMULPS T, G, G;  \
	VMULPS V, G, G

// dy·(1 − y·y)
#define TANHB(V, G, T) \
	VMULPS V, V, T;  \
	VSUBPS T, Y4, T; \
	VMULPS T, G, G

// dy where a < x < b, else 0 (NaN included).
#define HARDTANHB(V, G, T) \
	VCMPPS $0x1e, Y6, V, T; \
	VCMPPS $0x11, Y7, V, V; \
	VANDPS V, T, T;         \
	VANDPS T, G, G

// dy·(a·v)
#define SCALEB(V, G, T) \
	VMULPS Y6, V, V; \
	VMULPS V, G, G

// s = 1/(1 + e^−x); (dy·s)·(1 + x·(1 − s))
#define SILUB \
	VXORPS  fSign<>(SB), Y0, Y3; \
	EXPF(Y3, X3, Y5, X5);        \
	VADDPS  fOne<>(SB), Y5, Y5;  \
	VMOVUPS fOne<>(SB), Y3;      \
	VDIVPS  Y5, Y3, Y5;          \
	VSUBPS  Y5, Y3, Y3;          \
	VMULPS  Y3, Y0, Y3;          \
	VADDPS  fOne<>(SB), Y3, Y3;  \
	VMULPS  Y5, Y2, Y1;          \
	VMULPS  Y3, Y1, Y1

// x > 0 ? dy : (dy·a)·e^x
#define ELUB \
	EXPF(Y0, X0, Y3, X3);        \
	VMULPS    Y6, Y2, Y5;        \
	VMULPS    Y3, Y5, Y5;        \
	VXORPS    Y3, Y3, Y3;        \
	VCMPPS    $0x1e, Y3, Y0, Y3; \
	VBLENDVPS Y3, Y2, Y5, Y1

// dy·(0.5·(1 + erf(x·a)) + x·(b·e^((x·x)·−0.5))), a = 1/√2, b = 1/√(2π)
#define GELUB \
	VMULPS Y6, Y0, Y3;             \
	ERFF(Y3, X3, Y1, X1);          \
	VADDPS fOne<>(SB), Y1, Y1;     \
	VMULPS fHalf<>(SB), Y1, Y1;    \
	VMULPS Y0, Y0, Y3;             \
	VMULPS fNegHalf<>(SB), Y3, Y3; \
	EXPF(Y3, X3, Y5, X5);          \
	VMULPS Y7, Y5, Y5;             \
	VMULPS Y0, Y5, Y5;             \
	VADDPS Y5, Y1, Y1;             \
	VMULPS Y2, Y1, Y1

// PyTorch's GELU tanh backward with a = √(2/π), b = 0.044715, c = 3·b:
// t = tanh(a·(x + b·x³)); dy·(0.5·(1+t) + (0.5·x)·(1−t·t)·(a·(1 + c·x²)))
#define GELUTANHB \
	VMULPS  Y0, Y0, Y3;           \
	VMULPS  Y0, Y3, Y5;           \
	VMULPS  Y7, Y5, Y5;           \
	VADDPS  Y5, Y0, Y5;           \
	VMULPS  Y6, Y5, Y5;           \
	TANHF(Y5, X5, Y1, X1);        \
	VMOVUPS fOne<>(SB), Y4;       \
	VMULPS  Y1, Y1, Y5;           \
	VSUBPS  Y5, Y4, Y5;           \
	VADDPS  Y4, Y1, Y1;           \
	VMULPS  fHalf<>(SB), Y1, Y1;  \
	VMULPS  fHalf<>(SB), Y0, Y4;  \
	VMULPS  Y5, Y4, Y4;           \
	MOVL    R9, X5;               \
	VBROADCASTSS X5, Y5;          \
	VMULPS  Y5, Y3, Y3;           \
	VADDPS  fOne<>(SB), Y3, Y3;   \
	VMULPS  Y6, Y3, Y3;           \
	VMULPS  Y3, Y4, Y4;           \
	VADDPS  Y4, Y1, Y1;           \
	VMULPS  Y2, Y1, Y1

// ---- forward kernels: func(dst, src []float32, a, b, c float32) -----------

TEXT ·actNegAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY32(NEG)

TEXT ·actAddScalarAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY32(ADDS)

TEXT ·actMulScalarAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY32(MULS)

TEXT ·actReLUAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY32(RELU)

TEXT ·actHardTanhAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY32(HARDTANH)

TEXT ·actSqrtAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY32(SQRTS)

TEXT ·actSquareAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY32(SQUARE)

TEXT ·actRecipAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY32(RECIP)

TEXT ·actExpAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(EXPBODY)

TEXT ·actLogAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(LOGBODY)

TEXT ·actSigmoidAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(SIGMOIDBODY)

TEXT ·actTanhAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(TANHBODY)

TEXT ·actSiLUAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(SILUBODY)

TEXT ·actELUAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(ELUBODY)

TEXT ·actGELUAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(GELUBODY)

TEXT ·actGELUTanhAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(GELUTANHBODY)

TEXT ·actCubeAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(CUBEBODY)

TEXT ·actInvSquareAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(INVSQUAREBODY)

TEXT ·actRsqrtAVX2(SB), NOSPLIT, $0-60
	FWDARGS
	UNARY8(RSQRTBODY)

// func actPowAVX2(dst, src []float32, e float64) int
//
// dst[i] = src[i]^e for a general exponent, as e^(e·ln x) in float64. It
// stops at the first vector holding an element that is not positive and
// finite (those need math.Pow's special cases) and returns how many
// elements it wrote; the caller computes that vector and calls again.
TEXT ·actPowAVX2(SB), NOSPLIT, $0-64
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), CX
	VBROADCASTSD e+48(FP), Y7
	MOVQ         SI, R10
	VXORPS       Y5, Y5, Y5
	SUBQ         $8, CX
	JL           ptail

ploop:
	VMOVUPS   (SI), Y0
	VCMPPS    $0x1e, Y5, Y0, Y2
	VCMPPS    $0x11, fInf<>(SB), Y0, Y3
	VANDPS    Y3, Y2, Y2
	VMOVMSKPS Y2, AX
	CMPL      AX, $0xff
	JNE       pstop
	POWBODY
	VMOVUPS   Y1, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JGE       ploop

ptail:
	ADDQ       $8, CX
	JZ         pstop
	TAILMASK(CX, R8, Y15)
	VMASKMOVPS (SI), Y15, Y0
	VCMPPS     $0x1e, Y5, Y0, Y2
	VCMPPS     $0x11, fInf<>(SB), Y0, Y3
	VANDPS     Y3, Y2, Y2
	VANDNPS    Y15, Y2, Y2
	VMOVMSKPS  Y2, AX
	TESTL      AX, AX
	JNZ        pstop
	POWBODY
	VMOVDQU    (R8), Y15
	VMASKMOVPS Y1, Y15, (DI)
	LEAQ       (SI)(CX*4), SI

pstop:
	SUBQ       R10, SI
	SHRQ       $2, SI
	MOVQ       SI, ret+56(FP)
	VZEROUPPER
	RET

// ---- backward kernels: func(dx, dy, v []float32, a, b, c float32) --------

TEXT ·actExpBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY32(EXPB)

TEXT ·actLogBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY32(LOGB)

TEXT ·actSqrtBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY32(SQRTB)

TEXT ·actReLUBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY32(RELUB)

TEXT ·actSigmoidBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY32(SIGMOIDB)

TEXT ·actTanhBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY32(TANHB)

TEXT ·actHardTanhBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY32(HARDTANHB)

TEXT ·actScaleBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY32(SCALEB)

TEXT ·actSiLUBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY8(SILUB)

TEXT ·actELUBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY8(ELUB)

TEXT ·actGELUBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY8(GELUB)

TEXT ·actGELUTanhBwdAVX2(SB), NOSPLIT, $0-84
	BWDARGS
	BINARY8(GELUTANHB)

// func dropoutAVX2(dst, src []float32, keep []uint8, scale float32)
//
// dst[i] = src[i]·(float32(keep[i])·scale) for the whole vectors of src;
// the caller does the last len(src)%8 elements.
TEXT ·dropoutAVX2(SB), NOSPLIT, $0-76
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), CX
	MOVQ         keep_base+48(FP), DX
	VBROADCASTSS scale+72(FP), Y6
	SHRQ         $3, CX
	JZ           ddone

dloop:
	VPMOVZXBD (DX), Y1
	VCVTDQ2PS Y1, Y1
	VMULPS    Y6, Y1, Y1
	VMULPS    (SI), Y1, Y1
	VMOVUPS   Y1, (DI)
	ADDQ      $8, DX
	ADDQ      $32, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       dloop

ddone:
	VZEROUPPER
	RET
