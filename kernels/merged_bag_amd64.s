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
// to prefetch, R11 a prefetched row's bytes; AX, R12 (and R14 for one
// bfloat16) scratch. Z31/Y15 is +0.

// PFW(off): PREFETCHW off(DI), off a 32-bit displacement, which Go's
// assembler lacks. The output is far larger than the caches and written
// once: prefetching its lines for writing, a few KiB ahead of the stores,
// overlaps their reads for ownership, which otherwise cost as much as the
// table rows' misses (the gathers of DLRM's 26 tables at batch 2048 took
// 4.0 ms without, 2.1 with it, on one core of a Cascade Lake VM).
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

// GATHERFN(shift, SETUP, COPY): a whole gather of elements of 1<<shift
// bytes, SETUP preparing COPY's registers.
#define GATHERFN(shift, SETUP, COPY) \
	GATHERARGS(shift) \
	SETUP             \
	GATHER(COPY)      \
	VZEROUPPER        \
	RET

// STEP(top, next, n, LOAD, STORE, src, dst): while R12 counts at least
// n elements, LOAD n from AX, STORE them at DI and advance AX by src and
// DI by dst bytes; then go on at next.
#define STEP(top, next, n, LOAD, STORE, src, dst) \
top: \
	CMPQ R12, $n \
	JL   next    \
	LOAD         \
	STORE        \
	ADDQ $src, AX \
	ADDQ $dst, DI \
	SUBQ $n, R12 \
	JMP  top

// Loads of four vectors of w bytes (or of w bytes of bfloat16, widened)
// from AX into a–d, and their stores at DI: each element plus zero, +0.
#define ADD4(w, zero, a, b, c, d) \
	VADDPS (AX), zero, a     \
	VADDPS w(AX), zero, b    \
	VADDPS 2*w(AX), zero, c  \
	VADDPS 3*w(AX), zero, d
#define WIDEN(off, zero, r) VPMOVZXWD off(AX), r; VPSLLD $16, r, r; VADDPS r, zero, r
#define WIDEN4(w, zero, a, b, c, d) WIDEN(0, zero, a); WIDEN(w, zero, b); WIDEN(2*w, zero, c); WIDEN(3*w, zero, d)
#define STORE4(w, a, b, c, d) \
	VMOVUPS a, (DI)    \
	VMOVUPS b, w(DI)   \
	VMOVUPS c, 2*w(DI) \
	VMOVUPS d, 3*w(DI)

// The AVX-512 loads: four vectors into Z0–Z3, one into Z0, a tail under
// mask K1 into Z0.
#define F32X4 ADD4(64, Z31, Z0, Z1, Z2, Z3)
#define F32X1 VADDPS (AX), Z31, Z0
#define BF16X4 WIDEN4(32, Z31, Z0, Z1, Z2, Z3)
#define BF16X1 WIDEN(0, Z31, Z0)
#define F32TAIL VMOVUPS.Z (AX), K1, Z0; VADDPS Z0, Z31, Z0
#define BF16TAIL VPMOVZXWD.Z (AX), K1, Z0; VPSLLD $16, Z0, Z0; VADDPS Z0, Z31, Z0

#define STOREX4 \
	PFW(PFWAHEAD)      \
	PFW(PFWAHEAD+64)   \
	PFW(PFWAHEAD+128)  \
	PFW(PFWAHEAD+192)  \
	STORE4(64, Z0, Z1, Z2, Z3)
#define STOREX1 PFW(PFWAHEAD); VMOVUPS Z0, (DI)

// COPY512(X4, X1, TAIL, size): copy R12 elements of size bytes from AX
// to DI, 64 at a time, then 16, then the rest under mask K1.
#define COPY512(X4, X1, TAIL, size) \
	STEP(x64, x16, 64, X4, STOREX4, 64*size, 256) \
	STEP(x16, xtail, 16, X1, STOREX1, 16*size, 64) \
xtail: \
	TESTQ   R12, R12         \
	JZ      xdone            \
	TAIL                     \
	VMOVUPS Z0, K1, (DI)     \
	LEAQ    (DI)(R12*4), DI  \
xdone:

#define SETUP512 TAILK1; VPXORD Z31, Z31, Z31
#define F32COPY512 COPY512(F32X4, F32X1, F32TAIL, 4)
#define BF16COPY512 COPY512(BF16X4, BF16X1, BF16TAIL, 2)

// func bagGatherF32AVX512(out, table []float32, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)
TEXT ·bagGatherF32AVX512(SB), NOSPLIT, $0-136
	GATHERFN(2, SETUP512, F32COPY512)

// func bagGatherBF16AVX512(out []float32, table []uint16, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)
TEXT ·bagGatherBF16AVX512(SB), NOSPLIT, $0-136
	GATHERFN(1, SETUP512, BF16COPY512)

// The AVX2 loads: four vectors into Y0–Y3, one into Y0, one element
// into X0.
#define F32Y4 ADD4(32, Y15, Y0, Y1, Y2, Y3)
#define F32Y1 VADDPS (AX), Y15, Y0
#define F32S VMOVSS (AX), X0; VADDSS X15, X0, X0
#define BF16Y4 WIDEN4(16, Y15, Y0, Y1, Y2, Y3)
#define BF16Y1 WIDEN(0, Y15, Y0)
#define BF16S MOVWLZX (AX), R14; SHLL $16, R14; VMOVD R14, X0; VADDSS X15, X0, X0

#define STOREY4 PFW(PFWAHEAD); PFW(PFWAHEAD+64); STORE4(32, Y0, Y1, Y2, Y3)
#define STOREY1 PFW(PFWAHEAD); VMOVUPS Y0, (DI)
#define STORES VMOVSS X0, (DI)

// COPY2(Y4, Y1, S, size): copy R12 elements of size bytes from AX to DI,
// 32 at a time, then 8, then one.
#define COPY2(Y4, Y1, S, size) \
	STEP(y32, y8, 32, Y4, STOREY4, 32*size, 128) \
	STEP(y8, y1, 8, Y1, STOREY1, 8*size, 32)     \
	STEP(y1, ydone, 1, S, STORES, size, 4)       \
ydone:

#define SETUP2 VXORPS Y15, Y15, Y15
#define F32COPY2 COPY2(F32Y4, F32Y1, F32S, 4)
#define BF16COPY2 COPY2(BF16Y4, BF16Y1, BF16S, 2)

// func bagGatherF32AVX2(out, table []float32, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)
TEXT ·bagGatherF32AVX2(SB), NOSPLIT, $0-136
	GATHERFN(2, SETUP2, F32COPY2)

// func bagGatherBF16AVX2(out []float32, table []uint16, idx []int64, dim int, pf []float32, pfIdx []int64, pfDim int)
TEXT ·bagGatherBF16AVX2(SB), NOSPLIT, $0-136
	GATHERFN(1, SETUP2, BF16COPY2)
