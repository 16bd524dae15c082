//go:build amd64 && !noasm

#include "textflag.h"
#include "optim_amd64.h"

// The Lamb passes and the LARS norm pass, four elements per iteration:
// float32 work on xmm, float64 work on ymm, following lambMomentsSpan,
// lambApplySpan and sumSquares2 operation by operation. Each fused
// "x + α·y" is a float64 multiply-add rounded once to float32; the
// squares summed are exact in float64, so a multiply-add accumulates them
// exactly as the reference's x += y·y does. Lane j of each accumulator
// holds the elements i with i mod 4 = j.

// LOADPDECAY: p widened into Y5; then, with weight decay (flags&1),
// a = a + wd·p for a in X1; either way on at nowd.
#define LOADPDECAY(nowd) \
	VCVTPS2PD   (DI), Y5; \
	TESTQ       $1, R10; \
	JZ          nowd; \
	VCVTPS2PD   X1, Y1; \
	VFMADD231PD Y14, Y5, Y1; \
	VCVTPD2PSY  Y1, X1

// func lambMomentsAVX2(p, g, m, v []float32, acc *[8]float64, k1, wd float64, b1, b2, k2, bc1, bc2, eps float32, flags int)
//
// Registers: Y15 Keep1 and Y14 wd as float64, X13 β1, X12 β2, X11 Keep2,
// X10 bias correction 1, X9 bias correction 2, X8 eps, Y7 and Y6 the p²
// and u² lanes.
TEXT ·lambMomentsAVX2(SB), NOSPLIT, $0-152
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         m_base+48(FP), DX
	MOVQ         v_base+72(FP), R8
	MOVQ         acc+96(FP), R9
	VBROADCASTSD k1+104(FP), Y15
	VBROADCASTSD wd+112(FP), Y14
	VBROADCASTSS b1+120(FP), X13
	VBROADCASTSS b2+124(FP), X12
	VBROADCASTSS k2+128(FP), X11
	VBROADCASTSS bc1+132(FP), X10
	VBROADCASTSS bc2+136(FP), X9
	VBROADCASTSS eps+140(FP), X8
	MOVQ         flags+144(FP), R10
	ACCLOAD
	SHRQ         $2, CX
	JZ           mdone

mloop:
	VMOVUPS     (SI), X0
	VMULPS      (DX), X13, X1 // m·β1
	VCVTPS2PD   X1, Y1
	VCVTPS2PD   X0, Y2
	VFMADD231PD Y15, Y2, Y1 // m·β1 + Keep1·g
	VCVTPD2PSY  Y1, X1
	VMOVUPS     X1, (DX)
	VMULPS      (R8), X12, X3 // v·β2
	VCVTPS2PD   X3, Y3
	VMULPS      X11, X0, X4 // Keep2·g
	VCVTPS2PD   X4, Y4
	VFMADD231PD Y4, Y2, Y3 // v·β2 + (Keep2·g)·g
	VCVTPD2PSY  Y3, X3
	VMOVUPS     X3, (R8)
	VDIVPS      X9, X3, X3 // v / bc2
	VSQRTPS     X3, X3
	VADDPS      X8, X3, X3 // + eps
	VDIVPS      X10, X1, X1 // m / bc1
	VDIVPS      X3, X1, X1
	LOADPDECAY(mnowd)

mnowd:
	VFMADD231PD Y5, Y5, Y7 // p² lanes
	VCVTPS2PD   X1, Y1
	VFMADD231PD Y1, Y1, Y6 // u² lanes
	ADDQ        $16, DI
	ADDQ        $16, SI
	ADDQ        $16, DX
	ADDQ        $16, R8
	DECQ        CX
	JNZ         mloop

mdone:
	ACCSTORE
	VZEROUPPER
	RET

// func lambApplyAVX2(p, m, v []float32, wd, negScale float64, bc1, bc2, eps float32, flags int)
//
// Registers: Y14 wd and Y7 the scale as float64, X10 and X9 the bias
// corrections, X8 eps.
TEXT ·lambApplyAVX2(SB), NOSPLIT, $0-112
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         m_base+24(FP), DX
	MOVQ         v_base+48(FP), R8
	VBROADCASTSD wd+72(FP), Y14
	VBROADCASTSD negScale+80(FP), Y7
	VBROADCASTSS bc1+88(FP), X10
	VBROADCASTSS bc2+92(FP), X9
	VBROADCASTSS eps+96(FP), X8
	MOVQ         flags+104(FP), R10
	SHRQ         $2, CX
	JZ           adone

aloop:
	VMOVUPS     (R8), X3
	VDIVPS      X9, X3, X3 // v / bc2
	VSQRTPS     X3, X3
	VADDPS      X8, X3, X3 // + eps
	VMOVUPS     (DX), X1
	VDIVPS      X10, X1, X1 // m / bc1
	VDIVPS      X3, X1, X1
	LOADPDECAY(anowd)

anowd:
	VCVTPS2PD   X1, Y1
	VFMADD231PD Y7, Y1, Y5 // p + scale·u
	VCVTPD2PSY  Y5, X5
	VMOVUPS     X5, (DI)
	ADDQ        $16, DI
	ADDQ        $16, DX
	ADDQ        $16, R8
	DECQ        CX
	JNZ         aloop

adone:
	VZEROUPPER
	RET

// func sumSquares2AVX2(a, b []float32, acc *[8]float64)
TEXT ·sumSquares2AVX2(SB), NOSPLIT, $0-56
	MOVQ    a_base+0(FP), DI
	MOVQ    a_len+8(FP), CX
	MOVQ    b_base+24(FP), SI
	MOVQ    acc+48(FP), R9
	ACCLOAD
	SHRQ    $2, CX
	JZ      sdone

sloop:
	VCVTPS2PD   (DI), Y0
	VFMADD231PD Y0, Y0, Y7
	VCVTPS2PD   (SI), Y1
	VFMADD231PD Y1, Y1, Y6
	ADDQ        $16, DI
	ADDQ        $16, SI
	DECQ        CX
	JNZ         sloop

sdone:
	ACCSTORE
	VZEROUPPER
	RET
