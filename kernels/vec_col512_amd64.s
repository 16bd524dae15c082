//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"
#include "colwalk_amd64.h"
#include "colwalk512_amd64.h"

// The AVX-512 column sums of colwalk512_amd64.h on float32 rows. The
// float32 maps stay AVX2: on Zen 4, which splits each 512-bit operation in
// two, ZMM forms of colAffine and colAffine2 were 1–3 % slower in L1 (the
// sums 7–27 % faster), their narrowing conversions costing more in ZMM.

// ZF32(off, p, y, z): z = the eight float32 at off(p) widened to float64.
#define ZF32(off, p, y, z) VCVTPS2PD off(p), z

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
