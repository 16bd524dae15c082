//go:build amd64 && !noasm

#include "textflag.h"
#include "optim_amd64.h"

// func adagradAVX2(p, g, s []float32, wd float64, negLR, eps, sign float32, flags int)
//
// One Adagrad update of len(p) elements (a multiple of 4) in one pass over
// p, g and s, following AdagradStep's reference operation by operation:
// the float32 products, square root and division in float32, each fused
// "x + α·y" in float64 (where the product of two float32 values is exact)
// rounded once to float32. flags: 1 weight decay.
//
// Four elements per iteration: float32 work on xmm, float64 on ymm.
//
// Registers: X15 sign, X9 eps, X8 −lr, Y6 wd as float64.

TEXT ·adagradAVX2(SB), NOSPLIT, $0-104
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         s_base+48(FP), DX
	VBROADCASTSD wd+72(FP), Y6
	VBROADCASTSS negLR+80(FP), X8
	VBROADCASTSS eps+84(FP), X9
	VBROADCASTSS sign+88(FP), X15
	MOVQ         flags+96(FP), R10
	SHRQ         $2, CX
	JZ           done

loop:
	LOADDECAY(nowd)

nowd:
	VCVTPS2PD   X0, Y3
	VCVTPS2PD   (DX), Y2
	VFMADD231PD Y3, Y3, Y2 // s + d·d
	VCVTPD2PSY  Y2, X2
	VMOVUPS     X2, (DX)
	VSQRTPS     X2, X2
	VADDPS      X9, X2, X2 // √s + eps
	VMULPS      X8, X0, X0 // −lr·d
	VDIVPS      X2, X0, X0
	VADDPS      X0, X1, X1
	VMOVUPS     X1, (DI)
	ADDQ        $16, SI
	ADDQ        $16, DI
	ADDQ        $16, DX
	DECQ        CX
	JNZ         loop

done:
	VZEROUPPER
	RET

// func adagradSparseAVX2(p, g, s []float32, negLR float64, eps, sign float32)
//
// AdagradSparse's update of len(p) elements (a multiple of 4), operation
// by operation as adagradSparseSpan: the square rounded to float32 before
// it is added (PyTorch's sparse branch squares, then adds), the square
// root and division in float32, and p + (−lr)·q in float64 (the product of
// two float32 values is exact there) rounded once to float32.
//
// Registers: X15 sign, X9 eps, Y8 −lr as float64.
TEXT ·adagradSparseAVX2(SB), NOSPLIT, $0-88
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         s_base+48(FP), DX
	VBROADCASTSD negLR+72(FP), Y8
	VBROADCASTSS eps+80(FP), X9
	VBROADCASTSS sign+84(FP), X15
	SHRQ         $2, CX
	JZ           sdone

sloop:
	VMULPS      (SI), X15, X0 // d = sign·g
	VMULPS      X0, X0, X2    // d·d, rounded
	VADDPS      (DX), X2, X2  // s + d·d
	VMOVUPS     X2, (DX)
	VSQRTPS     X2, X2
	VADDPS      X9, X2, X2    // √s + eps
	VDIVPS      X2, X0, X0    // q = d / (√s + eps)
	VCVTPS2PD   X0, Y3
	VCVTPS2PD   (DI), Y1
	VFMADD231PD Y8, Y3, Y1    // p + (−lr)·q
	VCVTPD2PSY  Y1, X1
	VMOVUPS     X1, (DI)
	ADDQ        $16, SI
	ADDQ        $16, DI
	ADDQ        $16, DX
	DECQ        CX
	JNZ         sloop

sdone:
	VZEROUPPER
	RET
