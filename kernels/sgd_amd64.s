//go:build amd64 && !noasm

#include "textflag.h"

// func sgdAVX2(p, g, b []float32, negLR, wd, keep float64, m, sign float32, flags int)
//
// One SGD update of len(p) elements (a multiple of 4) in one pass over p, g
// and b, following SGDStep's reference operation by operation: the float32
// products (sign·g, b·m) in float32, each "x + α·y" in float64 (where the
// product of two float32 values is exact, so a fused multiply-add there is
// the reference's multiply and add) rounded once to float32. flags:
// 1 weight decay, 2 momentum, 4 first step (b = d), 8 Nesterov.
//
// Four elements per step: the float32 operations run on xmm halves and the
// float64 ones on ymm, so no lane shuffling is needed, which would
// otherwise make the loop compute-bound on one core.
TEXT ·sgdAVX2(SB), NOSPLIT, $0-112
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         b_base+48(FP), DX
	VBROADCASTSD negLR+72(FP), Y11
	VBROADCASTSD wd+80(FP), Y13
	VBROADCASTSD keep+88(FP), Y12
	VBROADCASTSS m+96(FP), X14
	VBROADCASTSS sign+100(FP), X15
	MOVQ         flags+104(FP), R10
	VCVTPS2PD    X14, Y10
	SHRQ         $2, CX
	JZ           done

loop:
	VMULPS    (SI), X15, X0
	VCVTPS2PD (DI), Y2
	TESTQ     $1, R10
	JZ        decayed

	// d = d + wd·p
	VCVTPS2PD   X0, Y4
	VFMADD231PD Y13, Y2, Y4
	VCVTPD2PSY  Y4, X0

decayed:
	TESTQ $2, R10
	JZ    update
	TESTQ $4, R10
	JNZ   first

	// b = b·m + keep·d
	VMULPS      (DX), X14, X6
	VCVTPS2PD   X6, Y7
	VCVTPS2PD   X0, Y4
	VFMADD231PD Y12, Y4, Y7
	VCVTPD2PSY  Y7, X6
	JMP         stored

first:
	VMOVAPS X0, X6

stored:
	VMOVUPS X6, (DX)
	TESTQ   $8, R10
	JZ      heavy

	// Nesterov: d = d + m·b
	VCVTPS2PD   X0, Y4
	VCVTPS2PD   X6, Y7
	VFMADD231PD Y10, Y7, Y4
	VCVTPD2PSY  Y4, X0
	JMP         update

heavy:
	VMOVAPS X6, X0

update:
	// p = p − lr·d
	VCVTPS2PD   X0, Y4
	VFMADD231PD Y11, Y4, Y2
	VCVTPD2PSY  Y2, X2
	VMOVUPS     X2, (DI)
	ADDQ        $16, SI
	ADDQ        $16, DI
	ADDQ        $16, DX
	DECQ        CX
	JNZ         loop

done:
	VZEROUPPER
	RET
