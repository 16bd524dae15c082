//go:build amd64 && !noasm

#include "textflag.h"

// func adagradSplitAVX512(top, bottom, g16 []uint16, g32, s []float32, wd float64, negLR, eps, sign float32, flags int)
//
// AdagradSplitStep's update fused into one pass: for the first len(top)
// elements (a multiple of 8) it joins top and bottom into the FP32 master,
// widens the bfloat16 gradient exactly (or reads the float32 one), runs
// adagradAVX2's operations on it in the same order and with the same
// operand order, eight lanes at a time (float32 in ymm, float64 in zmm),
// and splits the new master back. flags: 1 weight decay, 16 the gradient
// is g16 (else g32).
//
// Registers: Y15 sign, Y9 eps, Y8 −lr, Z6 wd as float64; AX the element
// index, CX the count; Y0 d, Y1 p.

#define LOADP \
	VPMOVZXWD (DI)(AX*2), Y1; \
	VPMOVZXWD (R8)(AX*2), Y3; \
	VPSLLD    $16, Y1, Y1; \
	VPOR      Y3, Y1, Y1

#define LOADG16 \
	VPMOVZXWD (SI)(AX*2), Y0; \
	VPSLLD    $16, Y0, Y0; \
	VMULPS    Y0, Y15, Y0

#define LOADG32 \
	VMULPS (R9)(AX*4), Y15, Y0

#define DECAY \
	VCVTPS2PD   Y0, Z2; \
	VCVTPS2PD   Y1, Z3; \
	VFMADD231PD Z6, Z3, Z2; \
	VCVTPD2PS   Z2, Y0

#define UPDATE \
	VCVTPS2PD   Y0, Z3; \
	VCVTPS2PD   (DX)(AX*4), Z2; \
	VFMADD231PD Z3, Z3, Z2; \
	VCVTPD2PS   Z2, Y2; \
	VMOVUPS     Y2, (DX)(AX*4); \
	VSQRTPS     Y2, Y2; \
	VADDPS      Y9, Y2, Y2; \
	VMULPS      Y8, Y0, Y0; \
	VDIVPS      Y2, Y0, Y0; \
	VADDPS      Y0, Y1, Y1; \
	VPSRLD      $16, Y1, Y3; \
	VPMOVDW     Y3, X3; \
	VPMOVDW     Y1, X1; \
	VMOVDQU     X3, (DI)(AX*2); \
	VMOVDQU     X1, (R8)(AX*2)

#define NEXT(lbl) \
	ADDQ $8, AX; \
	CMPQ AX, CX; \
	JB   lbl; \
	JMP  done

TEXT ·adagradSplitAVX512(SB), NOSPLIT, $0-152
	MOVQ         top_base+0(FP), DI
	MOVQ         top_len+8(FP), CX
	MOVQ         bottom_base+24(FP), R8
	MOVQ         g16_base+48(FP), SI
	MOVQ         g32_base+72(FP), R9
	MOVQ         s_base+96(FP), DX
	VBROADCASTSD wd+120(FP), Z6
	VBROADCASTSS negLR+128(FP), Y8
	VBROADCASTSS eps+132(FP), Y9
	VBROADCASTSS sign+136(FP), Y15
	MOVQ         flags+144(FP), R10
	XORQ         AX, AX
	ANDQ         $-8, CX
	JZ           done
	ANDQ         $17, R10

	CMPQ R10, $16
	JEQ  h0
	CMPQ R10, $17
	JEQ  h1
	CMPQ R10, $0
	JEQ  f0
	CMPQ R10, $1
	JEQ  f1
	JMP  done

h0:
	LOADP
	LOADG16
	UPDATE
	NEXT(h0)
h1:
	LOADP
	LOADG16
	DECAY
	UPDATE
	NEXT(h1)
f0:
	LOADP
	LOADG32
	UPDATE
	NEXT(f0)
f1:
	LOADP
	LOADG32
	DECAY
	UPDATE
	NEXT(f1)

done:
	VZEROUPPER
	RET
