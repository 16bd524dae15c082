//go:build amd64 && !noasm

#include "textflag.h"
#include "vmath32_amd64.h"
#include "vmath_amd64.h"
#include "elementwise_amd64.h"

// AVX2 softmax kernels. Like the reference they compute each e^(x−max) in
// float32 (vmath32_amd64.h's, the reference's bits) and accumulate in
// float64, so results agree with it to an ulp (the sums' order differs). Row kernels (Inner = 1) reduce one softmax held contiguously; column
// kernels apply one row of a tile of neighbouring softmaxes to their
// per-column float64 accumulators, four columns at a time.

// TOD(YF, XF, DLO, DHI, XHI): DLO and DHI = the low and high four float32
// of YF as float64 (XF, XHI: the xmm names of YF, DHI).
#define TOD(YF, XF, DLO, DHI, XHI) \
	VCVTPS2PD    XF, DLO;      \
	VEXTRACTF128 $1, YF, XHI;  \
	VCVTPS2PD    XHI, DHI

// TOF(DLO, DHI, XHI, YF, XF): YF = the eight float64 of DLO, DHI rounded to
// float32.
#define TOF(DLO, DHI, XHI, YF, XF) \
	VCVTPD2PSY  DLO, XF;        \
	VCVTPD2PSY  DHI, XHI;       \
	VINSERTF128 $1, XHI, YF, YF

// DMASKS: Y13, Y14 = the tail mask in Y15 widened to the low and high four
// float64 lanes.
#define DMASKS \
	VPMOVSXDQ    X15, Y13;      \
	VEXTRACTF128 $1, Y15, X14;  \
	VPMOVSXDQ    X14, Y14

// HSUMD(A, XA, XB): the low lane of XA = the sum of A's four float64 (XA
// is A's xmm name, XB a scratch xmm).
#define HSUMD(A, XA, XB) \
	VEXTRACTF128 $1, A, XB;     \
	VADDPD       XB, XA, XA;    \
	VPERMILPD    $1, XA, XB;    \
	VADDSD       XB, XA, XA

// SUMRET(ret): returns in ret the sum of the float64 in Y5 and Y6.
#define SUMRET(ret) \
	VADDPD Y6, Y5, Y5 \
	HSUMD(Y5, X5, X6) \
	VMOVSD X5, ret \
	VZEROUPPER \
	RET

// ---- rows -----------------------------------------------------------------

// func smRowMaxAVX2(x []float32) float32
//
// The largest element, or NaN if any element is NaN.
TEXT ·smRowMaxAVX2(SB), NOSPLIT, $0-28
	MOVQ    x_base+0(FP), SI
	MOVQ    x_len+8(FP), CX
	VMOVUPS fNegInf<>(SB), Y0
	VMOVAPS Y0, Y1
	VXORPS  Y4, Y4, Y4
	SUBQ    $16, CX
	JL      mone

mloop:
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VMAXPS  Y2, Y0, Y0
	VMAXPS  Y3, Y1, Y1
	VCMPPS  $3, Y2, Y2, Y2
	VCMPPS  $3, Y3, Y3, Y3
	VORPS   Y2, Y4, Y4
	VORPS   Y3, Y4, Y4
	ADDQ    $64, SI
	SUBQ    $16, CX
	JGE     mloop

mone:
	ADDQ    $8, CX
	JL      mtail
	VMOVUPS (SI), Y2
	VMAXPS  Y2, Y0, Y0
	VCMPPS  $3, Y2, Y2, Y2
	VORPS   Y2, Y4, Y4
	ADDQ    $32, SI
	SUBQ    $8, CX

mtail:
	ADDQ       $8, CX
	JZ         mreduce
	TAILMASK(CX, R8, Y15)
	VMASKMOVPS (SI), Y15, Y2
	VMOVUPS    fNegInf<>(SB), Y3
	VBLENDVPS  Y15, Y2, Y3, Y2
	VMAXPS     Y2, Y1, Y1
	VCMPPS     $3, Y2, Y2, Y2
	VORPS      Y2, Y4, Y4

mreduce:
	VMAXPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X1, X0, X0
	VMOVMSKPS    Y4, AX
	TESTL        AX, AX
	JZ           mdone
	VMOVSS       fNaN<>(SB), X0

mdone:
	VMOVSS     X0, ret+24(FP)
	VZEROUPPER
	RET

// EXPSUM8(MASKLO, MASKHI): Y1 = e^(Y0 − Y7) for eight float32 in Y0 (Y7:
// the maximum), the difference and exponential in float32 as the
// reference's, and the results added as float64 to the sums Y5 (low half)
// and Y6 (high). MASKLO and MASKHI clear the tail's unused lanes (by Y13,
// Y14) before they are added, or do nothing.
#define EXPSUM8(MASKLO, MASKHI) \
	VSUBPS       Y7, Y0, Y2;          \
	EXP32(Y2, Y1, Y8, Y9, Y10);       \
	VCVTPS2PD    X1, Y9;              \
	MASKLO;                           \
	VADDPD       Y9, Y5, Y5;          \
	VEXTRACTF128 $1, Y1, X9;          \
	VCVTPS2PD    X9, Y9;              \
	MASKHI;                           \
	VADDPD       Y9, Y6, Y6

#define NOMASK VMOVAPD Y9, Y9
#define MASKLO VANDPD Y13, Y9, Y9
#define MASKHI VANDPD Y14, Y9, Y9

// func smRowExpSumAVX2(x, e []float32, mx float32, store int) float64
//
// Σ e^(x−mx) in float64; when store is not 0, e[i] = float32(e^(x[i]−mx)).
TEXT ·smRowExpSumAVX2(SB), NOSPLIT, $0-72
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	MOVQ         e_base+24(FP), DI
	VBROADCASTSS mx+48(FP), Y7
	MOVQ         store+56(FP), R9
	VXORPD       Y5, Y5, Y5
	VXORPD       Y6, Y6, Y6
	SUBQ         $8, CX
	JL           etail

eloop:
	VMOVUPS (SI), Y0
	EXPSUM8(NOMASK, NOMASK)
	TESTQ   R9, R9
	JZ      enext
	VMOVUPS Y1, (DI)

enext:
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JGE  eloop

etail:
	ADDQ       $8, CX
	JZ         ereduce
	TAILMASK(CX, R8, Y15)
	VMASKMOVPS (SI), Y15, Y0
	DMASKS
	EXPSUM8(MASKLO, MASKHI)
	TESTQ      R9, R9
	JZ         ereduce
	VMASKMOVPS Y1, Y15, (DI)

ereduce:
	SUMRET(ret+64(FP))

// MAP8(BODY): eight float32 at a time, with a masked tail, BODY maps Y0
// (loaded from SI) and Y1 (from DX) to Y2 (stored at DI), with Y7 holding
// the kernel's float64 scalar. CX = n.
#define MAP8(BODY) MAP8X2(BODY, Y1, Y2)

// y·s
#define SCALE8 \
	TOD(Y0, X0, Y8, Y9, X9);    \
	VMULPD Y7, Y8, Y8;          \
	VMULPD Y7, Y9, Y9;          \
	TOF(Y8, Y9, X9, Y2, X2)

// x − lse
#define SUB8 \
	TOD(Y0, X0, Y8, Y9, X9);    \
	VSUBPD Y7, Y8, Y8;          \
	VSUBPD Y7, Y9, Y9;          \
	TOF(Y8, Y9, X9, Y2, X2)

// y·(dy − dot), y in Y0, dy in Y1
#define SOFTBWD8 \
	TOD(Y0, X0, Y8, Y9, X9);    \
	TOD(Y1, X1, Y10, Y11, X11); \
	VSUBPD Y7, Y10, Y10;        \
	VSUBPD Y7, Y11, Y11;        \
	VMULPD Y10, Y8, Y8;         \
	VMULPD Y11, Y9, Y9;         \
	TOF(Y8, Y9, X9, Y2, X2)

// dy − e^y·sum, y in Y0, dy in Y1, e^y in float32 (as the reference's)
#define LOGBWD8 \
	EXP32(Y0, Y3, Y8, Y9, Y10);   \
	VCVTPS2PD    X3, Y8;          \
	VMULPD       Y7, Y8, Y8;      \
	VCVTPS2PD    X1, Y9;          \
	VSUBPD       Y8, Y9, Y9;      \
	VCVTPD2PSY   Y9, X2;          \
	VEXTRACTF128 $1, Y3, X8;      \
	VCVTPS2PD    X8, Y8;          \
	VMULPD       Y7, Y8, Y8;      \
	VEXTRACTF128 $1, Y1, X9;      \
	VCVTPS2PD    X9, Y9;          \
	VSUBPD       Y8, Y9, Y9;      \
	VCVTPD2PSY   Y9, X9;          \
	VINSERTF128  $1, X9, Y2, Y2

// func smRowScaleAVX2(y []float32, s float64)
//
// y[i] = float32(float64(y[i])·s).
TEXT ·smRowScaleAVX2(SB), NOSPLIT, $0-32
	MOVQ         y_base+0(FP), SI
	MOVQ         y_len+8(FP), CX
	VBROADCASTSD s+24(FP), Y7
	MOVQ         SI, DI
	MOVQ         SI, DX
	MAP8(SCALE8)

// func smRowSubAVX2(y, x []float32, lse float64)
//
// y[i] = float32(float64(x[i]) − lse).
TEXT ·smRowSubAVX2(SB), NOSPLIT, $0-56
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	MOVQ         x_base+24(FP), SI
	VBROADCASTSD lse+48(FP), Y7
	MOVQ         SI, DX
	MAP8(SUB8)

// func smRowSoftBwdAVX2(dx, y, dy []float32, dot float64)
//
// dx[i] = float32(float64(y[i])·(float64(dy[i]) − dot)).
TEXT ·smRowSoftBwdAVX2(SB), NOSPLIT, $0-80
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         y_base+24(FP), SI
	MOVQ         dy_base+48(FP), DX
	VBROADCASTSD dot+72(FP), Y7
	MAP8(SOFTBWD8)

// func smRowLogBwdAVX2(dx, y, dy []float32, sum float64)
//
// dx[i] = float32(float64(dy[i]) − e^y[i]·sum).
TEXT ·smRowLogBwdAVX2(SB), NOSPLIT, $0-80
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         y_base+24(FP), SI
	MOVQ         dy_base+48(FP), DX
	VBROADCASTSD sum+72(FP), Y7
	MAP8(LOGBWD8)

// func smRowDotAVX2(y, dy []float32) float64
//
// Σ float64(y[i])·float64(dy[i]). The product of two float32 is exact in
// float64, so the FMA is a multiply and an add.
TEXT ·smRowDotAVX2(SB), NOSPLIT, $0-56
	MOVQ   y_base+0(FP), SI
	MOVQ   y_len+8(FP), CX
	MOVQ   dy_base+24(FP), DX
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	SUBQ   $8, CX
	JL     dtail

dloop:
	VCVTPS2PD   (SI), Y0
	VCVTPS2PD   16(SI), Y1
	VCVTPS2PD   (DX), Y2
	VCVTPS2PD   16(DX), Y3
	VFMADD231PD Y2, Y0, Y5
	VFMADD231PD Y3, Y1, Y6
	ADDQ        $32, SI
	ADDQ        $32, DX
	SUBQ        $8, CX
	JGE         dloop

dtail:
	ADDQ        $8, CX
	JZ          dreduce
	TAILMASK(CX, R8, Y15)
	VMASKMOVPS  (SI), Y15, Y0
	VMASKMOVPS  (DX), Y15, Y1
	TOD(Y0, X0, Y8, Y9, X9)
	TOD(Y1, X1, Y10, Y11, X11)
	VFMADD231PD Y10, Y8, Y5
	VFMADD231PD Y11, Y9, Y6

dreduce:
	SUMRET(ret+48(FP))

// func smRowSumAVX2(x []float32) float64
//
// Σ float64(x[i]).
TEXT ·smRowSumAVX2(SB), NOSPLIT, $0-32
	MOVQ   x_base+0(FP), SI
	MOVQ   x_len+8(FP), CX
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	SUBQ   $8, CX
	JL     stail

sloop:
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	VADDPD    Y0, Y5, Y5
	VADDPD    Y1, Y6, Y6
	ADDQ      $32, SI
	SUBQ      $8, CX
	JGE       sloop

stail:
	ADDQ       $8, CX
	JZ         sreduce
	TAILMASK(CX, R8, Y15)
	VMASKMOVPS (SI), Y15, Y0
	TOD(Y0, X0, Y8, Y9, X9)
	VADDPD     Y8, Y5, Y5
	VADDPD     Y9, Y6, Y6

sreduce:
	SUMRET(ret+24(FP))

// ---- columns: len(row) a multiple of 4; accumulators float64 ---------------

// COLSTART and COLEND enclose the body of a loop over the CX/4 groups of
// four columns (none when CX < 4); COLEND returns.
#define COLSTART \
	SHRQ $2, CX \
	JZ   coldone \
colloop:

#define COLEND \
	DECQ CX \
	JNZ  colloop \
coldone: \
	VZEROUPPER \
	RET

// func smColMaxAVX2(mx []float64, row []float32)
//
// mx[c] = row[c] where it is larger or NaN.
TEXT ·smColMaxAVX2(SB), NOSPLIT, $0-48
	MOVQ mx_base+0(FP), DI
	MOVQ row_base+24(FP), SI
	MOVQ row_len+32(FP), CX
	COLSTART
	VCVTPS2PD (SI), Y0
	VMOVUPD   (DI), Y1
	VCMPPD    $0x1e, Y1, Y0, Y2
	VCMPPD    $3, Y0, Y0, Y3
	VORPD     Y3, Y2, Y2
	VBLENDVPD Y2, Y0, Y1, Y1
	VMOVUPD   Y1, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	COLEND

// func smColExpSumAVX2(sum, mx []float64, row, e []float32, store int)
//
// sum[c] += e^(row[c]−mx[c]), and e[c] = float32 of it when store is not 0.
TEXT ·smColExpSumAVX2(SB), NOSPLIT, $0-104
	MOVQ sum_base+0(FP), DI
	MOVQ mx_base+24(FP), DX
	MOVQ row_base+48(FP), SI
	MOVQ row_len+56(FP), CX
	MOVQ e_base+72(FP), R10
	MOVQ store+96(FP), R9
	COLSTART
	VCVTPD2PSY (DX), X0
	VMOVUPS    (SI), X1
	VSUBPS     X0, X1, X1
	EXP32(X1, X2, X8, X9, X10)
	VCVTPS2PD  X2, Y9
	VADDPD     (DI), Y9, Y0
	VMOVUPD    Y0, (DI)
	TESTQ      R9, R9
	JZ         cenext
	VMOVUPS    X2, (R10)

cenext:
	ADDQ $16, SI
	ADDQ $16, R10
	ADDQ $32, DX
	ADDQ $32, DI
	COLEND

// func smColScaleAVX2(row []float32, s []float64)
//
// row[c] = float32(float64(row[c])·s[c]).
TEXT ·smColScaleAVX2(SB), NOSPLIT, $0-48
	MOVQ row_base+0(FP), SI
	MOVQ row_len+8(FP), CX
	MOVQ s_base+24(FP), DX
	COLSTART
	VCVTPS2PD  (SI), Y0
	VMULPD     (DX), Y0, Y0
	VCVTPD2PSY Y0, X0
	VMOVUPS    X0, (SI)
	ADDQ       $16, SI
	ADDQ       $32, DX
	COLEND

// func smColSubAVX2(y, x []float32, lse []float64)
//
// y[c] = float32(float64(x[c]) − lse[c]).
TEXT ·smColSubAVX2(SB), NOSPLIT, $0-72
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	MOVQ lse_base+48(FP), DX
	COLSTART
	VCVTPS2PD  (SI), Y0
	VSUBPD     (DX), Y0, Y0
	VCVTPD2PSY Y0, X0
	VMOVUPS    X0, (DI)
	ADDQ       $16, SI
	ADDQ       $16, DI
	ADDQ       $32, DX
	COLEND

// func smColDotAVX2(dot []float64, y, dy []float32)
//
// dot[c] += float64(y[c])·float64(dy[c]) (an exact product, so the FMA is
// the reference's multiply and add).
TEXT ·smColDotAVX2(SB), NOSPLIT, $0-72
	MOVQ dot_base+0(FP), DI
	MOVQ y_base+24(FP), SI
	MOVQ y_len+32(FP), CX
	MOVQ dy_base+48(FP), DX
	COLSTART
	VCVTPS2PD   (SI), Y0
	VCVTPS2PD   (DX), Y1
	VMOVUPD     (DI), Y2
	VFMADD231PD Y1, Y0, Y2
	VMOVUPD     Y2, (DI)
	ADDQ        $16, SI
	ADDQ        $16, DX
	ADDQ        $32, DI
	COLEND

// func smColSumAVX2(sum []float64, x []float32)
//
// sum[c] += float64(x[c]).
TEXT ·smColSumAVX2(SB), NOSPLIT, $0-48
	MOVQ sum_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ x_len+32(FP), CX
	COLSTART
	VCVTPS2PD (SI), Y0
	VADDPD    (DI), Y0, Y0
	VMOVUPD   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	COLEND

// func smColSoftBwdAVX2(dx, y, dy []float32, dot []float64)
//
// dx[c] = float32(float64(y[c])·(float64(dy[c]) − dot[c])).
TEXT ·smColSoftBwdAVX2(SB), NOSPLIT, $0-96
	MOVQ dx_base+0(FP), DI
	MOVQ dx_len+8(FP), CX
	MOVQ y_base+24(FP), SI
	MOVQ dy_base+48(FP), DX
	MOVQ dot_base+72(FP), R10
	COLSTART
	VCVTPS2PD  (SI), Y0
	VCVTPS2PD  (DX), Y1
	VSUBPD     (R10), Y1, Y1
	VMULPD     Y1, Y0, Y0
	VCVTPD2PSY Y0, X0
	VMOVUPS    X0, (DI)
	ADDQ       $16, SI
	ADDQ       $16, DX
	ADDQ       $16, DI
	ADDQ       $32, R10
	COLEND

// func smColLogBwdAVX2(dx, y, dy []float32, sum []float64)
//
// dx[c] = float32(float64(dy[c]) − e^y[c]·sum[c]).
TEXT ·smColLogBwdAVX2(SB), NOSPLIT, $0-96
	MOVQ dx_base+0(FP), DI
	MOVQ dx_len+8(FP), CX
	MOVQ y_base+24(FP), SI
	MOVQ dy_base+48(FP), DX
	MOVQ sum_base+72(FP), R10
	COLSTART
	VMOVUPS    (SI), X0
	EXP32(X0, X2, X8, X9, X10)
	VCVTPS2PD  X2, Y9
	VMULPD     (R10), Y9, Y9
	VCVTPS2PD  (DX), Y1
	VSUBPD     Y9, Y1, Y1
	VCVTPD2PSY Y1, X1
	VMOVUPS    X1, (DI)
	ADDQ       $16, SI
	ADDQ       $16, DX
	ADDQ       $16, DI
	ADDQ       $32, R10
	COLEND
