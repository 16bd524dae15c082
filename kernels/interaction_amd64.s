//go:build amd64 && !noasm

#include "textflag.h"

// ZERO16 clears the accumulators Z0–Z15.
#define ZERO16 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15

// FPAIR(off, acc): acc += row i's sixteen at R12 (Z16) times those of
// the row whose header is at off(BX), fused (one rounding); FTPAIR is it
// for the last d%16 under K1, adding only those lanes; FPAIR4 is it on
// sixty-four, row i's in Z16–Z19, the four products added in order.
#define FPAIR(off, acc) \
	MOVQ        off(BX), R11; \
	VFMADD231PS (R11)(R12*1), Z16, acc

#define FTPAIR(off, acc) \
	MOVQ        off(BX), R11; \
	VFMADD231PS (R11)(R12*1), Z16, K1, acc

#define FPAIR4(off, acc) \
	MOVQ   off(BX), R11; \
	ADDQ   R12, R11; \
	VFMADD231PS (R11), Z16, acc; \
	VFMADD231PS 64(R11), Z17, acc; \
	VFMADD231PS 128(R11), Z18, acc; \
	VFMADD231PS 192(R11), Z19, acc

// FGROUP(P, end): P for each of the group's CX pairs, pair q (its row j
// header q·24 past BX) into Z(4(q%4) + q/4), then on at end.
#define FLAST(q, end) CMPQ CX, $q; JEQ end
#define FGROUP(P, end) \
	P(0, Z0); FLAST(1, end); \
	P(24, Z4); FLAST(2, end); \
	P(48, Z8); FLAST(3, end); \
	P(72, Z12); FLAST(4, end); \
	P(96, Z1); FLAST(5, end); \
	P(120, Z5); FLAST(6, end); \
	P(144, Z9); FLAST(7, end); \
	P(168, Z13); FLAST(8, end); \
	P(192, Z2); FLAST(9, end); \
	P(216, Z6); FLAST(10, end); \
	P(240, Z10); FLAST(11, end); \
	P(264, Z14); FLAST(12, end); \
	P(288, Z3); FLAST(13, end); \
	P(312, Z7); FLAST(14, end); \
	P(336, Z11); FLAST(15, end); \
	P(360, Z15)

// FHALVE(imm0, imm1, shuf, a, b): the folds of sixteen dots at once. The
// shuffles gather into Z16 the lanes l and into Z17 the lanes l+h (h the
// level's half width) of the dots in a and b, and a = Z16 + Z17:
// interactionDot's additions, each of a pair of one dot's partial sums,
// two registers' worth in one.
#define FHALVE(imm0, imm1, shuf, a, b) \
	shuf   $imm0, b, a, Z16; \
	shuf   $imm1, b, a, Z17; \
	VADDPS Z17, Z16, a

// The AVX-512 gradient kernel's steps, on sixty-four columns at R12 (the
// *4 forms, feature q's in Z(4q)…Z(4q+3)) or sixteen under K1 (the *1
// forms, Z(4q) alone, the other accumulators named but left alone):
// GLOAD loads row m (SI walks the row headers) into Z16…; GMUL adds the
// broadcast coefficient in Z20 times it to a feature's accumulators,
// fused (one rounding). For both kernels, GROW(MUL, …) takes
// the coefficient of a feature t > m from t's own dots, (r)(BX*4) with r
// at them and BX = m, GCOL that of a feature t < m from m's dots, off(DX)
// with DX at m's dot with the block's first feature, GDIAG the doubled
// (t, t) of self; GNEXT moves DX, SI and BX = m to the next row (R15 =
// self).
#define GLOAD4 \
	MOVQ    (SI), AX; \
	VMOVUPS (AX)(R12*1), Z16; \
	VMOVUPS 64(AX)(R12*1), Z17; \
	VMOVUPS 128(AX)(R12*1), Z18; \
	VMOVUPS 192(AX)(R12*1), Z19

#define GLOAD1 MOVQ (SI), AX; VMOVUPS.Z (AX)(R12*1), K1, Z16

#define GMUL4(a0, a1, a2, a3) \
	VFMADD231PS Z16, Z20, a0; \
	VFMADD231PS Z17, Z20, a1; \
	VFMADD231PS Z18, Z20, a2; \
	VFMADD231PS Z19, Z20, a3

#define GMUL1(a0, a1, a2, a3) VFMADD231PS Z16, Z20, a0

#define GROW(MUL, r, a0, a1, a2, a3) VBROADCASTSS (r)(BX*4), GBC; MUL(a0, a1, a2, a3)
#define GCOL(MUL, off, a0, a1, a2, a3) VBROADCASTSS off(DX), GBC; MUL(a0, a1, a2, a3)
#define GDIAG(MUL, r, a0, a1, a2, a3) VBROADCASTSS (r)(BX*4), GBC; VADDPS GBC, GBC, GBC; MUL(a0, a1, a2, a3)

// Row m + 1's dots start m + self after row m's.
#define GNEXT \
	LEAQ (BX)(R15*1), AX; \
	LEAQ (DX)(AX*4), DX; \
	ADDQ $24, SI; \
	INCQ BX

// GTRI(q, r): r = dots + 4·T(t0 + q), T(t) = t(t − 1 + 2·self)/2 the
// first of feature t's own dots.
#define GTRI(q, r) \
	LEAQ  q(R14), AX; \
	MOVQ  R15, r; \
	LEAQ  -1(AX)(r*2), r; \
	IMULQ AX, r; \
	SHRQ  $1, r; \
	LEAQ  (R8)(r*4), r

// GINIT loads feature 0's accumulators from the row at AX; GST stores a
// feature's at R12 of the row whose header is at off(AX); GPF asks for
// the columns at R12 + BX of the matrix whose header is at hdr: the
// sample after this one, read next (each sample's rows lie in 2f
// matrices, more streams than the hardware prefetcher follows).
#define GINIT4 \
	VMOVUPS (AX)(R12*1), Z0; \
	VMOVUPS 64(AX)(R12*1), Z1; \
	VMOVUPS 128(AX)(R12*1), Z2; \
	VMOVUPS 192(AX)(R12*1), Z3

#define GINIT1 VMOVUPS.Z (AX)(R12*1), K1, Z0

#define GST4(off, a0, a1, a2, a3) \
	MOVQ    off(AX), DX; \
	VMOVUPS a0, (DX)(R12*1); \
	VMOVUPS a1, 64(DX)(R12*1); \
	VMOVUPS a2, 128(DX)(R12*1); \
	VMOVUPS a3, 192(DX)(R12*1)

// GST4NT is GST4 with non-temporal stores (the rows 64-byte aligned).
#define GST4NT(off, a0, a1, a2, a3) \
	MOVQ     off(AX), DX; \
	VMOVNTPS a0, (DX)(R12*1); \
	VMOVNTPS a1, 64(DX)(R12*1); \
	VMOVNTPS a2, 128(DX)(R12*1); \
	VMOVNTPS a3, 192(DX)(R12*1)

#define GNOPF(hdr)

#define GST1(off, a0, a1, a2, a3) MOVQ off(AX), DX; VMOVUPS a0, K1, (DX)(R12*1)

#define GPF4(hdr) \
	MOVQ       hdr, DX; \
	ADDQ       BX, DX; \
	PREFETCHT0 (DX)(R12*1); \
	PREFETCHT0 64(DX)(R12*1); \
	PREFETCHT0 128(DX)(R12*1); \
	PREFETCHT0 192(DX)(R12*1)

#define GPF1(hdr) MOVQ hdr, DX; ADDQ BX, DX; PREFETCHT0 (DX)(R12*1)

// GSECTION runs the block's four features over one column block with
// the step forms of one width (LOAD, MUL, INIT, ST, PF), the labels its
// loops and branches need after them: features from init or zeros, the
// rows m < t0, the four rows of the block's own, the rows after, the
// stores and the next sample's rows asked for. Feature q's accumulators
// are G(A+q)0…3, the coefficient GBC, GZERO clears them: each kernel
// names its registers so before it.
#define GSECTION(LOAD, MUL, INIT, ST, PF, PFG, lrows, la, ldiag, ld0, ld1, ld2, ld3, lc, lst) \
	GZERO; \
	TESTQ R14, R14; \
	JNZ   lrows; \
	MOVQ  dout+8(FP), AX; \
	SUBQ  off+56(FP), AX; \
	INIT; \
lrows: \
	MOVQ feats+16(FP), SI; \
	XORQ BX, BX; \
la: \
	CMPQ BX, R14; \
	JGE  ldiag; \
	LOAD; \
	GROW(MUL, R9, GA0, GA1, GA2, GA3); \
	GROW(MUL, R10, GB0, GB1, GB2, GB3); \
	GROW(MUL, R11, GC0, GC1, GC2, GC3); \
	GROW(MUL, R13, GD0, GD1, GD2, GD3); \
	ADDQ $24, SI; \
	INCQ BX; \
	JMP  la; \
ldiag: \
	LEAQ  (R9)(R14*4), DX; \
	LOAD; \
	TESTQ R15, R15; \
	JEQ   ld0; \
	GDIAG(MUL, R9, GA0, GA1, GA2, GA3); \
ld0: \
	GROW(MUL, R10, GB0, GB1, GB2, GB3); \
	GROW(MUL, R11, GC0, GC1, GC2, GC3); \
	GROW(MUL, R13, GD0, GD1, GD2, GD3); \
	GNEXT; \
	LOAD; \
	GCOL(MUL, 0, GA0, GA1, GA2, GA3); \
	TESTQ R15, R15; \
	JEQ   ld1; \
	GDIAG(MUL, R10, GB0, GB1, GB2, GB3); \
ld1: \
	GROW(MUL, R11, GC0, GC1, GC2, GC3); \
	GROW(MUL, R13, GD0, GD1, GD2, GD3); \
	GNEXT; \
	LOAD; \
	GCOL(MUL, 0, GA0, GA1, GA2, GA3); \
	GCOL(MUL, 4, GB0, GB1, GB2, GB3); \
	TESTQ R15, R15; \
	JEQ   ld2; \
	GDIAG(MUL, R11, GC0, GC1, GC2, GC3); \
ld2: \
	GROW(MUL, R13, GD0, GD1, GD2, GD3); \
	GNEXT; \
	LOAD; \
	GCOL(MUL, 0, GA0, GA1, GA2, GA3); \
	GCOL(MUL, 4, GB0, GB1, GB2, GB3); \
	GCOL(MUL, 8, GC0, GC1, GC2, GC3); \
	TESTQ R15, R15; \
	JEQ   ld3; \
	GDIAG(MUL, R13, GD0, GD1, GD2, GD3); \
ld3: \
	GNEXT; \
lc: \
	CMPQ BX, DI; \
	JGE  lst; \
	LOAD; \
	GCOL(MUL, 0, GA0, GA1, GA2, GA3); \
	GCOL(MUL, 4, GB0, GB1, GB2, GB3); \
	GCOL(MUL, 8, GC0, GC1, GC2, GC3); \
	GCOL(MUL, 12, GD0, GD1, GD2, GD3); \
	GNEXT; \
	JMP  lc; \
lst: \
	MOVQ grads+0(FP), AX; \
	LEAQ (R14)(R14*2), DX; \
	LEAQ (AX)(DX*8), AX; \
	ST(0, GA0, GA1, GA2, GA3); \
	ST(24, GB0, GB1, GB2, GB3); \
	ST(48, GC0, GC1, GC2, GC3); \
	ST(72, GD0, GD1, GD2, GD3); \
	MOVQ d+40(FP), BX; \
	SHLQ $2, BX; \
	PFG(0(AX)); \
	PFG(24(AX)); \
	PFG(48(AX)); \
	PFG(72(AX)); \
	MOVQ feats+16(FP), SI; \
	LEAQ (R14)(R14*2), DX; \
	LEAQ (SI)(DX*8), SI; \
	PF(0(SI)); \
	PF(24(SI)); \
	PF(48(SI)); \
	PF(72(SI))

// GARGS loads the gradient kernels' arguments: R8 = the dots, DI = f,
// R15 = self, R14 = t0 = 0; GBLOCK starts the block of t0: R9–R11 and
// R13 at its four features' dots, R12 at the sample's first column, CX
// = d; GNEXTBLOCK(lblock, ldone) moves t0 on four features, to f − 4 for
// the last block, and goes to lblock, or to ldone after the last.
#define GARGS \
	MOVQ dout+8(FP), R8; \
	MOVQ d+40(FP), AX; \
	LEAQ (R8)(AX*4), R8; \
	MOVQ f+24(FP), DI; \
	MOVQ self+32(FP), R15; \
	XORQ R14, R14

#define GBLOCK \
	GTRI(0, R9); \
	GTRI(1, R10); \
	GTRI(2, R11); \
	GTRI(3, R13); \
	MOVQ off+56(FP), R12; \
	MOVQ d+40(FP), CX

#define GNEXTBLOCK(lblock, ldone) \
	ADDQ    $4, R14; \
	CMPQ    R14, DI; \
	JGE     ldone; \
	LEAQ    -4(DI), AX; \
	CMPQ    R14, AX; \
	CMOVQGT AX, R14; \
	JMP     lblock

// TRIARGS loads the triangle kernels' arguments: DI = dst, R8 = the
// matrices' headers, R14 = f, R10 = the whole sixteens of a row, R9 = the
// first row i (1 − self); TRIROW(done) starts row i, SI = its matrix and
// BX = the first header of the rows j, or ends at done after the last.
#define TRIARGS \
	MOVQ dst+0(FP), DI; \
	MOVQ feats+8(FP), R8; \
	MOVQ f+16(FP), R14; \
	MOVQ d+32(FP), R10; \
	SHRQ $4, R10; \
	MOVQ $1, R9; \
	SUBQ self+24(FP), R9

#define TRIROW(done) \
	CMPQ R9, R14; \
	JGE  done; \
	LEAQ (R9)(R9*2), AX; \
	MOVQ (R8)(AX*8), SI; \
	MOVQ R8, BX

// func interactionTriangleAVX512(dst *float32, feats *[]float32, f, self, d int, tail int, off int)
// Row i's dots with up to sixteen rows j at a time: pair q of the group
// accumulates in Z(4(q%4) + q/4) sixty-four elements at a time (row i's
// in Z16–Z19, no FMA), then sixteen, then the last d%16 under K1; then
// four levels of FHALVE fold the sixteen dots together (lane l + l+8,
// l + l+4, l + l+2, l + l+1, interactionDot's order) into Z0, dot q in
// lane q, stored under K2 (the group's CX dots). The rows are the
// feature matrices' at byte off: R8 = the matrices' headers, SI = matrix
// i, BX the group's first matrix j header, R13 the dots of row i left,
// R10 the whole sixteens of a row, R15 the sixty-fours or sixteens left,
// R12 the byte offset in the matrices, R9 = i, R14 = f.
TEXT ·interactionTriangleAVX512(SB), NOSPLIT, $0-56
	TRIARGS
	MOVQ  tail+40(FP), AX
	KMOVW AX, K1

ftrow:
	TRIROW(ftdone)
	MOVQ R9, R13
	ADDQ self+24(FP), R13

ftgroup:
	TESTQ   R13, R13
	JZ      ftnext
	MOVQ    $16, CX
	CMPQ    R13, CX
	CMOVQLT R13, CX
	ZERO16
	MOVQ    off+48(FP), R12
	MOVQ    R10, R15
	SHRQ    $2, R15

ft64:
	TESTQ      R15, R15
	JZ         ft16
	VMOVUPS    (SI)(R12*1), Z16
	VMOVUPS    64(SI)(R12*1), Z17
	VMOVUPS    128(SI)(R12*1), Z18
	VMOVUPS    192(SI)(R12*1), Z19
	MOVQ       d+32(FP), AX       // row i of the next sample, d floats on
	LEAQ       (SI)(AX*4), AX
	PREFETCHT0 (AX)(R12*1)
	PREFETCHT0 64(AX)(R12*1)
	PREFETCHT0 128(AX)(R12*1)
	PREFETCHT0 192(AX)(R12*1)
	FGROUP(FPAIR4, ft64end)

ft64end:
	ADDQ $256, R12
	DECQ R15
	JMP  ft64

ft16:
	MOVQ R10, R15
	ANDQ $3, R15

ftchunk:
	TESTQ   R15, R15
	JZ      fttail
	VMOVUPS (SI)(R12*1), Z16
	FGROUP(FPAIR, ftcend)

ftcend:
	ADDQ $64, R12
	DECQ R15
	JMP  ftchunk

fttail:
	KORTESTW  K1, K1
	JZ        ftfold
	VMOVUPS.Z (SI)(R12*1), K1, Z16
	FGROUP(FTPAIR, ftfold)

// Lane l + l+8: the low halves of a pair of registers against their high
// halves; l + l+4: 128-bit blocks 0 and 2 against 1 and 3; l + l+2 and
// l + l+1 within the blocks.
ftfold:
	FHALVE(0x44, 0xEE, VSHUFF32X4, Z0, Z1)
	FHALVE(0x44, 0xEE, VSHUFF32X4, Z2, Z3)
	FHALVE(0x44, 0xEE, VSHUFF32X4, Z4, Z5)
	FHALVE(0x44, 0xEE, VSHUFF32X4, Z6, Z7)
	FHALVE(0x44, 0xEE, VSHUFF32X4, Z8, Z9)
	FHALVE(0x44, 0xEE, VSHUFF32X4, Z10, Z11)
	FHALVE(0x44, 0xEE, VSHUFF32X4, Z12, Z13)
	FHALVE(0x44, 0xEE, VSHUFF32X4, Z14, Z15)
	FHALVE(0x88, 0xDD, VSHUFF32X4, Z0, Z2)
	FHALVE(0x88, 0xDD, VSHUFF32X4, Z4, Z6)
	FHALVE(0x88, 0xDD, VSHUFF32X4, Z8, Z10)
	FHALVE(0x88, 0xDD, VSHUFF32X4, Z12, Z14)
	FHALVE(0x44, 0xEE, VSHUFPS, Z0, Z4)
	FHALVE(0x44, 0xEE, VSHUFPS, Z8, Z12)
	FHALVE(0x88, 0xDD, VSHUFPS, Z0, Z8)
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K2
	VMOVUPS Z0, K2, (DI)
	LEAQ    (DI)(CX*4), DI
	ADDQ    $384, BX
	SUBQ    CX, R13
	JMP     ftgroup

ftnext:
	INCQ R9
	JMP  ftrow

ftdone:
	VZEROUPPER
	RET

// The AVX-512 gradient kernel's registers: feature q's accumulators
// G(A+q)0…3, the broadcast coefficient GBC, GZERO clearing them all.
#define GA0 Z0
#define GA1 Z1
#define GA2 Z2
#define GA3 Z3
#define GB0 Z4
#define GB1 Z5
#define GB2 Z6
#define GB3 Z7
#define GC0 Z8
#define GC1 Z9
#define GC2 Z10
#define GC3 Z11
#define GD0 Z12
#define GD1 Z13
#define GD2 Z14
#define GD3 Z15
#define GBC Z20
#define GZERO ZERO16

// func interactionGradsAVX512(grads *[]float32, dout *float32, feats *[]float32, f, self, d int, tail int, off int)
// The rows of the gradient and feature matrices at byte off, init the
// first d of dout and the dots the rest. Four features t0…t0+3 at a
// time (the last four when f%4 > 0, some then done twice, to the same
// bits), in blocks of sixty-four columns, then of sixteen (the last d%16
// under K1): each starts from init for feature 0, zeros for the others,
// and adds the rows m in increasing order. For m < t0 every feature's
// coefficient is among its own dots; for m ≥ t0 + 4 among m's; the four
// m in between mix the two and skip each feature's own row (or, with
// self, add it at twice its dot). R8 = dots, R9–R11 and R13 the four
// features' dots, R14 = t0, DI = f, R15 = self, CX the columns left.
TEXT ·interactionGradsAVX512(SB), NOSPLIT, $0-72
	GARGS

gblock:
	GBLOCK

gw4:
	CMPQ CX, $64
	JL   gw1
	CMPQ nt+64(FP), $0
	JNE  gn4
	GSECTION(GLOAD4, GMUL4, GINIT4, GST4, GPF4, GPF4, gw4rows, gw4a, gw4diag, gw4d0, gw4d1, gw4d2, gw4d3, gw4c, gw4store)
	ADDQ $256, R12
	SUBQ $64, CX
	JMP  gw4

// The same with the gradient rows streamed past the caches, and not
// fetched for the next sample.
gn4:
	GSECTION(GLOAD4, GMUL4, GINIT4, GST4NT, GPF4, GNOPF, gn4rows, gn4a, gn4diag, gn4d0, gn4d1, gn4d2, gn4d3, gn4c, gn4store)
	ADDQ $256, R12
	SUBQ $64, CX
	JMP  gw4

gw1:
	TESTQ   CX, CX
	JLE     gnext
	MOVL    $0xFFFF, AX
	MOVQ    tail+48(FP), DX
	CMPQ    CX, $16
	CMOVQLT DX, AX
	KMOVW   AX, K1
	GSECTION(GLOAD1, GMUL1, GINIT1, GST1, GPF1, GPF1, gw1rows, gw1a, gw1diag, gw1d0, gw1d1, gw1d2, gw1d3, gw1c, gw1store)
	ADDQ    $64, R12
	SUBQ    $16, CX
	JMP     gw1

gnext:
	GNEXTBLOCK(gblock, gdone)

gdone:
	SFENCE // the streamed rows are seen before anything after
	VZEROUPPER
	RET

// JFOLD(lo, hi, xlo): the AVX2 fold of sixteen partial sums held in lo
// (lanes 0–7) and hi (8–15): lo + hi, then halves down to X xlo's lane 0
// (interactionDot's order); X15 is clobbered.
#define JFOLD(lo, hi, xlo) \
	VADDPS       hi, lo, lo; \
	VEXTRACTF128 $1, lo, X15; \
	VADDPS       X15, xlo, xlo; \
	VMOVHLPS     xlo, xlo, X15; \
	VADDPS       X15, xlo, xlo; \
	VMOVSHDUP    xlo, X15; \
	VADDSS       X15, xlo, xlo

// JQTERM(r, lo, hi) adds row i's sixteen (Y8, Y9) times row r's at R12
// into lo and hi, fused (one rounding); JQTAIL is it for
// the masked last d%16, the products' operands in jttail's order.
#define JQTERM(r, lo, hi) \
	VFMADD231PS (r)(R12*1), Y8, lo; \
	VFMADD231PS 32(r)(R12*1), Y9, hi

#define JQTAIL(r, lo, hi) \
	VMASKMOVPS  (r)(R12*1), Y14, Y10; \
	VFMADD231PS Y10, Y8, lo; \
	VMASKMOVPS  32(r)(R12*1), Y13, Y11; \
	VFMADD231PS Y11, Y9, hi

// func interactionTriangleAVX2(dst *float32, feats *[]float32, f, self, d int, tail int, m0, m1 *int32, off int)
// interactionTriangleAVX512 on YMM registers: the sixteen lanes are Y0
// (lanes 0–7) and Y1 (8–15), a tail's lanes masked by the masks at m0 and
// m1 (zeros past the row), and the fold starts with Y0 + Y1.
TEXT ·interactionTriangleAVX2(SB), NOSPLIT, $0-72
	TRIARGS
	MOVQ    m0+48(FP), AX
	VMOVDQU (AX), Y14
	MOVQ    m1+56(FP), AX
	VMOVDQU (AX), Y13

jtrow:
	TRIROW(jtdone)
	MOVQ       d+32(FP), AX       // row i of the next sample, d floats on
	LEAQ       (SI)(AX*4), AX
	ADDQ       off+64(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	MOVQ       self+24(FP), DX // the quads below use DX
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
	MOVQ   off+64(FP), R12
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

// The four dots fold together, JFOLD's additions: lane l + l+8 within
// each dot's pair, l + l+4 with dots 0 and 2, then 1 and 3, sharing a
// register (halves), l + l+2 and l + l+1 with all four sharing one,
// ending as dots 0–3 in X8.
jtqfold:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y5, Y4, Y4
	VADDPS       Y7, Y6, Y6
	VPERM2F128   $0x20, Y4, Y0, Y8
	VPERM2F128   $0x31, Y4, Y0, Y9
	VADDPS       Y9, Y8, Y0
	VPERM2F128   $0x20, Y6, Y2, Y8
	VPERM2F128   $0x31, Y6, Y2, Y9
	VADDPS       Y9, Y8, Y2
	VSHUFPS      $0x44, Y2, Y0, Y8
	VSHUFPS      $0xEE, Y2, Y0, Y9
	VADDPS       Y9, Y8, Y0
	VEXTRACTF128 $1, Y0, X9
	VSHUFPS      $0x88, X9, X0, X8
	VSHUFPS      $0xDD, X9, X0, X9
	VADDPS       X9, X8, X8
	VMOVUPS      X8, (DI)
	ADDQ         $16, DI
	ADDQ   $96, BX
	SUBQ   $4, CX
	JMP    jtquad

jtpair:
	TESTQ CX, CX
	JZ    jtnext
	MOVQ  (BX), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ  off+64(FP), R12
	MOVQ  R10, R13

jtchunk:
	TESTQ R13, R13
	JZ    jttail
	VMOVUPS     (SI)(R12*1), Y2
	VFMADD231PS (R11)(R12*1), Y2, Y0
	VMOVUPS     32(SI)(R12*1), Y3
	VFMADD231PS 32(R11)(R12*1), Y3, Y1
	ADDQ    $64, R12
	DECQ    R13
	JMP     jtchunk

jttail:
	VPTEST     Y14, Y14
	JZ         jtfold
	VMASKMOVPS  (SI)(R12*1), Y14, Y2
	VMASKMOVPS  (R11)(R12*1), Y14, Y4
	VFMADD231PS Y4, Y2, Y0
	VMASKMOVPS  32(SI)(R12*1), Y13, Y3
	VMASKMOVPS  32(R11)(R12*1), Y13, Y5
	VFMADD231PS Y5, Y3, Y1

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

// The AVX2 gradient kernel's registers: feature q's sixteen columns in
// Y(2q) and Y(2q+1) (its G(A+q)2 and 3 name them again, unused), the
// coefficient in Y10; GZERO clears them.
#undef GA0
#undef GA1
#undef GA2
#undef GA3
#undef GB0
#undef GB1
#undef GB2
#undef GB3
#undef GC0
#undef GC1
#undef GC2
#undef GC3
#undef GD0
#undef GD1
#undef GD2
#undef GD3
#undef GBC
#undef GZERO
#define GA0 Y0
#define GA1 Y1
#define GA2 Y0
#define GA3 Y1
#define GB0 Y2
#define GB1 Y3
#define GB2 Y2
#define GB3 Y3
#define GC0 Y4
#define GC1 Y5
#define GC2 Y4
#define GC3 Y5
#define GD0 Y6
#define GD1 Y7
#define GD2 Y6
#define GD3 Y7
#define GBC Y10
#define GZERO \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

// The AVX2 steps on sixteen columns (the *2 forms, row m's in Y8 and Y9)
// or eight under the mask in Y15 (the *1 forms, Y8 alone, the second
// accumulator named but left alone), as GLOAD4 … GST4 and GLOAD1 … GST1.
#define GLOADY2 MOVQ (SI), AX; VMOVUPS (AX)(R12*1), Y8; VMOVUPS 32(AX)(R12*1), Y9
#define GLOADY1 MOVQ (SI), AX; VMASKMOVPS (AX)(R12*1), Y15, Y8

#define GMULY2(a0, a1, a2, a3) \
	VFMADD231PS Y8, Y10, a0; \
	VFMADD231PS Y9, Y10, a1

#define GMULY1(a0, a1, a2, a3) VFMADD231PS Y8, Y10, a0

#define GINITY2 VMOVUPS (AX)(R12*1), Y0; VMOVUPS 32(AX)(R12*1), Y1
#define GINITY1 VMASKMOVPS (AX)(R12*1), Y15, Y0
#define GSTY2(off, a0, a1, a2, a3) MOVQ off(AX), DX; VMOVUPS a0, (DX)(R12*1); VMOVUPS a1, 32(DX)(R12*1)
#define GSTY2NT(off, a0, a1, a2, a3) MOVQ off(AX), DX; VMOVNTPS a0, (DX)(R12*1); VMOVNTPS a1, 32(DX)(R12*1)
#define GSTY1(off, a0, a1, a2, a3) MOVQ off(AX), DX; VMASKMOVPS a0, Y15, (DX)(R12*1)

// func interactionGradsAVX2(grads *[]float32, dout *float32, feats *[]float32, f, self, d int, m *int32, off int, nt int)
// interactionGradsAVX512 on YMM registers, in blocks of sixteen columns,
// then of eight, the last d%8 under the mask at m.
TEXT ·interactionGradsAVX2(SB), NOSPLIT, $0-72
	GARGS

hblock:
	GBLOCK

hw2:
	CMPQ CX, $16
	JL   hw1
	CMPQ nt+64(FP), $0
	JNE  hn2
	GSECTION(GLOADY2, GMULY2, GINITY2, GSTY2, GPF1, GPF1, hw2rows, hw2a, hw2diag, hw2d0, hw2d1, hw2d2, hw2d3, hw2c, hw2store)
	ADDQ $64, R12
	SUBQ $16, CX
	JMP  hw2

hn2:
	GSECTION(GLOADY2, GMULY2, GINITY2, GSTY2NT, GPF1, GNOPF, hn2rows, hn2a, hn2diag, hn2d0, hn2d1, hn2d2, hn2d3, hn2c, hn2store)
	ADDQ $64, R12
	SUBQ $16, CX
	JMP  hw2

hw1:
	TESTQ    CX, CX
	JLE      hnext
	VPCMPEQD Y15, Y15, Y15
	CMPQ     CX, $8
	JGE      hw1go
	MOVQ     m+48(FP), AX
	VMOVDQU  (AX), Y15

hw1go:
	GSECTION(GLOADY1, GMULY1, GINITY1, GSTY1, GPF1, GPF1, hw1rows, hw1a, hw1diag, hw1d0, hw1d1, hw1d2, hw1d3, hw1c, hw1store)
	ADDQ $32, R12
	SUBQ $8, CX
	JMP  hw1

hnext:
	GNEXTBLOCK(hblock, hdone)

hdone:
	SFENCE
	VZEROUPPER
	RET
