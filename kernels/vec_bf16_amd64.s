//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"
#include "tobf16_amd64.h"
#include "colwalk_amd64.h"

// The column primitives on bfloat16 rows. The AVX2 forms expand
// colwalk_amd64.h, as the float32 ones in vec_amd64.s do, with loads that
// widen each value exactly (the 16 bits moved to the top of a float32) and
// stores that round each float32 result (rectified first where asked) with
// TOBF16, as F32ToBF16 rounds it: every other instruction, and so every
// bit, is the float32 primitive's on the widened rows.

// HCVT(off, p, x, y): y = the four bfloat16 at off(p) widened to float64
// (x is y's low half).
#define HCVT(off, p, x, y) VPMOVZXWD off(p), x; VPSLLD $16, x, x; VCVTPS2PD x, y
// HCVT1(p, x): x[0] = the bfloat16 at (p) widened to float64 (AX scratch).
#define HCVT1(p, x) MOVWLZX (p), AX; SHLL $16, AX; VMOVD AX, x; VCVTSS2SD x, x, x

// The rectifier of activation_amd64.s's RELU on X registers, X5 zero,
// where X7 is all ones (and nothing where it is 0): x < 0 → 0; −0 and NaN
// pass.
#define RELUX(R, T) VCMPPS $0x11, X5, R, T; VANDPS X7, T, T; VANDNPS R, T, R
#define NORELU(R, T)

// Narrowing stores of float64 results in Y0, Y1 (X0) to bfloat16 at (p),
// rectified by RELU first.
#define HPUT8(p, RELU) \
	VCVTPD2PSY Y0, X0; VCVTPD2PSY Y1, X1; \
	RELU(X0, X2); RELU(X1, X2);         \
	TOBF16(X0, X2, X3); TOBF16(X1, X2, X3); \
	VPACKUSDW X1, X0, X0; VMOVDQU X0, (p)
#define HPUT4(p, RELU) \
	VCVTPD2PSY Y0, X0; RELU(X0, X2); TOBF16(X0, X2, X3); \
	VPACKUSDW X0, X0, X0; VMOVQ X0, (p)
#define HPUT1(p, RELU) \
	VCVTSD2SS X0, X0, X0; RELU(X0, X2); TOBF16(X0, X2, X3); \
	VMOVD X0, AX; MOVW AX, (p)

// The stores colwalk_amd64.h's maps take: rectified under X7, or not.
#define HPUT8R(p) HPUT8(p, RELUX)
#define HPUT4R(p) HPUT4(p, RELUX)
#define HPUT1R(p) HPUT1(p, RELUX)
#define HPUT8N(p) HPUT8(p, NORELU)
#define HPUT4N(p) HPUT4(p, NORELU)
#define HPUT1N(p) HPUT1(p, NORELU)

// func colSumHAVX2(s []float64, x []uint16, rows int)
TEXT ·colSumHAVX2(SB), NOSPLIT, $0-56
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ rows+48(FP), CX
	IFZERO(CX, hsdone)
	MOVQ BX, R8
	SHLQ $1, R8
	COLSUM(HCVT, HCVT1, 2, hs16, hs16row, hs4, hs4row, hs1, hs1row, hsdone)
hsdone:
	VRET

// func colSqDevHAVX2(s []float64, x []uint16, m []float64, rows int)
TEXT ·colSqDevHAVX2(SB), NOSPLIT, $0-80
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ m_base+48(FP), DX
	MOVQ rows+72(FP), CX
	IFZERO(CX, hqdone)
	MOVQ BX, R8
	SHLQ $1, R8
	COLSQDEV(HCVT, HCVT1, 2, hq16, hq16row, hq4, hq4row, hq1, hq1row, hqdone)
hqdone:
	VRET

// func colGradSumsHAVX2(s1, s2 []float64, g, x []uint16, m []float64, rows int)
TEXT ·colGradSumsHAVX2(SB), NOSPLIT, $0-128
	MOVQ s1_base+0(FP), DI
	MOVQ s1_len+8(FP), BX
	MOVQ s2_base+24(FP), R11
	MOVQ g_base+48(FP), SI
	MOVQ x_base+72(FP), R12
	MOVQ m_base+96(FP), DX
	MOVQ rows+120(FP), CX
	IFZERO(CX, hgdone)
	MOVQ BX, R8
	SHLQ $1, R8
	COLGRADSUMS(HCVT, HCVT1, 2, hg16, hg16row, hg4, hg4row, hg1, hg1row, hgdone)
hgdone:
	VRET

// func colAffineHAVX2(y, x []uint16, a, b []float64, rows int, relu bool)
TEXT ·colAffineHAVX2(SB), NOSPLIT, $0-105
	MOVQ y_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ a_base+48(FP), R11
	MOVQ a_len+56(FP), R12
	MOVQ b_base+72(FP), R13
	MOVQ rows+96(FP), CX
	MOVBLZX relu+104(FP), AX
	NEGL AX
	VMOVD AX, X7
	VPBROADCASTD X7, X7
	VXORPS X5, X5, X5
	IFZERO(CX, hadone)
	COLAFFINE(HCVT, HCVT1, HPUT8R, HPUT4R, HPUT1R, 2, harow, ha8, ha4, ha1, hanext)
hadone:
	VRET

// func colAffine2HAVX2(y, u, v []uint16, p, q, r []float64, rows int)
TEXT ·colAffine2HAVX2(SB), NOSPLIT, $0-152
	MOVQ y_base+0(FP), DI
	MOVQ u_base+24(FP), SI
	MOVQ v_base+48(FP), R8
	MOVQ p_base+72(FP), R11
	MOVQ p_len+80(FP), R12
	MOVQ rows+144(FP), CX
	IFZERO(CX, hbdone)
	COLAFFINE2(HCVT, HCVT1, HPUT8N, HPUT4N, HPUT1N, 2, hbrow, hb8, hb4, hb1, hbnext)
hbdone:
	VRET

// AVX-512 forms for channel counts that are multiples of 16 (the callers
// take the AVX2 forms for the others): blocks of 16 channels, eight
// float64 lanes per register, the same per-lane arithmetic.

// ZCVT(off, p, y, z): z = the eight bfloat16 at off(p) widened to float64
// (y is z's low half).
#define ZCVT(off, p, y, z) VPMOVZXWD off(p), y; VPSLLD $16, y, y; VCVTPS2PD y, z

// ZRELU rectifies Z0 where K7 is set (Z31 zero): x < 0 → 0; −0 and NaN
// pass.
#define ZRELU VCMPPS $0x11, Z31, Z0, K7, K1; VMOVAPS Z31, K1, Z0
#define ZNORELU

// ZPUT16(p, RELU): the 16 float64 of Z0, Z1 narrowed to float32,
// rectified by RELU and rounded to bfloat16 at (p).
#define ZPUT16(p, RELU) \
	VCVTPD2PS Z0, Y0; VCVTPD2PS Z1, Y1; VINSERTF64X4 $1, Y1, Z0, Z0; \
	RELU; TOBF16512(Z0, Z2, Z3, K2); VPMOVDW Z0, Y0; VMOVDQU Y0, (p)

// LDZ8(p), STZ8(p): Z0–Z7 = the 64 float64 at (p), and back.
#define LDZ8(p) \
	VMOVUPD (p), Z0; VMOVUPD 64(p), Z1; VMOVUPD 128(p), Z2; VMOVUPD 192(p), Z3; \
	VMOVUPD 256(p), Z4; VMOVUPD 320(p), Z5; VMOVUPD 384(p), Z6; VMOVUPD 448(p), Z7
#define STZ8(p) \
	VMOVUPD Z0, (p); VMOVUPD Z1, 64(p); VMOVUPD Z2, 128(p); VMOVUPD Z3, 192(p); \
	VMOVUPD Z4, 256(p); VMOVUPD Z5, 320(p); VMOVUPD Z6, 384(p); VMOVUPD Z7, 448(p)

// ZCVT8(p): Z16–Z23 = the 64 bfloat16 at (p) widened to float64.
#define ZCVT8(p) \
	ZCVT(0, p, Y16, Z16); ZCVT(16, p, Y17, Z17); ZCVT(32, p, Y18, Z18); ZCVT(48, p, Y19, Z19); \
	ZCVT(64, p, Y20, Z20); ZCVT(80, p, Y21, Z21); ZCVT(96, p, Y22, Z22); ZCVT(112, p, Y23, Z23)

// func colSumHAVX512(s []float64, x []uint16, rows int)
TEXT ·colSumHAVX512(SB), NOSPLIT, $0-56
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ rows+48(FP), CX
	IFZERO(CX, zsdone)
	MOVQ BX, R8
	SHLQ $1, R8
	// 64 channels at a time while they last: eight sums in flight, where
	// one block's two waited on each other's latency, row by row.
zs64:
	CMPQ BX, $64
	JB zs16
	LDZ8(DI)
	COLROWS
zs64row:
	ZCVT8(R9)
	VADDPD Z16, Z0, Z0
	VADDPD Z17, Z1, Z1
	VADDPD Z18, Z2, Z2
	VADDPD Z19, Z3, Z3
	VADDPD Z20, Z4, Z4
	VADDPD Z21, Z5, Z5
	VADDPD Z22, Z6, Z6
	VADDPD Z23, Z7, Z7
	COLNEXT(zs64row)
	STZ8(DI)
	ADDQ $512, DI
	ADDQ $128, SI
	AGAIN(BX, 64, zs64)
zs16:
	IFZERO(BX, zsdone)
	VMOVUPD (DI), Z0
	VMOVUPD 64(DI), Z1
	COLROWS
zsrow:
	ZCVT(0, R9, Y4, Z4)
	ZCVT(16, R9, Y5, Z5)
	VADDPD Z4, Z0, Z0
	VADDPD Z5, Z1, Z1
	COLNEXT(zsrow)
	VMOVUPD Z0, (DI)
	VMOVUPD Z1, 64(DI)
	ADDQ $128, DI
	ADDQ $32, SI
	AGAIN(BX, 16, zs16)
zsdone:
	VRET

// func colSqDevHAVX512(s []float64, x []uint16, m []float64, rows int)
TEXT ·colSqDevHAVX512(SB), NOSPLIT, $0-80
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ m_base+48(FP), DX
	MOVQ rows+72(FP), CX
	IFZERO(CX, zqdone)
	MOVQ BX, R8
	SHLQ $1, R8
zq64:
	CMPQ BX, $64
	JB zq16
	LDZ8(DI)
	VMOVUPD (DX), Z8
	VMOVUPD 64(DX), Z9
	VMOVUPD 128(DX), Z10
	VMOVUPD 192(DX), Z11
	VMOVUPD 256(DX), Z12
	VMOVUPD 320(DX), Z13
	VMOVUPD 384(DX), Z14
	VMOVUPD 448(DX), Z15
	COLROWS
zq64row:
	ZCVT8(R9)
	VSUBPD Z8, Z16, Z16
	VSUBPD Z9, Z17, Z17
	VSUBPD Z10, Z18, Z18
	VSUBPD Z11, Z19, Z19
	VSUBPD Z12, Z20, Z20
	VSUBPD Z13, Z21, Z21
	VSUBPD Z14, Z22, Z22
	VSUBPD Z15, Z23, Z23
	VFMADD231PD Z16, Z16, Z0
	VFMADD231PD Z17, Z17, Z1
	VFMADD231PD Z18, Z18, Z2
	VFMADD231PD Z19, Z19, Z3
	VFMADD231PD Z20, Z20, Z4
	VFMADD231PD Z21, Z21, Z5
	VFMADD231PD Z22, Z22, Z6
	VFMADD231PD Z23, Z23, Z7
	COLNEXT(zq64row)
	STZ8(DI)
	ADDQ2(512, DI, DX)
	ADDQ $128, SI
	AGAIN(BX, 64, zq64)
zq16:
	IFZERO(BX, zqdone)
	VMOVUPD (DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD (DX), Z8
	VMOVUPD 64(DX), Z9
	COLROWS
zqrow:
	ZCVT(0, R9, Y4, Z4)
	ZCVT(16, R9, Y5, Z5)
	VSUBPD Z8, Z4, Z4
	VSUBPD Z9, Z5, Z5
	VFMADD231PD Z4, Z4, Z0
	VFMADD231PD Z5, Z5, Z1
	COLNEXT(zqrow)
	VMOVUPD Z0, (DI)
	VMOVUPD Z1, 64(DI)
	ADDQ2(128, DI, DX)
	ADDQ $32, SI
	AGAIN(BX, 16, zq16)
zqdone:
	VRET

// func colGradSumsHAVX512(s1, s2 []float64, g, x []uint16, m []float64, rows int)
TEXT ·colGradSumsHAVX512(SB), NOSPLIT, $0-128
	MOVQ s1_base+0(FP), DI
	MOVQ s1_len+8(FP), BX
	MOVQ s2_base+24(FP), R11
	MOVQ g_base+48(FP), SI
	MOVQ x_base+72(FP), R12
	MOVQ m_base+96(FP), DX
	MOVQ rows+120(FP), CX
	IFZERO(CX, zgdone)
	MOVQ BX, R8
	SHLQ $1, R8
zg16:
	IFZERO(BX, zgdone)
	VMOVUPD (DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD (R11), Z2
	VMOVUPD 64(R11), Z3
	VMOVUPD (DX), Z8
	VMOVUPD 64(DX), Z9
	COLROWS2
zgrow:
	ZCVT(0, R9, Y12, Z12)
	ZCVT(16, R9, Y13, Z13)
	ZCVT(0, R13, Y14, Z14)
	ZCVT(16, R13, Y15, Z15)
	VSUBPD Z8, Z14, Z14
	VSUBPD Z9, Z15, Z15
	VADDPD Z12, Z0, Z0
	VADDPD Z13, Z1, Z1
	VFMADD231PD Z12, Z14, Z2
	VFMADD231PD Z13, Z15, Z3
	COLNEXT2(zgrow)
	VMOVUPD Z0, (DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, (R11)
	VMOVUPD Z3, 64(R11)
	ADDQ3(128, DI, R11, DX)
	ADDQ2(32, SI, R12)
	AGAIN(BX, 16, zg16)
zgdone:
	VRET

// func colAffineHAVX512(y, x []uint16, a, b []float64, rows int, relu bool)
TEXT ·colAffineHAVX512(SB), NOSPLIT, $0-105
	MOVQ y_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ a_base+48(FP), R11
	MOVQ a_len+56(FP), R12
	MOVQ b_base+72(FP), R13
	MOVQ rows+96(FP), CX
	CVTCONSTS512
	MOVBLZX relu+104(FP), AX
	NEGL AX
	KMOVW AX, K7
	VPXORD Z31, Z31, Z31
	IFZERO(CX, zadone)
zarow:
	MOVQ R11, BX
	MOVQ R13, DX
	MOVQ R12, R8
za16:
	IFZERO(R8, zanext)
	ZCVT(0, SI, Y0, Z0)
	ZCVT(16, SI, Y1, Z1)
	VMULPD (BX), Z0, Z0
	VMULPD 64(BX), Z1, Z1
	VADDPD (DX), Z0, Z0
	VADDPD 64(DX), Z1, Z1
	ZPUT16(DI, ZRELU)
	ADDQ2(32, SI, DI)
	ADDQ2(128, BX, DX)
	AGAIN(R8, 16, za16)
zanext:
	DECJNZ(CX, zarow)
zadone:
	VRET

// func colAffine2HAVX512(y, u, v []uint16, p, q, r []float64, rows int)
TEXT ·colAffine2HAVX512(SB), NOSPLIT, $0-152
	MOVQ y_base+0(FP), DI
	MOVQ u_base+24(FP), SI
	MOVQ v_base+48(FP), R8
	MOVQ p_base+72(FP), R11
	MOVQ p_len+80(FP), R12
	MOVQ rows+144(FP), CX
	CVTCONSTS512
	IFZERO(CX, zbdone)
zbrow:
	MOVQ R11, BX
	MOVQ q_base+96(FP), R9
	MOVQ r_base+120(FP), DX
	MOVQ R12, R10
zb16:
	IFZERO(R10, zbnext)
	ZCVT(0, SI, Y0, Z0)
	ZCVT(16, SI, Y1, Z1)
	ZCVT(0, R8, Y4, Z4)
	ZCVT(16, R8, Y6, Z6)
	VMULPD (BX), Z0, Z0
	VMULPD 64(BX), Z1, Z1
	VMULPD (R9), Z4, Z4
	VMULPD 64(R9), Z6, Z6
	VADDPD Z4, Z0, Z0
	VADDPD Z6, Z1, Z1
	VADDPD (DX), Z0, Z0
	VADDPD 64(DX), Z1, Z1
	ZPUT16(DI, ZNORELU)
	ADDQ3(32, SI, R8, DI)
	ADDQ3(128, BX, R9, DX)
	AGAIN(R10, 16, zb16)
zbnext:
	DECJNZ(CX, zbrow)
zbdone:
	VRET
