//go:build amd64 && !noasm

#include "textflag.h"
#include "gemm_amd64.h"

// ZERO12, ZERO24 clear the accumulators Z0–Z11 (Z0–Z23) of a 12×16
// (12×32) tile.
#define ZERO12 \
	ZERO4(VPXORD, Z0, Z1, Z2, Z3) \
	ZERO4(VPXORD, Z4, Z5, Z6, Z7) \
	ZERO4(VPXORD, Z8, Z9, Z10, Z11)

#define ZERO24 \
	ZERO12 \
	ZERO4(VPXORD, Z12, Z13, Z14, Z15) \
	ZERO4(VPXORD, Z16, Z17, Z18, Z19) \
	ZERO4(VPXORD, Z20, Z21, Z22, Z23)

// SROWS(lda): the in-place kernels' A row pointers, from the tile's first
// row at SI and lda (an argument, in floats): R12 at row 0, R14 at row 4,
// BX at row 8, AX and CX one and three row strides in bytes; then DX at B
// and R13 the depth count.
#define SROWS(lda) \
	MOVQ lda, AX;          \
	SHLQ $2, AX;           \
	LEAQ (AX)(AX*2), CX;   \
	MOVQ SI, R12;          \
	LEAQ (R12)(AX*4), R14; \
	LEAQ (R14)(AX*4), BX;  \
	MOVQ b+16(FP), DX;     \
	MOVQ R10, R13

// ALPHA12(s), ALPHA24(s) scale the 12 (24) accumulators by alpha,
// broadcast in s.
#define ALPHA12(s) \
	MUL4(s, Z0, Z1, Z2, Z3) \
	MUL4(s, Z4, Z5, Z6, Z7) \
	MUL4(s, Z8, Z9, Z10, Z11)

#define ALPHA24(s) \
	ALPHA12(s) \
	MUL4(s, Z12, Z13, Z14, Z15) \
	MUL4(s, Z16, Z17, Z18, Z19) \
	MUL4(s, Z20, Z21, Z22, Z23)

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

// Four k steps (the B rows alternating through Z16–Z19), and ADVP(a, b)
// moves the packed A panels a bytes and the B panel b bytes on.
#define STEP4 \
	STEP(0, 0, Z16) \
	STEP(64, 24, Z17) \
	STEP(128, 48, Z18) \
	STEP(192, 72, Z19)

#define ADVP(a, b) \
	ADDQ $a, R12 \
	ADDQ $a, R14 \
	ADDQ $b, DX

// CPF16, CPF32 prefetch the first 16 (32) floats of the C row at AX.
#define CPF16 PREFETCHT0 (AX)

#define CPF32 \
	PREFETCHT0 (AX) \
	PREFETCHT0 64(AX)

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
	ROW1(BETA, END, Z0, 0, 1, next) \
	ROW1(BETA, END, Z1, 4, 2, next) \
	ROW1(BETA, END, Z2, 8, 3, next) \
	ROW1(BETA, END, Z3, 12, 4, next) \
	ROW1(BETA, END, Z4, 16, 5, next) \
	ROW1(BETA, END, Z5, 20, 6, next) \
	ROW1(BETA, END, Z6, 24, 7, next) \
	ROW1(BETA, END, Z7, 28, 8, next) \
	ROW1(BETA, END, Z8, 32, 9, next) \
	ROW1(BETA, END, Z9, 36, 10, next) \
	ROW1(BETA, END, Z10, 40, 11, next) \
	BETA(Z11) \
	END(Z11, 44) \
	JMP  next

// EPILOGUE16: the 12×16 kernels' epilogue after the k loop: scale by
// alpha, then each of the first DI rows through ROWS, under the column mask
// at mask+128(FP) when it is not nil, and on to the next tile.
#define EPILOGUE16 \
	VBROADCASTSS alpha+56(FP), Z12 \
	ALPHA12(Z12) \
	VBROADCASTSS lo+64(FP), Z14 \
	MOVQ         CX, R13 \
	MOVQ         R8, AX \
	MOVQ         mask+128(FP), R12 \
	TESTQ        R12, R12 \
	JNE          masked \
	MOVL         beta+60(FP), R12 \
	TESTL        $0x7fffffff, R12 \
	JEQ          nobeta \
	VBROADCASTSS beta+60(FP), Z13 \
	ROWS(ROWBETA, ROWEND) \
nobeta: \
	ROWS(NOBETA, ROWEND) \
masked: \
	VMOVDQU32    (R12), Z12 \
	VPMOVD2M     Z12, K1 \
	MOVL         beta+60(FP), R12 \
	TESTL        $0x7fffffff, R12 \
	JEQ          nobetam \
	VBROADCASTSS beta+60(FP), Z13 \
	ROWS(ROWBETAM, ROWENDM) \
nobetam: \
	ROWS(NOBETA, ROWENDM) \
next: \
	NEXTTILE(tile)

// func sgemmKernel12x16(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32)
//
// sgemmKernel6x16 with tiles of 12 rows: the A operand of a tile is the
// packed panel at a and the one after it (a + 6·kc floats), which must be
// readable even when rows ≤ 6 (its products are then discarded).
TEXT ·sgemmKernel12x16(SB), NOSPLIT, $0-136
	TILEARGS

tile:
	// Ask for the C tile now; it is needed only after the k loop.
	CROWS12(CPF16)

	ZERO12
	MOVQ SI, R12
	LEAQ (R10)(R10*2), R14
	SHLQ $3, R14            // 6·kc floats in bytes: the second A panel
	ADDQ SI, R14
	MOVQ b+16(FP), DX
	MOVQ R10, R13
	KLOOP(STEP4, ADVP(96, 256), STEP(0, 0, Z16), ADVP(24, 64))

	EPILOGUE16


// STEP16S(boff, aoff, breg): STEP with A's twelve rows read in place:
// rows 0–3 from R12, 4–7 from R14 and 8–11 from BX, each aoff bytes on,
// AX and CX one and three row strides.
#define STEP16S(boff, aoff, breg) \
	VMOVUPS boff(DX), breg; \
	VFMADD231PS.BCST aoff(R12), breg, Z0; \
	VFMADD231PS.BCST aoff(R12)(AX*1), breg, Z1; \
	VFMADD231PS.BCST aoff(R12)(AX*2), breg, Z2; \
	VFMADD231PS.BCST aoff(R12)(CX*1), breg, Z3; \
	VFMADD231PS.BCST aoff(R14), breg, Z4; \
	VFMADD231PS.BCST aoff(R14)(AX*1), breg, Z5; \
	VFMADD231PS.BCST aoff(R14)(AX*2), breg, Z6; \
	VFMADD231PS.BCST aoff(R14)(CX*1), breg, Z7; \
	VFMADD231PS.BCST aoff(BX), breg, Z8; \
	VFMADD231PS.BCST aoff(BX)(AX*1), breg, Z9; \
	VFMADD231PS.BCST aoff(BX)(AX*2), breg, Z10; \
	VFMADD231PS.BCST aoff(BX)(CX*1), breg, Z11

#define STEP16SX4 \
	STEP16S(0, 0, Z16) \
	STEP16S(64, 4, Z17) \
	STEP16S(128, 8, Z18) \
	STEP16S(192, 12, Z19)

// ADVS(a, b) moves the three A row pointers a bytes and the B panel b
// bytes on.
#define ADVS(a, b) \
	ADDQ $a, R12 \
	ADDQ $a, R14 \
	ADDQ $a, BX \
	ADDQ $b, DX

// func sgemmKernel12x16S(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32, lda int)
//
// sgemmKernel12x16 reading A unpacked, as sgemmKernel12x32S does: row r
// of the 12×kc A block starts r·lda floats after a (rows past rows are
// read, not used). The same products in the same order: the same bits.
TEXT ·sgemmKernel12x16S(SB), NOSPLIT, $16-144
	TILEARGS

tile:
	CROWS12(CPF16)
	MOVQ BX, savebx-8(SP)
	MOVQ CX, savecx-16(SP)
	ZERO12
	SROWS(lda+136(FP))
	KLOOP(STEP16SX4, ADVS(16, 256), STEP16S(0, 0, Z16), ADVS(4, 64))
	MOVQ savebx-8(SP), BX
	MOVQ savecx-16(SP), CX
	EPILOGUE16

// The 12×32 micro-kernel: the same two A panels by two consecutive B
// panels (32 columns), 24 accumulators (row r in Z(2r), Z(2r+1)). Each A
// value now serves two FMAs, so it is broadcast once into a register:
// 14 loads per 24 FMAs instead of 13 per 12, which lifted the kernel from
// ~87% to ~98% of the FMA peak in L1 on Zen 5.
// BFMA2(a, t, b0, b1, c0, c1): t = a broadcast; c0 += t·b0, c1 += t·b1.
#define BFMA2(a, t, b0, b1, c0, c1) \
	VBROADCASTSS a, t \
	VFMADD231PS  t, b0, c0 \
	VFMADD231PS  t, b1, c1

#define STEP32(boff, aoff, b0, b1) \
	VMOVUPS boff(DX), b0 \
	VMOVUPS boff(DX)(R15*1), b1 \
	BFMA2(aoff(R12), Z26, b0, b1, Z0, Z1) \
	BFMA2(aoff+4(R12), Z27, b0, b1, Z2, Z3) \
	BFMA2(aoff+8(R12), Z28, b0, b1, Z4, Z5) \
	BFMA2(aoff+12(R12), Z29, b0, b1, Z6, Z7) \
	BFMA2(aoff+16(R12), Z26, b0, b1, Z8, Z9) \
	BFMA2(aoff+20(R12), Z27, b0, b1, Z10, Z11) \
	BFMA2(aoff(R14), Z26, b0, b1, Z12, Z13) \
	BFMA2(aoff+4(R14), Z27, b0, b1, Z14, Z15) \
	BFMA2(aoff+8(R14), Z28, b0, b1, Z16, Z17) \
	BFMA2(aoff+12(R14), Z29, b0, b1, Z18, Z19) \
	BFMA2(aoff+16(R14), Z26, b0, b1, Z20, Z21) \
	BFMA2(aoff+20(R14), Z27, b0, b1, Z22, Z23)

// Four k steps (B rows alternating through Z24, Z25 and Z30, Z31).
#define STEP32X4 \
	STEP32(0, 0, Z24, Z25) \
	STEP32(64, 24, Z30, Z31) \
	STEP32(128, 48, Z24, Z25) \
	STEP32(192, 72, Z30, Z31)

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

// ROWS32 runs the epilogue (with BETA first) on the first DI rows of the
// tile, then jumps to NEXT.
#define ROWS32(BETA, NEXT) \
	ROW2(BETA, ROWEND32, Z0, Z1, 0, 1, NEXT) \
	ROW2(BETA, ROWEND32, Z2, Z3, 4, 2, NEXT) \
	ROW2(BETA, ROWEND32, Z4, Z5, 8, 3, NEXT) \
	ROW2(BETA, ROWEND32, Z6, Z7, 12, 4, NEXT) \
	ROW2(BETA, ROWEND32, Z8, Z9, 16, 5, NEXT) \
	ROW2(BETA, ROWEND32, Z10, Z11, 20, 6, NEXT) \
	ROW2(BETA, ROWEND32, Z12, Z13, 24, 7, NEXT) \
	ROW2(BETA, ROWEND32, Z14, Z15, 28, 8, NEXT) \
	ROW2(BETA, ROWEND32, Z16, Z17, 32, 9, NEXT) \
	ROW2(BETA, ROWEND32, Z18, Z19, 36, 10, NEXT) \
	ROW2(BETA, ROWEND32, Z20, Z21, 40, 11, NEXT) \
	BETA(Z22, Z23) \
	ROWEND32(Z22, Z23, 44) \
	JMP  NEXT

// EPILOGUE32(alpha, lo, beta): the accumulators times alpha, then the
// row epilogues with beta·C (unless beta is ±0, when C is not read) on the
// first DI rows; it ends at next32.
#define EPILOGUE32(alpha, lo, beta) \
	VBROADCASTSS alpha, Z30 \
	ALPHA24(Z30) \
	VBROADCASTSS lo, Z29 \
	MOVQ         CX, R13 \
	MOVQ         R8, AX \
	MOVL         beta, R12 \
	TESTL        $0x7fffffff, R12 \
	JEQ          nobeta32 \
	VBROADCASTSS beta, Z28 \
	ROWS32(ROWBETA32, next32) \
nobeta32: \
	ROWS32(NOBETA32, next32) \
next32:

// func sgemmKernel12x32(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int)
//
// sgemmKernel12x16 on tiles of 32 columns: the B operand of a tile is the
// packed panel at b and the one after it (b + 16·kc floats); colBias has
// 32 floats. There is no column mask: narrower tiles go to
// sgemmKernel12x16.
TEXT ·sgemmKernel12x32(SB), NOSPLIT, $0-128
	TILEARGS
	MOVQ R10, R15
	SHLQ $6, R15            // 16·kc floats in bytes: the second B panel

tile32:
	CROWS12(CPF32)

	ZERO24
	MOVQ SI, R12
	LEAQ (R10)(R10*2), R14
	SHLQ $3, R14            // 6·kc floats in bytes: the second A panel
	ADDQ SI, R14
	MOVQ b+16(FP), DX
	MOVQ R10, R13
	KLOOP(STEP32X4, ADVP(96, 256), STEP32(0, 0, Z24, Z25), ADVP(24, 64))
	EPILOGUE32(alpha+56(FP), lo+64(FP), beta+60(FP))
	NEXTTILE(tile32)

// One k step of sgemmKernel12x32S: A's 12 rows lie lda bytes apart (AX =
// lda, CX = 3·lda) from R12 (rows 0–3), R14 (rows 4–7) and BX (rows 8–11).
#define STEP32S(boff, aoff, b0, b1) \
	VMOVUPS boff(DX), b0 \
	VMOVUPS boff(DX)(R15*1), b1 \
	BFMA2(aoff(R12), Z26, b0, b1, Z0, Z1) \
	BFMA2(aoff(R12)(AX*1), Z27, b0, b1, Z2, Z3) \
	BFMA2(aoff(R12)(AX*2), Z28, b0, b1, Z4, Z5) \
	BFMA2(aoff(R12)(CX*1), Z29, b0, b1, Z6, Z7) \
	BFMA2(aoff(R14), Z26, b0, b1, Z8, Z9) \
	BFMA2(aoff(R14)(AX*1), Z27, b0, b1, Z10, Z11) \
	BFMA2(aoff(R14)(AX*2), Z28, b0, b1, Z12, Z13) \
	BFMA2(aoff(R14)(CX*1), Z29, b0, b1, Z14, Z15) \
	BFMA2(aoff(BX), Z26, b0, b1, Z16, Z17) \
	BFMA2(aoff(BX)(AX*1), Z27, b0, b1, Z18, Z19) \
	BFMA2(aoff(BX)(AX*2), Z28, b0, b1, Z20, Z21) \
	BFMA2(aoff(BX)(CX*1), Z29, b0, b1, Z22, Z23)

// Four k steps of STEP32S.
#define STEP32SX4 \
	STEP32S(0, 0, Z24, Z25) \
	STEP32S(64, 4, Z30, Z31) \
	STEP32S(128, 8, Z24, Z25) \
	STEP32S(192, 12, Z30, Z31)

// func sgemmKernel12x32S(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, lda int)
//
// sgemmKernel12x32 reading A unpacked: row r of the 12×kc A block starts
// r·lda floats after a (rows past rows are read, not used). Copying rows
// is far cheaper than interleaving them, so a packer that gathers rows
// (an implicit im2col) feeds this kernel.
TEXT ·sgemmKernel12x32S(SB), NOSPLIT, $16-136
	TILEARGS
	MOVQ R10, R15
	SHLQ $6, R15            // 16·kc floats in bytes: the second B panel

tile32s:
	MOVQ BX, savebx-8(SP)
	MOVQ CX, savecx-16(SP)
	ZERO24
	SROWS(lda+128(FP))
	KLOOP(STEP32SX4, ADVS(16, 256), STEP32S(0, 0, Z24, Z25), ADVS(4, 64))
	MOVQ         savebx-8(SP), BX
	MOVQ         savecx-16(SP), CX
	EPILOGUE32(alpha+56(FP), lo+64(FP), beta+60(FP))
	NEXTTILE(tile32s)

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
	KLOOP(STEP32SX4, ADVS(16, 256), STEP32S(0, 0, Z24, Z25), ADVS(4, 64))
	ADDQ $8, R10
	DECQ tapsleft-24(SP)
	JNE  tap32t

	MOVQ         savebx-8(SP), BX
	MOVQ         savecx-16(SP), CX
	EPILOGUE32(alpha+80(FP), lo+88(FP), beta+84(FP))
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
	TILEARGS
	MOVQ R10, R15
	SHLQ $6, R15            // 16·kc floats in bytes: the second B panel

tile32d:
	CROWS12(CPF32)

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
	EPILOGUE32(alpha+56(FP), lo+64(FP), beta+60(FP))
	NEXTTILE(tile32d)
