//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"
#include "colwalk_amd64.h"

// AVX2 row primitives; see vec.go for what each computes. Float32 data is
// widened to float64 four lanes at a time (VCVTPS2PD) wherever the
// reference works in float64. Main loops take 8 or 16 elements, then a
// 4-element loop, then a scalar loop finishes the tail, so no access goes
// past a slice. Register use stays within AX-DX, SI, DI, R8-R13 and
// Y0-Y14.

// func sumAVX2(x []float32) float64
TEXT ·sumAVX2(SB), NOSPLIT, $0-32
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	ZERO4(VXORPD, Y0, Y1, Y2, Y3)
sum16:
	BELOW(CX, 16, sum4)
	CVT4(SI, Y4, Y5, Y6, Y7)
	ACC4(VADDPD, Y4, Y5, Y6, Y7, Y0, Y1, Y2, Y3)
	ADDQ $64, SI
	AGAIN(CX, 16, sum16)
sum4:
	BELOW(CX, 4, sumred)
	VCVTPS2PD (SI), Y4
	VADDPD Y4, Y0, Y0
	ADDQ $16, SI
	AGAIN(CX, 4, sum4)
sumred:
	REDUCE4PD
	IFZERO(CX, sumdone)
sum1:
	VCVTSS2SD (SI), X4, X4
	VADDSD X4, X0, X0
	ADDQ $4, SI
	DECJNZ(CX, sum1)
sumdone:
	VMOVSD X0, ret+24(FP)
	VRET

// func sqDevAVX2(x []float32, m float64) float64
TEXT ·sqDevAVX2(SB), NOSPLIT, $0-40
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	VBROADCASTSD m+24(FP), Y8
	ZERO4(VXORPD, Y0, Y1, Y2, Y3)
sq16:
	BELOW(CX, 16, sq4)
	CVT4(SI, Y4, Y5, Y6, Y7)
	OP4(VSUBPD, Y8, Y4, Y5, Y6, Y7)
	FMA4(Y4, Y5, Y6, Y7, Y4, Y5, Y6, Y7, Y0, Y1, Y2, Y3)
	ADDQ $64, SI
	AGAIN(CX, 16, sq16)
sq4:
	BELOW(CX, 4, sqred)
	VCVTPS2PD (SI), Y4
	VSUBPD Y8, Y4, Y4
	VFMADD231PD Y4, Y4, Y0
	ADDQ $16, SI
	AGAIN(CX, 4, sq4)
sqred:
	REDUCE4PD
	IFZERO(CX, sqdone)
sq1:
	VCVTSS2SD (SI), X4, X4
	VSUBSD X8, X4, X4
	VFMADD231SD X4, X4, X0
	ADDQ $4, SI
	DECJNZ(CX, sq1)
sqdone:
	VMOVSD X0, ret+32(FP)
	VRET

// func gradSumsAVX2(g, x []float32, m float64) (sg, sgx float64)
TEXT ·gradSumsAVX2(SB), NOSPLIT, $0-72
	MOVQ g_base+0(FP), SI
	MOVQ g_len+8(FP), CX
	MOVQ x_base+24(FP), DX
	VBROADCASTSD m+48(FP), Y8
	VXORPD Y0, Y0, Y0 // Σg
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2 // Σg·(x−m)
	VXORPD Y3, Y3, Y3
gs8:
	BELOW(CX, 8, gs4)
	CVT2(SI, Y4, Y5)
	CVT2(DX, Y6, Y7)
	OP2(VSUBPD, Y8, Y6, Y7)
	ACC2(VADDPD, Y4, Y5, Y0, Y1)
	VFMADD231PD Y4, Y6, Y2
	VFMADD231PD Y5, Y7, Y3
	ADDQ2(32, SI, DX)
	AGAIN(CX, 8, gs8)
gs4:
	BELOW(CX, 4, gsred)
	VCVTPS2PD (SI), Y4
	VCVTPS2PD (DX), Y6
	VSUBPD Y8, Y6, Y6
	VADDPD Y4, Y0, Y0
	VFMADD231PD Y4, Y6, Y2
	ADDQ2(16, SI, DX)
	SUBQ $4, CX
gsred:
	REDUCE2x2PD
	IFZERO(CX, gsdone)
gs1:
	VCVTSS2SD (SI), X4, X4
	VCVTSS2SD (DX), X6, X6
	VSUBSD X8, X6, X6
	VADDSD X4, X0, X0
	VFMADD231SD X4, X6, X2
	ADDQ2(4, SI, DX)
	DECJNZ(CX, gs1)
gsdone:
	VMOVSD X0, sg+56(FP)
	VMOVSD X2, sgx+64(FP)
	VRET

// func gradSumsWAVX2(dy, w, x []float32, m float64) (sg, sgx float64)
TEXT ·gradSumsWAVX2(SB), NOSPLIT, $0-96
	MOVQ dy_base+0(FP), SI
	MOVQ dy_len+8(FP), CX
	MOVQ w_base+24(FP), BX
	MOVQ x_base+48(FP), DX
	VBROADCASTSD m+72(FP), Y8
	ZERO4(VXORPD, Y0, Y1, Y2, Y3)
gw8:
	BELOW(CX, 8, gw4)
	CVT2(SI, Y4, Y5)
	CVT2(BX, Y9, Y10)
	ACC2(VMULPD, Y9, Y10, Y4, Y5)
	CVT2(DX, Y6, Y7)
	OP2(VSUBPD, Y8, Y6, Y7)
	ACC2(VADDPD, Y4, Y5, Y0, Y1)
	VFMADD231PD Y4, Y6, Y2
	VFMADD231PD Y5, Y7, Y3
	ADDQ3(32, SI, BX, DX)
	AGAIN(CX, 8, gw8)
gw4:
	BELOW(CX, 4, gwred)
	VCVTPS2PD (SI), Y4
	VCVTPS2PD (BX), Y9
	VMULPD Y9, Y4, Y4
	VCVTPS2PD (DX), Y6
	VSUBPD Y8, Y6, Y6
	VADDPD Y4, Y0, Y0
	VFMADD231PD Y4, Y6, Y2
	ADDQ3(16, SI, BX, DX)
	SUBQ $4, CX
gwred:
	REDUCE2x2PD
	IFZERO(CX, gwdone)
gw1:
	VCVTSS2SD (SI), X4, X4
	VCVTSS2SD (BX), X9, X9
	VMULSD X9, X4, X4
	VCVTSS2SD (DX), X6, X6
	VSUBSD X8, X6, X6
	VADDSD X4, X0, X0
	VFMADD231SD X4, X6, X2
	ADDQ3(4, SI, BX, DX)
	DECJNZ(CX, gw1)
gwdone:
	VMOVSD X0, sg+80(FP)
	VMOVSD X2, sgx+88(FP)
	VRET

// func dotAVX2(a, b []float32) float64
TEXT ·dotAVX2(SB), NOSPLIT, $0-56
	MOVQ a_base+0(FP), SI
	MOVQ a_len+8(FP), CX
	MOVQ b_base+24(FP), DX
	ZERO4(VXORPD, Y0, Y1, Y2, Y3)
dot16:
	BELOW(CX, 16, dot4)
	CVT4(SI, Y4, Y5, Y6, Y7)
	CVT4(DX, Y8, Y9, Y10, Y11)
	FMA4(Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y0, Y1, Y2, Y3)
	ADDQ2(64, SI, DX)
	AGAIN(CX, 16, dot16)
dot4:
	BELOW(CX, 4, dotred)
	VCVTPS2PD (SI), Y4
	VCVTPS2PD (DX), Y8
	VFMADD231PD Y4, Y8, Y0
	ADDQ2(16, SI, DX)
	AGAIN(CX, 4, dot4)
dotred:
	REDUCE4PD
	IFZERO(CX, dotdone)
dot1:
	VCVTSS2SD (SI), X4, X4
	VCVTSS2SD (DX), X8, X8
	VFMADD231SD X4, X8, X0
	ADDQ2(4, SI, DX)
	DECJNZ(CX, dot1)
dotdone:
	VMOVSD X0, ret+48(FP)
	VRET

// The column primitives expand colwalk_amd64.h with float32 elements.
#define F32Q(off, p, x, y) VCVTPS2PD off(p), y
#define F32S(p, x) VCVTSS2SD (p), x, x

// func colSumAVX2(s []float64, x []float32, rows int)
TEXT ·colSumAVX2(SB), NOSPLIT, $0-56
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ rows+48(FP), CX
	IFZERO(CX, csdone)
	MOVQ BX, R8
	SHLQ $2, R8
	COLSUM(F32Q, F32S, 4, cs16, cs16row, cs4, cs4row, cs1, cs1row, csdone)
csdone:
	VRET

// func colSqDevAVX2(s []float64, x []float32, m []float64, rows int)
TEXT ·colSqDevAVX2(SB), NOSPLIT, $0-80
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ m_base+48(FP), DX
	MOVQ rows+72(FP), CX
	IFZERO(CX, cqdone)
	MOVQ BX, R8
	SHLQ $2, R8
	COLSQDEV(F32Q, F32S, 4, cq16, cq16row, cq4, cq4row, cq1, cq1row, cqdone)
cqdone:
	VRET

// func colGradSumsAVX2(s1, s2 []float64, g, x []float32, m []float64, rows int)
TEXT ·colGradSumsAVX2(SB), NOSPLIT, $0-128
	MOVQ s1_base+0(FP), DI
	MOVQ s1_len+8(FP), BX
	MOVQ s2_base+24(FP), R11
	MOVQ g_base+48(FP), SI
	MOVQ x_base+72(FP), R12
	MOVQ m_base+96(FP), DX
	MOVQ rows+120(FP), CX
	IFZERO(CX, cgdone)
	MOVQ BX, R8
	SHLQ $2, R8
	COLGRADSUMS(F32Q, F32S, 4, cg16, cg16row, cg4, cg4row, cg1, cg1row, cgdone)
cgdone:
	VRET

// func affineAVX2(y, x []float32, a, b float64)
TEXT ·affineAVX2(SB), NOSPLIT, $0-64
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	VBROADCASTSD a+48(FP), Y8
	VBROADCASTSD b+56(FP), Y9
af16:
	BELOW(CX, 16, af4)
	CVT4(SI, Y0, Y1, Y2, Y3)
	OP4(VMULPD, Y8, Y0, Y1, Y2, Y3)
	OP4(VADDPD, Y9, Y0, Y1, Y2, Y3)
	PUT16(DI)
	ADDQ2(64, SI, DI)
	AGAIN(CX, 16, af16)
af4:
	BELOW(CX, 4, af1)
	VCVTPS2PD (SI), Y0
	VMULPD Y8, Y0, Y0
	VADDPD Y9, Y0, Y0
	PUT4(DI)
	ADDQ2(16, SI, DI)
	AGAIN(CX, 4, af4)
af1:
	IFZERO(CX, afdone)
	VCVTSS2SD (SI), X0, X0
	VMULSD X8, X0, X0
	VADDSD X9, X0, X0
	PUT1(DI)
	ADDQ2(4, SI, DI)
	AGAIN1(CX, af1)
afdone:
	VRET

// func affine2AVX2(y, u, v []float32, p, q, r float64)
TEXT ·affine2AVX2(SB), NOSPLIT, $0-96
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ u_base+24(FP), SI
	MOVQ v_base+48(FP), DX
	VBROADCASTSD p+72(FP), Y8
	VBROADCASTSD q+80(FP), Y9
	VBROADCASTSD r+88(FP), Y10
a28:
	BELOW(CX, 8, a24)
	CVT2(SI, Y0, Y1)
	CVT2(DX, Y2, Y3)
	ACC4(VMULPD, Y8, Y8, Y9, Y9, Y0, Y1, Y2, Y3)
	ACC2(VADDPD, Y2, Y3, Y0, Y1)
	OP2(VADDPD, Y10, Y0, Y1)
	PUT8(DI)
	ADDQ3(32, SI, DX, DI)
	AGAIN(CX, 8, a28)
a24:
	BELOW(CX, 4, a21)
	VCVTPS2PD (SI), Y0
	VCVTPS2PD (DX), Y2
	ACC2(VMULPD, Y8, Y9, Y0, Y2)
	VADDPD Y2, Y0, Y0
	VADDPD Y10, Y0, Y0
	PUT4(DI)
	ADDQ3(16, SI, DX, DI)
	SUBQ $4, CX
a21:
	IFZERO(CX, a2done)
	VCVTSS2SD (SI), X0, X0
	VCVTSS2SD (DX), X2, X2
	ACC2(VMULSD, X8, X9, X0, X2)
	VADDSD X2, X0, X0
	VADDSD X10, X0, X0
	PUT1(DI)
	ADDQ3(4, SI, DX, DI)
	AGAIN1(CX, a21)
a2done:
	VRET

// func colAffineAVX2(y, x []float32, a, b []float64, rows int)
TEXT ·colAffineAVX2(SB), NOSPLIT, $0-104
	MOVQ y_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ a_base+48(FP), R11
	MOVQ a_len+56(FP), R12
	MOVQ b_base+72(FP), R13
	MOVQ rows+96(FP), CX
	IFZERO(CX, cadone)
	COLAFFINE(F32Q, F32S, PUT8, PUT4, PUT1, 4, carow, ca8, ca4, ca1, canext)
cadone:
	VRET

// func colAffine2AVX2(y, u, v []float32, p, q, r []float64, rows int)
TEXT ·colAffine2AVX2(SB), NOSPLIT, $0-152
	MOVQ y_base+0(FP), DI
	MOVQ u_base+24(FP), SI
	MOVQ v_base+48(FP), R8
	MOVQ p_base+72(FP), R11
	MOVQ p_len+80(FP), R12
	MOVQ rows+144(FP), CX
	IFZERO(CX, cbdone)
	COLAFFINE2(F32Q, F32S, PUT8, PUT4, PUT1, 4, cbrow, cb8, cb4, cb1, cbnext)
cbdone:
	VRET

// func lnNormAVX2(y, x []float32, m, rs float64)
TEXT ·lnNormAVX2(SB), NOSPLIT, $0-64
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	VBROADCASTSD m+48(FP), Y8
	VBROADCASTSD rs+56(FP), Y9
ln8:
	BELOW(CX, 8, ln4)
	CVT2(SI, Y0, Y1)
	OP2(VSUBPD, Y8, Y0, Y1)
	OP2(VMULPD, Y9, Y0, Y1)
	PUT8(DI)
	ADDQ2(32, SI, DI)
	AGAIN(CX, 8, ln8)
ln4:
	BELOW(CX, 4, ln1)
	VCVTPS2PD (SI), Y0
	VSUBPD Y8, Y0, Y0
	VMULPD Y9, Y0, Y0
	PUT4(DI)
	ADDQ2(16, SI, DI)
	SUBQ $4, CX
ln1:
	IFZERO(CX, lndone)
	VCVTSS2SD (SI), X0, X0
	VSUBSD X8, X0, X0
	VMULSD X9, X0, X0
	PUT1(DI)
	ADDQ2(4, SI, DI)
	AGAIN1(CX, ln1)
lndone:
	VRET

// func lnApplyAVX2(y, x, w, b []float32, m, rs float64)
TEXT ·lnApplyAVX2(SB), NOSPLIT, $0-112
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	MOVQ w_base+48(FP), BX
	MOVQ b_base+72(FP), DX
	VBROADCASTSD m+96(FP), Y8
	VBROADCASTSD rs+104(FP), Y9
la8:
	BELOW(CX, 8, la4)
	CVT2(SI, Y0, Y1)
	OP2(VSUBPD, Y8, Y0, Y1)
	OP2(VMULPD, Y9, Y0, Y1)
	CVT2(BX, Y2, Y3)
	CVT2(DX, Y4, Y5)
	ACC2(VMULPD, Y2, Y3, Y0, Y1)
	ACC2(VADDPD, Y4, Y5, Y0, Y1)
	PUT8(DI)
	ADDQ3(32, SI, BX, DX)
	ADDQ $32, DI
	AGAIN(CX, 8, la8)
la4:
	BELOW(CX, 4, la1)
	VCVTPS2PD (SI), Y0
	VSUBPD Y8, Y0, Y0
	VMULPD Y9, Y0, Y0
	VCVTPS2PD (BX), Y2
	VCVTPS2PD (DX), Y4
	VMULPD Y2, Y0, Y0
	VADDPD Y4, Y0, Y0
	PUT4(DI)
	ADDQ3(16, SI, BX, DX)
	ADDQ $16, DI
	SUBQ $4, CX
la1:
	IFZERO(CX, ladone)
	VCVTSS2SD (SI), X0, X0
	VSUBSD X8, X0, X0
	VMULSD X9, X0, X0
	VCVTSS2SD (BX), X2, X2
	VCVTSS2SD (DX), X4, X4
	VMULSD X2, X0, X0
	VADDSD X4, X0, X0
	PUT1(DI)
	ADDQ3(4, SI, BX, DX)
	ADDQ $4, DI
	AGAIN1(CX, la1)
ladone:
	VRET

// func lnBackwardAVX2(dx, dy, w, x []float32, m, rs, s1, s2 float64)
TEXT ·lnBackwardAVX2(SB), NOSPLIT, $0-128
	MOVQ dx_base+0(FP), DI
	MOVQ dx_len+8(FP), CX
	MOVQ dy_base+24(FP), SI
	MOVQ w_base+48(FP), BX
	MOVQ x_base+72(FP), DX
	VBROADCASTSD m+96(FP), Y8
	VBROADCASTSD rs+104(FP), Y9
	VBROADCASTSD s1+112(FP), Y10
	VBROADCASTSD s2+120(FP), Y11
lb8:
	BELOW(CX, 8, lb4)
	CVT2(SI, Y0, Y1)
	CVT2(BX, Y2, Y3)
	VMULPD Y2, Y0, Y0 // g
	VMULPD Y3, Y1, Y1
	VSUBPD Y10, Y0, Y0 // g − s1
	VSUBPD Y10, Y1, Y1
	CVT2(DX, Y4, Y5)
	OP2(VSUBPD, Y8, Y4, Y5)
	OP2(VMULPD, Y9, Y4, Y5)
	VMULPD Y11, Y4, Y4 // (x − m)·rs·s2
	VMULPD Y11, Y5, Y5
	ACC2(VSUBPD, Y4, Y5, Y0, Y1)
	OP2(VMULPD, Y9, Y0, Y1)
	PUT8(DI)
	ADDQ3(32, SI, BX, DX)
	ADDQ $32, DI
	AGAIN(CX, 8, lb8)
lb4:
	BELOW(CX, 4, lb1)
	VCVTPS2PD (SI), Y0
	VCVTPS2PD (BX), Y2
	VMULPD Y2, Y0, Y0
	VSUBPD Y10, Y0, Y0
	VCVTPS2PD (DX), Y4
	VSUBPD Y8, Y4, Y4
	VMULPD Y9, Y4, Y4
	VMULPD Y11, Y4, Y4
	VSUBPD Y4, Y0, Y0
	VMULPD Y9, Y0, Y0
	PUT4(DI)
	ADDQ3(16, SI, BX, DX)
	ADDQ $16, DI
	SUBQ $4, CX
lb1:
	IFZERO(CX, lbdone)
	VCVTSS2SD (SI), X0, X0
	VCVTSS2SD (BX), X2, X2
	VMULSD X2, X0, X0
	VSUBSD X10, X0, X0
	VCVTSS2SD (DX), X4, X4
	VSUBSD X8, X4, X4
	VMULSD X9, X4, X4
	VMULSD X11, X4, X4
	VSUBSD X4, X0, X0
	VMULSD X9, X0, X0
	PUT1(DI)
	ADDQ3(4, SI, BX, DX)
	ADDQ $4, DI
	AGAIN1(CX, lb1)
lbdone:
	VRET

// func lnColAccAVX2(aw, ab []float64, dy, x []float32, m, rs float64)
TEXT ·lnColAccAVX2(SB), NOSPLIT, $0-112
	MOVQ aw_base+0(FP), DI
	MOVQ aw_len+8(FP), CX
	MOVQ ab_base+24(FP), R8
	MOVQ dy_base+48(FP), SI
	MOVQ x_base+72(FP), DX
	VBROADCASTSD m+96(FP), Y8
	VBROADCASTSD rs+104(FP), Y9
lc8:
	BELOW(CX, 8, lc4)
	CVT2(DX, Y0, Y1)
	OP2(VSUBPD, Y8, Y0, Y1)
	OP2(VMULPD, Y9, Y0, Y1)
	CVT2(SI, Y2, Y3)
	ACC2(VMULPD, Y2, Y3, Y0, Y1)
	MEM2(VADDPD, DI, Y0, Y1)
	ST2(VMOVUPD, DI, Y0, Y1)
	MEM2(VADDPD, R8, Y2, Y3)
	ST2(VMOVUPD, R8, Y2, Y3)
	ADDQ2(32, SI, DX)
	ADDQ2(64, DI, R8)
	AGAIN(CX, 8, lc8)
lc4:
	BELOW(CX, 4, lc1)
	VCVTPS2PD (DX), Y0
	VSUBPD Y8, Y0, Y0
	VMULPD Y9, Y0, Y0
	VCVTPS2PD (SI), Y2
	VMULPD Y2, Y0, Y0
	VADDPD (DI), Y0, Y0
	VMOVUPD Y0, (DI)
	VADDPD (R8), Y2, Y2
	VMOVUPD Y2, (R8)
	ADDQ2(16, SI, DX)
	ADDQ2(32, DI, R8)
	SUBQ $4, CX
lc1:
	IFZERO(CX, lcdone)
	VCVTSS2SD (DX), X0, X0
	VSUBSD X8, X0, X0
	VMULSD X9, X0, X0
	VCVTSS2SD (SI), X2, X2
	VMULSD X2, X0, X0
	VADDSD (DI), X0, X0
	VMOVSD X0, (DI)
	VADDSD (R8), X2, X2
	VMOVSD X2, (R8)
	ADDQ2(4, SI, DX)
	ADDQ2(8, DI, R8)
	AGAIN1(CX, lc1)
lcdone:
	VRET

// func lnBackwardAccAVX2(dx, dy, w, x []float32, m, rs, s1, s2 float64, aw, ab []float64)
TEXT ·lnBackwardAccAVX2(SB), NOSPLIT, $0-176
	MOVQ dx_base+0(FP), DI
	MOVQ dx_len+8(FP), CX
	MOVQ dy_base+24(FP), SI
	MOVQ w_base+48(FP), BX
	MOVQ x_base+72(FP), DX
	VBROADCASTSD m+96(FP), Y8
	VBROADCASTSD rs+104(FP), Y9
	VBROADCASTSD s1+112(FP), Y10
	VBROADCASTSD s2+120(FP), Y11
	MOVQ aw_base+128(FP), R8
	MOVQ ab_base+152(FP), R9
lk4:
	BELOW(CX, 4, lk1)
	VCVTPS2PD (SI), Y0 // dy
	VCVTPS2PD (BX), Y2
	VMULPD Y0, Y2, Y2 // g
	VSUBPD Y10, Y2, Y2 // g − s1
	VCVTPS2PD (DX), Y4
	VSUBPD Y8, Y4, Y4
	VMULPD Y9, Y4, Y4 // t = (x − m)·rs
	VMULPD Y11, Y4, Y6
	VSUBPD Y6, Y2, Y2
	VMULPD Y9, Y2, Y2
	VCVTPD2PSY Y2, X2
	VMOVUPS X2, (DI)
	VMULPD Y4, Y0, Y6 // dy·t
	VADDPD (R8), Y6, Y6
	VMOVUPD Y6, (R8)
	VADDPD (R9), Y0, Y0
	VMOVUPD Y0, (R9)
	ADDQ3(16, SI, BX, DX)
	ADDQ $16, DI
	ADDQ2(32, R8, R9)
	AGAIN(CX, 4, lk4)
lk1:
	IFZERO(CX, lkdone)
	VCVTSS2SD (SI), X0, X0
	VCVTSS2SD (BX), X2, X2
	VMULSD X0, X2, X2
	VSUBSD X10, X2, X2
	VCVTSS2SD (DX), X4, X4
	VSUBSD X8, X4, X4
	VMULSD X9, X4, X4
	VMULSD X11, X4, X6
	VSUBSD X6, X2, X2
	VMULSD X9, X2, X2
	VCVTSD2SS X2, X2, X2
	VMOVSS X2, (DI)
	VMULSD X4, X0, X6
	VADDSD (R8), X6, X6
	VMOVSD X6, (R8)
	VADDSD (R9), X0, X0
	VMOVSD X0, (R9)
	ADDQ3(4, SI, BX, DX)
	ADDQ $4, DI
	ADDQ2(8, R8, R9)
	AGAIN1(CX, lk1)
lkdone:
	VRET

// func accRowAVX2(acc []float64, x []float32)
TEXT ·accRowAVX2(SB), NOSPLIT, $0-48
	MOVQ acc_base+0(FP), DI
	MOVQ acc_len+8(FP), CX
	MOVQ x_base+24(FP), SI
ar16:
	BELOW(CX, 16, ar4)
	CVT4(SI, Y0, Y1, Y2, Y3)
	MEM4(VADDPD, DI, Y0, Y1, Y2, Y3)
	ST4(VMOVUPD, DI, Y0, Y1, Y2, Y3)
	ADDQ $64, SI
	ADDQ $128, DI
	AGAIN(CX, 16, ar16)
ar4:
	BELOW(CX, 4, ar1)
	VCVTPS2PD (SI), Y0
	VADDPD (DI), Y0, Y0
	VMOVUPD Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	AGAIN(CX, 4, ar4)
ar1:
	IFZERO(CX, ardone)
	VCVTSS2SD (SI), X0, X0
	VADDSD (DI), X0, X0
	VMOVSD X0, (DI)
	ADDQ $4, SI
	ADDQ $8, DI
	AGAIN1(CX, ar1)
ardone:
	VRET

// func accRowScaledAVX2(acc []float64, x []float32, k float64)
TEXT ·accRowScaledAVX2(SB), NOSPLIT, $0-56
	MOVQ acc_base+0(FP), DI
	MOVQ acc_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	VBROADCASTSD k+48(FP), Y8
as16:
	BELOW(CX, 16, as4)
	CVT4(SI, Y0, Y1, Y2, Y3)
	OP4(VMULPD, Y8, Y0, Y1, Y2, Y3)
	MEM4(VADDPD, DI, Y0, Y1, Y2, Y3)
	ST4(VMOVUPD, DI, Y0, Y1, Y2, Y3)
	ADDQ $64, SI
	ADDQ $128, DI
	AGAIN(CX, 16, as16)
as4:
	BELOW(CX, 4, as1)
	VCVTPS2PD (SI), Y0
	VMULPD Y8, Y0, Y0
	VADDPD (DI), Y0, Y0
	VMOVUPD Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	AGAIN(CX, 4, as4)
as1:
	IFZERO(CX, asdone)
	VCVTSS2SD (SI), X0, X0
	VMULSD X8, X0, X0
	VADDSD (DI), X0, X0
	VMOVSD X0, (DI)
	ADDQ $4, SI
	ADDQ $8, DI
	AGAIN1(CX, as1)
asdone:
	VRET

// Whole bags: blocks of 32, 4 and 1 columns, each block's float64 sums
// in registers while the bag's rows (R12 = table + idx·dim·4) stream past,
// so the rows' loads are independent of each other.

// ADD4 adds the 4 floats at off(R12) into acc (Y8 scratch); MULADD4
// scales them by Y9 first.
#define ADD4(off, acc) \
	VCVTPS2PD off(R12), Y8 \
	VADDPD Y8, acc, acc

#define MULADD4(off, acc) \
	VCVTPS2PD off(R12), Y8 \
	VMULPD Y9, Y8, Y8 \
	VADDPD Y8, acc, acc

// EACH32(step): step(off, acc) for the 8 quads of a 32-column block,
// accumulators Y0…Y7.
#define EACH32(step) step(0, Y0); step(16, Y1); step(32, Y2); step(48, Y3); step(64, Y4); step(80, Y5); step(96, Y6); step(112, Y7)

// LOADACC32 / STOREACC32: Y0…Y7 = / → the 32 float64 sums at (DI).
#define LOADACC32 LD4(VMOVUPD, DI, Y0, Y1, Y2, Y3); VMOVUPD 128(DI), Y4; VMOVUPD 160(DI), Y5; VMOVUPD 192(DI), Y6; VMOVUPD 224(DI), Y7
#define STOREACC32 ST4(VMOVUPD, DI, Y0, Y1, Y2, Y3); VMOVUPD Y4, 128(DI); VMOVUPD Y5, 160(DI); VMOVUPD Y6, 192(DI); VMOVUPD Y7, 224(DI)

// BAG: R10 walks the bag's indices from R8, R11 counts them down from R9.
// BAGROW: R12 = the row the index at (R10) names (table SI, row DX bytes).
// BAGNEXT(top): next index, back to top while one is left; BAGNEXTW(top)
// also steps the weight pointer R13. BAGWEIGHT: Y9 = the row's weight,
// the float32 at (R13) widened and broadcast.
#define BAG MOVQ R8, R10; MOVQ R9, R11
#define BAGROW MOVQ (R10), AX; IMULQ DX, AX; LEAQ (SI)(AX*1), R12
#define BAGNEXT(top) ADDQ $8, R10; DECJNZ(R11, top)
#define BAGNEXTW(top) ADDQ $8, R10; ADDQ $4, R13; DECJNZ(R11, top)
#define BAGWEIGHT VCVTSS2SD (R13), X9, X9; VBROADCASTSD X9, Y9

// func accRowsAVX2(acc []float64, table []float32, idx []int64, dim int)
TEXT ·accRowsAVX2(SB), NOSPLIT, $0-80
	MOVQ acc_base+0(FP), DI
	MOVQ acc_len+8(FP), BX
	MOVQ table_base+24(FP), SI
	MOVQ idx_base+48(FP), R8
	MOVQ idx_len+56(FP), R9
	MOVQ dim+72(FP), DX
	SHLQ $2, DX
	IFZERO(R9, rsdone)
rs32:
	BELOW(BX, 32, rs4)
	LOADACC32
	BAG
rs32row:
	BAGROW
	EACH32(ADD4)
	BAGNEXT(rs32row)
	STOREACC32
	ADDQ $256, DI
	ADDQ $128, SI
	AGAIN(BX, 32, rs32)
rs4:
	BELOW(BX, 4, rs1)
	VMOVUPD (DI), Y0
	BAG
rs4row:
	BAGROW
	ADD4(0, Y0)
	BAGNEXT(rs4row)
	VMOVUPD Y0, (DI)
	ADDQ $32, DI
	ADDQ $16, SI
	AGAIN(BX, 4, rs4)
rs1:
	IFZERO(BX, rsdone)
	VMOVSD (DI), X0
	BAG
rs1row:
	BAGROW
	VCVTSS2SD (R12), X8, X8
	VADDSD X8, X0, X0
	BAGNEXT(rs1row)
	VMOVSD X0, (DI)
	ADDQ $8, DI
	ADDQ $4, SI
	AGAIN1(BX, rs1)
rsdone:
	VRET

// func accRowsScaledAVX2(acc []float64, table []float32, idx []int64, w []float32, dim int)
TEXT ·accRowsScaledAVX2(SB), NOSPLIT, $0-104
	MOVQ acc_base+0(FP), DI
	MOVQ acc_len+8(FP), BX
	MOVQ table_base+24(FP), SI
	MOVQ idx_base+48(FP), R8
	MOVQ idx_len+56(FP), R9
	MOVQ w_base+72(FP), CX
	MOVQ dim+96(FP), DX
	SHLQ $2, DX
	IFZERO(R9, wsdone)
ws32:
	BELOW(BX, 32, ws4)
	LOADACC32
	BAG
	MOVQ CX, R13
ws32row:
	BAGROW
	BAGWEIGHT
	EACH32(MULADD4)
	BAGNEXTW(ws32row)
	STOREACC32
	ADDQ $256, DI
	ADDQ $128, SI
	AGAIN(BX, 32, ws32)
ws4:
	BELOW(BX, 4, ws1)
	VMOVUPD (DI), Y0
	BAG
	MOVQ CX, R13
ws4row:
	BAGROW
	BAGWEIGHT
	MULADD4(0, Y0)
	BAGNEXTW(ws4row)
	VMOVUPD Y0, (DI)
	ADDQ $32, DI
	ADDQ $16, SI
	AGAIN(BX, 4, ws4)
ws1:
	IFZERO(BX, wsdone)
	VMOVSD (DI), X0
	BAG
	MOVQ CX, R13
ws1row:
	BAGROW
	VCVTSS2SD (R13), X9, X9
	VCVTSS2SD (R12), X8, X8
	VMULSD X9, X8, X8
	VADDSD X8, X0, X0
	BAGNEXTW(ws1row)
	VMOVSD X0, (DI)
	ADDQ $8, DI
	ADDQ $4, SI
	AGAIN1(BX, ws1)
wsdone:
	VRET

// func storeScaledAVX2(y []float32, acc []float64, k float64)
TEXT ·storeScaledAVX2(SB), NOSPLIT, $0-56
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ acc_base+24(FP), SI
	VBROADCASTSD k+48(FP), Y8
ss16:
	BELOW(CX, 16, ss4)
	VMULPD (SI), Y8, Y0
	VMULPD 32(SI), Y8, Y1
	VMULPD 64(SI), Y8, Y2
	VMULPD 96(SI), Y8, Y3
	PUT16(DI)
	ADDQ $128, SI
	ADDQ $64, DI
	AGAIN(CX, 16, ss16)
ss4:
	BELOW(CX, 4, ss1)
	VMULPD (SI), Y8, Y0
	PUT4(DI)
	ADDQ $32, SI
	ADDQ $16, DI
	AGAIN(CX, 4, ss4)
ss1:
	IFZERO(CX, ssdone)
	VMULSD (SI), X8, X0
	PUT1(DI)
	ADDQ $8, SI
	ADDQ $4, DI
	AGAIN1(CX, ss1)
ssdone:
	VRET

// func maxRowArgAVX2(y []float32, am []int64, x []float32, r int64)
TEXT ·maxRowArgAVX2(SB), NOSPLIT, $0-80
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ am_base+24(FP), R8
	MOVQ x_base+48(FP), SI
	VBROADCASTSD r+72(FP), Y8
ma8:
	BELOW(CX, 8, ma1)
	VMOVUPS (SI), Y0
	VMOVUPS (DI), Y1
	VCMPPS $0x11, Y0, Y1, Y2 // y < x, false for NaN
	VBLENDVPS Y2, Y0, Y1, Y1
	VMOVUPS Y1, (DI)
	VPMOVSXDQ X2, Y3
	VEXTRACTF128 $1, Y2, X4
	VPMOVSXDQ X4, Y4
	VMOVUPD (R8), Y5
	VMOVUPD 32(R8), Y6
	VBLENDVPD Y3, Y8, Y5, Y5
	VBLENDVPD Y4, Y8, Y6, Y6
	ST2(VMOVUPD, R8, Y5, Y6)
	ADDQ2(32, SI, DI)
	ADDQ $64, R8
	AGAIN(CX, 8, ma8)
ma1:
	IFZERO(CX, madone)
	VMOVSS (SI), X0
	VMOVSS (DI), X1
	VCMPPS $0x11, X0, X1, X2
	VBLENDVPS X2, X0, X1, X1
	VMOVSS X1, (DI)
	VPMOVSXDQ X2, X3
	VMOVQ (R8), X5
	VBLENDVPD X3, X8, X5, X5
	VMOVQ X5, (R8)
	ADDQ2(4, SI, DI)
	ADDQ $8, R8
	AGAIN1(CX, ma1)
madone:
	VRET

// func transpose8AVX2(dst []float32, ldd int, src []float32, lds int, rows, cols int)
// Row blocks of src (8 rows) outer, column blocks inner: each 8×8 tile is
// loaded as 8 rows, transposed in registers (unpack, shuffle, lane
// permute) and stored as 8 rows of dst.
TEXT ·transpose8AVX2(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ ldd+24(FP), R8
	SHLQ $2, R8
	MOVQ src_base+32(FP), SI
	MOVQ lds+56(FP), R9
	SHLQ $2, R9
	MOVQ rows+64(FP), R10
	MOVQ cols+72(FP), R11
	MOVQ R8, R12
	SHLQ $3, R12 // 8 dst rows
	MOVQ R9, DX
	SHLQ $3, DX // 8 src rows
	IFZERO(R10, trdone)
	IFZERO(R11, trdone)
trrow:
	MOVQ SI, AX
	MOVQ DI, BX
	MOVQ R11, CX
trcol:
	MOVQ AX, R13
	VMOVUPS (R13), Y0
	ADDQ R9, R13
	VMOVUPS (R13), Y1
	ADDQ R9, R13
	VMOVUPS (R13), Y2
	ADDQ R9, R13
	VMOVUPS (R13), Y3
	ADDQ R9, R13
	VMOVUPS (R13), Y4
	ADDQ R9, R13
	VMOVUPS (R13), Y5
	ADDQ R9, R13
	VMOVUPS (R13), Y6
	ADDQ R9, R13
	VMOVUPS (R13), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y0
	VUNPCKHPS Y7, Y6, Y1
	VSHUFPS $0x44, Y10, Y8, Y2
	VSHUFPS $0xEE, Y10, Y8, Y3
	VSHUFPS $0x44, Y11, Y9, Y4
	VSHUFPS $0xEE, Y11, Y9, Y5
	VSHUFPS $0x44, Y0, Y12, Y6
	VSHUFPS $0xEE, Y0, Y12, Y7
	VSHUFPS $0x44, Y1, Y13, Y8
	VSHUFPS $0xEE, Y1, Y13, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x20, Y8, Y4, Y12
	VPERM2F128 $0x20, Y9, Y5, Y13
	VPERM2F128 $0x31, Y6, Y2, Y0
	VPERM2F128 $0x31, Y7, Y3, Y1
	VPERM2F128 $0x31, Y8, Y4, Y2
	VPERM2F128 $0x31, Y9, Y5, Y3
	MOVQ BX, R13
	VMOVUPS Y10, (R13)
	ADDQ R8, R13
	VMOVUPS Y11, (R13)
	ADDQ R8, R13
	VMOVUPS Y12, (R13)
	ADDQ R8, R13
	VMOVUPS Y13, (R13)
	ADDQ R8, R13
	VMOVUPS Y0, (R13)
	ADDQ R8, R13
	VMOVUPS Y1, (R13)
	ADDQ R8, R13
	VMOVUPS Y2, (R13)
	ADDQ R8, R13
	VMOVUPS Y3, (R13)
	ADDQ $32, AX
	ADDQ R12, BX
	SUBQ $8, CX
	JNZ  trcol
	ADDQ DX, SI
	ADDQ $32, DI
	SUBQ $8, R10
	JNZ  trrow
trdone:
	VRET

// func prefetchRowsAVX2(table []float32, idx []int64, dim int)
// Touches every cache line of each row with PREFETCHT0, which never
// faults, so the loads of a later row overlap the work on this one.
TEXT ·prefetchRowsAVX2(SB), NOSPLIT, $0-56
	MOVQ table_base+0(FP), SI
	MOVQ idx_base+24(FP), BX
	MOVQ idx_len+32(FP), CX
	MOVQ dim+48(FP), DX
	SHLQ $2, DX
	IFZERO(CX, pfdone)
	IFZERO(DX, pfdone)
pfrow:
	MOVQ (BX), AX
	IMULQ DX, AX
	LEAQ (SI)(AX*1), R8
	MOVQ DX, R9
pfline:
	PREFETCHT0 (R8)
	ADDQ $64, R8
	SUBQ $64, R9
	JG   pfline
	ADDQ $8, BX
	DECJNZ(CX, pfrow)
pfdone:
	RET

// Window primitives: channel blocks of 32, 8 and 1; for each block the
// taps are walked with DX (tap address) and R9 (tap position), rows with
// R13 and AX. Steps arrive in elements and become bytes (R11, R12).

// WINROWS(nh, store): R13 walks the window's rows from SI, CX counts nh
// of them (none: go to store); WINTAPS(nw, rownext): DX walks a row's
// taps from R13, R10 counts nw of them (none: go to rownext). NEXTTAP(top)
// and NEXTROW(top) step to the next tap and row, back to top while one is
// left. The MAX* forms also carry the tap position: AX for the row (from
// pos0, step ph), R9 for the tap (step pw).
#define WINROWS(nh, store) MOVQ SI, R13; MOVQ nh, CX; IFZERO(CX, store)
#define WINTAPS(nw, rownext) MOVQ R13, DX; MOVQ nw, R10; IFZERO(R10, rownext)
#define NEXTTAP(top) ADDQ R12, DX; DECJNZ(R10, top)
#define NEXTROW(top) ADDQ R11, R13; DECJNZ(CX, top)
#define MAXROWS(pos0, nh, store) MOVQ SI, R13; MOVL pos0, AX; MOVQ nh, CX; IFZERO(CX, store)
#define MAXTAPS(nw, rownext) MOVQ R13, DX; MOVL AX, R9; MOVQ nw, R10; IFZERO(R10, rownext)
#define MAXTAPSTEP(pw, top) ADDQ R12, DX; ADDL pw, R9; DECJNZ(R10, top)
#define MAXROWSTEP(ph, top) ADDQ R11, R13; ADDL ph, AX; DECJNZ(CX, top)

// MAXTAP(off, v, i) folds the tap at off(DX) into best v and index i
// (Y8 holds the tap's position): replace where v < tap or tap is NaN.
#define MAXTAP(off, v, i) \
	VMOVUPS off(DX), Y9 \
	VCMPPS $0x11, Y9, v, Y10 \
	VCMPPS $3, Y9, Y9, Y11 \
	VORPS Y11, Y10, Y10 \
	VBLENDVPS Y10, Y9, v, v \
	VBLENDVPS Y10, Y8, i, i

// func maxWindowAVX2(y []float32, idx []int32, x []float32, nh, nw, sh, sw int, pos0, ph, pw int32)
TEXT ·maxWindowAVX2(SB), NOSPLIT, $0-116
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), BX
	MOVQ idx_base+24(FP), R8
	MOVQ x_base+48(FP), SI
	MOVQ sh+88(FP), R11
	SHLQ $2, R11
	MOVQ sw+96(FP), R12
	SHLQ $2, R12
	MOVL $0xff800000, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12 // −Inf
	MOVL pos0+104(FP), AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
mw32:
	BELOW(BX, 32, mw8)
	COPY4(Y12, Y0, Y1, Y2, Y3)
	COPY4(Y13, Y4, Y5, Y6, Y7)
	MAXROWS(pos0+104(FP), nh+72(FP), mw32store)
mw32row:
	MAXTAPS(nw+80(FP), mw32rownext)
mw32tap:
	VMOVD R9, X8
	VPBROADCASTD X8, Y8
	MAXTAP(0, Y0, Y4)
	MAXTAP(32, Y1, Y5)
	MAXTAP(64, Y2, Y6)
	MAXTAP(96, Y3, Y7)
	MAXTAPSTEP(pw+112(FP), mw32tap)
mw32rownext:
	MAXROWSTEP(ph+108(FP), mw32row)
mw32store:
	ST4(VMOVUPS, DI, Y0, Y1, Y2, Y3)
	ST4(VMOVUPS, R8, Y4, Y5, Y6, Y7)
	ADDQ3(128, DI, R8, SI)
	AGAIN(BX, 32, mw32)
mw8:
	BELOW(BX, 8, mw1)
	VMOVAPS Y12, Y0
	VMOVAPS Y13, Y4
	MAXROWS(pos0+104(FP), nh+72(FP), mw8store)
mw8row:
	MAXTAPS(nw+80(FP), mw8rownext)
mw8tap:
	VMOVD R9, X8
	VPBROADCASTD X8, Y8
	MAXTAP(0, Y0, Y4)
	MAXTAPSTEP(pw+112(FP), mw8tap)
mw8rownext:
	MAXROWSTEP(ph+108(FP), mw8row)
mw8store:
	VMOVUPS Y0, (DI)
	VMOVUPS Y4, (R8)
	ADDQ3(32, DI, R8, SI)
	AGAIN(BX, 8, mw8)
mw1:
	IFZERO(BX, mwdone)
	VMOVAPS X12, X0
	VMOVAPS X13, X4
	MAXROWS(pos0+104(FP), nh+72(FP), mw1store)
mw1row:
	MAXTAPS(nw+80(FP), mw1rownext)
mw1tap:
	VMOVD R9, X8
	VMOVSS (DX), X9
	VCMPPS $0x11, X9, X0, X10
	VCMPPS $3, X9, X9, X11
	VORPS X11, X10, X10
	VBLENDVPS X10, X9, X0, X0
	VBLENDVPS X10, X8, X4, X4
	MAXTAPSTEP(pw+112(FP), mw1tap)
mw1rownext:
	MAXROWSTEP(ph+108(FP), mw1row)
mw1store:
	VMOVSS X0, (DI)
	VMOVSS X4, (R8)
	ADDQ3(4, DI, R8, SI)
	AGAIN1(BX, mw1)
mwdone:
	VRET

// func sumWindowAVX2(y, x []float32, nh, nw, sh, sw int, div float32)
TEXT ·sumWindowAVX2(SB), NOSPLIT, $0-84
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), BX
	MOVQ x_base+24(FP), SI
	MOVQ sh+64(FP), R11
	SHLQ $2, R11
	MOVQ sw+72(FP), R12
	SHLQ $2, R12
	VBROADCASTSS div+80(FP), Y12
sw32:
	BELOW(BX, 32, sw8)
	ZERO4(VXORPS, Y0, Y1, Y2, Y3)
	WINROWS(nh+48(FP), sw32store)
sw32row:
	WINTAPS(nw+56(FP), sw32rownext)
sw32tap:
	MEM4(VADDPS, DX, Y0, Y1, Y2, Y3)
	NEXTTAP(sw32tap)
sw32rownext:
	NEXTROW(sw32row)
sw32store:
	OP4(VDIVPS, Y12, Y0, Y1, Y2, Y3)
	ST4(VMOVUPS, DI, Y0, Y1, Y2, Y3)
	ADDQ2(128, DI, SI)
	AGAIN(BX, 32, sw32)
sw8:
	BELOW(BX, 8, sw1)
	VXORPS Y0, Y0, Y0
	WINROWS(nh+48(FP), sw8store)
sw8row:
	WINTAPS(nw+56(FP), sw8rownext)
sw8tap:
	VADDPS (DX), Y0, Y0
	NEXTTAP(sw8tap)
sw8rownext:
	NEXTROW(sw8row)
sw8store:
	VDIVPS Y12, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ2(32, DI, SI)
	AGAIN(BX, 8, sw8)
sw1:
	IFZERO(BX, swdone)
	VXORPS X0, X0, X0
	WINROWS(nh+48(FP), sw1store)
sw1row:
	WINTAPS(nw+56(FP), sw1rownext)
sw1tap:
	VADDSS (DX), X0, X0
	NEXTTAP(sw1tap)
sw1rownext:
	NEXTROW(sw1row)
sw1store:
	VDIVSS X12, X0, X0
	VMOVSS X0, (DI)
	ADDQ2(4, DI, SI)
	AGAIN1(BX, sw1)
swdone:
	VRET

// func addWindowAVX2(x []float32, nh, nw, sh, sw int, g []float32, div float32)
TEXT ·addWindowAVX2(SB), NOSPLIT, $0-84
	MOVQ x_base+0(FP), SI
	MOVQ nh+24(FP), CX
	MOVQ sh+40(FP), R11
	SHLQ $2, R11
	MOVQ sw+48(FP), R12
	SHLQ $2, R12
	MOVQ g_base+56(FP), DI
	MOVQ g_len+64(FP), BX
	VBROADCASTSS div+80(FP), Y12
	IFZERO(CX, adone)
	MOVQ nw+32(FP), R10
	IFZERO(R10, adone)
ad32:
	BELOW(BX, 32, ad8)
	LD4(VMOVUPS, DI, Y0, Y1, Y2, Y3)
	OP4(VDIVPS, Y12, Y0, Y1, Y2, Y3)
	MOVQ SI, R13
	MOVQ CX, AX
ad32row:
	MOVQ R13, DX
	MOVQ nw+32(FP), R10
ad32tap:
	VADDPS (DX), Y0, Y4
	VADDPS 32(DX), Y1, Y5
	VADDPS 64(DX), Y2, Y6
	VADDPS 96(DX), Y3, Y7
	ST4(VMOVUPS, DX, Y4, Y5, Y6, Y7)
	NEXTTAP(ad32tap)
	ADDQ R11, R13
	DECJNZ(AX, ad32row)
	ADDQ2(128, DI, SI)
	AGAIN(BX, 32, ad32)
ad8:
	BELOW(BX, 8, ad1)
	VMOVUPS (DI), Y0
	VDIVPS Y12, Y0, Y0
	MOVQ SI, R13
	MOVQ CX, AX
ad8row:
	MOVQ R13, DX
	MOVQ nw+32(FP), R10
ad8tap:
	VADDPS (DX), Y0, Y4
	VMOVUPS Y4, (DX)
	NEXTTAP(ad8tap)
	ADDQ R11, R13
	DECJNZ(AX, ad8row)
	ADDQ2(32, DI, SI)
	AGAIN(BX, 8, ad8)
ad1:
	IFZERO(BX, adone)
	VMOVSS (DI), X0
	VDIVSS X12, X0, X0
	MOVQ SI, R13
	MOVQ CX, AX
ad1row:
	MOVQ R13, DX
	MOVQ nw+32(FP), R10
ad1tap:
	VADDSS (DX), X0, X4
	VMOVSS X4, (DX)
	NEXTTAP(ad1tap)
	ADDQ R11, R13
	DECJNZ(AX, ad1row)
	ADDQ2(4, DI, SI)
	AGAIN1(BX, ad1)
adone:
	VRET
