// Steps shared by the SGEMM micro-kernels (gemm_amd64.s,
// gemm_avx512_amd64.s). Register conventions common to them: R8 = the C
// tile, R9 = the C row stride in bytes, AX walks the C rows, DI = the rows
// to write, R13 = the k steps left in the k loop and the row bias in the
// epilogue, SI/BX/CX = the A panel, column bias and row bias of the tile.

// ZERO4(OP, a, b, c, d): a, b, c, d = 0 by the xor OP (VXORPS, VPXORD).
#define ZERO4(OP, a, b, c, d) \
	OP a, a, a \
	OP b, b, b \
	OP c, c, c \
	OP d, d, d

// MUL4(s, a, b, c, d): a, b, c, d ·= s (alpha, broadcast in s).
#define MUL4(s, a, b, c, d) \
	VMULPS s, a, a \
	VMULPS s, b, b \
	VMULPS s, c, c \
	VMULPS s, d, d

// CROWS6(PF), CROWS12(PF): PF on each of the first 6 (12) rows of the C
// tile, AX at the row. PF prefetches: C is needed only after the k loop.
#define NEXTCROW(PF) \
	ADDQ R9, AX \
	PF

#define CROWS6(PF) \
	MOVQ R8, AX \
	PF \
	NEXTCROW(PF) \
	NEXTCROW(PF) \
	NEXTCROW(PF) \
	NEXTCROW(PF) \
	NEXTCROW(PF)

#define CROWS12(PF) \
	CROWS6(PF) \
	NEXTCROW(PF) \
	NEXTCROW(PF) \
	NEXTCROW(PF) \
	NEXTCROW(PF) \
	NEXTCROW(PF) \
	NEXTCROW(PF)

// KLOOP(STEP4, ADV4, STEP1, ADV1): the k loop over R13 steps: four at a
// time (STEP4, then ADV4 moves the panel pointers on) while four remain,
// then one at a time (STEP1, ADV1); it ends at kdone.
#define KLOOP(STEP4, ADV4, STEP1, ADV1) \
	CMPQ R13, $4 \
	JLT  ktail \
kloop4: \
	STEP4 \
	ADV4 \
	SUBQ $4, R13 \
	CMPQ R13, $4 \
	JGE  kloop4 \
ktail: \
	TESTQ R13, R13 \
	JEQ   kdone \
kloop1: \
	STEP1 \
	ADV1 \
	DECQ R13 \
	JNE  kloop1 \
kdone:

// ROW1(BETA, END, acc, roff, n, next), ROW2(BETA, END, a0, a1, roff, n,
// next): the epilogue of C row n−1 (BETA, then END with the row bias at
// roff(R13)) held in acc (a0, a1); then to next if it was row DI−1, else AX
// to the next row.
#define ROW1(BETA, END, acc, roff, n, next) \
	BETA(acc) \
	END(acc, roff) \
	CMPQ DI, $n \
	JLE  next \
	ADDQ R9, AX

#define ROW2(BETA, END, a0, a1, roff, n, next) \
	BETA(a0, a1) \
	END(a0, a1, roff) \
	CMPQ DI, $n \
	JLE  next \
	ADDQ R9, AX

// TILEARGS loads the arguments that the kernels of signature
// (kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo
// float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep,
// rowBiasStep int, …) keep in registers; NEXTTILE(tile) moves those
// kernels' pointers on by the steps and loops to tile while tiles remain.
#define TILEARGS \
	MOVQ kc+0(FP), R10 \
	MOVQ a+8(FP), SI \
	MOVQ c+24(FP), R8 \
	MOVQ ldc+32(FP), R9 \
	SHLQ $2, R9 \
	MOVQ tiles+40(FP), R11 \
	MOVQ rows+48(FP), DI \
	MOVQ colBias+72(FP), BX \
	MOVQ rowBias+80(FP), CX

#define NEXTTILE(tile) \
	ADDQ aStep+88(FP), SI \
	MOVQ bStep+96(FP), AX \
	ADDQ AX, b+16(FP) \
	ADDQ cStep+104(FP), R8 \
	ADDQ colBiasStep+112(FP), BX \
	ADDQ rowBiasStep+120(FP), CX \
	DECQ R11 \
	JNE  tile \
	VZEROUPPER \
	RET
