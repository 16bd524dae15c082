//go:build amd64 && !noasm

#include "textflag.h"

// VNNIROW(mem, t, acc0, acc1): broadcast a row's four bytes of A at mem
// into t and add their dot products with the group's 32 channels (Z24,
// Z25) into acc0 and acc1. VPDPBUSD takes the unsigned bytes from its
// middle operand and the signed ones from its first. VBROADCASTSS moves
// the same 32 bits as VPBROADCASTD and is a pure load on every Intel core.
#define VNNIROW(mem, t, acc0, acc1) \
	VBROADCASTSS mem, t; VPDPBUSD Z24, t, acc0; VPDPBUSD Z25, t, acc1

// VNNIGROUP(ao, bo0, bo1): one group of four depths for the 12 rows: A at
// byte ao of each row, the weight at bo0 and bo1 of DX.
#define VNNIGROUP(ao, bo0, bo1) \
	VMOVDQU32 bo0(DX), Z24; VMOVDQU32 bo1(DX), Z25 \
	VNNIROW(ao(SI), Z26, Z0, Z1); VNNIROW(ao(SI)(R8*1), Z27, Z2, Z3) \
	VNNIROW(ao(SI)(R8*2), Z28, Z4, Z5); VNNIROW(ao(SI)(R9*1), Z29, Z6, Z7) \
	VNNIROW(ao(R10), Z30, Z8, Z9); VNNIROW(ao(R10)(R8*1), Z31, Z10, Z11) \
	VNNIROW(ao(R10)(R8*2), Z26, Z12, Z13); VNNIROW(ao(R10)(R9*1), Z27, Z14, Z15) \
	VNNIROW(ao(R11), Z28, Z16, Z17); VNNIROW(ao(R11)(R8*1), Z29, Z18, Z19) \
	VNNIROW(ao(R11)(R8*2), Z30, Z20, Z21); VNNIROW(ao(R11)(R9*1), Z31, Z22, Z23)

// ADDROW(m0, m1, a, b): a += the 16 int32 at m0, b += those at m1.
#define ADDROW(m0, m1, a, b) VPADDD m0, a, a; VPADDD m1, b, b

// STROW(m0, m1, a, b): store a at m0 and b at m1.
#define STROW(m0, m1, a, b) VMOVDQU32 a, m0; VMOVDQU32 b, m1

// ZROW4(a, b, c, d): zero four ZMM registers.
#define ZROW4(a, b, c, d) VPXORD a, a, a; VPXORD b, b, b; VPXORD c, c, c; VPXORD d, d, d

// W64PUT stores the 6×64 sums Z0…Z23 to rows DI, DI+R12, DI+2·R12,
// DI+R13 (three rows), AX (four rows on) and AX+R12, and returns.
#define W64PUT \
	ST4((DI), Z0, Z1, Z2, Z3); ST4((DI)(R12*1), Z4, Z5, Z6, Z7); \
	ST4((DI)(R12*2), Z8, Z9, Z10, Z11); ST4((DI)(R13*1), Z12, Z13, Z14, Z15); \
	ST4((AX), Z16, Z17, Z18, Z19); ST4((AX)(R12*1), Z20, Z21, Z22, Z23); \
	VZEROUPPER; \
	RET

// TILEARGS8 loads the arguments the 12×32 VNNI and 6×8 AVX2 kernels share:
// lda (R8, three rows R9), b (BX), c (DI), its row stride in bytes (R12,
// three rows R13) and the tile count (R14).
#define TILEARGS8 \
	MOVQ lda+16(FP), R8; \
	LEAQ (R8)(R8*2), R9; \
	MOVQ b+24(FP), BX; \
	MOVQ c+40(FP), DI; \
	MOVQ ldc+48(FP), R12; \
	SHLQ $2, R12; \
	LEAQ (R12)(R12*2), R13; \
	MOVQ tiles+56(FP), R14

// func u8s8KernelVNNI(kg int, a *uint8, lda int, b *int8, bStep int, c *int32, ldc int, tiles int, add int)
// Registers: Z0…Z23 the 12×32 int32 sums (row r in Z2r, Z2r+1), Z24–Z25
// the weight group, Z26–Z31 broadcast A. Rows of A: SI, SI+lda, SI+2lda,
// SI+3lda, then the same from R10 = SI+4lda and R11 = SI+8lda. Two groups
// a round, so the loop's own instructions stay few beside the 48
// VPDPBUSD.
TEXT ·u8s8KernelVNNI(SB), NOSPLIT, $0-72
	TILEARGS8

vnnitile:
	MOVQ a+8(FP), SI
	LEAQ (SI)(R8*4), R10
	LEAQ (R10)(R8*4), R11
	MOVQ BX, DX
	ZROW4(Z0, Z1, Z2, Z3); ZROW4(Z4, Z5, Z6, Z7); ZROW4(Z8, Z9, Z10, Z11)
	ZROW4(Z12, Z13, Z14, Z15); ZROW4(Z16, Z17, Z18, Z19); ZROW4(Z20, Z21, Z22, Z23)
	MOVQ kg+0(FP), CX
	SHRQ $1, CX
	JZ   vnnisingle

vnnipair:
	VNNIGROUP(0, 0, 64)
	VNNIGROUP(4, 128, 192)
	ADDQ $8, SI
	ADDQ $8, R10
	ADDQ $8, R11
	ADDQ $256, DX
	DECQ CX
	JNZ  vnnipair

vnnisingle:
	TESTQ $1, kg+0(FP)
	JZ    vnnistore
	VNNIGROUP(0, 0, 64)

vnnistore:
	LEAQ  (DI)(R12*4), AX
	LEAQ  (AX)(R12*4), DX
	CMPQ  add+64(FP), $0
	JEQ   vnniput
	ADDROW((DI), 64(DI), Z0, Z1); ADDROW((DI)(R12*1), 64(DI)(R12*1), Z2, Z3)
	ADDROW((DI)(R12*2), 64(DI)(R12*2), Z4, Z5); ADDROW((DI)(R13*1), 64(DI)(R13*1), Z6, Z7)
	ADDROW((AX), 64(AX), Z8, Z9); ADDROW((AX)(R12*1), 64(AX)(R12*1), Z10, Z11)
	ADDROW((AX)(R12*2), 64(AX)(R12*2), Z12, Z13); ADDROW((AX)(R13*1), 64(AX)(R13*1), Z14, Z15)
	ADDROW((DX), 64(DX), Z16, Z17); ADDROW((DX)(R12*1), 64(DX)(R12*1), Z18, Z19)
	ADDROW((DX)(R12*2), 64(DX)(R12*2), Z20, Z21); ADDROW((DX)(R13*1), 64(DX)(R13*1), Z22, Z23)

vnniput:
	STROW((DI), 64(DI), Z0, Z1); STROW((DI)(R12*1), 64(DI)(R12*1), Z2, Z3)
	STROW((DI)(R12*2), 64(DI)(R12*2), Z4, Z5); STROW((DI)(R13*1), 64(DI)(R13*1), Z6, Z7)
	STROW((AX), 64(AX), Z8, Z9); STROW((AX)(R12*1), 64(AX)(R12*1), Z10, Z11)
	STROW((AX)(R12*2), 64(AX)(R12*2), Z12, Z13); STROW((AX)(R13*1), 64(AX)(R13*1), Z14, Z15)
	STROW((DX), 64(DX), Z16, Z17); STROW((DX)(R12*1), 64(DX)(R12*1), Z18, Z19)
	STROW((DX)(R12*2), 64(DX)(R12*2), Z20, Z21); STROW((DX)(R13*1), 64(DX)(R13*1), Z22, Z23)
	ADDQ bStep+32(FP), BX
	ADDQ $128, DI
	DECQ R14
	JNZ  vnnitile
	VZEROUPPER
	RET

// W64ROW(mem, t, a0, a1, a2, a3): broadcast a row's four bytes of A at mem
// into t and add their dot products with the group's 64 channels (Z24–Z27,
// two panels) into a0…a3.
#define W64ROW(mem, t, a0, a1, a2, a3) \
	VBROADCASTSS mem, t; VPDPBUSD Z24, t, a0; VPDPBUSD Z25, t, a1; VPDPBUSD Z26, t, a2; VPDPBUSD Z27, t, a3

// W64GROUP(ao, bo0, bo1): one group of four depths for the 6 rows: A at
// byte ao of each row, the weights at bo0 and bo1 of both panels (DX and
// DX+R11).
#define W64GROUP(ao, bo0, bo1) \
	VMOVDQU32 bo0(DX), Z24; VMOVDQU32 bo1(DX), Z25 \
	VMOVDQU32 bo0(DX)(R11*1), Z26; VMOVDQU32 bo1(DX)(R11*1), Z27 \
	W64ROW(ao(SI), Z28, Z0, Z1, Z2, Z3); W64ROW(ao(SI)(R8*1), Z29, Z4, Z5, Z6, Z7) \
	W64ROW(ao(SI)(R8*2), Z30, Z8, Z9, Z10, Z11); W64ROW(ao(SI)(R9*1), Z31, Z12, Z13, Z14, Z15) \
	W64ROW(ao(R10), Z28, Z16, Z17, Z18, Z19); W64ROW(ao(R10)(R8*1), Z29, Z20, Z21, Z22, Z23)

// ADD4(m, a, b, c, d): a…d += the 64 int32 at m.
#define ADD4(m, a, b, c, d) VPADDD m, a, a; VPADDD 64 m, b, b; VPADDD 128 m, c, c; VPADDD 192 m, d, d

// ST4(m, a, b, c, d): store a…d at m.
#define ST4(m, a, b, c, d) VMOVDQU32 a, m; VMOVDQU32 b, 64 m; VMOVDQU32 c, 128 m; VMOVDQU32 d, 192 m

// func u8s8KernelVNNI64(kg int, a *uint8, lda int, b *int8, ps int, c *int32, ldc int, add int)
// One tile of 6 rows by 64 channels: the panel at b and the next, ps
// bytes on. Registers: Z0…Z23 the sums (row r in Z4r…Z4r+3), Z24–Z27 the
// weight group, Z28–Z31 broadcast A. Rows of A: SI, SI+lda, SI+2lda,
// SI+3lda, R10 = SI+4lda, R10+lda.
TEXT ·u8s8KernelVNNI64(SB), NOSPLIT, $0-64
	MOVQ lda+16(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ a+8(FP), SI
	LEAQ (SI)(R8*4), R10
	MOVQ b+24(FP), DX
	MOVQ ps+32(FP), R11
	ZROW4(Z0, Z1, Z2, Z3); ZROW4(Z4, Z5, Z6, Z7); ZROW4(Z8, Z9, Z10, Z11)
	ZROW4(Z12, Z13, Z14, Z15); ZROW4(Z16, Z17, Z18, Z19); ZROW4(Z20, Z21, Z22, Z23)
	MOVQ kg+0(FP), CX
	SHRQ $1, CX
	JZ   w64single

w64pair:
	W64GROUP(0, 0, 64)
	W64GROUP(4, 128, 192)
	ADDQ $8, SI
	ADDQ $8, R10
	ADDQ $256, DX
	DECQ CX
	JNZ  w64pair

w64single:
	TESTQ $1, kg+0(FP)
	JZ    w64store
	W64GROUP(0, 0, 64)

w64store:
	MOVQ c+40(FP), DI
	MOVQ ldc+48(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*2), R13
	LEAQ (DI)(R12*4), AX
	CMPQ add+56(FP), $0
	JEQ  w64put
	ADD4((DI), Z0, Z1, Z2, Z3); ADD4((DI)(R12*1), Z4, Z5, Z6, Z7)
	ADD4((DI)(R12*2), Z8, Z9, Z10, Z11); ADD4((DI)(R13*1), Z12, Z13, Z14, Z15)
	ADD4((AX), Z16, Z17, Z18, Z19); ADD4((AX)(R12*1), Z20, Z21, Z22, Z23)

w64put:
	W64PUT

// The indirect kernels run a strip's whole depth in one call, segment by
// segment (tapRun: byte offset, first group, group count, 8 bytes each),
// with the sums in registers throughout, and store them. Registers: AX
// the input, BX the row offsets, DI the segment, R14 segments left, SI,
// R8, R9, R10, R12, R13 the six rows, DX the weights, CX groups left.

// INDSEG(b) loads segment DI: the six rows at AX + rows[r] + off, the
// weights at b + 128·g0, and its group count, halved, into CX.
#define INDSEG(b) \
	MOVQ 0(DI), SI; \
	ADDQ AX, SI; \
	MOVQ SI, R8; \
	MOVQ SI, R9; \
	MOVQ SI, R10; \
	MOVQ SI, R12; \
	MOVQ SI, R13; \
	ADDQ 0(BX), SI; \
	ADDQ 8(BX), R8; \
	ADDQ 16(BX), R9; \
	ADDQ 24(BX), R10; \
	ADDQ 32(BX), R12; \
	ADDQ 40(BX), R13; \
	MOVQ 8(DI), DX; \
	SHLQ $7, DX; \
	ADDQ b, DX; \
	MOVQ 16(DI), CX; \
	SHRQ $1, CX

// INDNEXT(n): advance the six rows by n bytes.
#define INDNEXT(n) ADDQ n, SI; ADDQ n, R8; ADDQ n, R9; ADDQ n, R10; ADDQ n, R12; ADDQ n, R13

// W64GROUPI(ao, bo0, bo1) is W64GROUP for the indirect kernel's rows.
#define W64GROUPI(ao, bo0, bo1) \
	VMOVDQU32 bo0(DX), Z24; VMOVDQU32 bo1(DX), Z25 \
	VMOVDQU32 bo0(DX)(R11*1), Z26; VMOVDQU32 bo1(DX)(R11*1), Z27 \
	W64ROW(ao(SI), Z28, Z0, Z1, Z2, Z3); W64ROW(ao(R8), Z29, Z4, Z5, Z6, Z7) \
	W64ROW(ao(R9), Z30, Z8, Z9, Z10, Z11); W64ROW(ao(R10), Z31, Z12, Z13, Z14, Z15) \
	W64ROW(ao(R12), Z28, Z16, Z17, Z18, Z19); W64ROW(ao(R13), Z29, Z20, Z21, Z22, Z23)

// INDLOOP(GROUP, b, seg, pair, single, next): the indirect kernels' loop
// over the segments (DI, R14 of them) and each segment's groups, two a
// round, with GROUP(ao, bo0, bo1) the kernel's group of four depths and b
// its weights; the labels are the kernel's own.
#define INDLOOP(GROUP, b, seg, pair, single, next) \
seg: \
	INDSEG(b); \
	JZ   single; \
pair: \
	GROUP(0, 0, 64); \
	GROUP(4, 128, 192); \
	INDNEXT($8); \
	ADDQ $256, DX; \
	DECQ CX; \
	JNZ  pair; \
single: \
	TESTQ $1, 16(DI); \
	JZ    next; \
	GROUP(0, 0, 64); \
next: \
	ADDQ $24, DI; \
	DECQ R14; \
	JNZ  seg

// INDOUT(c, ldc): the rows of the sums at c, ldc int32 apart: DI, R12 a
// row in bytes, R13 three, AX four rows on.
#define INDOUT(c, ldc) \
	MOVQ c, DI; \
	MOVQ ldc, R12; \
	SHLQ $2, R12; \
	LEAQ (R12)(R12*2), R13; \
	LEAQ (DI)(R12*4), AX

// func u8s8KernelVNNI64Ind(segs *tapRun, nseg int, a *uint8, rows *int, b *int8, ps int, c *int32, ldc int)
// Six rows by 64 channels (the panel at b and the next, ps bytes on), row
// r of A at a + rows[r], over nseg ≥ 1 segments.
TEXT ·u8s8KernelVNNI64Ind(SB), NOSPLIT, $0-64
	MOVQ segs+0(FP), DI
	MOVQ nseg+8(FP), R14
	MOVQ a+16(FP), AX
	MOVQ rows+24(FP), BX
	MOVQ ps+40(FP), R11
	ZROW4(Z0, Z1, Z2, Z3); ZROW4(Z4, Z5, Z6, Z7); ZROW4(Z8, Z9, Z10, Z11)
	ZROW4(Z12, Z13, Z14, Z15); ZROW4(Z16, Z17, Z18, Z19); ZROW4(Z20, Z21, Z22, Z23)

	INDLOOP(W64GROUPI, b+32(FP), i64seg, i64pair, i64single, i64next)
	INDOUT(c+48(FP), ldc+56(FP))
	W64PUT

// W32GROUPI(ao, bo0, bo1): one group of four depths for the indirect
// kernel's six rows and one panel of 32 channels.
#define W32GROUPI(ao, bo0, bo1) \
	VMOVDQU32 bo0(DX), Z24; VMOVDQU32 bo1(DX), Z25 \
	VNNIROW(ao(SI), Z26, Z0, Z1); VNNIROW(ao(R8), Z27, Z2, Z3) \
	VNNIROW(ao(R9), Z28, Z4, Z5); VNNIROW(ao(R10), Z29, Z6, Z7) \
	VNNIROW(ao(R12), Z30, Z8, Z9); VNNIROW(ao(R13), Z31, Z10, Z11)

// func u8s8KernelVNNI32Ind(segs *tapRun, nseg int, a *uint8, rows *int, b *int8, c *int32, ldc int)
// The indirect kernel for a last odd panel: six rows by 32 channels.
TEXT ·u8s8KernelVNNI32Ind(SB), NOSPLIT, $0-56
	MOVQ segs+0(FP), DI
	MOVQ nseg+8(FP), R14
	MOVQ a+16(FP), AX
	MOVQ rows+24(FP), BX
	ZROW4(Z0, Z1, Z2, Z3); ZROW4(Z4, Z5, Z6, Z7); ZROW4(Z8, Z9, Z10, Z11)

	INDLOOP(W32GROUPI, b+32(FP), i32seg, i32pair, i32single, i32next)
	INDOUT(c+40(FP), ldc+48(FP))
	STROW((DI), 64(DI), Z0, Z1); STROW((DI)(R12*1), 64(DI)(R12*1), Z2, Z3)
	STROW((DI)(R12*2), 64(DI)(R12*2), Z4, Z5); STROW((DI)(R13*1), 64(DI)(R13*1), Z6, Z7)
	STROW((AX), 64(AX), Z8, Z9); STROW((AX)(R12*1), 64(AX)(R12*1), Z10, Z11)
	VZEROUPPER
	RET

// AVX2ROW(mem, acc0, acc1): broadcast a row's four depths of A at mem,
// already widened to 16 bits, across Y14 and add their products with the
// group's eight channels, widened in Y12 (channels 0–3) and Y13 (4–7),
// into acc0 and acc1. VPMADDWD sums adjacent pairs, so each channel's sum
// is spread over two int32 lanes until the end; no pair exceeds
// 2·255·128.
#define AVX2ROW(mem, acc0, acc1) \
	VPBROADCASTQ mem, Y14 \
	VPMADDWD Y12, Y14, Y15; VPADDD Y15, acc0, acc0 \
	VPMADDWD Y13, Y14, Y15; VPADDD Y15, acc1, acc1

// FOLD(a, b): a = the eight channel sums of the pair-split a (channels
// 0–3) and b (4–7), in channel order.
#define FOLD(a, b) VPHADDD b, a, a; VPERMQ $0xD8, a, a

// func u8s8KernelAVX2(kg int, a *uint16, lda int, b *int8, bStep int, c *int32, ldc int, tiles int, add int)
// Registers: Y0…Y11 the 6×8 sums (row r in Y2r, Y2r+1, two lanes per
// channel), Y12–Y13 the widened weights, Y14 widened A, Y15 products.
TEXT ·u8s8KernelAVX2(SB), NOSPLIT, $0-72
	TILEARGS8

avx2tile:
	MOVQ   a+8(FP), SI
	LEAQ   (SI)(R8*4), R10
	MOVQ   BX, DX
	VPXOR  Y0, Y0, Y0
	VPXOR  Y1, Y1, Y1
	VPXOR  Y2, Y2, Y2
	VPXOR  Y3, Y3, Y3
	VPXOR  Y4, Y4, Y4
	VPXOR  Y5, Y5, Y5
	VPXOR  Y6, Y6, Y6
	VPXOR  Y7, Y7, Y7
	VPXOR  Y8, Y8, Y8
	VPXOR  Y9, Y9, Y9
	VPXOR  Y10, Y10, Y10
	VPXOR  Y11, Y11, Y11
	MOVQ   kg+0(FP), CX

avx2loop:
	VPMOVSXBW (DX), Y12
	VPMOVSXBW 16(DX), Y13
	AVX2ROW((SI), Y0, Y1)
	AVX2ROW((SI)(R8*1), Y2, Y3)
	AVX2ROW((SI)(R8*2), Y4, Y5)
	AVX2ROW((SI)(R9*1), Y6, Y7)
	AVX2ROW((R10), Y8, Y9)
	AVX2ROW((R10)(R8*1), Y10, Y11)
	ADDQ $8, SI
	ADDQ $8, R10
	ADDQ $128, DX
	DECQ CX
	JNZ  avx2loop

	FOLD(Y0, Y1); FOLD(Y2, Y3); FOLD(Y4, Y5); FOLD(Y6, Y7); FOLD(Y8, Y9); FOLD(Y10, Y11)
	LEAQ (DI)(R12*4), AX
	CMPQ add+64(FP), $0
	JEQ  avx2put
	VPADDD (DI), Y0, Y0
	VPADDD (DI)(R12*1), Y2, Y2
	VPADDD (DI)(R12*2), Y4, Y4
	VPADDD (DI)(R13*1), Y6, Y6
	VPADDD (AX), Y8, Y8
	VPADDD (AX)(R12*1), Y10, Y10

avx2put:
	VMOVDQU Y0, (DI)
	VMOVDQU Y2, (DI)(R12*1)
	VMOVDQU Y4, (DI)(R12*2)
	VMOVDQU Y6, (DI)(R13*1)
	VMOVDQU Y8, (AX)
	VMOVDQU Y10, (AX)(R12*1)
	ADDQ bStep+32(FP), BX
	ADDQ $32, DI
	DECQ R14
	JNZ  avx2tile
	VZEROUPPER
	RET

// func vpdpbusdLoop(iters int)
// The VNNI ceiling: twenty independent VPDPBUSD chains on ZMM registers
// (latency 5, two a cycle, so ten would just fill the pipes), sources
// Z30 and Z31, no memory operands.
TEXT ·vpdpbusdLoop(SB), NOSPLIT, $0-8
	MOVQ iters+0(FP), CX
	ZROW4(Z0, Z1, Z2, Z3); ZROW4(Z4, Z5, Z6, Z7); ZROW4(Z8, Z9, Z10, Z11)
	ZROW4(Z12, Z13, Z14, Z15); ZROW4(Z16, Z17, Z18, Z19); ZROW4(Z28, Z29, Z30, Z31)

dpbusdloop:
	VPDPBUSD Z31, Z30, Z0; VPDPBUSD Z31, Z30, Z1; VPDPBUSD Z31, Z30, Z2; VPDPBUSD Z31, Z30, Z3
	VPDPBUSD Z31, Z30, Z4; VPDPBUSD Z31, Z30, Z5; VPDPBUSD Z31, Z30, Z6; VPDPBUSD Z31, Z30, Z7
	VPDPBUSD Z31, Z30, Z8; VPDPBUSD Z31, Z30, Z9; VPDPBUSD Z31, Z30, Z10; VPDPBUSD Z31, Z30, Z11
	VPDPBUSD Z31, Z30, Z12; VPDPBUSD Z31, Z30, Z13; VPDPBUSD Z31, Z30, Z14; VPDPBUSD Z31, Z30, Z15
	VPDPBUSD Z31, Z30, Z16; VPDPBUSD Z31, Z30, Z17; VPDPBUSD Z31, Z30, Z18; VPDPBUSD Z31, Z30, Z19
	DECQ CX
	JNZ  dpbusdloop
	VZEROUPPER
	RET

// func vpmaddwdLoop(iters int)
// The exact AVX2 kernel's ceiling: its pattern of VPMADDWD into a fresh
// register and VPADDD into an accumulator, six pairs twice a round on YMM
// registers, no memory operands.
TEXT ·vpmaddwdLoop(SB), NOSPLIT, $0-8
	MOVQ  iters+0(FP), CX
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	VPXOR Y14, Y14, Y14
	VPXOR Y15, Y15, Y15

maddwdloop:
	VPMADDWD Y15, Y14, Y0; VPADDD Y0, Y6, Y6
	VPMADDWD Y15, Y14, Y1; VPADDD Y1, Y7, Y7
	VPMADDWD Y15, Y14, Y2; VPADDD Y2, Y8, Y8
	VPMADDWD Y15, Y14, Y3; VPADDD Y3, Y9, Y9
	VPMADDWD Y15, Y14, Y4; VPADDD Y4, Y10, Y10
	VPMADDWD Y15, Y14, Y5; VPADDD Y5, Y11, Y11
	VPMADDWD Y15, Y14, Y0; VPADDD Y0, Y6, Y6
	VPMADDWD Y15, Y14, Y1; VPADDD Y1, Y7, Y7
	VPMADDWD Y15, Y14, Y2; VPADDD Y2, Y8, Y8
	VPMADDWD Y15, Y14, Y3; VPADDD Y3, Y9, Y9
	VPMADDWD Y15, Y14, Y4; VPADDD Y4, Y10, Y10
	VPMADDWD Y15, Y14, Y5; VPADDD Y5, Y11, Y11
	DECQ CX
	JNZ  maddwdloop
	VZEROUPPER
	RET

// func prefetchRows(p unsafe.Pointer, n int, stride int, rows int)
// Fetch the cache lines of rows rows of n ≥ 1 bytes, stride bytes apart
// from p, toward L2, so that the epilogue's stores do not wait on memory.
TEXT ·prefetchRows(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), DX
	MOVQ stride+16(FP), R8
	MOVQ rows+24(FP), CX
	TESTQ CX, CX
	JZ   pfdone

pfrow:
	MOVQ SI, AX
	LEAQ -1(SI)(DX*1), BX
	ANDQ $-64, BX

pfline:
	PREFETCHT1 (AX)
	ADDQ $64, AX
	CMPQ AX, BX
	JLE  pfline
	ADDQ R8, SI
	DECQ CX
	JNZ  pfrow

pfdone:
	RET

// func widenU8(dst *uint16, src *uint8, n int)
// dst[i] = src[i] for n bytes, n a multiple of 16.
TEXT ·widenU8(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   widendone

widenloop:
	VPMOVZXBW (SI), Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       widenloop

widendone:
	VZEROUPPER
	RET
