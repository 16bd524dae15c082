//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"
#include "tobf16_amd64.h"

// The column primitives of vec_amd64.s on bfloat16 rows. Each value is
// widened exactly (the 16 bits moved to the top of a float32) where the
// float32 primitive loads it, and every later instruction is the float32
// primitive's, in the same order, so sums and maps come out bit for bit as
// the float32 primitive's on the widened rows; the maps' float32 results
// are rounded with TOBF16 (after the rectifier in the ReLU forms) as
// F32ToBF16 rounds them. Channel blocks are 16, 4 and 1 for the sums and
// 8, 4 and 1 for the maps, as in vec_amd64.s.

// HCVT(off, p, x, y): y = the four bfloat16 at off(p) widened to float64
// (x is y's low half).
#define HCVT(off, p, x, y) VPMOVZXWD off(p), x; VPSLLD $16, x, x; VCVTPS2PD x, y
// HCVT4(p, a, b, c, d): a…d = the 16 bfloat16 at (p) widened to float64.
#define HCVT4(p, a, b, c, d, xa, xb, xc, xd) HCVT(0, p, xa, a); HCVT(8, p, xb, b); HCVT(16, p, xc, c); HCVT(24, p, xd, d)
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

// func colSumHAVX2(s []float64, x []uint16, rows int)
TEXT ·colSumHAVX2(SB), NOSPLIT, $0-56
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ rows+48(FP), CX
	IFZERO(CX, hsdone)
	MOVQ BX, R8
	SHLQ $1, R8
hs16:
	BELOW(BX, 16, hs4)
	LD4(VMOVUPD, DI, Y0, Y1, Y2, Y3)
	COLROWS
hs16row:
	HCVT4(R9, Y4, Y5, Y6, Y7, X4, X5, X6, X7)
	ACC4(VADDPD, Y4, Y5, Y6, Y7, Y0, Y1, Y2, Y3)
	COLNEXT(hs16row)
	ST4(VMOVUPD, DI, Y0, Y1, Y2, Y3)
	ADDQ $128, DI
	ADDQ $32, SI
	AGAIN(BX, 16, hs16)
hs4:
	BELOW(BX, 4, hs1)
	VMOVUPD (DI), Y0
	COLROWS
hs4row:
	HCVT(0, R9, X4, Y4)
	VADDPD Y4, Y0, Y0
	COLNEXT(hs4row)
	VMOVUPD Y0, (DI)
	ADDQ $32, DI
	ADDQ $8, SI
	AGAIN(BX, 4, hs4)
hs1:
	IFZERO(BX, hsdone)
	VMOVSD (DI), X0
	COLROWS
hs1row:
	HCVT1(R9, X4)
	VADDSD X4, X0, X0
	COLNEXT(hs1row)
	VMOVSD X0, (DI)
	ADDQ $8, DI
	ADDQ $2, SI
	AGAIN1(BX, hs1)
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
hq16:
	BELOW(BX, 16, hq4)
	LD4(VMOVUPD, DI, Y0, Y1, Y2, Y3)
	LD4(VMOVUPD, DX, Y8, Y9, Y10, Y11)
	COLROWS
hq16row:
	HCVT4(R9, Y4, Y5, Y6, Y7, X4, X5, X6, X7)
	ACC4(VSUBPD, Y8, Y9, Y10, Y11, Y4, Y5, Y6, Y7)
	FMA4(Y4, Y5, Y6, Y7, Y4, Y5, Y6, Y7, Y0, Y1, Y2, Y3)
	COLNEXT(hq16row)
	ST4(VMOVUPD, DI, Y0, Y1, Y2, Y3)
	ADDQ2(128, DI, DX)
	ADDQ $32, SI
	AGAIN(BX, 16, hq16)
hq4:
	BELOW(BX, 4, hq1)
	VMOVUPD (DI), Y0
	VMOVUPD (DX), Y8
	COLROWS
hq4row:
	HCVT(0, R9, X4, Y4)
	VSUBPD Y8, Y4, Y4
	VFMADD231PD Y4, Y4, Y0
	COLNEXT(hq4row)
	VMOVUPD Y0, (DI)
	ADDQ2(32, DI, DX)
	ADDQ $8, SI
	AGAIN(BX, 4, hq4)
hq1:
	IFZERO(BX, hqdone)
	VMOVSD (DI), X0
	VMOVSD (DX), X8
	COLROWS
hq1row:
	HCVT1(R9, X4)
	VSUBSD X8, X4, X4
	VFMADD231SD X4, X4, X0
	COLNEXT(hq1row)
	VMOVSD X0, (DI)
	ADDQ2(8, DI, DX)
	ADDQ $2, SI
	AGAIN1(BX, hq1)
hqdone:
	VRET

// HGRAD(off): one block of four channels of colGradSums, g at off(R9),
// x at off(R13), m, s1 and s2 in the registers named.
#define HGRAD(off, m, s1, s2) \
	HCVT(off, R9, X12, Y12);  \
	HCVT(off, R13, X13, Y13); \
	VSUBPD m, Y13, Y13;        \
	VADDPD Y12, s1, s1;        \
	VFMADD231PD Y12, Y13, s2

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
hg16:
	BELOW(BX, 16, hg4)
	LD4(VMOVUPD, DI, Y0, Y1, Y2, Y3)
	LD4(VMOVUPD, R11, Y4, Y5, Y6, Y7)
	LD4(VMOVUPD, DX, Y8, Y9, Y10, Y11)
	COLROWS2
hg16row:
	HGRAD(0, Y8, Y0, Y4)
	HGRAD(8, Y9, Y1, Y5)
	HGRAD(16, Y10, Y2, Y6)
	HGRAD(24, Y11, Y3, Y7)
	COLNEXT2(hg16row)
	ST4(VMOVUPD, DI, Y0, Y1, Y2, Y3)
	ST4(VMOVUPD, R11, Y4, Y5, Y6, Y7)
	ADDQ3(128, DI, R11, DX)
	ADDQ2(32, SI, R12)
	AGAIN(BX, 16, hg16)
hg4:
	BELOW(BX, 4, hg1)
	VMOVUPD (DI), Y0
	VMOVUPD (R11), Y4
	VMOVUPD (DX), Y8
	COLROWS2
hg4row:
	HGRAD(0, Y8, Y0, Y4)
	COLNEXT2(hg4row)
	VMOVUPD Y0, (DI)
	VMOVUPD Y4, (R11)
	ADDQ3(32, DI, R11, DX)
	ADDQ2(8, SI, R12)
	AGAIN(BX, 4, hg4)
hg1:
	IFZERO(BX, hgdone)
	VMOVSD (DI), X0
	VMOVSD (R11), X4
	VMOVSD (DX), X8
	COLROWS2
hg1row:
	HCVT1(R9, X12)
	HCVT1(R13, X13)
	VSUBSD X8, X13, X13
	VADDSD X12, X0, X0
	VFMADD231SD X12, X13, X4
	COLNEXT2(hg1row)
	VMOVSD X0, (DI)
	VMOVSD X4, (R11)
	ADDQ3(8, DI, R11, DX)
	ADDQ2(2, SI, R12)
	AGAIN1(BX, hg1)
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
harow:
	MOVQ R11, BX
	MOVQ R13, DX
	MOVQ R12, R8
ha8:
	BELOW(R8, 8, ha4)
	HCVT(0, SI, X0, Y0)
	HCVT(8, SI, X1, Y1)
	MEM2(VMULPD, BX, Y0, Y1)
	MEM2(VADDPD, DX, Y0, Y1)
	HPUT8(DI, RELUX)
	ADDQ2(16, SI, DI)
	ADDQ2(64, BX, DX)
	AGAIN(R8, 8, ha8)
ha4:
	BELOW(R8, 4, ha1)
	HCVT(0, SI, X0, Y0)
	VMULPD (BX), Y0, Y0
	VADDPD (DX), Y0, Y0
	HPUT4(DI, RELUX)
	ADDQ2(8, SI, DI)
	ADDQ2(32, BX, DX)
	SUBQ $4, R8
ha1:
	IFZERO(R8, hanext)
	HCVT1(SI, X0)
	VMULSD (BX), X0, X0
	VADDSD (DX), X0, X0
	HPUT1(DI, RELUX)
	ADDQ2(2, SI, DI)
	ADDQ2(8, BX, DX)
	AGAIN1(R8, ha1)
hanext:
	DECJNZ(CX, harow)
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
hbrow:
	MOVQ R11, BX
	MOVQ q_base+96(FP), R9
	MOVQ r_base+120(FP), DX
	MOVQ R12, R10
hb8:
	BELOW(R10, 8, hb4)
	HCVT(0, SI, X0, Y0)
	HCVT(8, SI, X1, Y1)
	HCVT(0, R8, X4, Y4)
	HCVT(8, R8, X6, Y6)
	MEM2(VMULPD, BX, Y0, Y1)
	MEM2(VMULPD, R9, Y4, Y6)
	ACC2(VADDPD, Y4, Y6, Y0, Y1)
	MEM2(VADDPD, DX, Y0, Y1)
	HPUT8(DI, NORELU)
	ADDQ3(16, SI, R8, DI)
	ADDQ3(64, BX, R9, DX)
	AGAIN(R10, 8, hb8)
hb4:
	BELOW(R10, 4, hb1)
	HCVT(0, SI, X0, Y0)
	HCVT(0, R8, X4, Y4)
	VMULPD (BX), Y0, Y0
	VMULPD (R9), Y4, Y4
	VADDPD Y4, Y0, Y0
	VADDPD (DX), Y0, Y0
	HPUT4(DI, NORELU)
	ADDQ3(8, SI, R8, DI)
	ADDQ3(32, BX, R9, DX)
	SUBQ $4, R10
hb1:
	IFZERO(R10, hbnext)
	HCVT1(SI, X0)
	HCVT1(R8, X4)
	VMULSD (BX), X0, X0
	VMULSD (R9), X4, X4
	VADDSD X4, X0, X0
	VADDSD (DX), X0, X0
	HPUT1(DI, NORELU)
	ADDQ3(2, SI, R8, DI)
	ADDQ3(8, BX, R9, DX)
	AGAIN1(R10, hb1)
hbnext:
	DECJNZ(CX, hbrow)
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

// func colSumHAVX512(s []float64, x []uint16, rows int)
TEXT ·colSumHAVX512(SB), NOSPLIT, $0-56
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ rows+48(FP), CX
	IFZERO(CX, zsdone)
	MOVQ BX, R8
	SHLQ $1, R8
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
