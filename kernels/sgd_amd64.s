//go:build amd64 && !noasm

#include "textflag.h"

// func sgdAVX2(p, g, b []float32, negLR, wd, keep float64, m, sign float32, flags int)
//
// One SGD update of len(p) elements (a multiple of 8) in one pass over p, g
// and b, following SGDStep's reference operation by operation: the float32
// products (sign·g, b·m) in float32, each "x + α·y" in float64 (where the
// product of two float32 values is exact, so a fused multiply-add there is
// the reference's multiply and add) rounded once to float32. flags:
// 1 weight decay, 2 momentum, 4 first step (b = d), 8 Nesterov.
TEXT ·sgdAVX2(SB), NOSPLIT, $0-112
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         b_base+48(FP), DX
	VBROADCASTSD negLR+72(FP), Y11
	VBROADCASTSD wd+80(FP), Y13
	VBROADCASTSD keep+88(FP), Y12
	VBROADCASTSS m+96(FP), Y14
	VBROADCASTSS sign+100(FP), Y15
	MOVQ         flags+104(FP), R10
	VCVTPS2PD    X14, Y10
	SHRQ         $3, CX
	JZ           done

loop:
	VMOVUPS      (SI), Y0
	VMULPS       Y15, Y0, Y0
	VMOVUPS      (DI), Y1
	VCVTPS2PD    X1, Y2
	VEXTRACTF128 $1, Y1, X3
	VCVTPS2PD    X3, Y3
	TESTQ        $1, R10
	JZ           decayed

	// d = d + wd·p
	VCVTPS2PD    X0, Y4
	VEXTRACTF128 $1, Y0, X5
	VCVTPS2PD    X5, Y5
	VFMADD231PD  Y13, Y2, Y4
	VFMADD231PD  Y13, Y3, Y5
	VCVTPD2PSY   Y4, X0
	VCVTPD2PSY   Y5, X5
	VINSERTF128  $1, X5, Y0, Y0

decayed:
	TESTQ $2, R10
	JZ    update
	TESTQ $4, R10
	JNZ   first

	// b = b·m + keep·d
	VMULPS       (DX), Y14, Y6
	VCVTPS2PD    X6, Y7
	VEXTRACTF128 $1, Y6, X8
	VCVTPS2PD    X8, Y8
	VCVTPS2PD    X0, Y4
	VEXTRACTF128 $1, Y0, X5
	VCVTPS2PD    X5, Y5
	VFMADD231PD  Y12, Y4, Y7
	VFMADD231PD  Y12, Y5, Y8
	VCVTPD2PSY   Y7, X6
	VCVTPD2PSY   Y8, X8
	VINSERTF128  $1, X8, Y6, Y6
	JMP          stored

first:
	VMOVAPS Y0, Y6

stored:
	VMOVUPS Y6, (DX)
	TESTQ   $8, R10
	JZ      heavy

	// Nesterov: d = d + m·b
	VCVTPS2PD    X0, Y4
	VEXTRACTF128 $1, Y0, X5
	VCVTPS2PD    X5, Y5
	VCVTPS2PD    X6, Y7
	VEXTRACTF128 $1, Y6, X8
	VCVTPS2PD    X8, Y8
	VFMADD231PD  Y10, Y7, Y4
	VFMADD231PD  Y10, Y8, Y5
	VCVTPD2PSY   Y4, X0
	VCVTPD2PSY   Y5, X5
	VINSERTF128  $1, X5, Y0, Y0
	JMP          update

heavy:
	VMOVAPS Y6, Y0

update:
	// p = p − lr·d
	VCVTPS2PD    X0, Y4
	VEXTRACTF128 $1, Y0, X5
	VCVTPS2PD    X5, Y5
	VFMADD231PD  Y11, Y4, Y2
	VFMADD231PD  Y11, Y5, Y3
	VCVTPD2PSY   Y2, X2
	VCVTPD2PSY   Y3, X3
	VINSERTF128  $1, X3, Y2, Y2
	VMOVUPS      Y2, (DI)
	ADDQ         $32, SI
	ADDQ         $32, DI
	ADDQ         $32, DX
	DECQ         CX
	JNZ          loop

done:
	VZEROUPPER
	RET
