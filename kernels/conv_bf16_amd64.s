//go:build !noasm

#include "textflag.h"
#include "bf16_amd64.h"
#include "vec_amd64.h"
#include "tobf16_amd64.h"

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

// CBLOOP: the kernels' sum over taps and channel pairs into Z0–Z23, with
// R11 taps, R10 their offsets, SI the pixels, AX and CX one and three
// pixel strides, DI and R8 the second and third groups of four pixels
// from SI, DX and R15 B (labels named by the caller).
#define CBLOOP(tap, loop4, tl, loop1, next) \
tap:                                \
	MOVQ (R10), R12;                \
	ADDQ SI, R12;                   \
	LEAQ (R12)(DI*1), R14;          \
	LEAQ (R12)(R8*1), BX;           \
	MOVQ cp+16(FP), R13;            \
	CMPQ R13, $4;                   \
	JLT  tl;                        \
loop4:                              \
	BSTEP0; BSTEP1; BSTEP2; BSTEP3; \
	ADDQ $16, R12;                  \
	ADDQ $16, R14;                  \
	ADDQ $16, BX;                   \
	ADDQ $256, DX;                  \
	SUBQ $4, R13;                   \
	CMPQ R13, $4;                   \
	JGE  loop4;                     \
tl:                                 \
	TESTQ R13, R13;                 \
	JEQ   next;                     \
loop1:                              \
	BSTEP0;                         \
	ADDQ $4, R12;                   \
	ADDQ $4, R14;                   \
	ADDQ $4, BX;                    \
	ADDQ $64, DX;                   \
	DECQ R13;                       \
	JNE  loop1;                     \
next:                               \
	ADDQ $8, R10;                   \
	DECQ R11;                       \
	JNE  tap

// CBSTART loads the arguments both kernels share and zeroes the
// accumulators.
#define CBSTART \
	MOVQ taps+0(FP), R11;      \
	MOVQ cp+16(FP), R15;       \
	IMULQ R11, R15;            \
	SHLQ $6, R15;              \
	MOVQ a+24(FP), SI;         \
	MOVQ lda+32(FP), AX;       \
	LEAQ (AX)(AX*2), CX;       \
	MOVQ b+40(FP), DX;         \
	MOVQ offs+8(FP), R10;      \
	MOVQ g2+96(FP), DI;        \
	MOVQ g3+104(FP), R8;       \
	ZERO4(VPXORD, Z0, Z1, Z2, Z3);     \
	ZERO4(VPXORD, Z4, Z5, Z6, Z7);     \
	ZERO4(VPXORD, Z8, Z9, Z10, Z11);   \
	ZERO4(VPXORD, Z12, Z13, Z14, Z15); \
	ZERO4(VPXORD, Z16, Z17, Z18, Z19); \
	ZERO4(VPXORD, Z20, Z21, Z22, Z23)

// func convBF16Kernel12x32(taps int, offs *int, cp int, a *uint16, lda int, b *uint32, c *float32, ldc, rows, beta int, bias *float32, bstride, g2, g3 int)
//
// For each of taps taps (byte offsets offs[t] from a), cp channel pairs;
// the twelve pixels are three groups of four, lda bytes apart within a
// group, the groups at a, a + g2 and a + g3; pixel 4g+i's pairs start at
// its place + offs[t] (12 pixels are read, the first rows stored). b is the tile's first packed panel (64 bytes per
// pair, taps·cp pairs in order), the second panel bstride bytes on (at
// least 64·taps·cp: a panel may hold more taps than the call reads).
// C = A·B + bias (+ C when beta ≠ 0), bias 32 floats.
TEXT ·convBF16Kernel12x32(SB), NOSPLIT, $0-112
	CBSTART
	MOVQ bstride+88(FP), R15
	CBLOOP(cbtap, cbloop4, cbtail, cbloop1, cbnext)

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

// cbLowWords picks, for VPERMT2W, the low words of two vectors of
// doublewords, in order.
DATA cbLowWords<>+0(SB)/2, $0
DATA cbLowWords<>+2(SB)/2, $2
DATA cbLowWords<>+4(SB)/2, $4
DATA cbLowWords<>+6(SB)/2, $6
DATA cbLowWords<>+8(SB)/2, $8
DATA cbLowWords<>+10(SB)/2, $10
DATA cbLowWords<>+12(SB)/2, $12
DATA cbLowWords<>+14(SB)/2, $14
DATA cbLowWords<>+16(SB)/2, $16
DATA cbLowWords<>+18(SB)/2, $18
DATA cbLowWords<>+20(SB)/2, $20
DATA cbLowWords<>+22(SB)/2, $22
DATA cbLowWords<>+24(SB)/2, $24
DATA cbLowWords<>+26(SB)/2, $26
DATA cbLowWords<>+28(SB)/2, $28
DATA cbLowWords<>+30(SB)/2, $30
DATA cbLowWords<>+32(SB)/2, $32
DATA cbLowWords<>+34(SB)/2, $34
DATA cbLowWords<>+36(SB)/2, $36
DATA cbLowWords<>+38(SB)/2, $38
DATA cbLowWords<>+40(SB)/2, $40
DATA cbLowWords<>+42(SB)/2, $42
DATA cbLowWords<>+44(SB)/2, $44
DATA cbLowWords<>+46(SB)/2, $46
DATA cbLowWords<>+48(SB)/2, $48
DATA cbLowWords<>+50(SB)/2, $50
DATA cbLowWords<>+52(SB)/2, $52
DATA cbLowWords<>+54(SB)/2, $54
DATA cbLowWords<>+56(SB)/2, $56
DATA cbLowWords<>+58(SB)/2, $58
DATA cbLowWords<>+60(SB)/2, $60
DATA cbLowWords<>+62(SB)/2, $62
GLOBL cbLowWords<>(SB), RODATA|NOPTR, $64

// BROWH stores one row of the tile as bfloat16, the bfloat16 stage of
// bf16Stage in registers: accumulators plus the bias (Z24, Z25) rounded,
// then, where R12 has bit 1, plus the residual row at SI, rectified where
// it has bit 0 and rounded again; without the residual the rounded values
// are rectified as they are (a rectified bfloat16 value needs no second
// rounding). After the row, stops when the rows run out.
//
// Without the residual and with no subnormal lane, VCVTNE2PS2BF16 rounds
// the row in one instruction, as TOBF16512 does (to nearest even, a NaN's
// top half quieted) but for subnormals, which it flushes; the rectifier
// goes first there, which gives the same bits for every other value (a
// negative normal float never rounds to −0). na and nb number za and zb.
#define BROWH(za, zb, na, nb, res, slow, norelu, relu2, store, next, done) \
	VADDPS Z24, za, za;                  \
	VADDPS Z25, zb, zb;                  \
	TESTQ $2, R12;                       \
	JNE res;                             \
	VFPCLASSPSZ $0x20, za, K3;           \
	VFPCLASSPSZ $0x20, zb, K4;           \
	KORTESTW K3, K4;                     \
	JNE slow;                            \
	TESTQ $1, R12;                       \
	JEQ norelu;                          \
	VCMPPS $0x11, Z31, za, K3;           \
	VMOVAPS Z31, K3, za;                 \
	VCMPPS $0x11, Z31, zb, K4;           \
	VMOVAPS Z31, K4, zb;                 \
norelu:                                  \
	VCVTNE2PS2BF16_Z(28, nb, na);        \
	VMOVDQU64 Z28, (R8);                 \
	JMP next;                            \
res:                                     \
	TOBF16512(za, Z28, Z29, K1);         \
	TOBF16512(zb, Z28, Z29, K2);         \
	VPSLLD $16, za, za;                  \
	VPSLLD $16, zb, zb;                  \
	VPMOVZXWD (SI), Z28;                 \
	VPMOVZXWD 32(SI), Z29;               \
	VPSLLD $16, Z28, Z28;                \
	VPSLLD $16, Z29, Z29;                \
	VADDPS Z28, za, za;                  \
	VADDPS Z29, zb, zb;                  \
	TESTQ $1, R12;                       \
	JEQ relu2;                           \
	VMAXPS za, Z31, za;                  \
	VMAXPS zb, Z31, zb;                  \
relu2:                                   \
	TOBF16512(za, Z28, Z29, K1);         \
	TOBF16512(zb, Z28, Z29, K2);         \
	JMP store;                           \
slow:                                    \
	TOBF16512(za, Z28, Z29, K1);         \
	TOBF16512(zb, Z28, Z29, K2);         \
	TESTQ $1, R12;                       \
	JEQ store;                           \
	VPSLLD $16, za, za;                  \
	VPSLLD $16, zb, zb;                  \
	VMAXPS za, Z31, za;                  \
	VMAXPS zb, Z31, zb;                  \
	VPSRLD $16, za, za;                  \
	VPSRLD $16, zb, zb;                  \
store:                                   \
	VMOVDQU64 cbLowWords<>(SB), Z28;     \
	VPERMT2W zb, Z28, za;                \
	VMOVDQU64 za, (R8);                  \
next:                                    \
	DECQ DI;                             \
	JEQ done;                            \
	ADDQ R9, R8;                         \
	ADDQ R9, SI

// func convBF16Kernel12x32H(taps int, offs *int, cp int, a *uint16, lda int, b *uint32, y *uint16, ldy, rows int, bias *float32, res *uint16, mode, g2, g3 int)
//
// convBF16Kernel12x32 with beta 0 and bfloat16 output: y (row stride ldy
// elements) gets A·B + bias through BROWH's stage, mode bit 0 the
// rectifier and bit 1 the residual res (laid out as y).
TEXT ·convBF16Kernel12x32H(SB), NOSPLIT, $0-112
	CBSTART
	CBLOOP(chtap, chloop4, chtail, chloop1, chnext)

	CVTCONSTS512
	VPXORD Z31, Z31, Z31
	MOVQ y+48(FP), R8
	MOVQ ldy+56(FP), R9
	SHLQ $1, R9
	MOVQ rows+64(FP), DI
	MOVQ bias+72(FP), R13
	MOVQ res+80(FP), SI
	MOVQ mode+88(FP), R12
	VMOVUPS (R13), Z24
	VMOVUPS 64(R13), Z25
	BROWH(Z0, Z1, 0, 1, chres0, chslow0, chnr0, chr20, chst0, chnx0, chdone)
	BROWH(Z2, Z3, 2, 3, chres1, chslow1, chnr1, chr21, chst1, chnx1, chdone)
	BROWH(Z4, Z5, 4, 5, chres2, chslow2, chnr2, chr22, chst2, chnx2, chdone)
	BROWH(Z6, Z7, 6, 7, chres3, chslow3, chnr3, chr23, chst3, chnx3, chdone)
	BROWH(Z8, Z9, 8, 9, chres4, chslow4, chnr4, chr24, chst4, chnx4, chdone)
	BROWH(Z10, Z11, 10, 11, chres5, chslow5, chnr5, chr25, chst5, chnx5, chdone)
	BROWH(Z12, Z13, 12, 13, chres6, chslow6, chnr6, chr26, chst6, chnx6, chdone)
	BROWH(Z14, Z15, 14, 15, chres7, chslow7, chnr7, chr27, chst7, chnx7, chdone)
	BROWH(Z16, Z17, 16, 17, chres8, chslow8, chnr8, chr28, chst8, chnx8, chdone)
	BROWH(Z18, Z19, 18, 19, chres9, chslow9, chnr9, chr29, chst9, chnx9, chdone)
	BROWH(Z20, Z21, 20, 21, chres10, chslow10, chnr10, chr210, chst10, chnx10, chdone)
	BROWH(Z22, Z23, 22, 23, chres11, chslow11, chnr11, chr211, chst11, chnx11, chdone)

chdone:
	VZEROUPPER
	RET
