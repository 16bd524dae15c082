//go:build amd64 && !noasm

#include "textflag.h"

// IFOLD(acc): fold the sixteen partial sums in Z acc (named by its X and
// Y forms) in halves, lane l + lane l+8, l + l+4, l + l+2, l + l+1, into
// X acc's lane 0; X15 is clobbered.
#define IFOLD(z, y, x) \
	VEXTRACTF64X4 $1, z, Y15; \
	VADDPS        Y15, y, y; \
	VEXTRACTF128  $1, y, X15; \
	VADDPS        X15, x, x; \
	VMOVHLPS      x, x, X15; \
	VADDPS        X15, x, x; \
	VMOVSHDUP     x, X15; \
	VADDSS        X15, x, x

// func interactionTriangleAVX512(dst *float32, rows *[]float32, f, self, d int, tail int)
// For each row i from 1 − self and each row j < i + self: Z0 accumulates
// row i · row j sixteen elements at a time (the product rounded, then
// added: no FMA), the last d%16 under K1, then IFOLD, and the dot goes to
// the next element of dst. R8 = the headers, SI = row i, BX walks the
// headers of the rows j, CX counts them, R11 = row j, R12 the byte
// offset, R13 the whole sixteens left, R9 = i, R14 = f.
TEXT ·interactionTriangleAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), R8
	MOVQ f+16(FP), R14
	MOVQ self+24(FP), DX
	MOVQ d+32(FP), R10
	SHRQ $4, R10
	MOVQ tail+40(FP), AX
	KMOVW AX, K1
	MOVQ $1, R9
	SUBQ DX, R9

itrow:
	CMPQ R9, R14
	JGE  itdone
	LEAQ (R9)(R9*2), AX
	MOVQ (R8)(AX*8), SI
	MOVQ R8, BX
	MOVQ self+24(FP), DX // the quads below use DX
	LEAQ (R9)(DX*1), CX

// Four rows j at a time while four are left: the same products and sums
// per dot as itpair's, in Z0, Z4, Z5 and Z6, so four dots' additions
// overlap instead of each waiting for the last. R11, R15, AX and DX hold
// the four rows.
itquad:
	CMPQ CX, $4
	JL   itpair
	MOVQ 0(BX), R11
	MOVQ 24(BX), R15
	MOVQ 48(BX), AX
	MOVQ 72(BX), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	XORQ  R12, R12
	MOVQ  R10, R13

itqchunk:
	TESTQ R13, R13
	JZ    itqtail
	VMOVUPS (SI)(R12*1), Z1
	VMULPS  (R11)(R12*1), Z1, Z7
	VMULPS  (R15)(R12*1), Z1, Z8
	VMULPS  (AX)(R12*1), Z1, Z9
	VMULPS  (DX)(R12*1), Z1, Z10
	VADDPS  Z7, Z0, Z0
	VADDPS  Z8, Z4, Z4
	VADDPS  Z9, Z5, Z5
	VADDPS  Z10, Z6, Z6
	ADDQ    $64, R12
	DECQ    R13
	JMP     itqchunk

itqtail:
	KORTESTW K1, K1
	JZ       itqfold
	VMOVUPS.Z (SI)(R12*1), K1, Z1
	VMOVUPS.Z (R11)(R12*1), K1, Z7
	VMOVUPS.Z (R15)(R12*1), K1, Z8
	VMOVUPS.Z (AX)(R12*1), K1, Z9
	VMOVUPS.Z (DX)(R12*1), K1, Z10
	VMULPS    Z7, Z1, Z7
	VMULPS    Z8, Z1, Z8
	VMULPS    Z9, Z1, Z9
	VMULPS    Z10, Z1, Z10
	VADDPS    Z7, Z0, Z0
	VADDPS    Z8, Z4, Z4
	VADDPS    Z9, Z5, Z5
	VADDPS    Z10, Z6, Z6

itqfold:
	IFOLD(Z0, Y0, X0)
	IFOLD(Z4, Y4, X4)
	IFOLD(Z5, Y5, X5)
	IFOLD(Z6, Y6, X6)
	VMOVSS X0, (DI)
	VMOVSS X4, 4(DI)
	VMOVSS X5, 8(DI)
	VMOVSS X6, 12(DI)
	ADDQ   $16, DI
	ADDQ   $96, BX
	SUBQ   $4, CX
	JMP    itquad

itpair:
	TESTQ CX, CX
	JZ    itnext
	MOVQ  (BX), R11
	VPXORD Z0, Z0, Z0
	XORQ  R12, R12
	MOVQ  R10, R13

itchunk:
	TESTQ R13, R13
	JZ    ittail
	VMOVUPS (SI)(R12*1), Z1
	VMULPS  (R11)(R12*1), Z1, Z1
	VADDPS  Z1, Z0, Z0
	ADDQ    $64, R12
	DECQ    R13
	JMP     itchunk

ittail:
	KORTESTW K1, K1
	JZ       itfold
	VMOVUPS.Z (SI)(R12*1), K1, Z1
	VMOVUPS.Z (R11)(R12*1), K1, Z2
	VMULPS    Z2, Z1, Z1
	VADDPS    Z1, Z0, Z0

itfold:
	IFOLD(Z0, Y0, X0)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   $24, BX
	DECQ   CX
	JMP    itpair

itnext:
	INCQ R9
	JMP  itrow

itdone:
	VZEROUPPER
	RET

// The axpys' loop over the terms: TERMS starts it at the first row header
// (R13), coefficient (R14) and count (R15); TERM(done, skip, c) ends it at
// done, jumps to skip (just before NEXT) for the skipped term (R15 = R9;
// R9 = 0 skips none), or loads the row (R11) and broadcasts the
// coefficient into c; NEXT(loop)
// moves on.
#define TERMS MOVQ BX, R13; MOVQ DX, R14; MOVQ R10, R15
#define TERM(done, skip, c) TESTQ R15, R15; JZ done; CMPQ R15, R9; JEQ skip; MOVQ (R13), R11; VBROADCASTSS (R14), c
#define NEXT(loop) ADDQ $24, R13; ADDQ $4, R14; DECQ R15; JMP loop

// IAXPY(z, off): z += coef[m]·row m at byte off, the broadcast coefficient
// in Z8, the product in Z9 rounded before the sum.
#define IAXPY(z, off) \
	VMULPS off(R11)(R12*1), Z8, Z9; \
	VADDPS Z9, z, z

// func interactionAxpysAVX512(dst, init *float32, rows *[]float32, coef *float32, n, d int, tail int, sk int)
// Sixty-four columns at a time in Z0–Z3, then sixteen in Z0, then the
// last d%16 under K1: each block starts from init (or zeros) and adds
// the n terms in order. R12 is the block's byte offset, CX the columns
// left, R13/R14/R15 walk the rows' headers, the coefficients and the terms.
TEXT ·interactionAxpysAVX512(SB), NOSPLIT, $0-64
	MOVQ sk+56(FP), R9
	MOVQ dst+0(FP), DI
	MOVQ init+8(FP), SI
	MOVQ rows+16(FP), BX
	MOVQ coef+24(FP), DX
	MOVQ n+32(FP), R10
	MOVQ d+40(FP), CX
	MOVQ tail+48(FP), AX
	KMOVW AX, K1
	XORQ R12, R12

ia64:
	CMPQ CX, $64
	JL   ia16
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	TESTQ SI, SI
	JZ    ia64terms
	VMOVUPS (SI)(R12*1), Z0
	VMOVUPS 64(SI)(R12*1), Z1
	VMOVUPS 128(SI)(R12*1), Z2
	VMOVUPS 192(SI)(R12*1), Z3

ia64terms:
	TERMS

ia64term:
	TERM(ia64store, ia64skip, Z8)
	IAXPY(Z0, 0)
	IAXPY(Z1, 64)
	IAXPY(Z2, 128)
	IAXPY(Z3, 192)
ia64skip:
	NEXT(ia64term)

ia64store:
	VMOVUPS Z0, (DI)(R12*1)
	VMOVUPS Z1, 64(DI)(R12*1)
	VMOVUPS Z2, 128(DI)(R12*1)
	VMOVUPS Z3, 192(DI)(R12*1)
	ADDQ $256, R12
	SUBQ $64, CX
	JMP  ia64

ia16:
	CMPQ CX, $16
	JL   iatail
	VPXORD Z0, Z0, Z0
	TESTQ SI, SI
	JZ    ia16terms
	VMOVUPS (SI)(R12*1), Z0

ia16terms:
	TERMS

ia16term:
	TERM(ia16store, ia16skip, Z8)
	IAXPY(Z0, 0)
ia16skip:
	NEXT(ia16term)

ia16store:
	VMOVUPS Z0, (DI)(R12*1)
	ADDQ $64, R12
	SUBQ $16, CX
	JMP  ia16

iatail:
	TESTQ CX, CX
	JZ    iadone
	VPXORD Z0, Z0, Z0
	TESTQ SI, SI
	JZ    iatailterms
	VMOVUPS.Z (SI)(R12*1), K1, Z0

iatailterms:
	TERMS

iatailterm:
	TERM(iatailstore, iatailskip, Z8)
	VMOVUPS.Z (R11)(R12*1), K1, Z9
	VMULPS Z9, Z8, Z9
	VADDPS Z9, Z0, Z0
iatailskip:
	NEXT(iatailterm)

iatailstore:
	VMOVUPS Z0, K1, (DI)(R12*1)

iadone:
	VZEROUPPER
	RET

// JFOLD(lo, hi, xlo): the AVX2 fold of sixteen partial sums held in lo
// (lanes 0–7) and hi (8–15): lo + hi, then halves down to X xlo's lane 0
// (IFOLD's order); X15 is clobbered.
#define JFOLD(lo, hi, xlo) \
	VADDPS       hi, lo, lo; \
	VEXTRACTF128 $1, lo, X15; \
	VADDPS       X15, xlo, xlo; \
	VMOVHLPS     xlo, xlo, X15; \
	VADDPS       X15, xlo, xlo; \
	VMOVSHDUP    xlo, X15; \
	VADDSS       X15, xlo, xlo

// JQTERM(r, lo, hi) adds row i's sixteen (Y8, Y9) times row r's at R12
// into lo and hi, each product rounded before its sum; JQTAIL is it for
// the masked last d%16, the products' operands in jttail's order.
#define JQTERM(r, lo, hi) \
	VMULPS (r)(R12*1), Y8, Y10; \
	VADDPS Y10, lo, lo; \
	VMULPS 32(r)(R12*1), Y9, Y11; \
	VADDPS Y11, hi, hi

#define JQTAIL(r, lo, hi) \
	VMASKMOVPS (r)(R12*1), Y14, Y10; \
	VMULPS     Y10, Y8, Y10; \
	VADDPS     Y10, lo, lo; \
	VMASKMOVPS 32(r)(R12*1), Y13, Y11; \
	VMULPS     Y11, Y9, Y11; \
	VADDPS     Y11, hi, hi

// func interactionTriangleAVX2(dst *float32, rows *[]float32, f, self, d int, tail int, m0, m1 *int32)
// interactionTriangleAVX512 on YMM registers: the sixteen lanes are Y0
// (lanes 0–7) and Y1 (8–15), a tail's lanes masked by the masks at m0 and
// m1 (zeros past the row), and the fold starts with Y0 + Y1.
TEXT ·interactionTriangleAVX2(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), R8
	MOVQ f+16(FP), R14
	MOVQ self+24(FP), DX
	MOVQ d+32(FP), R10
	SHRQ $4, R10
	MOVQ m0+48(FP), AX
	VMOVDQU (AX), Y14
	MOVQ m1+56(FP), AX
	VMOVDQU (AX), Y13
	MOVQ $1, R9
	SUBQ DX, R9

jtrow:
	CMPQ R9, R14
	JGE  jtdone
	LEAQ (R9)(R9*2), AX
	MOVQ (R8)(AX*8), SI
	MOVQ R8, BX
	MOVQ self+24(FP), DX // the quads below use DX
	LEAQ (R9)(DX*1), CX

// Four rows j at a time while four are left, as in the AVX-512 kernel:
// dot q's lanes in Y(2q) and Y(2q+1), the rows in R11, R15, AX and DX,
// row i's sixteen in Y8 and Y9. A tail is there when Y14's mask is not
// all zeros (d%16 > 0).
jtquad:
	CMPQ   CX, $4
	JL     jtpair
	MOVQ   0(BX), R11
	MOVQ   24(BX), R15
	MOVQ   48(BX), AX
	MOVQ   72(BX), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   R12, R12
	MOVQ   R10, R13

jtqchunk:
	TESTQ   R13, R13
	JZ      jtqtail
	VMOVUPS (SI)(R12*1), Y8
	VMOVUPS 32(SI)(R12*1), Y9
	JQTERM(R11, Y0, Y1)
	JQTERM(R15, Y2, Y3)
	JQTERM(AX, Y4, Y5)
	JQTERM(DX, Y6, Y7)
	ADDQ    $64, R12
	DECQ    R13
	JMP     jtqchunk

jtqtail:
	VPTEST     Y14, Y14
	JZ         jtqfold
	VMASKMOVPS (SI)(R12*1), Y14, Y8
	VMASKMOVPS 32(SI)(R12*1), Y13, Y9
	JQTAIL(R11, Y0, Y1)
	JQTAIL(R15, Y2, Y3)
	JQTAIL(AX, Y4, Y5)
	JQTAIL(DX, Y6, Y7)

jtqfold:
	JFOLD(Y0, Y1, X0)
	JFOLD(Y2, Y3, X2)
	JFOLD(Y4, Y5, X4)
	JFOLD(Y6, Y7, X6)
	VMOVSS X0, (DI)
	VMOVSS X2, 4(DI)
	VMOVSS X4, 8(DI)
	VMOVSS X6, 12(DI)
	ADDQ   $16, DI
	ADDQ   $96, BX
	SUBQ   $4, CX
	JMP    jtquad

jtpair:
	TESTQ CX, CX
	JZ    jtnext
	MOVQ  (BX), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ  R12, R12
	MOVQ  R10, R13

jtchunk:
	TESTQ R13, R13
	JZ    jttail
	VMOVUPS (SI)(R12*1), Y2
	VMULPS  (R11)(R12*1), Y2, Y2
	VADDPS  Y2, Y0, Y0
	VMOVUPS 32(SI)(R12*1), Y3
	VMULPS  32(R11)(R12*1), Y3, Y3
	VADDPS  Y3, Y1, Y1
	ADDQ    $64, R12
	DECQ    R13
	JMP     jtchunk

jttail:
	VPTEST     Y14, Y14
	JZ         jtfold
	VMASKMOVPS (SI)(R12*1), Y14, Y2
	VMASKMOVPS (R11)(R12*1), Y14, Y4
	VMULPS     Y4, Y2, Y2
	VADDPS     Y2, Y0, Y0
	VMASKMOVPS 32(SI)(R12*1), Y13, Y3
	VMASKMOVPS 32(R11)(R12*1), Y13, Y5
	VMULPS     Y5, Y3, Y3
	VADDPS     Y3, Y1, Y1

jtfold:
	JFOLD(Y0, Y1, X0)
	VMOVSS       X0, (DI)
	ADDQ         $4, DI
	ADDQ         $24, BX
	DECQ         CX
	JMP          jtpair

jtnext:
	INCQ R9
	JMP  jtrow

jtdone:
	VZEROUPPER
	RET

// JAXPY(y, off): y += coef·row m at byte off, the coefficient in Y8.
#define JAXPY(y, off) \
	VMULPS off(R11)(R12*1), Y8, Y9; \
	VADDPS Y9, y, y

// func interactionAxpysAVX2(dst, init *float32, rows *[]float32, coef *float32, n, d int, m *int32)
// interactionAxpysAVX512 on YMM registers: thirty-two columns at a time
// in Y0–Y3, then eight in Y0, then the last d%8 under the mask at m.
TEXT ·interactionAxpysAVX2(SB), NOSPLIT, $0-64
	MOVQ sk+56(FP), R9
	MOVQ dst+0(FP), DI
	MOVQ init+8(FP), SI
	MOVQ rows+16(FP), BX
	MOVQ coef+24(FP), DX
	MOVQ n+32(FP), R10
	MOVQ d+40(FP), CX
	MOVQ m+48(FP), AX
	VMOVDQU (AX), Y14
	XORQ R12, R12

ja32:
	CMPQ CX, $32
	JL   ja8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ SI, SI
	JZ    ja32terms
	VMOVUPS (SI)(R12*1), Y0
	VMOVUPS 32(SI)(R12*1), Y1
	VMOVUPS 64(SI)(R12*1), Y2
	VMOVUPS 96(SI)(R12*1), Y3

ja32terms:
	TERMS

ja32term:
	TERM(ja32store, ja32skip, Y8)
	JAXPY(Y0, 0)
	JAXPY(Y1, 32)
	JAXPY(Y2, 64)
	JAXPY(Y3, 96)
ja32skip:
	NEXT(ja32term)

ja32store:
	VMOVUPS Y0, (DI)(R12*1)
	VMOVUPS Y1, 32(DI)(R12*1)
	VMOVUPS Y2, 64(DI)(R12*1)
	VMOVUPS Y3, 96(DI)(R12*1)
	ADDQ $128, R12
	SUBQ $32, CX
	JMP  ja32

ja8:
	CMPQ CX, $8
	JL   jatail
	VXORPS Y0, Y0, Y0
	TESTQ SI, SI
	JZ    ja8terms
	VMOVUPS (SI)(R12*1), Y0

ja8terms:
	TERMS

ja8term:
	TERM(ja8store, ja8skip, Y8)
	JAXPY(Y0, 0)
ja8skip:
	NEXT(ja8term)

ja8store:
	VMOVUPS Y0, (DI)(R12*1)
	ADDQ $32, R12
	SUBQ $8, CX
	JMP  ja8

jatail:
	TESTQ CX, CX
	JZ    jadone
	VXORPS Y0, Y0, Y0
	TESTQ SI, SI
	JZ    jatailterms
	VMASKMOVPS (SI)(R12*1), Y14, Y0

jatailterms:
	TERMS

jatailterm:
	TERM(jatailstore, jatailskip, Y8)
	VMASKMOVPS (R11)(R12*1), Y14, Y9
	VMULPS Y9, Y8, Y9
	VADDPS Y9, Y0, Y0
jatailskip:
	NEXT(jatailterm)

jatailstore:
	VMASKMOVPS Y0, Y14, (DI)(R12*1)

jadone:
	VZEROUPPER
	RET
