//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"
#include "tobf16_amd64.h"
#include "colwalk_amd64.h"
#include "colwalk512_amd64.h"

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

// The AVX-512 forms of colwalk512_amd64.h.

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
#define ZPUTR(p) ZPUT16(p, ZRELU)
#define ZPUTN(p) ZPUT16(p, ZNORELU)

// func colSumHAVX512(s []float64, x []uint16, rows int)
TEXT ·colSumHAVX512(SB), NOSPLIT, $0-56
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ rows+48(FP), CX
	IFZERO(CX, zsdone)
	MOVQ BX, R8
	SHLQ $1, R8
	ZCOLSUM(ZCVT, 2, zs64, zs64row, zs16, zsrow, zsdone)
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
	ZCOLSQDEV(ZCVT, 2, zq64, zq64row, zq16, zqrow, zqdone)
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
	ZCOLGRADSUMS(ZCVT, 2, zg16, zgrow, zgdone)
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
	ZCOLAFFINE(ZCVT, ZPUTR, 2, zarow, za16, zanext)
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
	ZCOLAFFINE2(ZCVT, ZPUTN, 2, zbrow, zb16, zbnext)
zbdone:
	VRET
