//go:build amd64 && !noasm

#include "textflag.h"
#include "elementwise_amd64.h"

// AVX2 variants of Binary, BinaryScalar and BinaryStrided: one IEEE float32
// operation per element, like the reference, so they agree bit for bit.
// Four vectors per iteration, then single vectors, then a masked tail.

// binTail<>+32−4r holds r all-ones int32 lanes followed by zeros: the mask
// of VMASKMOVPS for a tail of r < 8 elements.
DATA binTail<>+0(SB)/8, $0xffffffffffffffff
DATA binTail<>+8(SB)/8, $0xffffffffffffffff
DATA binTail<>+16(SB)/8, $0xffffffffffffffff
DATA binTail<>+24(SB)/8, $0xffffffffffffffff
DATA binTail<>+32(SB)/8, $0
DATA binTail<>+40(SB)/8, $0
DATA binTail<>+48(SB)/8, $0
DATA binTail<>+56(SB)/8, $0
GLOBL binTail<>(SB), RODATA|NOPTR, $64

// binIota<> is 0, 1, …, 7 as int32: the lanes' element numbers.
DATA binIota<>+0(SB)/8, $0x0000000100000000
DATA binIota<>+8(SB)/8, $0x0000000300000002
DATA binIota<>+16(SB)/8, $0x0000000500000004
DATA binIota<>+24(SB)/8, $0x0000000700000006
GLOBL binIota<>(SB), RODATA|NOPTR, $32

// BINTAIL(CX, ymm): ymm = the mask of the first CX (< 8) lanes.
#define BINTAIL(ymm) \
	LEAQ    binTail<>+32(SB), R8; \
	MOVQ    CX, R9;               \
	SHLQ    $2, R9;               \
	SUBQ    R9, R8;               \
	VMOVDQU (R8), ymm

// SAMEARGS, SCALARARGS and GATHERARGS load the arguments of
// func(dst, a, b []float32), func(dst, a []float32, s float32) and
// func(dst, a, b []float32, as, bs int) into the loops' registers.
#define SAMEARGS \
	MOVQ dst_base+0(FP), DI \
	MOVQ dst_len+8(FP), CX \
	MOVQ a_base+24(FP), SI \
	MOVQ b_base+48(FP), DX

#define SCALARARGS \
	MOVQ         dst_base+0(FP), DI \
	MOVQ         dst_len+8(FP), CX \
	MOVQ         a_base+24(FP), SI \
	VBROADCASTSS s+48(FP), Y7

// SAME(OP): dst = a OP b. DI = dst, SI = a, DX = b, CX = n.
#define SAME(OP) \
	SUBQ    $32, CX;            \
	JL      sone;               \
sloop:                          \
	LOAD4(SI, Y0, Y1, Y2, Y3);  \
	OP      (DX), Y0, Y0;       \
	OP      32(DX), Y1, Y1;     \
	OP      64(DX), Y2, Y2;     \
	OP      96(DX), Y3, Y3;     \
	STORE4(DI, Y0, Y1, Y2, Y3); \
	ADDQ    $128, SI;           \
	ADDQ    $128, DX;           \
	ADDQ    $128, DI;           \
	SUBQ    $32, CX;            \
	JGE     sloop;              \
sone:                           \
	ADDQ    $24, CX;            \
	JL      stail;              \
sloop8:                         \
	VMOVUPS (SI), Y0;           \
	OP      (DX), Y0, Y0;       \
	VMOVUPS Y0, (DI);           \
	ADDQ    $32, SI;            \
	ADDQ    $32, DX;            \
	ADDQ    $32, DI;            \
	SUBQ    $8, CX;             \
	JGE     sloop8;             \
stail:                          \
	ADDQ    $8, CX;             \
	JZ      sdone;              \
	BINTAIL(Y15);               \
	VMASKMOVPS (SI), Y15, Y0;   \
	VMASKMOVPS (DX), Y15, Y1;   \
	OP      Y1, Y0, Y0;         \
	VMASKMOVPS Y0, Y15, (DI);   \
sdone:                          \
	VZEROUPPER;                 \
	RET

// SCALAR(BODY): dst = BODY(a), BODY(R) combining R (elements of a, in
// place) with Y7 (the scalar s). DI = dst, SI = a, CX = n.
#define SCALAR(BODY) \
	SUBQ    $32, CX;            \
	JL      cone;               \
cloop:                          \
	LOAD4(SI, Y0, Y1, Y2, Y3);  \
	BODY(Y0);                   \
	BODY(Y1);                   \
	BODY(Y2);                   \
	BODY(Y3);                   \
	STORE4(DI, Y0, Y1, Y2, Y3); \
	ADDQ    $128, SI;           \
	ADDQ    $128, DI;           \
	SUBQ    $32, CX;            \
	JGE     cloop;              \
cone:                           \
	ADDQ    $24, CX;            \
	JL      ctail;              \
cloop8:                         \
	VMOVUPS (SI), Y0;           \
	BODY(Y0);                   \
	VMOVUPS Y0, (DI);           \
	ADDQ    $32, SI;            \
	ADDQ    $32, DI;            \
	SUBQ    $8, CX;             \
	JGE     cloop8;             \
ctail:                          \
	ADDQ    $8, CX;             \
	JZ      cdone;              \
	BINTAIL(Y15);               \
	VMASKMOVPS (SI), Y15, Y0;   \
	BODY(Y0);                   \
	VMASKMOVPS Y0, Y15, (DI);   \
cdone:                          \
	VZEROUPPER;                 \
	RET

#define ADDS(R) VADDPS Y7, R, R
#define SUBS(R) VSUBPS Y7, R, R
#define MULS(R) VMULPS Y7, R, R
#define DIVS(R) VDIVPS Y7, R, R
#define RSUBS(R) VSUBPS R, Y7, R
#define RDIVS(R) VDIVPS R, Y7, R

// GATHER(OP): dst[i] = a[i·as] OP b[i·bs], dst contiguous. DI = dst,
// SI = a, DX = b, CX = n, Y13/Y14 = the lanes' offsets in a and b,
// R10/R11 = the bytes eight elements span in a and b.
#define GATHER(OP) \
	SUBQ     $8, CX;               \
	JL       gtail;                \
gloop:                             \
	VPCMPEQD Y11, Y11, Y11;        \
	VPCMPEQD Y12, Y12, Y12;        \
	VGATHERDPS Y11, (SI)(Y13*4), Y0; \
	VGATHERDPS Y12, (DX)(Y14*4), Y1; \
	OP       Y1, Y0, Y0;           \
	VMOVUPS  Y0, (DI);             \
	ADDQ     R10, SI;              \
	ADDQ     R11, DX;              \
	ADDQ     $32, DI;              \
	SUBQ     $8, CX;               \
	JGE      gloop;                \
gtail:                             \
	ADDQ     $8, CX;               \
	JZ       gdone;                \
	BINTAIL(Y15);                  \
	VMOVDQA  Y15, Y11;             \
	VMOVDQA  Y15, Y12;             \
	VXORPS   Y0, Y0, Y0;           \
	VXORPS   Y1, Y1, Y1;           \
	VGATHERDPS Y11, (SI)(Y13*4), Y0; \
	VGATHERDPS Y12, (DX)(Y14*4), Y1; \
	OP       Y1, Y0, Y0;           \
	VMASKMOVPS Y0, Y15, (DI);      \
gdone:                             \
	VZEROUPPER;                    \
	RET

// GATHERSETUP turns the strides in R10 and R11 into the lanes' offsets
// (Y13, Y14) and the bytes eight elements span (R10, R11).
#define GATHERSETUP \
	VMOVDQU      binIota<>(SB), Y10; \
	MOVQ         R10, X13;           \
	VPBROADCASTD X13, Y13;           \
	VPMULLD      Y10, Y13, Y13;      \
	MOVQ         R11, X14;           \
	VPBROADCASTD X14, Y14;           \
	VPMULLD      Y10, Y14, Y14;      \
	SHLQ         $5, R10;            \
	SHLQ         $5, R11

#define GATHERARGS \
	SAMEARGS \
	MOVQ as+72(FP), R10 \
	MOVQ bs+80(FP), R11 \
	GATHERSETUP

// func binAddAVX2(dst, a, b []float32)
TEXT ·binAddAVX2(SB), NOSPLIT, $0-72
	SAMEARGS
	SAME(VADDPS)

// func binSubAVX2(dst, a, b []float32)
TEXT ·binSubAVX2(SB), NOSPLIT, $0-72
	SAMEARGS
	SAME(VSUBPS)

// func binMulAVX2(dst, a, b []float32)
TEXT ·binMulAVX2(SB), NOSPLIT, $0-72
	SAMEARGS
	SAME(VMULPS)

// func binDivAVX2(dst, a, b []float32)
TEXT ·binDivAVX2(SB), NOSPLIT, $0-72
	SAMEARGS
	SAME(VDIVPS)

// func binAddScalarAVX2(dst, a []float32, s float32)
TEXT ·binAddScalarAVX2(SB), NOSPLIT, $0-52
	SCALARARGS
	SCALAR(ADDS)

// func binSubScalarAVX2(dst, a []float32, s float32)
TEXT ·binSubScalarAVX2(SB), NOSPLIT, $0-52
	SCALARARGS
	SCALAR(SUBS)

// func binMulScalarAVX2(dst, a []float32, s float32)
TEXT ·binMulScalarAVX2(SB), NOSPLIT, $0-52
	SCALARARGS
	SCALAR(MULS)

// func binDivScalarAVX2(dst, a []float32, s float32)
TEXT ·binDivScalarAVX2(SB), NOSPLIT, $0-52
	SCALARARGS
	SCALAR(DIVS)

// func binRSubScalarAVX2(dst, a []float32, s float32)
TEXT ·binRSubScalarAVX2(SB), NOSPLIT, $0-52
	SCALARARGS
	SCALAR(RSUBS)

// func binRDivScalarAVX2(dst, a []float32, s float32)
TEXT ·binRDivScalarAVX2(SB), NOSPLIT, $0-52
	SCALARARGS
	SCALAR(RDIVS)

// func binAddGatherAVX2(dst, a, b []float32, as, bs int)
TEXT ·binAddGatherAVX2(SB), NOSPLIT, $0-88
	GATHERARGS
	GATHER(VADDPS)

// func binSubGatherAVX2(dst, a, b []float32, as, bs int)
TEXT ·binSubGatherAVX2(SB), NOSPLIT, $0-88
	GATHERARGS
	GATHER(VSUBPS)

// func binMulGatherAVX2(dst, a, b []float32, as, bs int)
TEXT ·binMulGatherAVX2(SB), NOSPLIT, $0-88
	GATHERARGS
	GATHER(VMULPS)

// func binDivGatherAVX2(dst, a, b []float32, as, bs int)
TEXT ·binDivGatherAVX2(SB), NOSPLIT, $0-88
	GATHERARGS
	GATHER(VDIVPS)
