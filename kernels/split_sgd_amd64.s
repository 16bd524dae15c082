//go:build amd64 && !noasm

#include "textflag.h"
#include "optim_amd64.h"

// func sgdSplitAVX512(top, bottom, g16 []uint16, g32, b []float32, negLR, wd, keep float64, m, sign float32, flags int)
//
// SGDSplitStep's update fused into one pass over the split parameter: for
// the first len(top) elements (a multiple of 8) it joins top and bottom
// into the FP32 master, widens the bfloat16 gradient exactly (or reads the
// float32 one), runs sgdAVX2's float32 and float64 operations on it, in the
// same order and with the same operand order, on eight lanes at a time
// (float32 in ymm, float64 in zmm), and splits the new master back. flags:
// 1 weight decay, 2 momentum, 4 first step (b = d), 8 Nesterov, 16 the
// gradient is g16 (else g32). Only the slices the flags name are touched.
//
// Registers: Y15 sign, Y14 m, Z10 m as float64, Z11 −lr, Z12 keep, Z13 wd;
// AX the element index, CX the count; Y0 d, Y2/Z2 p, Y6 b, Z4 and Z7
// temporaries, Y3 a scratch.

// LOADP: Z2 = the joined master as float64 (Y2 as float32 first).
#define LOADP LOADMASTER(Y2); VCVTPS2PD Y2, Z2

// DECAY: d = d + wd·p.
#define DECAY \
	VCVTPS2PD   Y0, Z4; \
	VFMADD231PD Z13, Z2, Z4; \
	VCVTPD2PS   Z4, Y0

// MOM: b = b·m + keep·d, stored; Y6 = b.
#define MOM \
	VMULPS      (DX)(AX*4), Y14, Y6; \
	VCVTPS2PD   Y6, Z7; \
	VCVTPS2PD   Y0, Z4; \
	VFMADD231PD Z12, Z4, Z7; \
	VCVTPD2PS   Z7, Y6; \
	VMOVUPS     Y6, (DX)(AX*4)

// FIRST: b = d, stored; Y6 = b.
#define FIRST \
	VMOVUPS Y0, (DX)(AX*4); \
	VMOVAPS Y0, Y6

// USEB: d = b.
#define USEB \
	VMOVAPS Y6, Y0

// NEST: d = d + m·b.
#define NEST \
	VCVTPS2PD   Y0, Z4; \
	VCVTPS2PD   Y6, Z7; \
	VFMADD231PD Z10, Z7, Z4; \
	VCVTPD2PS   Z4, Y0

// UPDATE: p = p − lr·d, split into top and bottom.
#define UPDATE \
	VCVTPS2PD   Y0, Z4; \
	VFMADD231PD Z11, Z4, Z2; \
	VCVTPD2PS   Z2, Y2; \
	STOREMASTER(Y2, X2)

TEXT ·sgdSplitAVX512(SB), NOSPLIT, $0-160
	MOVQ         top_base+0(FP), DI
	MOVQ         top_len+8(FP), CX
	MOVQ         bottom_base+24(FP), R8
	MOVQ         g16_base+48(FP), SI
	MOVQ         g32_base+72(FP), R9
	MOVQ         b_base+96(FP), DX
	VBROADCASTSD negLR+120(FP), Z11
	VBROADCASTSD wd+128(FP), Z13
	VBROADCASTSD keep+136(FP), Z12
	VBROADCASTSS m+144(FP), Y14
	VBROADCASTSS sign+148(FP), Y15
	MOVQ         flags+152(FP), R10
	VCVTPS2PD    Y14, Z10
	XORQ         AX, AX
	ANDQ         $-8, CX
	JZ           done
	ANDQ         $31, R10

	CASE(16, h0)
	CASE(17, h1)
	CASE(18, h2)
	CASE(19, h3)
	CASE(22, h6)
	CASE(23, h7)
	CASE(26, h10)
	CASE(27, h11)
	CASE(30, h14)
	CASE(31, h15)
	CASE(0, f0)
	CASE(1, f1)
	CASE(2, f2)
	CASE(3, f3)
	CASE(6, f6)
	CASE(7, f7)
	CASE(10, f10)
	CASE(11, f11)
	CASE(14, f14)
	CASE(15, f15)
	JMP  done

// One loop per combination of flags: hN for flags 16+N (a bfloat16
// gradient), fN for flags N (a float32 one).
h0:  LOADP; LOADG16; UPDATE; NEXT8(h0)
h1:  LOADP; LOADG16; DECAY; UPDATE; NEXT8(h1)
h2:  LOADP; LOADG16; MOM; USEB; UPDATE; NEXT8(h2)
h3:  LOADP; LOADG16; DECAY; MOM; USEB; UPDATE; NEXT8(h3)
h6:  LOADP; LOADG16; FIRST; UPDATE; NEXT8(h6)
h7:  LOADP; LOADG16; DECAY; FIRST; UPDATE; NEXT8(h7)
h10: LOADP; LOADG16; MOM; NEST; UPDATE; NEXT8(h10)
h11: LOADP; LOADG16; DECAY; MOM; NEST; UPDATE; NEXT8(h11)
h14: LOADP; LOADG16; FIRST; NEST; UPDATE; NEXT8(h14)
h15: LOADP; LOADG16; DECAY; FIRST; NEST; UPDATE; NEXT8(h15)

f0:  LOADP; LOADG32; UPDATE; NEXT8(f0)
f1:  LOADP; LOADG32; DECAY; UPDATE; NEXT8(f1)
f2:  LOADP; LOADG32; MOM; USEB; UPDATE; NEXT8(f2)
f3:  LOADP; LOADG32; DECAY; MOM; USEB; UPDATE; NEXT8(f3)
f6:  LOADP; LOADG32; FIRST; UPDATE; NEXT8(f6)
f7:  LOADP; LOADG32; DECAY; FIRST; UPDATE; NEXT8(f7)
f10: LOADP; LOADG32; MOM; NEST; UPDATE; NEXT8(f10)
f11: LOADP; LOADG32; DECAY; MOM; NEST; UPDATE; NEXT8(f11)
f14: LOADP; LOADG32; FIRST; NEST; UPDATE; NEXT8(f14)
f15: LOADP; LOADG32; DECAY; FIRST; NEST; UPDATE; NEXT8(f15)

done:
	VZEROUPPER
	RET
