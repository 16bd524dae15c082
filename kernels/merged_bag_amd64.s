//go:build amd64 && !noasm

#include "textflag.h"

// The bag gathers copy one-row bags: row idx[i] of the table to row i of
// out, plus +0 (a sum starts from +0, so a -0 element becomes +0), while
// they prefetch the rows the next call will copy, one row of those for
// each row copied, so that a steady number of the random rows' cache
// misses is in flight.
//
// Registers: DI out, SI table, BX idx, CX rows left to copy, DX a table
// row's bytes, R13 dim; R8 the prefetched table, R9 pfIdx, R10 rows left
// to prefetch, R11 a prefetched row's bytes; AX, R12 scratch. Z31/Y15 is
// +0.

// PFW(off): PREFETCHW off(DI), off a 32-bit displacement, which Go's
// assembler lacks. The output is far larger than the caches and written
// once: prefetching its lines for writing, a few KiB ahead of the stores,
// overlaps their reads for ownership, which otherwise cost as much as the
// table rows' misses (2.4 vs 4.0 ms for DLRM's 26 tables at batch 2048).
// CPUs that predate the instruction (Intel before Broadwell) run it as a
// NOP.
#define PFW(off) BYTE $0x0F; BYTE $0x0D; BYTE $0x8F; LONG $off

// PFWAHEAD is how many bytes ahead of the stores PFW prefetches.
#define PFWAHEAD 4096

// GATHERARGS(shift): load the arguments; a table element is 1<<shift
// bytes.
#define GATHERARGS(shift) \
	MOVQ out_base+0(FP), DI       \
	MOVQ table_base+24(FP), SI    \
	MOVQ idx_base+48(FP), BX      \
	MOVQ idx_len+56(FP), CX       \
	MOVQ dim+72(FP), R13          \
	MOVQ R13, DX                  \
	SHLQ $shift, DX               \
	MOVQ pf_base+80(FP), R8       \
	MOVQ pfIdx_base+104(FP), R9   \
	MOVQ pfIdx_len+112(FP), R10   \
	MOVQ pfDim+128(FP), R11       \
	SHLQ $2, R11

// TAILK1: K1 = the low dim mod 16 lanes.
#define TAILK1 \
	MOVQ  R13, AX     \
	ANDQ  $15, AX     \
	MOVQ  $1, R12     \
	SHLXQ AX, R12, R12 \
	DECQ  R12         \
	KMOVW R12, K1

// GATHER(COPY): for each row, prefetch the next prefetch row, then point
// AX at the row to copy, R12 = dim, and run COPY, which leaves DI at the
// next out row. Rows to prefetch beyond those to copy are prefetched
// after.
#define GATHER(COPY) \
row: \
	TESTQ R10, R10          \
	JZ    copy              \
	MOVQ  (R9), AX          \
	IMULQ R11, AX           \
	ADDQ  R8, AX            \
	MOVQ  R11, R12          \
line: \
	PREFETCHT0 (AX)         \
	ADDQ  $64, AX           \
	SUBQ  $64, R12          \
	JG    line              \
	ADDQ  $8, R9            \
	DECQ  R10               \
copy: \
	TESTQ CX, CX            \
	JZ    more              \
	MOVQ  (BX), AX          \
	IMULQ DX, AX            \
	ADDQ  SI, AX            \
	MOVQ  R13, R12          \
	COPY                    \
	ADDQ  $8, BX            \
	DECQ  CX                \
	JMP   row               \
more: \
	TESTQ R10, R10          \
	JNZ   row

// F32COPY512: copy R12 float32s from AX to DI, 64 at a time, then 16,
// then a masked tail (K1).
#define F32COPY512 \
f64: \
	CMPQ    R12, $64        \
	JL      f16             \
	VADDPS  (AX), Z31, Z0   \
	VADDPS  64(AX), Z31, Z1 \
	VADDPS  128(AX), Z31, Z2 \
	VADDPS  192(AX), Z31, Z3 \
	PFW(PFWAHEAD)           \
	PFW(PFWAHEAD+64)        \
	PFW(PFWAHEAD+128)       \
	PFW(PFWAHEAD+192)       \
	VMOVUPS Z0, (DI)        \
	VMOVUPS Z1, 64(DI)      \
	VMOVUPS Z2, 128(DI)     \
	VMOVUPS Z3, 192(DI)     \
	ADDQ    $256, AX        \
	ADDQ    $256, DI        \
	SUBQ    $64, R12        \
	JMP     f64             \
f16: \
	CMPQ    R12, $16        \
	JL      ftail           \
	VADDPS  (AX), Z31, Z0   \
	PFW(PFWAHEAD)           \
	VMOVUPS Z0, (DI)        \
	ADDQ    $64, AX         \
	ADDQ    $64, DI         \
	SUBQ    $16, R12        \
	JMP     f16             \
ftail: \
	TESTQ     R12, R12      \
	JZ        fdone         \
	VMOVUPS.Z (AX), K1, Z0  \
	VADDPS    Z0, Z31, Z0   \
	VMOVUPS   Z0, K1, (DI)  \
	LEAQ      (DI)(R12*4), DI \
fdone:

// WIDEN512(off, z): z = the 16 bfloat16 at off(AX) widened, plus +0.
#define WIDEN512(off, z) \
	VPMOVZXWD off(AX), z \
	VPSLLD    $16, z, z  \
	VADDPS    z, Z31, z

// BF16COPY512: BF16 widening of F32COPY512.
#define BF16COPY512 \
b64: \
	CMPQ    R12, $64        \
	JL      b16             \
	WIDEN512(0, Z0)         \
	WIDEN512(32, Z1)        \
	WIDEN512(64, Z2)        \
	WIDEN512(96, Z3)        \
	PFW(PFWAHEAD)           \
	PFW(PFWAHEAD+64)        \
	PFW(PFWAHEAD+128)       \
	PFW(PFWAHEAD+192)       \
	VMOVUPS Z0, (DI)        \
	VMOVUPS Z1, 64(DI)      \
	VMOVUPS Z2, 128(DI)     \
	VMOVUPS Z3, 192(DI)     \
	ADDQ    $128, AX        \
	ADDQ    $256, DI        \
	SUBQ    $64, R12        \
	JMP     b64             \
b16: \
	CMPQ    R12, $16        \
	JL      btail           \
	WIDEN512(0, Z0)         \
	PFW(PFWAHEAD)           \
	VMOVUPS Z0, (DI)        \
	ADDQ    $32, AX         \
	ADDQ    $64, DI         \
	SUBQ    $16, R12        \
	JMP     b16             \
btail: \
	TESTQ       R12, R12    \
	JZ          bdone       \
	VPMOVZXWD.Z (AX), K1, Z0 \
	VPSLLD      $16, Z0, Z0 \
	VADDPS      Z0, Z31, Z0 \
	VMOVUPS     Z0, K1, (DI) \
	LEAQ        (DI)(R12*4), DI \
bdone:

// func bagGatherF32AVX512(out, table []float32, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)
TEXT ·bagGatherF32AVX512(SB), NOSPLIT, $0-136
	GATHERARGS(2)
	TAILK1
	VPXORD Z31, Z31, Z31
	GATHER(F32COPY512)
	VZEROUPPER
	RET

// func bagGatherBF16AVX512(out []float32, table []uint16, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)
TEXT ·bagGatherBF16AVX512(SB), NOSPLIT, $0-136
	GATHERARGS(1)
	TAILK1
	VPXORD Z31, Z31, Z31
	GATHER(BF16COPY512)
	VZEROUPPER
	RET

// F32COPY2: copy R12 float32s from AX to DI, 32 at a time, then 8, then
// one.
#define F32COPY2 \
f32: \
	CMPQ    R12, $32        \
	JL      f8              \
	VADDPS  (AX), Y15, Y0   \
	VADDPS  32(AX), Y15, Y1 \
	VADDPS  64(AX), Y15, Y2 \
	VADDPS  96(AX), Y15, Y3 \
	PFW(PFWAHEAD)           \
	PFW(PFWAHEAD+64)        \
	VMOVUPS Y0, (DI)        \
	VMOVUPS Y1, 32(DI)      \
	VMOVUPS Y2, 64(DI)      \
	VMOVUPS Y3, 96(DI)      \
	ADDQ    $128, AX        \
	ADDQ    $128, DI        \
	SUBQ    $32, R12        \
	JMP     f32             \
f8: \
	CMPQ    R12, $8         \
	JL      f1              \
	VADDPS  (AX), Y15, Y0   \
	PFW(PFWAHEAD)           \
	VMOVUPS Y0, (DI)        \
	ADDQ    $32, AX         \
	ADDQ    $32, DI         \
	SUBQ    $8, R12         \
	JMP     f8              \
f1: \
	TESTQ   R12, R12        \
	JZ      fdone           \
	VMOVSS  (AX), X0        \
	VADDSS  X15, X0, X0     \
	VMOVSS  X0, (DI)        \
	ADDQ    $4, AX          \
	ADDQ    $4, DI          \
	DECQ    R12             \
	JMP     f1              \
fdone:

// WIDEN2(off, y): y = the 8 bfloat16 at off(AX) widened, plus +0.
#define WIDEN2(off, y) \
	VPMOVZXWD off(AX), y \
	VPSLLD    $16, y, y  \
	VADDPS    y, Y15, y

// BF16COPY2: BF16 widening of F32COPY2.
#define BF16COPY2 \
b32: \
	CMPQ    R12, $32        \
	JL      b8              \
	WIDEN2(0, Y0)           \
	WIDEN2(16, Y1)          \
	WIDEN2(32, Y2)          \
	WIDEN2(48, Y3)          \
	PFW(PFWAHEAD)           \
	PFW(PFWAHEAD+64)        \
	VMOVUPS Y0, (DI)        \
	VMOVUPS Y1, 32(DI)      \
	VMOVUPS Y2, 64(DI)      \
	VMOVUPS Y3, 96(DI)      \
	ADDQ    $64, AX         \
	ADDQ    $128, DI        \
	SUBQ    $32, R12        \
	JMP     b32             \
b8: \
	CMPQ    R12, $8         \
	JL      b1              \
	WIDEN2(0, Y0)           \
	PFW(PFWAHEAD)           \
	VMOVUPS Y0, (DI)        \
	ADDQ    $16, AX         \
	ADDQ    $32, DI         \
	SUBQ    $8, R12         \
	JMP     b8              \
b1: \
	TESTQ   R12, R12        \
	JZ      bdone           \
	MOVWLZX (AX), R14       \
	SHLL    $16, R14        \
	VMOVD   R14, X0         \
	VADDSS  X15, X0, X0     \
	VMOVSS  X0, (DI)        \
	ADDQ    $2, AX          \
	ADDQ    $4, DI          \
	DECQ    R12             \
	JMP     b1              \
bdone:

// func bagGatherF32AVX2(out, table []float32, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)
TEXT ·bagGatherF32AVX2(SB), NOSPLIT, $0-136
	GATHERARGS(2)
	VXORPS Y15, Y15, Y15
	GATHER(F32COPY2)
	VZEROUPPER
	RET

// func bagGatherBF16AVX2(out []float32, table []uint16, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)
TEXT ·bagGatherBF16AVX2(SB), NOSPLIT, $0-136
	GATHERARGS(1)
	VXORPS Y15, Y15, Y15
	GATHER(BF16COPY2)
	VZEROUPPER
	RET
