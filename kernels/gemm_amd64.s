//go:build amd64 && !noasm

#include "textflag.h"

// The AVX2 SGEMM kernels: a 6×16 register-blocked micro-kernel over packed
// panels and the packing routines that build those panels. The layouts are
// described in gemm_pack.go.

// One k step of the 6×16 micro-kernel: two vectors of the B panel row,
// broadcast each of the six A values of the A panel column, twelve FMAs
// into the accumulators Y0..Y11 (row r in Y(2r), Y(2r+1)).
#define STEP(boff, aoff) \
	VMOVUPS boff(DX), Y12; \
	VMOVUPS boff+32(DX), Y13; \
	VBROADCASTSS aoff(R12), Y14; \
	VFMADD231PS Y12, Y14, Y0; \
	VFMADD231PS Y13, Y14, Y1; \
	VBROADCASTSS aoff+4(R12), Y15; \
	VFMADD231PS Y12, Y15, Y2; \
	VFMADD231PS Y13, Y15, Y3; \
	VBROADCASTSS aoff+8(R12), Y14; \
	VFMADD231PS Y12, Y14, Y4; \
	VFMADD231PS Y13, Y14, Y5; \
	VBROADCASTSS aoff+12(R12), Y15; \
	VFMADD231PS Y12, Y15, Y6; \
	VFMADD231PS Y13, Y15, Y7; \
	VBROADCASTSS aoff+16(R12), Y14; \
	VFMADD231PS Y12, Y14, Y8; \
	VFMADD231PS Y13, Y14, Y9; \
	VBROADCASTSS aoff+20(R12), Y15; \
	VFMADD231PS Y12, Y15, Y10; \
	VFMADD231PS Y13, Y15, Y11

// The epilogue of one C row (at AX) held in a0, a1, already scaled by
// alpha: add beta·C (Y13 holds beta; ROWBETA only), the column bias (Y14,
// Y15), the row bias (roff(R13)), clamp below at lo (ReLU uses 0, no
// activation −Inf; VMAXPS with the value as second source passes NaN
// through) and store.
#define ROWBETA(a0, a1) \
	VFMADD231PS (AX), Y13, a0; \
	VFMADD231PS 32(AX), Y13, a1

#define ROWEND(a0, a1, roff) \
	VADDPS Y14, a0, a0; \
	VADDPS Y15, a1, a1; \
	VBROADCASTSS roff(R13), Y12; \
	VADDPS Y12, a0, a0; \
	VADDPS Y12, a1, a1; \
	VBROADCASTSS lo+64(FP), Y12; \
	VMAXPS a0, Y12, a0; \
	VMAXPS a1, Y12, a1; \
	VMOVUPS a0, (AX); \
	VMOVUPS a1, 32(AX)

// func sgemmKernel6x16(kc int, a, b, c *float32, ldc, panels, rows int, alpha, beta, lo float32, colBias *float32, colBiasStride int, rowBias *float32)
//
// For each of panels consecutive packed B panels (kc×16 each, contiguous)
// it computes the 6×16 product of the packed A panel (kc×6) with it and
// writes the first rows rows of C (row stride ldc floats) as
// max(alpha·AB + beta·C + colBias + rowBias, lo); beta = ±0 does not read
// C. colBias points at 16 floats and advances colBiasStride bytes per
// panel; rowBias points at rows floats. Biases that are not wanted point at
// −0 (adding −0 changes nothing, not even the sign of a zero).
TEXT ·sgemmKernel6x16(SB), NOSPLIT, $0-96
	MOVQ kc+0(FP), R10
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ c+24(FP), R8
	MOVQ ldc+32(FP), R9
	SHLQ $2, R9
	MOVQ panels+40(FP), R11
	MOVQ rows+48(FP), DI
	MOVQ colBias+72(FP), BX
	MOVQ colBiasStride+80(FP), CX

panel:
	// Ask for the C tile now; it is needed only after the k loop.
	MOVQ R8, AX
	PREFETCHT0 (AX)
	PREFETCHT0 60(AX)
	ADDQ R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 60(AX)
	ADDQ R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 60(AX)
	ADDQ R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 60(AX)
	ADDQ R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 60(AX)
	ADDQ R9, AX
	PREFETCHT0 (AX)
	PREFETCHT0 60(AX)

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	MOVQ SI, R12
	MOVQ R10, R13
	CMPQ R13, $4
	JLT  tail

loop4:
	STEP(0, 0)
	STEP(64, 24)
	STEP(128, 48)
	STEP(192, 72)
	ADDQ $96, R12
	ADDQ $256, DX
	SUBQ $4, R13
	CMPQ R13, $4
	JGE  loop4

tail:
	TESTQ R13, R13
	JEQ   epilogue

loop1:
	STEP(0, 0)
	ADDQ $24, R12
	ADDQ $64, DX
	DECQ R13
	JNE  loop1

epilogue:
	VBROADCASTSS alpha+56(FP), Y12
	VMULPS       Y12, Y0, Y0
	VMULPS       Y12, Y1, Y1
	VMULPS       Y12, Y2, Y2
	VMULPS       Y12, Y3, Y3
	VMULPS       Y12, Y4, Y4
	VMULPS       Y12, Y5, Y5
	VMULPS       Y12, Y6, Y6
	VMULPS       Y12, Y7, Y7
	VMULPS       Y12, Y8, Y8
	VMULPS       Y12, Y9, Y9
	VMULPS       Y12, Y10, Y10
	VMULPS       Y12, Y11, Y11
	VMOVUPS      (BX), Y14
	VMOVUPS      32(BX), Y15
	MOVQ         rowBias+88(FP), R13
	MOVQ         R8, AX
	MOVL         beta+60(FP), R12
	TESTL        $0x7fffffff, R12
	JEQ          nobeta

	VBROADCASTSS beta+60(FP), Y13
	ROWBETA(Y0, Y1)
	ROWEND(Y0, Y1, 0)
	CMPQ         DI, $1
	JLE          next
	ADDQ         R9, AX
	ROWBETA(Y2, Y3)
	ROWEND(Y2, Y3, 4)
	CMPQ         DI, $2
	JLE          next
	ADDQ         R9, AX
	ROWBETA(Y4, Y5)
	ROWEND(Y4, Y5, 8)
	CMPQ         DI, $3
	JLE          next
	ADDQ         R9, AX
	ROWBETA(Y6, Y7)
	ROWEND(Y6, Y7, 12)
	CMPQ         DI, $4
	JLE          next
	ADDQ         R9, AX
	ROWBETA(Y8, Y9)
	ROWEND(Y8, Y9, 16)
	CMPQ         DI, $5
	JLE          next
	ADDQ         R9, AX
	ROWBETA(Y10, Y11)
	ROWEND(Y10, Y11, 20)
	JMP          next

nobeta:
	ROWEND(Y0, Y1, 0)
	CMPQ DI, $1
	JLE  next
	ADDQ R9, AX
	ROWEND(Y2, Y3, 4)
	CMPQ DI, $2
	JLE  next
	ADDQ R9, AX
	ROWEND(Y4, Y5, 8)
	CMPQ DI, $3
	JLE  next
	ADDQ R9, AX
	ROWEND(Y6, Y7, 12)
	CMPQ DI, $4
	JLE  next
	ADDQ R9, AX
	ROWEND(Y8, Y9, 16)
	CMPQ DI, $5
	JLE  next
	ADDQ R9, AX
	ROWEND(Y10, Y11, 20)

next:
	ADDQ $64, R8
	ADDQ CX, BX
	DECQ R11
	JNE  panel
	VZEROUPPER
	RET

// func gemmPackBN16(kc int, b *float32, ldb int, dst *float32, panels int)
//
// Packs panels full 16-column panels of a row-major kc×(16·panels) block
// of B (row stride ldb floats): panel j holds rows 0..kc-1 of columns
// 16j..16j+15, one 64-byte row after another, panels back to back.
TEXT ·gemmPackBN16(SB), NOSPLIT, $0-40
	MOVQ kc+0(FP), R10
	MOVQ b+8(FP), SI
	MOVQ ldb+16(FP), R9
	SHLQ $2, R9
	MOVQ dst+24(FP), DI
	MOVQ panels+32(FP), R11

pbnPanel:
	MOVQ SI, AX
	MOVQ R10, CX
	CMPQ CX, $2
	JLT  pbnOne

pbnTwo:
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS (AX)(R9*1), Y2
	VMOVUPS 32(AX)(R9*1), Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	LEAQ    (AX)(R9*2), AX
	ADDQ    $128, DI
	SUBQ    $2, CX
	CMPQ    CX, $2
	JGE     pbnTwo

pbnOne:
	TESTQ   CX, CX
	JEQ     pbnNext
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ    $64, DI

pbnNext:
	ADDQ $64, SI
	DECQ R11
	JNE  pbnPanel
	VZEROUPPER
	RET

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
	VUNPCKLPS   Y1, Y0, Y4; \
	VUNPCKHPS   Y1, Y0, Y5; \
	VUNPCKLPS   Y3, Y2, Y6; \
	VUNPCKHPS   Y3, Y2, Y7; \
	VSHUFPS     $0x44, Y6, Y4, Y8; \
	VSHUFPS     $0xEE, Y6, Y4, Y9; \
	VSHUFPS     $0x44, Y7, Y5, Y10; \
	VSHUFPS     $0xEE, Y7, Y5, Y11; \
	VMOVUPS     Y8, doff(DI); \
	VMOVUPS     Y9, doff+64(DI); \
	VMOVUPS     Y10, doff+128(DI); \
	VMOVUPS     Y11, doff+192(DI)

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

// func gemmPackAN6(kc8 int, a *float32, lda int, dst *float32)
//
// Packs a 6-row panel of a row-major A (row stride lda): element p of row
// r goes to dst[6p+r], for p < kc8 (a multiple of 8). Each column is
// stored as 8 floats, the last two of which the next column overwrites:
// dst needs two floats of room past 6·kc8.
TEXT ·gemmPackAN6(SB), NOSPLIT, $0-32
	MOVQ kc8+0(FP), R11
	MOVQ a+8(FP), AX
	MOVQ lda+16(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	LEAQ (AX)(R9*4), BX
	MOVQ dst+24(FP), DI
	TESTQ R11, R11
	JEQ  panDone

panLoop:
	VMOVUPS     (AX), X0
	VINSERTF128 $1, (BX), Y0, Y0
	VMOVUPS     (AX)(R9*1), X1
	VINSERTF128 $1, (BX)(R9*1), Y1, Y1
	VMOVUPS     (AX)(R9*2), X2
	VMOVUPS     (AX)(R10*1), X3
	VUNPCKLPS   Y1, Y0, Y4
	VUNPCKHPS   Y1, Y0, Y5
	VUNPCKLPS   Y3, Y2, Y6
	VUNPCKHPS   Y3, Y2, Y7
	VSHUFPS     $0x44, Y6, Y4, Y8
	VSHUFPS     $0xEE, Y6, Y4, Y9
	VSHUFPS     $0x44, Y7, Y5, Y10
	VSHUFPS     $0xEE, Y7, Y5, Y11
	VMOVUPS     Y8, (DI)
	VMOVUPS     Y9, 24(DI)
	VMOVUPS     Y10, 48(DI)
	VMOVUPS     Y11, 72(DI)
	VMOVUPS     16(AX), X0
	VINSERTF128 $1, 16(BX), Y0, Y0
	VMOVUPS     16(AX)(R9*1), X1
	VINSERTF128 $1, 16(BX)(R9*1), Y1, Y1
	VMOVUPS     16(AX)(R9*2), X2
	VMOVUPS     16(AX)(R10*1), X3
	VUNPCKLPS   Y1, Y0, Y4
	VUNPCKHPS   Y1, Y0, Y5
	VUNPCKLPS   Y3, Y2, Y6
	VUNPCKHPS   Y3, Y2, Y7
	VSHUFPS     $0x44, Y6, Y4, Y8
	VSHUFPS     $0xEE, Y6, Y4, Y9
	VSHUFPS     $0x44, Y7, Y5, Y10
	VSHUFPS     $0xEE, Y7, Y5, Y11
	VMOVUPS     Y8, 96(DI)
	VMOVUPS     Y9, 120(DI)
	VMOVUPS     Y10, 144(DI)
	VMOVUPS     Y11, 168(DI)
	ADDQ        $32, AX
	ADDQ        $32, BX
	ADDQ        $192, DI
	SUBQ        $8, R11
	JNE         panLoop

panDone:
	VZEROUPPER
	RET

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
