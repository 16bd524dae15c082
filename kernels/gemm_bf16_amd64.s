//go:build !noasm

#include "textflag.h"
#include "bf16_amd64.h"

// The BF16 GEMM micro-kernel: 12 rows × 32 columns of float32 C, depth in
// pairs of bfloat16. Per pair, B's two packed 16-column panels are loaded
// and each row's pair of A is broadcast once into a register that two
// VDPBF16PS use, each adding both products to every lane: 24 accumulators.
// (Broadcasting from memory inside VDPBF16PS loads each pair twice, and
// ran at half this rate.)

#define SBSTEP \
	VMOVUPS (DX), Z24; \
	VMOVUPS (DX)(R15*1), Z25; \
	VPBROADCASTD 0(BX), Z26; \
	VDPBF16PS_Z(0, 24, 26); \
	VDPBF16PS_Z(1, 25, 26); \
	VPBROADCASTD 4(BX), Z27; \
	VDPBF16PS_Z(2, 24, 27); \
	VDPBF16PS_Z(3, 25, 27); \
	VPBROADCASTD 8(BX), Z26; \
	VDPBF16PS_Z(4, 24, 26); \
	VDPBF16PS_Z(5, 25, 26); \
	VPBROADCASTD 12(BX), Z27; \
	VDPBF16PS_Z(6, 24, 27); \
	VDPBF16PS_Z(7, 25, 27); \
	VPBROADCASTD 16(BX), Z26; \
	VDPBF16PS_Z(8, 24, 26); \
	VDPBF16PS_Z(9, 25, 26); \
	VPBROADCASTD 20(BX), Z27; \
	VDPBF16PS_Z(10, 24, 27); \
	VDPBF16PS_Z(11, 25, 27); \
	VPBROADCASTD 0(R14), Z26; \
	VDPBF16PS_Z(12, 24, 26); \
	VDPBF16PS_Z(13, 25, 26); \
	VPBROADCASTD 4(R14), Z27; \
	VDPBF16PS_Z(14, 24, 27); \
	VDPBF16PS_Z(15, 25, 27); \
	VPBROADCASTD 8(R14), Z26; \
	VDPBF16PS_Z(16, 24, 26); \
	VDPBF16PS_Z(17, 25, 26); \
	VPBROADCASTD 12(R14), Z27; \
	VDPBF16PS_Z(18, 24, 27); \
	VDPBF16PS_Z(19, 25, 27); \
	VPBROADCASTD 16(R14), Z26; \
	VDPBF16PS_Z(20, 24, 26); \
	VDPBF16PS_Z(21, 25, 26); \
	VPBROADCASTD 20(R14), Z27; \
	VDPBF16PS_Z(22, 24, 27); \
	VDPBF16PS_Z(23, 25, 27)

// func sbgemmKernel12x32(kp int, a, b *uint16, c *float32, ldc, tiles, rows int, alpha, beta float32)
//
// kp pairs of depth; a is the packed A panel: two 6-row halves, each 6
// rows' pairs per depth pair (24 bytes), the second 24·kp bytes after the
// first — gemmPackAN6's layout, pairs taken as 32-bit words; b the first packed B panel of the first tile (64 bytes
// per depth pair; the tile's second panel follows at 64·kp bytes, the
// next tile at 128·kp). C = alpha·A·B + beta·C for the first rows rows
// (beta 0 reads no C) of tiles tiles of 32 columns.
TEXT ·sbgemmKernel12x32(SB), NOSPLIT, $0-64
	MOVQ kp+0(FP), R10
	MOVQ c+24(FP), R8
	MOVQ ldc+32(FP), R9
	SHLQ $2, R9
	MOVQ tiles+40(FP), R11
	MOVQ rows+48(FP), DI
	MOVQ R10, R15
	SHLQ $6, R15            // 64·kp bytes: the tile's second panel
	MOVQ b+16(FP), DX
	VBROADCASTSS alpha+56(FP), Z30
	VBROADCASTSS beta+60(FP), Z28
	MOVL beta+60(FP), R12
	ANDL $0x7fffffff, R12

sbtile:
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
	MOVQ a+8(FP), BX
	LEAQ (R10)(R10*2), R14
	SHLQ $3, R14            // 24·kp bytes: the second half of the panel
	ADDQ BX, R14
	MOVQ DX, SI             // this tile's B
	MOVQ R10, R13
	SHRQ $1, R13            // pairs of depth pairs: the loop runs two steps
	JEQ  sbodd

sbloop:
	SBSTEP
	ADDQ $24, BX
	ADDQ $24, R14
	ADDQ $64, DX
	SBSTEP
	ADDQ $24, BX
	ADDQ $24, R14
	ADDQ $64, DX
	DECQ R13
	JNE  sbloop

sbodd:
	TESTQ $1, R10
	JEQ  sbepilogue
	SBSTEP

sbepilogue:
	MOVQ R8, AX
	VMULPS  Z30, Z0, Z0
	VMULPS  Z30, Z1, Z1
	TESTL   R12, R12
	JEQ     sbnb0
	VFMADD231PS (AX), Z28, Z0
	VFMADD231PS 64(AX), Z28, Z1
sbnb0:
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	CMPQ    DI, $1
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z2, Z2
	VMULPS  Z30, Z3, Z3
	TESTL   R12, R12
	JEQ     sbnb1
	VFMADD231PS (AX), Z28, Z2
	VFMADD231PS 64(AX), Z28, Z3
sbnb1:
	VMOVUPS Z2, (AX)
	VMOVUPS Z3, 64(AX)
	CMPQ    DI, $2
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z4, Z4
	VMULPS  Z30, Z5, Z5
	TESTL   R12, R12
	JEQ     sbnb2
	VFMADD231PS (AX), Z28, Z4
	VFMADD231PS 64(AX), Z28, Z5
sbnb2:
	VMOVUPS Z4, (AX)
	VMOVUPS Z5, 64(AX)
	CMPQ    DI, $3
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z6, Z6
	VMULPS  Z30, Z7, Z7
	TESTL   R12, R12
	JEQ     sbnb3
	VFMADD231PS (AX), Z28, Z6
	VFMADD231PS 64(AX), Z28, Z7
sbnb3:
	VMOVUPS Z6, (AX)
	VMOVUPS Z7, 64(AX)
	CMPQ    DI, $4
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z8, Z8
	VMULPS  Z30, Z9, Z9
	TESTL   R12, R12
	JEQ     sbnb4
	VFMADD231PS (AX), Z28, Z8
	VFMADD231PS 64(AX), Z28, Z9
sbnb4:
	VMOVUPS Z8, (AX)
	VMOVUPS Z9, 64(AX)
	CMPQ    DI, $5
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z10, Z10
	VMULPS  Z30, Z11, Z11
	TESTL   R12, R12
	JEQ     sbnb5
	VFMADD231PS (AX), Z28, Z10
	VFMADD231PS 64(AX), Z28, Z11
sbnb5:
	VMOVUPS Z10, (AX)
	VMOVUPS Z11, 64(AX)
	CMPQ    DI, $6
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z12, Z12
	VMULPS  Z30, Z13, Z13
	TESTL   R12, R12
	JEQ     sbnb6
	VFMADD231PS (AX), Z28, Z12
	VFMADD231PS 64(AX), Z28, Z13
sbnb6:
	VMOVUPS Z12, (AX)
	VMOVUPS Z13, 64(AX)
	CMPQ    DI, $7
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z14, Z14
	VMULPS  Z30, Z15, Z15
	TESTL   R12, R12
	JEQ     sbnb7
	VFMADD231PS (AX), Z28, Z14
	VFMADD231PS 64(AX), Z28, Z15
sbnb7:
	VMOVUPS Z14, (AX)
	VMOVUPS Z15, 64(AX)
	CMPQ    DI, $8
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z16, Z16
	VMULPS  Z30, Z17, Z17
	TESTL   R12, R12
	JEQ     sbnb8
	VFMADD231PS (AX), Z28, Z16
	VFMADD231PS 64(AX), Z28, Z17
sbnb8:
	VMOVUPS Z16, (AX)
	VMOVUPS Z17, 64(AX)
	CMPQ    DI, $9
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z18, Z18
	VMULPS  Z30, Z19, Z19
	TESTL   R12, R12
	JEQ     sbnb9
	VFMADD231PS (AX), Z28, Z18
	VFMADD231PS 64(AX), Z28, Z19
sbnb9:
	VMOVUPS Z18, (AX)
	VMOVUPS Z19, 64(AX)
	CMPQ    DI, $10
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z20, Z20
	VMULPS  Z30, Z21, Z21
	TESTL   R12, R12
	JEQ     sbnb10
	VFMADD231PS (AX), Z28, Z20
	VFMADD231PS 64(AX), Z28, Z21
sbnb10:
	VMOVUPS Z20, (AX)
	VMOVUPS Z21, 64(AX)
	CMPQ    DI, $11
	JLE     sbnext
	ADDQ    R9, AX
	VMULPS  Z30, Z22, Z22
	VMULPS  Z30, Z23, Z23
	TESTL   R12, R12
	JEQ     sbnb11
	VFMADD231PS (AX), Z28, Z22
	VFMADD231PS 64(AX), Z28, Z23
sbnb11:
	VMOVUPS Z22, (AX)
	VMOVUPS Z23, 64(AX)

sbnext:
	LEAQ (SI)(R15*2), DX    // the next tile: two panels on
	ADDQ $128, R8
	DECQ R11
	JNE  sbtile
	VZEROUPPER
	RET

// SBPAIRS leaves in Z0 the words low | high<<16 of the bfloat16s set in
// mask k of the row at SI (low) and the row BX bytes further (high), zeros
// elsewhere; nothing outside the masked elements is read.
#define SBPAIRS(k) \
	VPMOVZXWD.Z (SI), k, Z0;       \
	VPMOVZXWD.Z (SI)(BX*1), k, Z1; \
	VPSLLD      $16, Z1, Z1;       \
	VPORD       Z1, Z0, Z0

// func sbPackPanelMask(dst *uint32, src *uint16, lane, ldb, pairs int, mask uint16)
//
// Part of one 16-column panel of B for GemmBF16: for each of pairs depth
// pairs, the bfloat16s of row 2p and row 2p+1 (ldb further) in the columns
// (lanes) set in mask become words low | high<<16 at dst, 64 bytes per
// pair, the other columns of dst left as they are. Column lane's rows
// start at src (column 0's would start lane elements before it).
TEXT ·sbPackPanelMask(SB), NOSPLIT, $0-42
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  lane+16(FP), AX
	SHLQ  $1, AX
	SUBQ  AX, SI
	MOVQ  ldb+24(FP), BX
	SHLQ  $1, BX            // a row in bytes
	MOVQ  pairs+32(FP), CX
	KMOVW mask+40(FP), K1
	TESTQ CX, CX
	JEQ   sbmdone
sbmloop:
	SBPAIRS(K1)
	VMOVDQU32   Z0, K1, (DI)
	LEAQ        (SI)(BX*2), SI
	ADDQ        $64, DI
	DECQ        CX
	JNE         sbmloop
sbmdone:
	VZEROUPPER
	RET

// func sbPackATrans(dst *uint32, src *uint16, lda, pairs, kp int)
//
// A full 12-row panel of a transposed A for GemmBF16: for each of pairs
// depth pairs, the 12 bfloat16s of A's stored row 2p (at src) and row
// 2p+1 (lda further) become 12 words low | high<<16, the first six at dst
// (24 bytes per pair), the other six in the panel's second half, 24·kp
// bytes on. The loads are masked to the 12 elements, so nothing past them
// is read.
TEXT ·sbPackATrans(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lda+16(FP), BX
	SHLQ $1, BX             // a stored row in bytes
	MOVQ pairs+24(FP), CX
	MOVQ kp+32(FP), DX
	LEAQ (DX)(DX*2), DX
	SHLQ $3, DX             // 24·kp bytes: the second half
	MOVL $0x0fff, AX
	KMOVW AX, K1
	MOVL $0x3f, AX
	KMOVW AX, K2
	TESTQ CX, CX
	JEQ  sbptdone
sbptloop:
	SBPAIRS(K1)
	VMOVDQU32 Z0, K2, (DI)
	VALIGND   $6, Z0, Z0, Z1
	VMOVDQU32 Z1, K2, (DI)(DX*1)
	LEAQ      (SI)(BX*2), SI
	ADDQ      $24, DI
	DECQ      CX
	JNE       sbptloop
sbptdone:
	VZEROUPPER
	RET
