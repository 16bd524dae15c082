//go:build amd64 && !noasm

#include "textflag.h"
#include "optim_amd64.h"

// func adamSplitAVX512(top, bottom, g16 []uint16, g32, m, v, vmax []float32, k1, wd float64, b1, b2, k2, scale, bc2, eps, negStep, sign float32, flags int)
//
// AdamSplitStep's update fused into one pass: for the first len(top)
// elements (a multiple of 8) it joins top and bottom into the FP32 master,
// widens the bfloat16 gradient exactly (or reads the float32 one), runs
// adamAVX2's float32 and float64 operations on it, in the same order and
// with the same operand order, eight lanes at a time (float32 in ymm,
// float64 in zmm), and splits the new master back. flags: 1 weight decay
// (L2), 2 AMSGrad, 16 the gradient is g16 (else g32). As in adamAVX2 the
// master is always multiplied by scale, which is 1 (exactly) without
// decoupled weight decay. Only the slices the flags name are touched.
//
// Registers: Y15 sign, Y14 β1, Y13 β2, Y12 Keep2, Y11 scale, Y10 √bc2,
// Y9 eps, Y8 −step size, Z7 Keep1 and Z6 wd as float64; AX the element
// index, CX the count; Y0 d, Y1 p, Y2 m, Y4 v, Y3/Y5 temporaries (each
// widened into the zmm of the same number as adamAVX2 widens xmm into ymm).

// LOADP: Y1 = the joined master.
#define LOADP LOADMASTER(Y1)

// MOMENTS: p = p·scale; m = m·β1 + Keep1·d; v = v·β2 + (Keep2·d)·d; both
// stored.
#define MOMENTS \
	VMULPS      Y11, Y1, Y1; \
	VMULPS      (DX)(AX*4), Y14, Y2; \
	VCVTPS2PD   Y2, Z2; \
	VCVTPS2PD   Y0, Z3; \
	VFMADD231PD Z7, Z3, Z2; \
	VCVTPD2PS   Z2, Y2; \
	VMOVUPS     Y2, (DX)(AX*4); \
	VMULPS      (R11)(AX*4), Y13, Y4; \
	VCVTPS2PD   Y4, Z4; \
	VMULPS      Y12, Y0, Y5; \
	VCVTPS2PD   Y5, Z5; \
	VFMADD231PD Z5, Z3, Z4; \
	VCVTPD2PS   Z4, Y4; \
	VMOVUPS     Y4, (R11)(AX*4)

// AMS: vmax = max(vmax, v) (v on a tie or when v is NaN, vmax when it is
// NaN), stored; v = vmax.
#define AMS \
	VMOVUPS   (BX)(AX*4), Y5; \
	VMAXPS    Y4, Y5, Y3; \
	VCMPPS    $3, Y5, Y5, Y0; \
	VBLENDVPS Y0, Y5, Y3, Y4; \
	VMOVUPS   Y4, (BX)(AX*4)

// UPDATE: p = p + (−step size·m) / (√v / √bc2 + eps), split into top and
// bottom.
#define UPDATE \
	VSQRTPS Y4, Y4; \
	VDIVPS  Y10, Y4, Y4; \
	VADDPS  Y9, Y4, Y4; \
	VMULPS  Y8, Y2, Y2; \
	VDIVPS  Y4, Y2, Y2; \
	VADDPS  Y2, Y1, Y1; \
	STOREMASTER(Y1, X1)

TEXT ·adamSplitAVX512(SB), NOSPLIT, $0-224
	MOVQ         top_base+0(FP), DI
	MOVQ         top_len+8(FP), CX
	MOVQ         bottom_base+24(FP), R8
	MOVQ         g16_base+48(FP), SI
	MOVQ         g32_base+72(FP), R9
	MOVQ         m_base+96(FP), DX
	MOVQ         v_base+120(FP), R11
	MOVQ         vmax_base+144(FP), BX
	VBROADCASTSD k1+168(FP), Z7
	VBROADCASTSD wd+176(FP), Z6
	VBROADCASTSS b1+184(FP), Y14
	VBROADCASTSS b2+188(FP), Y13
	VBROADCASTSS k2+192(FP), Y12
	VBROADCASTSS scale+196(FP), Y11
	VBROADCASTSS bc2+200(FP), Y10
	VBROADCASTSS eps+204(FP), Y9
	VBROADCASTSS negStep+208(FP), Y8
	VBROADCASTSS sign+212(FP), Y15
	MOVQ         flags+216(FP), R10
	XORQ         AX, AX
	ANDQ         $-8, CX
	JZ           done
	ANDQ         $19, R10

	CASE(16, h0)
	CASE(17, h1)
	CASE(18, h2)
	CASE(19, h3)
	CASE(0, f0)
	CASE(1, f1)
	CASE(2, f2)
	CASE(3, f3)
	JMP  done

// One loop per combination of flags: hN for flags 16+N (a bfloat16
// gradient), fN for flags N (a float32 one).
h0:  LOADP; LOADG16; MOMENTS; UPDATE; NEXT8(h0)
h1:  LOADP; LOADG16; SPLITDECAY; MOMENTS; UPDATE; NEXT8(h1)
h2:  LOADP; LOADG16; MOMENTS; AMS; UPDATE; NEXT8(h2)
h3:  LOADP; LOADG16; SPLITDECAY; MOMENTS; AMS; UPDATE; NEXT8(h3)

f0:  LOADP; LOADG32; MOMENTS; UPDATE; NEXT8(f0)
f1:  LOADP; LOADG32; SPLITDECAY; MOMENTS; UPDATE; NEXT8(f1)
f2:  LOADP; LOADG32; MOMENTS; AMS; UPDATE; NEXT8(f2)
f3:  LOADP; LOADG32; SPLITDECAY; MOMENTS; AMS; UPDATE; NEXT8(f3)

done:
	VZEROUPPER
	RET
