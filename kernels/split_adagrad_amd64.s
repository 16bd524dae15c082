//go:build amd64 && !noasm

#include "textflag.h"
#include "optim_amd64.h"

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

// LOADP: Y1 = the joined master.
#define LOADP LOADMASTER(Y1)

// UPDATE: s = s + d·d, stored; p = p + (−lr·d) / (√s + eps), split into
// top and bottom.
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
	STOREMASTER(Y1, X1)

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

	CASE(16, h0)
	CASE(17, h1)
	CASE(0, f0)
	CASE(1, f1)
	JMP  done

// One loop per combination of flags: hN for flags 16+N (a bfloat16
// gradient), fN for flags N (a float32 one).
h0:  LOADP; LOADG16; UPDATE; NEXT8(h0)
h1:  LOADP; LOADG16; SPLITDECAY; UPDATE; NEXT8(h1)
f0:  LOADP; LOADG32; UPDATE; NEXT8(f0)
f1:  LOADP; LOADG32; SPLITDECAY; UPDATE; NEXT8(f1)

done:
	VZEROUPPER
	RET
