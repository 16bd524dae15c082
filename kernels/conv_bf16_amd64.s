//go:build !noasm

#include "textflag.h"
#include "bf16_amd64.h"

// The direct BF16 convolution micro-kernel: 12 output pixels × 32 output
// channels of float32, depth in channel pairs per kernel tap. Per pair,
// B's two packed 16-column panels are loaded and each pixel's channel pair
// (the pixels lda bytes apart, read in place from the bordered input) is
// broadcast once into a register two VDPBF16PS use.
#define BSTEP0 \
	VMOVUPS 0(DX), Z24; \
	VMOVUPS 0(DX)(R15*1), Z25; \
	VPBROADCASTD 0(R12), Z26; \
	VDPBF16PS_Z(0, 24, 26); \
	VDPBF16PS_Z(1, 25, 26); \
	VPBROADCASTD 0(R12)(AX*1), Z27; \
	VDPBF16PS_Z(2, 24, 27); \
	VDPBF16PS_Z(3, 25, 27); \
	VPBROADCASTD 0(R12)(AX*2), Z28; \
	VDPBF16PS_Z(4, 24, 28); \
	VDPBF16PS_Z(5, 25, 28); \
	VPBROADCASTD 0(R12)(CX*1), Z29; \
	VDPBF16PS_Z(6, 24, 29); \
	VDPBF16PS_Z(7, 25, 29); \
	VPBROADCASTD 0(R14), Z26; \
	VDPBF16PS_Z(8, 24, 26); \
	VDPBF16PS_Z(9, 25, 26); \
	VPBROADCASTD 0(R14)(AX*1), Z27; \
	VDPBF16PS_Z(10, 24, 27); \
	VDPBF16PS_Z(11, 25, 27); \
	VPBROADCASTD 0(R14)(AX*2), Z28; \
	VDPBF16PS_Z(12, 24, 28); \
	VDPBF16PS_Z(13, 25, 28); \
	VPBROADCASTD 0(R14)(CX*1), Z29; \
	VDPBF16PS_Z(14, 24, 29); \
	VDPBF16PS_Z(15, 25, 29); \
	VPBROADCASTD 0(BX), Z26; \
	VDPBF16PS_Z(16, 24, 26); \
	VDPBF16PS_Z(17, 25, 26); \
	VPBROADCASTD 0(BX)(AX*1), Z27; \
	VDPBF16PS_Z(18, 24, 27); \
	VDPBF16PS_Z(19, 25, 27); \
	VPBROADCASTD 0(BX)(AX*2), Z28; \
	VDPBF16PS_Z(20, 24, 28); \
	VDPBF16PS_Z(21, 25, 28); \
	VPBROADCASTD 0(BX)(CX*1), Z29; \
	VDPBF16PS_Z(22, 24, 29); \
	VDPBF16PS_Z(23, 25, 29)
#define BSTEP1 \
	VMOVUPS 64(DX), Z30; \
	VMOVUPS 64(DX)(R15*1), Z31; \
	VPBROADCASTD 4(R12), Z26; \
	VDPBF16PS_Z(0, 30, 26); \
	VDPBF16PS_Z(1, 31, 26); \
	VPBROADCASTD 4(R12)(AX*1), Z27; \
	VDPBF16PS_Z(2, 30, 27); \
	VDPBF16PS_Z(3, 31, 27); \
	VPBROADCASTD 4(R12)(AX*2), Z28; \
	VDPBF16PS_Z(4, 30, 28); \
	VDPBF16PS_Z(5, 31, 28); \
	VPBROADCASTD 4(R12)(CX*1), Z29; \
	VDPBF16PS_Z(6, 30, 29); \
	VDPBF16PS_Z(7, 31, 29); \
	VPBROADCASTD 4(R14), Z26; \
	VDPBF16PS_Z(8, 30, 26); \
	VDPBF16PS_Z(9, 31, 26); \
	VPBROADCASTD 4(R14)(AX*1), Z27; \
	VDPBF16PS_Z(10, 30, 27); \
	VDPBF16PS_Z(11, 31, 27); \
	VPBROADCASTD 4(R14)(AX*2), Z28; \
	VDPBF16PS_Z(12, 30, 28); \
	VDPBF16PS_Z(13, 31, 28); \
	VPBROADCASTD 4(R14)(CX*1), Z29; \
	VDPBF16PS_Z(14, 30, 29); \
	VDPBF16PS_Z(15, 31, 29); \
	VPBROADCASTD 4(BX), Z26; \
	VDPBF16PS_Z(16, 30, 26); \
	VDPBF16PS_Z(17, 31, 26); \
	VPBROADCASTD 4(BX)(AX*1), Z27; \
	VDPBF16PS_Z(18, 30, 27); \
	VDPBF16PS_Z(19, 31, 27); \
	VPBROADCASTD 4(BX)(AX*2), Z28; \
	VDPBF16PS_Z(20, 30, 28); \
	VDPBF16PS_Z(21, 31, 28); \
	VPBROADCASTD 4(BX)(CX*1), Z29; \
	VDPBF16PS_Z(22, 30, 29); \
	VDPBF16PS_Z(23, 31, 29)
#define BSTEP2 \
	VMOVUPS 128(DX), Z24; \
	VMOVUPS 128(DX)(R15*1), Z25; \
	VPBROADCASTD 8(R12), Z26; \
	VDPBF16PS_Z(0, 24, 26); \
	VDPBF16PS_Z(1, 25, 26); \
	VPBROADCASTD 8(R12)(AX*1), Z27; \
	VDPBF16PS_Z(2, 24, 27); \
	VDPBF16PS_Z(3, 25, 27); \
	VPBROADCASTD 8(R12)(AX*2), Z28; \
	VDPBF16PS_Z(4, 24, 28); \
	VDPBF16PS_Z(5, 25, 28); \
	VPBROADCASTD 8(R12)(CX*1), Z29; \
	VDPBF16PS_Z(6, 24, 29); \
	VDPBF16PS_Z(7, 25, 29); \
	VPBROADCASTD 8(R14), Z26; \
	VDPBF16PS_Z(8, 24, 26); \
	VDPBF16PS_Z(9, 25, 26); \
	VPBROADCASTD 8(R14)(AX*1), Z27; \
	VDPBF16PS_Z(10, 24, 27); \
	VDPBF16PS_Z(11, 25, 27); \
	VPBROADCASTD 8(R14)(AX*2), Z28; \
	VDPBF16PS_Z(12, 24, 28); \
	VDPBF16PS_Z(13, 25, 28); \
	VPBROADCASTD 8(R14)(CX*1), Z29; \
	VDPBF16PS_Z(14, 24, 29); \
	VDPBF16PS_Z(15, 25, 29); \
	VPBROADCASTD 8(BX), Z26; \
	VDPBF16PS_Z(16, 24, 26); \
	VDPBF16PS_Z(17, 25, 26); \
	VPBROADCASTD 8(BX)(AX*1), Z27; \
	VDPBF16PS_Z(18, 24, 27); \
	VDPBF16PS_Z(19, 25, 27); \
	VPBROADCASTD 8(BX)(AX*2), Z28; \
	VDPBF16PS_Z(20, 24, 28); \
	VDPBF16PS_Z(21, 25, 28); \
	VPBROADCASTD 8(BX)(CX*1), Z29; \
	VDPBF16PS_Z(22, 24, 29); \
	VDPBF16PS_Z(23, 25, 29)
#define BSTEP3 \
	VMOVUPS 192(DX), Z30; \
	VMOVUPS 192(DX)(R15*1), Z31; \
	VPBROADCASTD 12(R12), Z26; \
	VDPBF16PS_Z(0, 30, 26); \
	VDPBF16PS_Z(1, 31, 26); \
	VPBROADCASTD 12(R12)(AX*1), Z27; \
	VDPBF16PS_Z(2, 30, 27); \
	VDPBF16PS_Z(3, 31, 27); \
	VPBROADCASTD 12(R12)(AX*2), Z28; \
	VDPBF16PS_Z(4, 30, 28); \
	VDPBF16PS_Z(5, 31, 28); \
	VPBROADCASTD 12(R12)(CX*1), Z29; \
	VDPBF16PS_Z(6, 30, 29); \
	VDPBF16PS_Z(7, 31, 29); \
	VPBROADCASTD 12(R14), Z26; \
	VDPBF16PS_Z(8, 30, 26); \
	VDPBF16PS_Z(9, 31, 26); \
	VPBROADCASTD 12(R14)(AX*1), Z27; \
	VDPBF16PS_Z(10, 30, 27); \
	VDPBF16PS_Z(11, 31, 27); \
	VPBROADCASTD 12(R14)(AX*2), Z28; \
	VDPBF16PS_Z(12, 30, 28); \
	VDPBF16PS_Z(13, 31, 28); \
	VPBROADCASTD 12(R14)(CX*1), Z29; \
	VDPBF16PS_Z(14, 30, 29); \
	VDPBF16PS_Z(15, 31, 29); \
	VPBROADCASTD 12(BX), Z26; \
	VDPBF16PS_Z(16, 30, 26); \
	VDPBF16PS_Z(17, 31, 26); \
	VPBROADCASTD 12(BX)(AX*1), Z27; \
	VDPBF16PS_Z(18, 30, 27); \
	VDPBF16PS_Z(19, 31, 27); \
	VPBROADCASTD 12(BX)(AX*2), Z28; \
	VDPBF16PS_Z(20, 30, 28); \
	VDPBF16PS_Z(21, 31, 28); \
	VPBROADCASTD 12(BX)(CX*1), Z29; \
	VDPBF16PS_Z(22, 30, 29); \
	VDPBF16PS_Z(23, 31, 29)

// BROW stores one row of the tile: accumulators plus the bias (Z24, Z25),
// plus C where R12 (beta) is nonzero; after the row, stops when the rows
// run out.
#define BROW(za, zb, lab) \
	VADDPS Z24, za, za; \
	VADDPS Z25, zb, zb; \
	TESTQ  R12, R12; \
	JEQ    lab; \
	VADDPS (R8), za, za; \
	VADDPS 64(R8), zb, zb; \
lab: \
	VMOVUPS za, (R8); \
	VMOVUPS zb, 64(R8); \
	DECQ   DI; \
	JEQ    cbdone; \
	ADDQ   R9, R8

// func convBF16Kernel12x32(taps int, offs *int, cp int, a *uint16, lda int, b *uint32, c *float32, ldc, rows, beta int, bias *float32)
//
// For each of taps taps (byte offsets offs[t] from a), cp channel pairs;
// pixel r's pairs start at a + r·lda + offs[t] (12 pixels are read, the
// first rows stored). b is the tile's first packed panel (64 bytes per
// pair, taps·cp pairs in order), the second panel 64·taps·cp bytes on.
// C = A·B + bias (+ C when beta ≠ 0), bias 32 floats.
TEXT ·convBF16Kernel12x32(SB), NOSPLIT, $0-88
	MOVQ taps+0(FP), R11
	MOVQ cp+16(FP), R15
	IMULQ R11, R15
	SHLQ $6, R15
	MOVQ a+24(FP), SI
	MOVQ lda+32(FP), AX
	LEAQ (AX)(AX*2), CX
	MOVQ b+40(FP), DX
	MOVQ offs+8(FP), R10
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

cbtap:
	MOVQ (R10), R12
	ADDQ SI, R12
	LEAQ (R12)(AX*4), R14
	LEAQ (R14)(AX*4), BX
	MOVQ cp+16(FP), R13
	CMPQ R13, $4
	JLT  cbtail

cbloop4:
	BSTEP0
	BSTEP1
	BSTEP2
	BSTEP3
	ADDQ $16, R12
	ADDQ $16, R14
	ADDQ $16, BX
	ADDQ $256, DX
	SUBQ $4, R13
	CMPQ R13, $4
	JGE  cbloop4

cbtail:
	TESTQ R13, R13
	JEQ   cbnext

cbloop1:
	BSTEP0
	ADDQ $4, R12
	ADDQ $4, R14
	ADDQ $4, BX
	ADDQ $64, DX
	DECQ R13
	JNE  cbloop1

cbnext:
	ADDQ $8, R10
	DECQ R11
	JNE  cbtap

	MOVQ c+48(FP), R8
	MOVQ ldc+56(FP), R9
	SHLQ $2, R9
	MOVQ rows+64(FP), DI
	MOVQ beta+72(FP), R12
	MOVQ bias+80(FP), R13
	VMOVUPS (R13), Z24
	VMOVUPS 64(R13), Z25
	BROW(Z0, Z1, cbr0)
	BROW(Z2, Z3, cbr1)
	BROW(Z4, Z5, cbr2)
	BROW(Z6, Z7, cbr3)
	BROW(Z8, Z9, cbr4)
	BROW(Z10, Z11, cbr5)
	BROW(Z12, Z13, cbr6)
	BROW(Z14, Z15, cbr7)
	BROW(Z16, Z17, cbr8)
	BROW(Z18, Z19, cbr9)
	BROW(Z20, Z21, cbr10)
	BROW(Z22, Z23, cbr11)

cbdone:
	VZEROUPPER
	RET
