//go:build amd64 && !noasm

#include "textflag.h"

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
