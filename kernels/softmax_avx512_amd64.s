//go:build amd64 && !noasm

#include "textflag.h"
#include "vmath32_amd64.h"

// AVX-512 variants of the softmax row kernels that evaluate exponentials:
// the same arithmetic as their AVX2 counterparts in softmax_amd64.s,
// sixteen lanes at a time, the exponential loops on two independent
// vectors, and one kernel for the whole forward of many rows. Tails go
// through the same code under the mask K3.

DATA v64One<>+0(SB)/8, $0x3ff0000000000000 // 1.0
GLOBL v64One<>(SB), RODATA|NOPTR, $8

// ZTAILMASK: K3 = the mask of the first CX (< 16) lanes.
#define ZTAILMASK \
	MOVL  $1, AX;  \
	SHLL  CX, AX;  \
	DECL  AX;      \
	KMOVW AX, K3

// ADDD(F, YF, T, YT, LO, HI): the sixteen float32 of F, widened, added to
// the float64 sums LO (low eight) and HI (YF, YT: the ymm names of F, T).
// Clobbers T.
#define ADDD(F, YF, T, YT, LO, HI) \
	VCVTPS2PD     YF, T;      \
	VADDPD        T, LO, LO;  \
	VEXTRACTF32X8 $1, F, YT;  \
	VCVTPS2PD     YT, T;      \
	VADDPD        T, HI, HI

// ZSUMRET(ret): returns in ret the sum of the float64 in Z5, Z6, Z20, Z21.
#define ZSUMRET(ret) \
	VADDPD        Z20, Z5, Z5;  \
	VADDPD        Z21, Z6, Z6;  \
	VADDPD        Z6, Z5, Z5;   \
	VEXTRACTF64X4 $1, Z5, Y6;   \
	VADDPD        Y6, Y5, Y5;   \
	VEXTRACTF128  $1, Y5, X6;   \
	VADDPD        X6, X5, X5;   \
	VPERMILPD     $1, X5, X6;   \
	VADDSD        X6, X5, X5;   \
	VMOVSD        X5, ret;      \
	VZEROUPPER;                 \
	RET

// func smRowExpSumAVX512(x, e []float32, mx float32, store int) float64
//
// Σ e^(x−mx), each term in float32 and the sum in float64; when store is
// not 0, e[i] = e^(x[i]−mx).
TEXT ·smRowExpSumAVX512(SB), NOSPLIT, $0-72
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	MOVQ         e_base+24(FP), DI
	VBROADCASTSS mx+48(FP), Z7
	MOVQ         store+56(FP), R9
	VXORPD       Z5, Z5, Z5
	VXORPD       Z6, Z6, Z6
	VXORPD       Z20, Z20, Z20
	VXORPD       Z21, Z21, Z21
	SUBQ         $32, CX
	JL           eone

eloop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z16
	VSUBPS  Z7, Z0, Z0
	VSUBPS  Z7, Z16, Z16
	EXP32Z(Z0, Z1, Z8, Z9, Z10)
	EXP32Z(Z16, Z17, Z22, Z23, Z24)
	ADDD(Z1, Y1, Z9, Y9, Z5, Z6)
	ADDD(Z17, Y17, Z23, Y23, Z20, Z21)
	TESTQ   R9, R9
	JZ      enext
	VMOVUPS Z1, (DI)
	VMOVUPS Z17, 64(DI)

enext:
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JGE  eloop

eone:
	ADDQ $16, CX
	JL   etail
	VMOVUPS (SI), Z0
	VSUBPS  Z7, Z0, Z0
	EXP32Z(Z0, Z1, Z8, Z9, Z10)
	ADDD(Z1, Y1, Z9, Y9, Z5, Z6)
	TESTQ   R9, R9
	JZ      enext1
	VMOVUPS Z1, (DI)

enext1:
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX

etail:
	ADDQ      $16, CX
	JZ        ereduce
	ZTAILMASK
	VMOVUPS.Z (SI), K3, Z0
	VSUBPS    Z7, Z0, Z0
	EXP32Z(Z0, Z1, Z8, Z9, Z10)
	VMOVAPS.Z Z1, K3, Z1
	ADDD(Z1, Y1, Z9, Y9, Z5, Z6)
	TESTQ     R9, R9
	JZ        ereduce
	VMOVUPS   Z1, K3, (DI)

ereduce:
	ZSUMRET(ret+64(FP))

// SCALETAIL(M): y = float32(float64(y)·s), s in Z7 as float64, on the
// first CX (< 16) elements at M, under the mask K3.
#define SCALETAIL(M) \
	VMOVUPS.Z     M, K3, Z0;      \
	VCVTPS2PD     Y0, Z1;         \
	VEXTRACTF32X8 $1, Z0, Y2;     \
	VCVTPS2PD     Y2, Z2;         \
	VMULPD        Z7, Z1, Z1;     \
	VMULPD        Z7, Z2, Z2;     \
	VCVTPD2PS     Z1, Y1;         \
	VCVTPD2PS     Z2, Y2;         \
	VINSERTF32X8  $1, Y2, Z1, Z1; \
	VMOVUPS       Z1, K3, M

// LOGBWD16(Y, G, YG, O, YO, T, YT, U, A, B, C): O = float32(float64(G) −
// float64(e^Y)·sum) for sixteen lanes, sum in Z7 as float64 (YG, YO, YT:
// the ymm names of G, O, T). Clobbers T, U, A–C.
#define LOGBWD16(Y, G, YG, O, YO, T, YT, U, A, B, C) \
	EXP32Z(Y, T, A, B, C);       \
	VCVTPS2PD     YT, U;         \
	VMULPD        Z7, U, U;      \
	VCVTPS2PD     YG, A;         \
	VSUBPD        U, A, A;       \
	VCVTPD2PS     A, YO;         \
	VEXTRACTF32X8 $1, T, YT;     \
	VCVTPS2PD     YT, U;         \
	VMULPD        Z7, U, U;      \
	VEXTRACTF32X8 $1, G, YT;     \
	VCVTPS2PD     YT, A;         \
	VSUBPD        U, A, A;       \
	VCVTPD2PS     A, YT;         \
	VINSERTF32X8  $1, YT, O, O

// func smRowLogBwdAVX512(dx, y, dy []float32, sum float64)
//
// dx[i] = float32(float64(dy[i]) − float64(e^y[i])·sum).
TEXT ·smRowLogBwdAVX512(SB), NOSPLIT, $0-80
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         y_base+24(FP), SI
	MOVQ         dy_base+48(FP), DX
	VBROADCASTSD sum+72(FP), Z7
	SUBQ         $32, CX
	JL           lone

lloop:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z2
	VMOVUPS 64(SI), Z16
	VMOVUPS 64(DX), Z18
	LOGBWD16(Z0, Z2, Y2, Z1, Y1, Z3, Y3, Z4, Z8, Z9, Z10)
	LOGBWD16(Z16, Z18, Y18, Z17, Y17, Z19, Y19, Z20, Z22, Z23, Z24)
	VMOVUPS Z1, (DI)
	VMOVUPS Z17, 64(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JGE     lloop

lone:
	ADDQ    $16, CX
	JL      ltail
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z2
	LOGBWD16(Z0, Z2, Y2, Z1, Y1, Z3, Y3, Z4, Z8, Z9, Z10)
	VMOVUPS Z1, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX

ltail:
	ADDQ      $16, CX
	JZ        ldone
	ZTAILMASK
	VMOVUPS.Z (SI), K3, Z0
	VMOVUPS.Z (DX), K3, Z2
	LOGBWD16(Z0, Z2, Y2, Z1, Y1, Z3, Y3, Z4, Z8, Z9, Z10)
	VMOVUPS   Z1, K3, (DI)

ldone:
	VZEROUPPER
	RET

// func smSoftmaxRowsAVX512(x, y []float32, n int)
//
// The whole forward softmax of each row of n elements (n ≥ 1) in x, into
// y: the row's maximum (NaN if any element is NaN), e^(x−max) stored in y
// and summed in float64 as smRowExpSumAVX512 does, then y scaled by the
// float64 reciprocal of the sum. One call for many rows: short rows (128
// elements in attention) would otherwise pay three calls each.
TEXT ·smSoftmaxRowsAVX512(SB), NOSPLIT, $0-56
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), R10
	MOVQ y_base+24(FP), DI
	MOVQ n+48(FP), R11
	MOVQ R11, CX
	ANDQ $15, CX
	ZTAILMASK
	MOVQ R11, R12
	SHRQ $4, R12
	MOVQ R11, R13
	SHLQ $2, R11

rrow:
	CMPQ R10, $0
	JLE  rdone

	// The maximum, and K2 = lanes that saw a NaN.
	VBROADCASTSS v32NegInf<>(SB), Z5
	KXORW        K2, K2, K2
	XORQ         AX, AX
	MOVQ         R12, CX
	TESTQ        CX, CX
	JZ           rmaxtail

rmaxloop:
	VMOVUPS (SI)(AX*1), Z0
	VMAXPS  Z0, Z5, Z5
	VCMPPS  $3, Z0, Z0, K1
	KORW    K1, K2, K2
	ADDQ    $64, AX
	DECQ    CX
	JNZ     rmaxloop

rmaxtail:
	KORTESTW K3, K3
	JZ       rmaxreduce
	VBROADCASTSS v32NegInf<>(SB), Z0
	VMOVUPS      (SI)(AX*1), K3, Z0
	VMAXPS       Z0, Z5, Z5
	VCMPPS       $3, Z0, Z0, K1
	KORW         K1, K2, K2

rmaxreduce:
	VEXTRACTF64X4 $1, Z5, Y6
	VMAXPS        Y6, Y5, Y5
	VEXTRACTF128  $1, Y5, X6
	VMAXPS        X6, X5, X5
	VPERMILPS     $0x4e, X5, X6
	VMAXPS        X6, X5, X5
	VPERMILPS     $0xb1, X5, X6
	VMAXPS        X6, X5, X5
	VBROADCASTSS  X5, Z7
	KORTESTW      K2, K2
	JZ            rexp
	VBROADCASTSS  v32NaN<>(SB), Z7

	// e^(x−max) into y, summed in Z5, Z6 (float64).
rexp:
	VXORPD Z5, Z5, Z5
	VXORPD Z6, Z6, Z6
	VXORPD Z20, Z20, Z20
	VXORPD Z21, Z21, Z21
	XORQ   AX, AX
	MOVQ   R12, CX
	SHRQ   $1, CX
	JZ     rexpone

rexploop:
	VMOVUPS (SI)(AX*1), Z0
	VMOVUPS 64(SI)(AX*1), Z16
	VSUBPS  Z7, Z0, Z0
	VSUBPS  Z7, Z16, Z16
	EXP32Z(Z0, Z1, Z8, Z9, Z10)
	EXP32Z(Z16, Z17, Z22, Z23, Z24)
	ADDD(Z1, Y1, Z9, Y9, Z5, Z6)
	ADDD(Z17, Y17, Z23, Y23, Z20, Z21)
	VMOVUPS Z1, (DI)(AX*1)
	VMOVUPS Z17, 64(DI)(AX*1)
	ADDQ    $128, AX
	DECQ    CX
	JNZ     rexploop

rexpone:
	TESTQ   $1, R12
	JZ      rexptail
	VMOVUPS (SI)(AX*1), Z0
	VSUBPS  Z7, Z0, Z0
	EXP32Z(Z0, Z1, Z8, Z9, Z10)
	ADDD(Z1, Y1, Z9, Y9, Z5, Z6)
	VMOVUPS Z1, (DI)(AX*1)
	ADDQ    $64, AX

rexptail:
	KORTESTW  K3, K3
	JZ        rsum
	VMOVUPS.Z (SI)(AX*1), K3, Z0
	VSUBPS    Z7, Z0, Z0
	EXP32Z(Z0, Z1, Z8, Z9, Z10)
	VMOVAPS.Z Z1, K3, Z1
	ADDD(Z1, Y1, Z9, Y9, Z5, Z6)
	VMOVUPS   Z1, K3, (DI)(AX*1)

	// Z7 = 1/sum as float64.
rsum:
	VADDPD        Z20, Z5, Z5
	VADDPD        Z21, Z6, Z6
	VADDPD        Z6, Z5, Z5
	VEXTRACTF64X4 $1, Z5, Y6
	VADDPD        Y6, Y5, Y5
	VEXTRACTF128  $1, Y5, X6
	VADDPD        X6, X5, X5
	VPERMILPD     $1, X5, X6
	VADDSD        X6, X5, X5
	VMOVSD        v64One<>(SB), X6
	VDIVSD        X5, X6, X6
	VBROADCASTSD  X6, Z7

	// y·(1/sum).
	XORQ AX, AX
	MOVQ R12, CX
	TESTQ CX, CX
	JZ   rscaletail

	// On YMM: Zen 4 converts between float32 and float64 faster in two
	// 256-bit halves than in one 512-bit instruction; the lanes' operations
	// are the same.
rscaleloop:
	VCVTPS2PD  (DI)(AX*1), Y0
	VCVTPS2PD  16(DI)(AX*1), Y1
	VCVTPS2PD  32(DI)(AX*1), Y2
	VCVTPS2PD  48(DI)(AX*1), Y3
	VMULPD     Y7, Y0, Y0
	VMULPD     Y7, Y1, Y1
	VMULPD     Y7, Y2, Y2
	VMULPD     Y7, Y3, Y3
	VCVTPD2PSY Y0, X0
	VCVTPD2PSY Y1, X1
	VCVTPD2PSY Y2, X2
	VCVTPD2PSY Y3, X3
	VMOVUPS    X0, (DI)(AX*1)
	VMOVUPS    X1, 16(DI)(AX*1)
	VMOVUPS    X2, 32(DI)(AX*1)
	VMOVUPS    X3, 48(DI)(AX*1)
	ADDQ       $64, AX
	DECQ       CX
	JNZ        rscaleloop

rscaletail:
	KORTESTW      K3, K3
	JZ            rnext
	SCALETAIL((DI)(AX*1))

rnext:
	ADDQ R11, SI
	ADDQ R11, DI
	SUBQ R13, R10
	JMP  rrow

rdone:
	VZEROUPPER
	RET
