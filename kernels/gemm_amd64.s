//go:build amd64 && !noasm

#include "textflag.h"
#include "gemm_amd64.h"

// The AVX2 SGEMM kernels: a 6×16 register-blocked micro-kernel over packed
// panels and the packing routines that build those panels. The layouts are
// described in gemm_pack.go.

// BFMA2(a, t, c0, c1): t = a broadcast; c0 += Y12·t, c1 += Y13·t.
#define BFMA2(a, t, c0, c1) \
	VBROADCASTSS a, t \
	VFMADD231PS  Y12, t, c0 \
	VFMADD231PS  Y13, t, c1

// One k step of the 6×16 micro-kernel: two vectors of the B panel row,
// broadcast each of the six A values of the A panel column, twelve FMAs
// into the accumulators Y0..Y11 (row r in Y(2r), Y(2r+1)).
#define STEP(boff, aoff) \
	VMOVUPS boff(DX), Y12 \
	VMOVUPS boff+32(DX), Y13 \
	BFMA2(aoff(R12), Y14, Y0, Y1) \
	BFMA2(aoff+4(R12), Y15, Y2, Y3) \
	BFMA2(aoff+8(R12), Y14, Y4, Y5) \
	BFMA2(aoff+12(R12), Y15, Y6, Y7) \
	BFMA2(aoff+16(R12), Y14, Y8, Y9) \
	BFMA2(aoff+20(R12), Y15, Y10, Y11)

// Four k steps, and ADV(a, b) moves the A panel a bytes and the B panel b
// bytes on.
#define STEP4 \
	STEP(0, 0) \
	STEP(64, 24) \
	STEP(128, 48) \
	STEP(192, 72)

#define ADV(a, b) \
	ADDQ $a, R12 \
	ADDQ $b, DX

// The epilogue of one C row (at AX) held in a0, a1, already scaled by
// alpha: add beta·C (Y13 holds beta; the BETA forms only), the column bias
// (at BX), the row bias (roff(R13)), clamp below at lo (ReLU uses 0, no
// activation −Inf; VMAXPS with the value as second source passes NaN
// through) and store. The M forms are for a tile narrower than 16 columns:
// they load and store C under the column masks in Y14 and Y15.
#define ROWBETA(a0, a1) \
	VFMADD231PS (AX), Y13, a0; \
	VFMADD231PS 32(AX), Y13, a1

#define ROWBETAM(a0, a1) \
	VMASKMOVPS  (AX), Y14, Y12; \
	VFMADD231PS Y12, Y13, a0; \
	VMASKMOVPS  32(AX), Y15, Y12; \
	VFMADD231PS Y12, Y13, a1

#define ROWADD(a0, a1, roff) \
	VADDPS       (BX), a0, a0; \
	VADDPS       32(BX), a1, a1; \
	VBROADCASTSS roff(R13), Y12; \
	VADDPS       Y12, a0, a0; \
	VADDPS       Y12, a1, a1; \
	VBROADCASTSS lo+64(FP), Y12; \
	VMAXPS       a0, Y12, a0; \
	VMAXPS       a1, Y12, a1

#define ROWEND(a0, a1, roff) \
	ROWADD(a0, a1, roff); \
	VMOVUPS a0, (AX); \
	VMOVUPS a1, 32(AX)

#define ROWENDM(a0, a1, roff) \
	ROWADD(a0, a1, roff); \
	VMASKMOVPS a0, Y14, (AX); \
	VMASKMOVPS a1, Y15, 32(AX)

// CPF prefetches the C row at AX (the lines of its first and last floats).
#define CPF \
	PREFETCHT0 (AX) \
	PREFETCHT0 60(AX)

// ROWS runs the epilogue END (with BETA first, or NOBETA, an empty macro)
// on the first DI rows of the tile, then jumps to next.
#define NOBETA(a0, a1)

#define ROWS(BETA, END) \
	ROW2(BETA, END, Y0, Y1, 0, 1, next) \
	ROW2(BETA, END, Y2, Y3, 4, 2, next) \
	ROW2(BETA, END, Y4, Y5, 8, 3, next) \
	ROW2(BETA, END, Y6, Y7, 12, 4, next) \
	ROW2(BETA, END, Y8, Y9, 16, 5, next) \
	BETA(Y10, Y11) \
	END(Y10, Y11, 20) \
	JMP  next

// PACKAN6(PAN, SHIFT, HALF, loop, done) is the body of gemmPackAN6 and
// its BF16 twin: PAN packs four columns from byte offset 0 and HALF of
// each row, elements being 1<<SHIFT bytes.
#define PACKAN6(PAN, SHIFT, HALF, loop, done) \
	MOVQ  kc8+0(FP), R11; \
	MOVQ  a+8(FP), AX; \
	MOVQ  lda+16(FP), R9; \
	SHLQ  SHIFT, R9; \
	LEAQ  (R9)(R9*2), R10; \
	LEAQ  (AX)(R9*4), BX; \
	MOVQ  dst+24(FP), DI; \
	TESTQ R11, R11; \
	JEQ   done; \
loop: \
	PAN(0, 0); \
	PAN(HALF, 96); \
	ADDQ  $(2*HALF), AX; \
	ADDQ  $(2*HALF), BX; \
	ADDQ  $192, DI; \
	SUBQ  $8, R11; \
	JNE   loop; \
done: \
	VZEROUPPER; \
	RET

// EPILOGUE6(tile): the 6×16 kernels' epilogue of a tile held in Y0–Y11
// (scale by alpha, beta·C, biases, clamp, store, under the mask when
// there is one), then on to the next tile at label tile.
#define EPILOGUE6(tile) \
	VBROADCASTSS alpha+56(FP), Y12; \
	MUL4(Y12, Y0, Y1, Y2, Y3); \
	MUL4(Y12, Y4, Y5, Y6, Y7); \
	MUL4(Y12, Y8, Y9, Y10, Y11); \
	MOVQ         CX, R13; \
	MOVQ         R8, AX; \
	MOVQ         mask+128(FP), R12; \
	TESTQ        R12, R12; \
	JNE          masked; \
	MOVL         beta+60(FP), R12; \
	TESTL        $0x7fffffff, R12; \
	JEQ          nobeta; \
	VBROADCASTSS beta+60(FP), Y13; \
	ROWS(ROWBETA, ROWEND); \
nobeta: \
	ROWS(NOBETA, ROWEND); \
masked: \
	VMOVUPS      (R12), Y14; \
	VMOVUPS      32(R12), Y15; \
	MOVL         beta+60(FP), R12; \
	TESTL        $0x7fffffff, R12; \
	JEQ          nobetam; \
	VBROADCASTSS beta+60(FP), Y13; \
	ROWS(ROWBETAM, ROWENDM); \
nobetam: \
	ROWS(NOBETA, ROWENDM); \
next: \
	NEXTTILE(tile)

// func sgemmKernel6x16(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32)
//
// Computes tiles 6×16 tiles of C. Tile t multiplies the packed A panel at
// a + t·aStep (kc×6) by the packed B panel at b + t·bStep (kc×16) and
// writes the first rows rows of the tile at c + t·cStep (row stride ldc
// floats) as max(alpha·AB + beta·C + colBias + rowBias, lo); beta = ±0
// does not read C. colBias (16 floats) and rowBias (rows floats) move by
// their steps per tile too; biases that are not wanted point at −0 (adding
// −0 changes nothing, not even the sign of a zero). Steps are in bytes.
// A non-nil mask (16 int32, all bits set for the columns to write) makes
// the tiles narrower: C is read and written under it, and colBias must
// then have 16 readable floats too.
TEXT ·sgemmKernel6x16(SB), NOSPLIT, $0-136
	TILEARGS

tile:
	// Ask for the C tile now; it is needed only after the k loop.
	CROWS6(CPF)

	ZERO4(VXORPS, Y0, Y1, Y2, Y3)
	ZERO4(VXORPS, Y4, Y5, Y6, Y7)
	ZERO4(VXORPS, Y8, Y9, Y10, Y11)
	MOVQ SI, R12
	MOVQ b+16(FP), DX
	MOVQ R10, R13
	KLOOP(STEP4, ADV(96, 256), STEP(0, 0), ADV(24, 64))

	EPILOGUE6(tile)

// One k step of sgemmKernel6x16S: A's six rows lie lda bytes apart (AX =
// lda, R15 = 3·lda) from R12 (rows 0–3) and R14 (rows 4–5).
#define STEPS(boff, aoff) \
	VMOVUPS boff(DX), Y12 \
	VMOVUPS boff+32(DX), Y13 \
	BFMA2(aoff(R12), Y14, Y0, Y1) \
	BFMA2(aoff(R12)(AX*1), Y15, Y2, Y3) \
	BFMA2(aoff(R12)(AX*2), Y14, Y4, Y5) \
	BFMA2(aoff(R12)(R15*1), Y15, Y6, Y7) \
	BFMA2(aoff(R14), Y14, Y8, Y9) \
	BFMA2(aoff(R14)(AX*1), Y15, Y10, Y11)

#define STEPS4 \
	STEPS(0, 0) \
	STEPS(64, 4) \
	STEPS(128, 8) \
	STEPS(192, 12)

#define ADVS6(a, b) \
	ADDQ $a, R12 \
	ADDQ $a, R14 \
	ADDQ $b, DX

// func sgemmKernel6x16S(kc int, a, b, c *float32, ldc, tiles, rows int, alpha, beta, lo float32, colBias, rowBias *float32, aStep, bStep, cStep, colBiasStep, rowBiasStep int, mask *int32, lda int)
//
// sgemmKernel6x16 reading A unpacked: row r of the 6×kc A block starts
// r·lda floats after a (all six rows are read).
TEXT ·sgemmKernel6x16S(SB), NOSPLIT, $0-144
	TILEARGS

tile:
	CROWS6(CPF)

	ZERO4(VXORPS, Y0, Y1, Y2, Y3)
	ZERO4(VXORPS, Y4, Y5, Y6, Y7)
	ZERO4(VXORPS, Y8, Y9, Y10, Y11)
	MOVQ lda+136(FP), AX
	SHLQ $2, AX             // lda in bytes
	LEAQ (AX)(AX*2), R15    // 3·lda
	MOVQ SI, R12
	LEAQ (R12)(AX*4), R14   // row 4
	MOVQ b+16(FP), DX
	MOVQ R10, R13
	KLOOP(STEPS4, ADVS6(16, 256), STEPS(0, 0), ADVS6(4, 64))
	EPILOGUE6(tile)

// LOADB4(r, …): the 16 floats of the four rows at r, r + R9, r + 2·R9 and
// r + R10 into the eight registers, two per row.
#define LOADB4(r, y0, y1, y2, y3, y4, y5, y6, y7) \
	VMOVUPS (r), y0 \
	VMOVUPS 32(r), y1 \
	VMOVUPS (r)(R9*1), y2 \
	VMOVUPS 32(r)(R9*1), y3 \
	VMOVUPS (r)(R9*2), y4 \
	VMOVUPS 32(r)(R9*2), y5 \
	VMOVUPS (r)(R10*1), y6 \
	VMOVUPS 32(r)(R10*1), y7

// STORE8(off, …): the eight registers to off(BX) on, one after another.
#define STORE8(off, y0, y1, y2, y3, y4, y5, y6, y7) \
	VMOVUPS y0, off(BX) \
	VMOVUPS y1, off+32(BX) \
	VMOVUPS y2, off+64(BX) \
	VMOVUPS y3, off+96(BX) \
	VMOVUPS y4, off+128(BX) \
	VMOVUPS y5, off+160(BX) \
	VMOVUPS y6, off+192(BX) \
	VMOVUPS y7, off+224(BX)

// func gemmPackBN16(kc int, b *float32, ldb int, dst *float32, panels int)
//
// Packs panels full 16-column panels of a row-major kc×(16·panels) block
// of B (row stride ldb floats): panel j holds rows 0..kc-1 of columns
// 16j..16j+15, one 64-byte row after another, panels back to back. It
// walks eight rows at a time across all panels (then four, then one), so
// B is read as eight sequential streams rather than down a column of
// pages; eight streams pack a third faster than four.
TEXT ·gemmPackBN16(SB), NOSPLIT, $0-40
	MOVQ kc+0(FP), R12
	MOVQ b+8(FP), SI
	MOVQ ldb+16(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ dst+24(FP), DI
	MOVQ R12, R8
	SHLQ $6, R8             // panel stride in bytes

pbnRows8:
	CMPQ R12, $8
	JLT  pbnRows4
	MOVQ SI, AX
	LEAQ (SI)(R9*4), CX
	MOVQ DI, BX
	MOVQ panels+32(FP), R11

pbnPanel8:
	LOADB4(AX, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	LOADB4(CX, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	STORE8(0, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	STORE8(256, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	ADDQ    $64, AX
	ADDQ    $64, CX
	ADDQ    R8, BX
	DECQ    R11
	JNE     pbnPanel8
	LEAQ    (SI)(R9*8), SI
	ADDQ    $512, DI
	SUBQ    $8, R12
	JMP     pbnRows8

pbnRows4:
	CMPQ R12, $4
	JLT  pbnRows1
	MOVQ SI, AX
	MOVQ DI, BX
	MOVQ panels+32(FP), R11

pbnPanel4:
	LOADB4(AX, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	STORE8(0, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	ADDQ    $64, AX
	ADDQ    R8, BX
	DECQ    R11
	JNE     pbnPanel4
	LEAQ    (SI)(R9*4), SI
	ADDQ    $256, DI
	SUBQ    $4, R12
	JMP     pbnRows4

pbnRows1:
	TESTQ R12, R12
	JEQ   pbnDone
	MOVQ  SI, AX
	MOVQ  DI, BX
	MOVQ  panels+32(FP), R11

pbnPanel1:
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS Y0, (BX)
	VMOVUPS Y1, 32(BX)
	ADDQ    $64, AX
	ADDQ    R8, BX
	DECQ    R11
	JNE     pbnPanel1
	ADDQ    R9, SI
	ADDQ    $64, DI
	DECQ    R12
	JMP     pbnRows1

pbnDone:
	VZEROUPPER
	RET

// func gemmPackBN16Mask(kc int, b *float32, ldb int, dst *float32, mask *int32)
//
// Packs one panel of fewer than 16 columns of a row-major kc-row block of
// B: the columns mask selects are read (VMASKMOVPS reads nothing, and
// cannot fault, outside them) and the rest of each 64-byte row is zero.
TEXT ·gemmPackBN16Mask(SB), NOSPLIT, $0-40
	MOVQ    kc+0(FP), CX
	MOVQ    b+8(FP), SI
	MOVQ    ldb+16(FP), R9
	SHLQ    $2, R9
	MOVQ    dst+24(FP), DI
	MOVQ    mask+32(FP), AX
	VMOVUPS (AX), Y14
	VMOVUPS 32(AX), Y15
	TESTQ   CX, CX
	JEQ     pbmDone

pbmLoop:
	VMASKMOVPS (SI), Y14, Y0
	VMASKMOVPS 32(SI), Y15, Y1
	VMOVUPS    Y0, (DI)
	VMOVUPS    Y1, 32(DI)
	ADDQ       R9, SI
	ADDQ       $64, DI
	DECQ       CX
	JNE        pbmLoop

pbmDone:
	VZEROUPPER
	RET

// TRANSPOSE4: in each 128-bit lane, the 4×4 transpose of Y0–Y3 (rows)
// into Y8–Y11 (columns), with scratch Y4–Y7.
#define TRANSPOSE4 \
	VUNPCKLPS Y1, Y0, Y4 \
	VUNPCKHPS Y1, Y0, Y5 \
	VUNPCKLPS Y3, Y2, Y6 \
	VUNPCKHPS Y3, Y2, Y7 \
	VSHUFPS   $0x44, Y6, Y4, Y8 \
	VSHUFPS   $0xEE, Y6, Y4, Y9 \
	VSHUFPS   $0x44, Y7, Y5, Y10 \
	VSHUFPS   $0xEE, Y7, Y5, Y11

// STORE4(d0, d1, d2, d3): Y8–Y11 to d0(DI), …, d3(DI).
#define STORE4(d0, d1, d2, d3) \
	VMOVUPS Y8, d0(DI) \
	VMOVUPS Y9, d1(DI) \
	VMOVUPS Y10, d2(DI) \
	VMOVUPS Y11, d3(DI)

// TR4 transposes a 4-column strip of 8 rows: rows 0..3 at r0(…), rows
// 4..7 at r4(…) (row stride R9, three strides R10), columns at byte offset
// off. Each 128-bit lane holds four rows of one column group, so an
// in-lane 4×4 transpose leaves column q of all 8 rows in one register,
// which is stored at doff + 64q bytes from DI.
#define TR4(off, r0, r4, doff) \
	VMOVUPS     off(r0), X0; \
	VINSERTF128 $1, off(r4), Y0, Y0; \
	VMOVUPS     off(r0)(R9*1), X1; \
	VINSERTF128 $1, off(r4)(R9*1), Y1, Y1; \
	VMOVUPS     off(r0)(R9*2), X2; \
	VINSERTF128 $1, off(r4)(R9*2), Y2, Y2; \
	VMOVUPS     off(r0)(R10*1), X3; \
	VINSERTF128 $1, off(r4)(R10*1), Y3, Y3; \
	TRANSPOSE4; \
	STORE4(doff, doff+64, doff+128, doff+192)

// func gemmPackBT16(kc8 int, b *float32, ldb int, dst *float32, panelStride, panels int)
//
// Packs 16-column panels of op(B) = Bᵀ where B is stored n×k row-major
// (row stride ldb): panel j takes stored rows 16j..16j+15, and its row p
// (64 bytes) holds element p of each. kc8, a multiple of 8, rows of each
// panel are written; panels start panelStride floats apart.
TEXT ·gemmPackBT16(SB), NOSPLIT, $0-48
	MOVQ kc8+0(FP), R11
	MOVQ b+8(FP), SI
	MOVQ ldb+16(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ dst+24(FP), R8
	MOVQ panelStride+32(FP), R13
	SHLQ $2, R13

pbtPanel:
	TESTQ R11, R11
	JEQ   pbtNext
	MOVQ  SI, AX
	LEAQ  (AX)(R9*4), BX
	LEAQ  (BX)(R9*4), CX
	LEAQ  (CX)(R9*4), DX
	MOVQ  R8, DI
	MOVQ  R11, R12

pbtLoop:
	TR4(0, AX, BX, 0)
	TR4(16, AX, BX, 256)
	TR4(0, CX, DX, 32)
	TR4(16, CX, DX, 288)
	ADDQ $32, AX
	ADDQ $32, BX
	ADDQ $32, CX
	ADDQ $32, DX
	ADDQ $512, DI
	SUBQ $8, R12
	JNE  pbtLoop

pbtNext:
	LEAQ (SI)(R9*8), SI
	LEAQ (SI)(R9*8), SI
	ADDQ R13, R8
	DECQ panels+40(FP)
	JNE  pbtPanel
	VZEROUPPER
	RET

// PAN6(off, doff): TR4 for 6 rows, at AX (rows 0–3) and BX (rows 4, 5;
// rows 6 and 7 are the zero upper halves of Y2, Y3): column q goes to
// doff + 24q bytes from DI, its last two floats overwritten by the next.
#define PAN6(off, doff) \
	VMOVUPS     off(AX), X0 \
	VINSERTF128 $1, off(BX), Y0, Y0 \
	VMOVUPS     off(AX)(R9*1), X1 \
	VINSERTF128 $1, off(BX)(R9*1), Y1, Y1 \
	VMOVUPS     off(AX)(R9*2), X2 \
	VMOVUPS     off(AX)(R10*1), X3 \
	TRANSPOSE4 \
	STORE4(doff, doff+24, doff+48, doff+72)

// func gemmPackAN6(kc8 int, a *float32, lda int, dst *float32)
//
// Packs a 6-row panel of a row-major A (row stride lda): element p of row
// r goes to dst[6p+r], for p < kc8 (a multiple of 8). Each column is
// stored as 8 floats, the last two of which the next column overwrites:
// dst needs two floats of room past 6·kc8.
TEXT ·gemmPackAN6(SB), NOSPLIT, $0-32
	PACKAN6(PAN6, $2, 16, panLoop, panDone)

// PAN6H(off, doff) is PAN6 for bfloat16 rows: four bfloat16 of each row
// at byte offset off are widened (zero-extended, shifted to the high half)
// as they are loaded.
#define PAN6H(off, doff) \
	VPMOVZXWD   off(AX), X0; \
	VPMOVZXWD   off(BX), X12; \
	VPMOVZXWD   off(AX)(R9*1), X1; \
	VPMOVZXWD   off(BX)(R9*1), X13; \
	VPMOVZXWD   off(AX)(R9*2), X2; \
	VPMOVZXWD   off(AX)(R10*1), X3; \
	VINSERTI128 $1, X12, Y0, Y0; \
	VINSERTI128 $1, X13, Y1, Y1; \
	VPSLLD      $16, Y0, Y0; \
	VPSLLD      $16, Y1, Y1; \
	VPSLLD      $16, Y2, Y2; \
	VPSLLD      $16, Y3, Y3; \
	TRANSPOSE4; \
	STORE4(doff, doff+24, doff+48, doff+72)

// func gemmPackAN6BF16(kc8 int, a *uint16, lda int, dst *float32)
//
// gemmPackAN6 for a bfloat16 A, widened exactly as it is packed.
TEXT ·gemmPackAN6BF16(SB), NOSPLIT, $0-32
	PACKAN6(PAN6H, $1, 8, panhLoop, panhDone)

// func gemmPackAT6(kc int, a *float32, lda int, dst *float32)
//
// Packs a 6-column strip of a row-major k×m A (op(A) = Aᵀ): the six
// contiguous floats of row p go to dst[6p..6p+5].
TEXT ·gemmPackAT6(SB), NOSPLIT, $0-32
	MOVQ kc+0(FP), R11
	MOVQ a+8(FP), AX
	MOVQ lda+16(FP), R9
	SHLQ $2, R9
	MOVQ dst+24(FP), DI
	TESTQ R11, R11
	JEQ  patDone

patLoop:
	VMOVUPS (AX), X0
	VMOVQ   16(AX), X1
	VMOVUPS X0, (DI)
	VMOVQ   X1, 16(DI)
	ADDQ    R9, AX
	ADDQ    $24, DI
	DECQ    R11
	JNE     patLoop

patDone:
	RET
