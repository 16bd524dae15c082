//go:build amd64 && !noasm

#include "textflag.h"
#include "optim_amd64.h"

// func adamAVX2(p, g, m, v, vmax []float32, k1, wd float64, b1, b2, k2, scale, bc2, eps, negStep, sign float32, flags int)
//
// One Adam update of len(p) elements (a multiple of 4) in one pass over p,
// g, m, v and (flags&2, AMSGrad) vmax, following AdamStep's reference
// operation by operation: the float32 products, square root and divisions
// in float32, each fused "x + α·y" in float64 (where the product of two
// float32 values is exact) rounded once to float32. flags: 1 weight decay
// (L2), 2 AMSGrad. p is always multiplied by scale, which is 1 (exactly)
// without decoupled weight decay.
//
// Four elements per iteration: float32 work on xmm, float64 on ymm, so no
// lanes are shuffled. The two flags branch inside the loop; the branches
// always go the same way and cost nothing beside the square root and the
// divisions.
//
// Registers: X15 sign, X14 β1, X13 β2, X12 Keep2, X11 scale, X10 √bc2,
// X9 eps, X8 −step size, Y7 Keep1 and Y6 wd as float64.

TEXT ·adamAVX2(SB), NOSPLIT, $0-176
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         m_base+48(FP), DX
	MOVQ         v_base+72(FP), R8
	MOVQ         vmax_base+96(FP), R9
	VBROADCASTSD k1+120(FP), Y7
	VBROADCASTSD wd+128(FP), Y6
	VBROADCASTSS b1+136(FP), X14
	VBROADCASTSS b2+140(FP), X13
	VBROADCASTSS k2+144(FP), X12
	VBROADCASTSS scale+148(FP), X11
	VBROADCASTSS bc2+152(FP), X10
	VBROADCASTSS eps+156(FP), X9
	VBROADCASTSS negStep+160(FP), X8
	VBROADCASTSS sign+164(FP), X15
	MOVQ         flags+168(FP), R10
	SHRQ         $2, CX
	JZ           done

loop:
	LOADDECAY(nowd)

nowd:
	VMULPS      X11, X1, X1 // p·scale
	VMULPS      (DX), X14, X2
	VCVTPS2PD   X2, Y2
	VCVTPS2PD   X0, Y3
	VFMADD231PD Y7, Y3, Y2 // m·β1 + Keep1·d
	VCVTPD2PSY  Y2, X2
	VMOVUPS     X2, (DX)
	VMULPS      (R8), X13, X4
	VCVTPS2PD   X4, Y4
	VMULPS      X12, X0, X5
	VCVTPS2PD   X5, Y5
	VFMADD231PD Y5, Y3, Y4 // v·β2 + (Keep2·d)·d
	VCVTPD2PSY  Y4, X4
	VMOVUPS     X4, (R8)
	TESTQ       $2, R10
	JZ          noams
	VMOVUPS     (R9), X5
	VMAXPS      X4, X5, X3         // vmax > v ? vmax : v (v when either is NaN)
	VCMPPS      $3, X5, X5, X0     // vmax is NaN
	VBLENDVPS   X0, X5, X3, X4     // … then vmax
	VMOVUPS     X4, (R9)
	ADDQ        $16, R9

noams:
	VSQRTPS X4, X4
	VDIVPS  X10, X4, X4 // √v / √bc2
	VADDPS  X9, X4, X4  // + eps
	VMULPS  X8, X2, X2  // −step size · m
	VDIVPS  X4, X2, X2
	VADDPS  X2, X1, X1
	VMOVUPS X1, (DI)
	ADDQ    $16, SI
	ADDQ    $16, DI
	ADDQ    $16, DX
	ADDQ    $16, R8
	DECQ    CX
	JNZ     loop

done:
	VZEROUPPER
	RET
