//go:build amd64 && !noasm

#include "textflag.h"

// ZERO24 clears the 24 accumulators Z0–Z23 of a 12×32 tile.
#define ZERO24 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	VPXORD Z14, Z14, Z14 \
	VPXORD Z15, Z15, Z15 \
	VPXORD Z16, Z16, Z16 \
	VPXORD Z17, Z17, Z17 \
	VPXORD Z18, Z18, Z18 \
	VPXORD Z19, Z19, Z19 \
	VPXORD Z20, Z20, Z20 \
	VPXORD Z21, Z21, Z21 \
	VPXORD Z22, Z22, Z22 \
	VPXORD Z23, Z23, Z23

// ALPHA24 scales the 24 accumulators by alpha, broadcast in Z30.
#define ALPHA24 \
	VMULPS Z30, Z0, Z0 \
	VMULPS Z30, Z1, Z1 \
	VMULPS Z30, Z2, Z2 \
	VMULPS Z30, Z3, Z3 \
	VMULPS Z30, Z4, Z4 \
	VMULPS Z30, Z5, Z5 \
	VMULPS Z30, Z6, Z6 \
	VMULPS Z30, Z7, Z7 \
	VMULPS Z30, Z8, Z8 \
	VMULPS Z30, Z9, Z9 \
	VMULPS Z30, Z10, Z10 \
	VMULPS Z30, Z11, Z11 \
	VMULPS Z30, Z12, Z12 \
	VMULPS Z30, Z13, Z13 \
	VMULPS Z30, Z14, Z14 \
	VMULPS Z30, Z15, Z15 \
	VMULPS Z30, Z16, Z16 \
	VMULPS Z30, Z17, Z17 \
	VMULPS Z30, Z18, Z18 \
	VMULPS Z30, Z19, Z19 \
	VMULPS Z30, Z20, Z20 \
	VMULPS Z30, Z21, Z21 \
	VMULPS Z30, Z22, Z22 \
	VMULPS Z30, Z23, Z23


// The AVX-512 SGEMM micro-kernel. It reads the AVX2 kernels' packed
// layouts (gemm_pack.go): a tile is two consecutive 6-row A panels by one
// 16-column B panel, so each row of the tile is one ZMM accumulator and
// the packers are shared. Twelve accumulators keep two full-width FMA
// pipes busy through a four-cycle latency; every A value is used once, so
// the FMA broadcasts it straight from memory.

// One k step: the B panel row into breg, then an FMA for each of the
// twelve rows, the first six reading the A panel at R12, the rest the
// panel at R14.
#define STEP(boff, aoff, breg) \
	VMOVUPS boff(DX), breg; \
	VFMADD231PS.BCST aoff(R12), breg, Z0; \
	VFMADD231PS.BCST aoff+4(R12), breg, Z1; \
	VFMADD231PS.BCST aoff+8(R12), breg, Z2; \
	VFMADD231PS.BCST aoff+12(R12), breg, Z3; \
	VFMADD231PS.BCST aoff+16(R12), breg, Z4; \
	VFMADD231PS.BCST aoff+20(R12), breg, Z5; \
	VFMADD231PS.BCST aoff(R14), breg, Z6; \
	VFMADD231PS.BCST aoff+4(R14), breg, Z7; \
	VFMADD231PS.BCST aoff+8(R14), breg, Z8; \
	VFMADD231PS.BCST aoff+12(R14), breg, Z9; \
	VFMADD231PS.BCST aoff+16(R14), breg, Z10; \
	VFMADD231PS.BCST aoff+20(R14), breg, Z11

// The epilogue of one C row (at AX) held in acc, already scaled by alpha:
// add beta·C (Z13 holds beta; the BETA forms only), the column bias (at
// BX), the row bias (roff(R13)), clamp below at lo (in Z14; VMAXPS with
// the value as second source passes NaN through) and store. The M forms
// read and write C under the column mask K1.
#define ROWBETA(acc) \
	VFMADD231PS (AX), Z13, acc

#define ROWBETAM(acc) \
	VMOVUPS.Z   (AX), K1, Z12; \
	VFMADD231PS Z12, Z13, acc

#define NOBETA(acc)

#define ROWADD(acc, roff) \
	VADDPS      (BX), acc, acc; \
	VADDPS.BCST roff(R13), acc, acc; \
	VMAXPS      acc, Z14, acc

#define ROWEND(acc, roff) \
	ROWADD(acc, roff); \
	VMOVUPS acc, (AX)

#define ROWENDM(acc, roff) \
	ROWADD(acc, roff); \
	VMOVUPS acc, K1, (AX)

// ROWS runs the epilogue END (with BETA first) on the first DI rows of
// the tile, then jumps to next.
#define ROWS(BETA, END) \
	BETA(Z0); \
	END(Z0, 0); \
	CMPQ DI, $1; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z1); \
	END(Z1, 4); \
	CMPQ DI, $2; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z2); \
	END(Z2, 8); \
	CMPQ DI, $3; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z3); \
	END(Z3, 12); \
	CMPQ DI, $4; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z4); \
	END(Z4, 16); \
	CMPQ DI, $5; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z5); \
	END(Z5, 20); \
	CMPQ DI, $6; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z6); \
	END(Z6, 24); \
	CMPQ DI, $7; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z7); \
	END(Z7, 28); \
	CMPQ DI, $8; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z8); \
	END(Z8, 32); \
	CMPQ DI, $9; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z9); \
	END(Z9, 36); \
	CMPQ DI, $10; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z10); \
	END(Z10, 40); \
	CMPQ DI, $11; \
	JLE  next; \
	ADDQ R9, AX; \
	BETA(Z11); \
	END(Z11, 44); \
	JMP  next

// func sgemmKernel12x16(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32)
//
// sgemmKernel6x16 with tiles of 12 rows: the A operand of a tile is the
// packed panel at a and the one after it (a + 6·kc floats), which must be
// readable even when rows ≤ 6 (its products are then discarded).
TEXT ·sgemmKernel12x16(SB), NOSPLIT, $0-136
	MOVQ kc+0(FP), R10
	MOVQ a+8(FP), SI
	MOVQ c+24(FP), R8
	MOVQ ldc+32(FP), R9
	SHLQ $2, R9
	MOVQ tiles+40(FP), R11
	MOVQ rows+48(FP), DI
	MOVQ colBias+72(FP), BX
	MOVQ rowBias+80(FP), CX

tile:
	// Ask for the C tile now; it is needed only after the k loop.
	MOVQ       R8, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)

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
	MOVQ SI, R12
	LEAQ (R10)(R10*2), R14
	SHLQ $3, R14            // 6·kc floats in bytes: the second A panel
	ADDQ SI, R14
	MOVQ b+16(FP), DX
	MOVQ R10, R13
	CMPQ R13, $4
	JLT  tail

loop4:
	STEP(0, 0, Z16)
	STEP(64, 24, Z17)
	STEP(128, 48, Z18)
	STEP(192, 72, Z19)
	ADDQ $96, R12
	ADDQ $96, R14
	ADDQ $256, DX
	SUBQ $4, R13
	CMPQ R13, $4
	JGE  loop4

tail:
	TESTQ R13, R13
	JEQ   epilogue

loop1:
	STEP(0, 0, Z16)
	ADDQ $24, R12
	ADDQ $24, R14
	ADDQ $64, DX
	DECQ R13
	JNE  loop1

epilogue:
	VBROADCASTSS alpha+56(FP), Z12
	VMULPS       Z12, Z0, Z0
	VMULPS       Z12, Z1, Z1
	VMULPS       Z12, Z2, Z2
	VMULPS       Z12, Z3, Z3
	VMULPS       Z12, Z4, Z4
	VMULPS       Z12, Z5, Z5
	VMULPS       Z12, Z6, Z6
	VMULPS       Z12, Z7, Z7
	VMULPS       Z12, Z8, Z8
	VMULPS       Z12, Z9, Z9
	VMULPS       Z12, Z10, Z10
	VMULPS       Z12, Z11, Z11
	VBROADCASTSS lo+64(FP), Z14
	MOVQ         CX, R13
	MOVQ         R8, AX
	MOVQ         mask+128(FP), R12
	TESTQ        R12, R12
	JNE          masked
	MOVL         beta+60(FP), R12
	TESTL        $0x7fffffff, R12
	JEQ          nobeta
	VBROADCASTSS beta+60(FP), Z13
	ROWS(ROWBETA, ROWEND)

nobeta:
	ROWS(NOBETA, ROWEND)

masked:
	VMOVDQU32    (R12), Z12
	VPMOVD2M     Z12, K1
	MOVL         beta+60(FP), R12
	TESTL        $0x7fffffff, R12
	JEQ          nobetam
	VBROADCASTSS beta+60(FP), Z13
	ROWS(ROWBETAM, ROWENDM)

nobetam:
	ROWS(NOBETA, ROWENDM)

next:
	ADDQ aStep+88(FP), SI
	MOVQ bStep+96(FP), AX
	ADDQ AX, b+16(FP)
	ADDQ cStep+104(FP), R8
	ADDQ colBiasStep+112(FP), BX
	ADDQ rowBiasStep+120(FP), CX
	DECQ R11
	JNE  tile
	VZEROUPPER
	RET

// The 12×32 micro-kernel: the same two A panels by two consecutive B
// panels (32 columns), 24 accumulators (row r in Z(2r), Z(2r+1)). Each A
// value now serves two FMAs, so it is broadcast once into a register:
// 14 loads per 24 FMAs instead of 13 per 12, which lifted the kernel from
// ~87% to ~98% of the FMA peak in L1 on Zen 5.
#define STEP32(boff, aoff, b0, b1) \
	VMOVUPS boff(DX), b0; \
	VMOVUPS boff(DX)(R15*1), b1; \
	VBROADCASTSS aoff(R12), Z26; \
	VFMADD231PS Z26, b0, Z0; \
	VFMADD231PS Z26, b1, Z1; \
	VBROADCASTSS aoff+4(R12), Z27; \
	VFMADD231PS Z27, b0, Z2; \
	VFMADD231PS Z27, b1, Z3; \
	VBROADCASTSS aoff+8(R12), Z28; \
	VFMADD231PS Z28, b0, Z4; \
	VFMADD231PS Z28, b1, Z5; \
	VBROADCASTSS aoff+12(R12), Z29; \
	VFMADD231PS Z29, b0, Z6; \
	VFMADD231PS Z29, b1, Z7; \
	VBROADCASTSS aoff+16(R12), Z26; \
	VFMADD231PS Z26, b0, Z8; \
	VFMADD231PS Z26, b1, Z9; \
	VBROADCASTSS aoff+20(R12), Z27; \
	VFMADD231PS Z27, b0, Z10; \
	VFMADD231PS Z27, b1, Z11; \
	VBROADCASTSS aoff(R14), Z26; \
	VFMADD231PS Z26, b0, Z12; \
	VFMADD231PS Z26, b1, Z13; \
	VBROADCASTSS aoff+4(R14), Z27; \
	VFMADD231PS Z27, b0, Z14; \
	VFMADD231PS Z27, b1, Z15; \
	VBROADCASTSS aoff+8(R14), Z28; \
	VFMADD231PS Z28, b0, Z16; \
	VFMADD231PS Z28, b1, Z17; \
	VBROADCASTSS aoff+12(R14), Z29; \
	VFMADD231PS Z29, b0, Z18; \
	VFMADD231PS Z29, b1, Z19; \
	VBROADCASTSS aoff+16(R14), Z26; \
	VFMADD231PS Z26, b0, Z20; \
	VFMADD231PS Z26, b1, Z21; \
	VBROADCASTSS aoff+20(R14), Z27; \
	VFMADD231PS Z27, b0, Z22; \
	VFMADD231PS Z27, b1, Z23

// The epilogue of one C row (at AX) in a0, a1: beta in Z28, lo in Z29,
// column bias at BX (32 floats), row bias at roff(R13).
#define ROWBETA32(a0, a1) \
	VFMADD231PS (AX), Z28, a0; \
	VFMADD231PS 64(AX), Z28, a1

#define NOBETA32(a0, a1)

#define ROWEND32(a0, a1, roff) \
	VADDPS       (BX), a0, a0; \
	VADDPS       64(BX), a1, a1; \
	VBROADCASTSS roff(R13), Z31; \
	VADDPS       Z31, a0, a0; \
	VADDPS       Z31, a1, a1; \
	VMAXPS       a0, Z29, a0; \
	VMAXPS       a1, Z29, a1; \
	VMOVUPS      a0, (AX); \
	VMOVUPS      a1, 64(AX)

#define ROWS32(BETA, NEXT) \
	BETA(Z0, Z1); \
	ROWEND32(Z0, Z1, 0); \
	CMPQ DI, $1; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z2, Z3); \
	ROWEND32(Z2, Z3, 4); \
	CMPQ DI, $2; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z4, Z5); \
	ROWEND32(Z4, Z5, 8); \
	CMPQ DI, $3; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z6, Z7); \
	ROWEND32(Z6, Z7, 12); \
	CMPQ DI, $4; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z8, Z9); \
	ROWEND32(Z8, Z9, 16); \
	CMPQ DI, $5; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z10, Z11); \
	ROWEND32(Z10, Z11, 20); \
	CMPQ DI, $6; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z12, Z13); \
	ROWEND32(Z12, Z13, 24); \
	CMPQ DI, $7; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z14, Z15); \
	ROWEND32(Z14, Z15, 28); \
	CMPQ DI, $8; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z16, Z17); \
	ROWEND32(Z16, Z17, 32); \
	CMPQ DI, $9; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z18, Z19); \
	ROWEND32(Z18, Z19, 36); \
	CMPQ DI, $10; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z20, Z21); \
	ROWEND32(Z20, Z21, 40); \
	CMPQ DI, $11; \
	JLE  NEXT; \
	ADDQ R9, AX; \
	BETA(Z22, Z23); \
	ROWEND32(Z22, Z23, 44); \
	JMP  NEXT

// func sgemmKernel12x32(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int)
//
// sgemmKernel12x16 on tiles of 32 columns: the B operand of a tile is the
// packed panel at b and the one after it (b + 16·kc floats); colBias has
// 32 floats. There is no column mask: narrower tiles go to
// sgemmKernel12x16.
TEXT ·sgemmKernel12x32(SB), NOSPLIT, $0-128
	MOVQ kc+0(FP), R10
	MOVQ a+8(FP), SI
	MOVQ c+24(FP), R8
	MOVQ ldc+32(FP), R9
	SHLQ $2, R9
	MOVQ tiles+40(FP), R11
	MOVQ rows+48(FP), DI
	MOVQ colBias+72(FP), BX
	MOVQ rowBias+80(FP), CX
	MOVQ R10, R15
	SHLQ $6, R15            // 16·kc floats in bytes: the second B panel

tile32:
	MOVQ       R8, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)

	ZERO24
	MOVQ SI, R12
	LEAQ (R10)(R10*2), R14
	SHLQ $3, R14            // 6·kc floats in bytes: the second A panel
	ADDQ SI, R14
	MOVQ b+16(FP), DX
	MOVQ R10, R13
	CMPQ R13, $4
	JLT  tail32

loop32:
	STEP32(0, 0, Z24, Z25)
	STEP32(64, 24, Z30, Z31)
	STEP32(128, 48, Z24, Z25)
	STEP32(192, 72, Z30, Z31)
	ADDQ $96, R12
	ADDQ $96, R14
	ADDQ $256, DX
	SUBQ $4, R13
	CMPQ R13, $4
	JGE  loop32

tail32:
	TESTQ R13, R13
	JEQ   epilogue32

loop32one:
	STEP32(0, 0, Z24, Z25)
	ADDQ $24, R12
	ADDQ $24, R14
	ADDQ $64, DX
	DECQ R13
	JNE  loop32one

epilogue32:
	VBROADCASTSS alpha+56(FP), Z30
	ALPHA24
	VBROADCASTSS lo+64(FP), Z29
	MOVQ         CX, R13
	MOVQ         R8, AX
	MOVL         beta+60(FP), R12
	TESTL        $0x7fffffff, R12
	JEQ          nobeta32
	VBROADCASTSS beta+60(FP), Z28
	ROWS32(ROWBETA32, next32)

nobeta32:
	ROWS32(NOBETA32, next32)

next32:
	ADDQ aStep+88(FP), SI
	MOVQ bStep+96(FP), AX
	ADDQ AX, b+16(FP)
	ADDQ cStep+104(FP), R8
	ADDQ colBiasStep+112(FP), BX
	ADDQ rowBiasStep+120(FP), CX
	DECQ R11
	JNE  tile32
	VZEROUPPER
	RET

// One k step of sgemmKernel12x32S: A's 12 rows lie lda bytes apart (AX =
// lda, CX = 3·lda) from R12 (rows 0–3), R14 (rows 4–7) and BX (rows 8–11).
#define STEP32S(boff, aoff, b0, b1) \
	VMOVUPS boff(DX), b0; \
	VMOVUPS boff(DX)(R15*1), b1; \
	VBROADCASTSS aoff(R12), Z26; \
	VFMADD231PS Z26, b0, Z0; \
	VFMADD231PS Z26, b1, Z1; \
	VBROADCASTSS aoff(R12)(AX*1), Z27; \
	VFMADD231PS Z27, b0, Z2; \
	VFMADD231PS Z27, b1, Z3; \
	VBROADCASTSS aoff(R12)(AX*2), Z28; \
	VFMADD231PS Z28, b0, Z4; \
	VFMADD231PS Z28, b1, Z5; \
	VBROADCASTSS aoff(R12)(CX*1), Z29; \
	VFMADD231PS Z29, b0, Z6; \
	VFMADD231PS Z29, b1, Z7; \
	VBROADCASTSS aoff(R14), Z26; \
	VFMADD231PS Z26, b0, Z8; \
	VFMADD231PS Z26, b1, Z9; \
	VBROADCASTSS aoff(R14)(AX*1), Z27; \
	VFMADD231PS Z27, b0, Z10; \
	VFMADD231PS Z27, b1, Z11; \
	VBROADCASTSS aoff(R14)(AX*2), Z28; \
	VFMADD231PS Z28, b0, Z12; \
	VFMADD231PS Z28, b1, Z13; \
	VBROADCASTSS aoff(R14)(CX*1), Z29; \
	VFMADD231PS Z29, b0, Z14; \
	VFMADD231PS Z29, b1, Z15; \
	VBROADCASTSS aoff(BX), Z26; \
	VFMADD231PS Z26, b0, Z16; \
	VFMADD231PS Z26, b1, Z17; \
	VBROADCASTSS aoff(BX)(AX*1), Z27; \
	VFMADD231PS Z27, b0, Z18; \
	VFMADD231PS Z27, b1, Z19; \
	VBROADCASTSS aoff(BX)(AX*2), Z28; \
	VFMADD231PS Z28, b0, Z20; \
	VFMADD231PS Z28, b1, Z21; \
	VBROADCASTSS aoff(BX)(CX*1), Z29; \
	VFMADD231PS Z29, b0, Z22; \
	VFMADD231PS Z29, b1, Z23

// func sgemmKernel12x32S(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, lda int)
//
// sgemmKernel12x32 reading A unpacked: row r of the 12×kc A block starts
// r·lda floats after a (rows past rows are read, not used). Copying rows
// is far cheaper than interleaving them, so a packer that gathers rows
// (an implicit im2col) feeds this kernel.
TEXT ·sgemmKernel12x32S(SB), NOSPLIT, $16-136
	MOVQ kc+0(FP), R10
	MOVQ a+8(FP), SI
	MOVQ c+24(FP), R8
	MOVQ ldc+32(FP), R9
	SHLQ $2, R9
	MOVQ tiles+40(FP), R11
	MOVQ rows+48(FP), DI
	MOVQ colBias+72(FP), BX
	MOVQ rowBias+80(FP), CX
	MOVQ R10, R15
	SHLQ $6, R15            // 16·kc floats in bytes: the second B panel

tile32s:
	MOVQ BX, savebx-8(SP)
	MOVQ CX, savecx-16(SP)
	ZERO24
	MOVQ lda+128(FP), AX
	SHLQ $2, AX             // lda in bytes
	LEAQ (AX)(AX*2), CX     // 3·lda
	MOVQ SI, R12
	LEAQ (R12)(AX*4), R14   // row 4
	LEAQ (R14)(AX*4), BX    // row 8
	MOVQ b+16(FP), DX
	MOVQ R10, R13
	CMPQ R13, $4
	JLT  tail32s

loop32s:
	STEP32S(0, 0, Z24, Z25)
	STEP32S(64, 4, Z30, Z31)
	STEP32S(128, 8, Z24, Z25)
	STEP32S(192, 12, Z30, Z31)
	ADDQ $16, R12
	ADDQ $16, R14
	ADDQ $16, BX
	ADDQ $256, DX
	SUBQ $4, R13
	CMPQ R13, $4
	JGE  loop32s

tail32s:
	TESTQ R13, R13
	JEQ   epilogue32s

loop32sone:
	STEP32S(0, 0, Z24, Z25)
	ADDQ $4, R12
	ADDQ $4, R14
	ADDQ $4, BX
	ADDQ $64, DX
	DECQ R13
	JNE  loop32sone

epilogue32s:
	MOVQ         savebx-8(SP), BX
	MOVQ         savecx-16(SP), CX
	VBROADCASTSS alpha+56(FP), Z30
	ALPHA24
	VBROADCASTSS lo+64(FP), Z29
	MOVQ         CX, R13
	MOVQ         R8, AX
	MOVL         beta+60(FP), R12
	TESTL        $0x7fffffff, R12
	JEQ          nobeta32s
	VBROADCASTSS beta+60(FP), Z28
	ROWS32(ROWBETA32, next32s)

nobeta32s:
	ROWS32(NOBETA32, next32s)

next32s:
	ADDQ aStep+88(FP), SI
	MOVQ bStep+96(FP), AX
	ADDQ AX, b+16(FP)
	ADDQ cStep+104(FP), R8
	ADDQ colBiasStep+112(FP), BX
	ADDQ rowBiasStep+120(FP), CX
	DECQ R11
	JNE  tile32s
	VZEROUPPER
	RET

// func convKernel12x32(taps int, offs *int, ct int, a *float32, lda int, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, bStep, cStep, colBiasStep int)
//
// The direct convolution micro-kernel: sgemmKernel12x32S whose depth runs
// over kernel taps. For tap t the 12 rows of A are 12 output pixels' input
// pixels, lda floats apart, from a + offs[t] bytes, each ct channels long;
// B is the packed block of taps·ct depths. No im2col is gathered at all.
TEXT ·convKernel12x32(SB), NOSPLIT, $24-136
	MOVQ taps+0(FP), R10
	IMULQ ct+16(FP), R10
	MOVQ R10, R15
	SHLQ $6, R15            // 16·(taps·ct) floats in bytes: the second B panel
	MOVQ c+48(FP), R8
	MOVQ ldc+56(FP), R9
	SHLQ $2, R9
	MOVQ tiles+64(FP), R11
	MOVQ rows+72(FP), DI
	MOVQ colBias+96(FP), BX
	MOVQ rowBias+104(FP), CX
	MOVQ a+24(FP), SI

tile32t:
	MOVQ BX, savebx-8(SP)
	MOVQ CX, savecx-16(SP)
	ZERO24
	MOVQ lda+32(FP), AX
	SHLQ $2, AX             // lda in bytes
	LEAQ (AX)(AX*2), CX     // 3·lda
	MOVQ b+40(FP), DX
	MOVQ offs+8(FP), R10
	MOVQ taps+0(FP), R13
	MOVQ R13, tapsleft-24(SP)

tap32t:
	MOVQ (R10), R12
	ADDQ SI, R12
	LEAQ (R12)(AX*4), R14   // row 4
	LEAQ (R14)(AX*4), BX    // row 8
	MOVQ ct+16(FP), R13
	CMPQ R13, $4
	JLT  tail32t

loop32t:
	STEP32S(0, 0, Z24, Z25)
	STEP32S(64, 4, Z30, Z31)
	STEP32S(128, 8, Z24, Z25)
	STEP32S(192, 12, Z30, Z31)
	ADDQ $16, R12
	ADDQ $16, R14
	ADDQ $16, BX
	ADDQ $256, DX
	SUBQ $4, R13
	CMPQ R13, $4
	JGE  loop32t

tail32t:
	TESTQ R13, R13
	JEQ   nexttap32t

loop32tone:
	STEP32S(0, 0, Z24, Z25)
	ADDQ $4, R12
	ADDQ $4, R14
	ADDQ $4, BX
	ADDQ $64, DX
	DECQ R13
	JNE  loop32tone

nexttap32t:
	ADDQ $8, R10
	DECQ tapsleft-24(SP)
	JNE  tap32t

	MOVQ         savebx-8(SP), BX
	MOVQ         savecx-16(SP), CX
	VBROADCASTSS alpha+80(FP), Z30
	ALPHA24
	VBROADCASTSS lo+88(FP), Z29
	MOVQ         CX, R13
	MOVQ         R8, AX
	MOVL         beta+84(FP), R12
	TESTL        $0x7fffffff, R12
	JEQ          nobeta32t
	VBROADCASTSS beta+84(FP), Z28
	ROWS32(ROWBETA32, next32t)

nobeta32t:
	ROWS32(NOBETA32, next32t)

next32t:
	MOVQ bStep+112(FP), AX
	ADDQ AX, b+40(FP)
	ADDQ cStep+120(FP), R8
	ADDQ colBiasStep+128(FP), BX
	DECQ R11
	JNE  tile32t
	VZEROUPPER
	RET

// func sgemmKernel12x32D(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, ldk int)
//
// sgemmKernel12x32 reading A unpacked the other way: the 12 rows of a
// depth step are 12 consecutive floats, and successive depths lie ldk
// floats apart. A convolution's weight gradient has that shape: rows are a
// run of (kernel column, channel) pairs of one input pixel, depths are the
// output pixels of a row.
TEXT ·sgemmKernel12x32D(SB), NOSPLIT, $0-136
	MOVQ kc+0(FP), R10
	MOVQ a+8(FP), SI
	MOVQ c+24(FP), R8
	MOVQ ldc+32(FP), R9
	SHLQ $2, R9
	MOVQ tiles+40(FP), R11
	MOVQ rows+48(FP), DI
	MOVQ colBias+72(FP), BX
	MOVQ rowBias+80(FP), CX
	MOVQ R10, R15
	SHLQ $6, R15            // 16·kc floats in bytes: the second B panel

tile32d:
	MOVQ       R8, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	ADDQ       R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)

	ZERO24
	MOVQ SI, R12
	LEAQ 24(SI), R14        // rows 6–11 follow rows 0–5
	MOVQ ldk+128(FP), AX
	SHLQ $2, AX             // the depth stride in bytes
	MOVQ b+16(FP), DX
	MOVQ R10, R13
	TESTQ R13, R13
	JEQ   epilogue32d

loop32d:
	STEP32(0, 0, Z24, Z25)
	ADDQ AX, R12
	ADDQ AX, R14
	ADDQ $64, DX
	DECQ R13
	JNE  loop32d

epilogue32d:
	VBROADCASTSS alpha+56(FP), Z30
	ALPHA24
	VBROADCASTSS lo+64(FP), Z29
	MOVQ         CX, R13
	MOVQ         R8, AX
	MOVL         beta+60(FP), R12
	TESTL        $0x7fffffff, R12
	JEQ          nobeta32d
	VBROADCASTSS beta+60(FP), Z28
	ROWS32(ROWBETA32, next32d)

nobeta32d:
	ROWS32(NOBETA32, next32d)

next32d:
	ADDQ aStep+88(FP), SI
	MOVQ bStep+96(FP), AX
	ADDQ AX, b+16(FP)
	ADDQ cStep+104(FP), R8
	ADDQ colBiasStep+112(FP), BX
	ADDQ rowBiasStep+120(FP), CX
	DECQ R11
	JNE  tile32d
	VZEROUPPER
	RET
