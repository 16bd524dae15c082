//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"
#include "colwalk_amd64.h"
#include "colwalk512_amd64.h"

// The AVX-512 column primitives of colwalk512_amd64.h on float32 rows.

// ZF32(off, p, y, z): z = the eight float32 at off(p) widened to float64.
#define ZF32(off, p, y, z) VCVTPS2PD off(p), z

// ZF32PUT(p): the 16 float64 of Z0, Z1 narrowed to float32 at (p).
#define ZF32PUT(p) VCVTPD2PS Z0, Y0; VCVTPD2PS Z1, Y1; VMOVUPS Y0, (p); VMOVUPS Y1, 32(p)

// func colSumAVX512(s []float64, x []float32, rows int)
TEXT ·colSumAVX512(SB), NOSPLIT, $0-56
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ rows+48(FP), CX
	IFZERO(CX, zsdone)
	MOVQ BX, R8
	SHLQ $2, R8
	ZCOLSUM(ZF32, 4, zs64, zs64row, zs16, zsrow, zsdone)
zsdone:
	VRET

// func colSqDevAVX512(s []float64, x []float32, m []float64, rows int)
TEXT ·colSqDevAVX512(SB), NOSPLIT, $0-80
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ m_base+48(FP), DX
	MOVQ rows+72(FP), CX
	IFZERO(CX, zqdone)
	MOVQ BX, R8
	SHLQ $2, R8
	ZCOLSQDEV(ZF32, 4, zq64, zq64row, zq16, zqrow, zqdone)
zqdone:
	VRET

// func colGradSumsAVX512(s1, s2 []float64, g, x []float32, m []float64, rows int)
TEXT ·colGradSumsAVX512(SB), NOSPLIT, $0-128
	MOVQ s1_base+0(FP), DI
	MOVQ s1_len+8(FP), BX
	MOVQ s2_base+24(FP), R11
	MOVQ g_base+48(FP), SI
	MOVQ x_base+72(FP), R12
	MOVQ m_base+96(FP), DX
	MOVQ rows+120(FP), CX
	IFZERO(CX, zgdone)
	MOVQ BX, R8
	SHLQ $2, R8
	ZCOLGRADSUMS(ZF32, 4, zg16, zgrow, zgdone)
zgdone:
	VRET

// func colAffineAVX512(y, x []float32, a, b []float64, rows int)
TEXT ·colAffineAVX512(SB), NOSPLIT, $0-104
	MOVQ y_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ a_base+48(FP), R11
	MOVQ a_len+56(FP), R12
	MOVQ b_base+72(FP), R13
	MOVQ rows+96(FP), CX
	IFZERO(CX, zadone)
	ZCOLAFFINE(ZF32, ZF32PUT, 4, zarow, za16, zanext)
zadone:
	VRET

// func colAffine2AVX512(y, u, v []float32, p, q, r []float64, rows int)
TEXT ·colAffine2AVX512(SB), NOSPLIT, $0-152
	MOVQ y_base+0(FP), DI
	MOVQ u_base+24(FP), SI
	MOVQ v_base+48(FP), R8
	MOVQ p_base+72(FP), R11
	MOVQ p_len+80(FP), R12
	MOVQ rows+144(FP), CX
	IFZERO(CX, zbdone)
	ZCOLAFFINE2(ZF32, ZF32PUT, 4, zbrow, zb16, zbnext)
zbdone:
	VRET
