//go:build amd64 && !noasm

#include "textflag.h"
#include "vmath32_amd64.h"

// AVX-512 variants of the elementwise functions built on e^x, ln x, tanh
// and erf (the cheap ones are memory bound and keep their AVX2 kernels).
// Each body is its AVX2 counterpart in activation_amd64.s operation for
// operation, so results are the reference's bit for bit. The loops run two
// independent vectors per iteration, one in Z0–Z14 and one in Z16–Z28:
// the cores are long dependency chains, and two of them keep the FMA
// units busy where one would wait on latencies. Tails of fewer than
// sixteen elements go through the first body under the mask K3.

// ---- loops ----------------------------------------------------------------

// ZFWDARGS and ZBWDARGS load the arguments of the forward kernels,
// func(dst, src []float32, a, b, c float32), and of the backward ones,
// func(dx, dy, v []float32, a, b, c float32): the parameters go to Z6, Z7
// and Z15.
#define ZFWDARGS \
	MOVQ         dst_base+0(FP), DI \
	MOVQ         src_base+24(FP), SI \
	MOVQ         src_len+32(FP), CX \
	VBROADCASTSS a+48(FP), Z6 \
	VBROADCASTSS b+52(FP), Z7 \
	VBROADCASTSS c+56(FP), Z15

#define ZBWDARGS \
	MOVQ         dx_base+0(FP), DI \
	MOVQ         dy_base+24(FP), DX \
	MOVQ         v_base+48(FP), SI \
	MOVQ         dx_len+8(FP), CX \
	VBROADCASTSS a+72(FP), Z6 \
	VBROADCASTSS b+76(FP), Z7 \
	VBROADCASTSS c+80(FP), Z15

// ZTAILMASK: K3 = the mask of the first CX (< 16) lanes.
#define ZTAILMASK \
	MOVL  $1, AX;  \
	SHLL  CX, AX;  \
	DECL  AX;      \
	KMOVW AX, K3

// UNARYZ(BODYA, BODYB): dst[i] = f(src[i]). BODYA maps Z0 to Z1 and BODYB
// Z16 to Z17.
#define UNARYZ(BODYA, BODYB) \
	SUBQ    $32, CX;          \
	JL      uzone;            \
uzloop:                       \
	VMOVUPS (SI), Z0;         \
	VMOVUPS 64(SI), Z16;      \
	BODYA;                    \
	BODYB;                    \
	VMOVUPS Z1, (DI);         \
	VMOVUPS Z17, 64(DI);      \
	ADDQ    $128, SI;         \
	ADDQ    $128, DI;         \
	SUBQ    $32, CX;          \
	JGE     uzloop;           \
uzone:                        \
	ADDQ    $16, CX;          \
	JL      uztail;           \
	VMOVUPS (SI), Z0;         \
	BODYA;                    \
	VMOVUPS Z1, (DI);         \
	ADDQ    $64, SI;          \
	ADDQ    $64, DI;          \
	SUBQ    $16, CX;          \
uztail:                       \
	ADDQ    $16, CX;          \
	JZ      uzdone;           \
	ZTAILMASK;                \
	VMOVUPS.Z (SI), K3, Z0;   \
	BODYA;                    \
	VMOVUPS Z1, K3, (DI);     \
uzdone:                       \
	VZEROUPPER;               \
	RET

// BINARYZ(BODYA, BODYB): dx[i] = f′(v[i])·dy[i]. BODYA reads v in Z0 and
// dy in Z2 and leaves dx in Z1; BODYB the same in Z16, Z18 and Z17.
#define BINARYZ(BODYA, BODYB) \
	SUBQ    $32, CX;          \
	JL      bzone;            \
bzloop:                       \
	VMOVUPS (SI), Z0;         \
	VMOVUPS (DX), Z2;         \
	VMOVUPS 64(SI), Z16;      \
	VMOVUPS 64(DX), Z18;      \
	BODYA;                    \
	BODYB;                    \
	VMOVUPS Z1, (DI);         \
	VMOVUPS Z17, 64(DI);      \
	ADDQ    $128, SI;         \
	ADDQ    $128, DX;         \
	ADDQ    $128, DI;         \
	SUBQ    $32, CX;          \
	JGE     bzloop;           \
bzone:                        \
	ADDQ    $16, CX;          \
	JL      bztail;           \
	VMOVUPS (SI), Z0;         \
	VMOVUPS (DX), Z2;         \
	BODYA;                    \
	VMOVUPS Z1, (DI);         \
	ADDQ    $64, SI;          \
	ADDQ    $64, DX;          \
	ADDQ    $64, DI;          \
	SUBQ    $16, CX;          \
bztail:                       \
	ADDQ    $16, CX;          \
	JZ      bzdone;           \
	ZTAILMASK;                \
	VMOVUPS.Z (SI), K3, Z0;   \
	VMOVUPS.Z (DX), K3, Z2;   \
	BODYA;                    \
	VMOVUPS Z1, K3, (DI);     \
bzdone:                       \
	VZEROUPPER;               \
	RET

// ---- bodies ---------------------------------------------------------------
//
// Forward bodies map X to Y; backward bodies map X (v) and G (dy) to Y.
// T, U and W are temporaries, A–G scratch for the cores; Z6 and Z7 hold
// the parameters a and b, Z15 c.

// 1 / (1 + e^−x)
#define SIGMOIDZ(X, Y, T, U, W, A, B, C, D, E, F, G) \
	VXORPS  v32Sign<>(SB), X, T;  \
	EXP32Z(T, Y, A, B, C);        \
	VADDPS  v32One<>(SB), Y, Y;   \
	VMOVUPS v32One<>(SB), T;      \
	VDIVPS  Y, T, Y

// x / (1 + e^−x)
#define SILUZ(X, Y, T, U, W, A, B, C, D, E, F, G) \
	VXORPS  v32Sign<>(SB), X, T;  \
	EXP32Z(T, Y, A, B, C);        \
	VADDPS  v32One<>(SB), Y, Y;   \
	VDIVPS  Y, X, Y

// x > 0 ? x : (e^x − 1)·a
#define ELUZ(X, Y, T, U, W, A, B, C, D, E, F, G) \
	EXP32Z(X, Y, A, B, C);        \
	VSUBPS  v32One<>(SB), Y, Y;   \
	VMULPS  Z6, Y, Y;             \
	VXORPS  T, T, T;              \
	VCMPPS  $0x1e, T, X, K1;      \
	VMOVAPS X, K1, Y

// (x·0.5)·(1 + erf(x·a)), a = 1/√2
#define GELUZ(X, Y, T, U, W, A, B, C, D, E, F, G) \
	VMULPS  Z6, X, T;                 \
	ERF32Z(T, Y, A, B, C, D, E, F, G); \
	VADDPS  v32One<>(SB), Y, Y;       \
	VMULPS  v32Half<>(SB), X, T;      \
	VMULPS  Y, T, Y

// (0.5·x)·(1 + tanh(a·(x + b·x³))), a = √(2/π), b = 0.044715
#define GELUTANHZ(X, Y, T, U, W, A, B, C, D, E, F, G) \
	VMULPS  X, X, T;                   \
	VMULPS  X, T, T;                   \
	VMULPS  Z7, T, T;                  \
	VADDPS  T, X, T;                   \
	VMULPS  Z6, T, T;                  \
	TANH32Z(T, Y, A, B, C, D, E, F, G); \
	VADDPS  v32One<>(SB), Y, Y;        \
	VMULPS  v32Half<>(SB), X, T;       \
	VMULPS  Y, T, Y

// s = 1/(1 + e^−x); (dy·s)·(1 + x·(1 − s))
#define SILUBZ(X, G, Y, T, U, W, A, B, C, D, E, F, H) \
	VXORPS  v32Sign<>(SB), X, T;  \
	EXP32Z(T, U, A, B, C);        \
	VADDPS  v32One<>(SB), U, U;   \
	VMOVUPS v32One<>(SB), T;      \
	VDIVPS  U, T, U;              \
	VSUBPS  U, T, T;              \
	VMULPS  T, X, T;              \
	VADDPS  v32One<>(SB), T, T;   \
	VMULPS  U, G, Y;              \
	VMULPS  T, Y, Y

// x > 0 ? dy : (dy·a)·e^x
#define ELUBZ(X, G, Y, T, U, W, A, B, C, D, E, F, H) \
	EXP32Z(X, T, A, B, C);        \
	VMULPS  Z6, G, Y;             \
	VMULPS  T, Y, Y;              \
	VXORPS  T, T, T;              \
	VCMPPS  $0x1e, T, X, K1;      \
	VMOVAPS G, K1, Y

// dy·(0.5·(1 + erf(x·a)) + x·(b·e^((x·x)·−0.5))), a = 1/√2, b = 1/√(2π)
#define GELUBZ(X, G, Y, T, U, W, A, B, C, D, E, F, H) \
	VMULPS  Z6, X, T;                  \
	ERF32Z(T, Y, A, B, C, D, E, F, H); \
	VADDPS  v32One<>(SB), Y, Y;        \
	VMULPS  v32Half<>(SB), Y, Y;       \
	VMULPS  X, X, T;                   \
	VMULPS  v32NegHalf<>(SB), T, T;    \
	EXP32Z(T, U, A, B, C);             \
	VMULPS  Z7, U, U;                  \
	VMULPS  X, U, U;                   \
	VADDPS  U, Y, Y;                   \
	VMULPS  G, Y, Y

// PyTorch's GELU tanh backward with a = √(2/π), b = 0.044715, c = 3·b:
// t = tanh(a·(x + b·x³)); dy·(0.5·(1+t) + (0.5·x)·(1−t·t)·(a·(1 + c·x²)))
#define GELUTANHBZ(X, G, Y, T, U, W, A, B, C, D, E, F, H) \
	VMULPS  X, X, T;                   \
	VMULPS  X, T, U;                   \
	VMULPS  Z7, U, U;                  \
	VADDPS  U, X, U;                   \
	VMULPS  Z6, U, U;                  \
	TANH32Z(U, Y, A, B, C, D, E, F, H); \
	VMULPS  Y, Y, U;                   \
	VMOVUPS v32One<>(SB), W;           \
	VSUBPS  U, W, U;                   \
	VADDPS  W, Y, Y;                   \
	VMULPS  v32Half<>(SB), Y, Y;       \
	VMULPS  v32Half<>(SB), X, W;       \
	VMULPS  U, W, W;                   \
	VMULPS  Z15, T, T;                 \
	VADDPS  v32One<>(SB), T, T;        \
	VMULPS  Z6, T, T;                  \
	VMULPS  T, W, W;                   \
	VADDPS  W, Y, Y;                   \
	VMULPS  G, Y, Y

// The two register sets of the loops: stream A's temporaries and
// scratch are Z3–Z5 and Z8–Z14, stream B's Z19–Z28.

#define EXPA EXP32Z(Z0, Z1, Z8, Z9, Z10)
#define EXPB EXP32Z(Z16, Z17, Z22, Z23, Z24)
#define LOGA LOG32Z(Z0, Z1, Z8, Z9, Z10, Z11, Z12)
#define LOGB LOG32Z(Z16, Z17, Z22, Z23, Z24, Z25, Z26)
#define TANHA TANH32Z(Z0, Z1, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define TANHB TANH32Z(Z16, Z17, Z22, Z23, Z24, Z25, Z26, Z27, Z28)
#define SIGMOIDA SIGMOIDZ(Z0, Z1, Z3, Z4, Z5, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define SIGMOIDB SIGMOIDZ(Z16, Z17, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28)
#define SILUA SILUZ(Z0, Z1, Z3, Z4, Z5, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define SILUB SILUZ(Z16, Z17, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28)
#define ELUA ELUZ(Z0, Z1, Z3, Z4, Z5, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define ELUB ELUZ(Z16, Z17, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28)
#define GELUA GELUZ(Z0, Z1, Z3, Z4, Z5, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define GELUB GELUZ(Z16, Z17, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28)
#define GELUTANHA GELUTANHZ(Z0, Z1, Z3, Z4, Z5, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define GELUTANHB GELUTANHZ(Z16, Z17, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28)
#define SILUBA SILUBZ(Z0, Z2, Z1, Z3, Z4, Z5, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define SILUBB SILUBZ(Z16, Z18, Z17, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28)
#define ELUBA ELUBZ(Z0, Z2, Z1, Z3, Z4, Z5, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define ELUBB ELUBZ(Z16, Z18, Z17, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28)
#define GELUBA GELUBZ(Z0, Z2, Z1, Z3, Z4, Z5, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define GELUBB GELUBZ(Z16, Z18, Z17, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28)
#define GELUTANHBA GELUTANHBZ(Z0, Z2, Z1, Z3, Z4, Z5, Z8, Z9, Z10, Z11, Z12, Z13, Z14)
#define GELUTANHBB GELUTANHBZ(Z16, Z18, Z17, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28)

// ---- kernels --------------------------------------------------------------

TEXT ·actExpAVX512(SB), NOSPLIT, $0-60
	ZFWDARGS
	UNARYZ(EXPA, EXPB)

TEXT ·actLogAVX512(SB), NOSPLIT, $0-60
	ZFWDARGS
	UNARYZ(LOGA, LOGB)

TEXT ·actSigmoidAVX512(SB), NOSPLIT, $0-60
	ZFWDARGS
	UNARYZ(SIGMOIDA, SIGMOIDB)

TEXT ·actTanhAVX512(SB), NOSPLIT, $0-60
	ZFWDARGS
	UNARYZ(TANHA, TANHB)

TEXT ·actSiLUAVX512(SB), NOSPLIT, $0-60
	ZFWDARGS
	UNARYZ(SILUA, SILUB)

TEXT ·actELUAVX512(SB), NOSPLIT, $0-60
	ZFWDARGS
	UNARYZ(ELUA, ELUB)

TEXT ·actGELUAVX512(SB), NOSPLIT, $0-60
	ZFWDARGS
	UNARYZ(GELUA, GELUB)

TEXT ·actGELUTanhAVX512(SB), NOSPLIT, $0-60
	ZFWDARGS
	UNARYZ(GELUTANHA, GELUTANHB)

TEXT ·actSiLUBwdAVX512(SB), NOSPLIT, $0-84
	ZBWDARGS
	BINARYZ(SILUBA, SILUBB)

TEXT ·actELUBwdAVX512(SB), NOSPLIT, $0-84
	ZBWDARGS
	BINARYZ(ELUBA, ELUBB)

TEXT ·actGELUBwdAVX512(SB), NOSPLIT, $0-84
	ZBWDARGS
	BINARYZ(GELUBA, GELUBB)

TEXT ·actGELUTanhBwdAVX512(SB), NOSPLIT, $0-84
	ZBWDARGS
	BINARYZ(GELUTANHBA, GELUTANHBB)
