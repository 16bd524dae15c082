//go:build amd64 && !noasm

#include "textflag.h"

// LOAD4X(b, …), STORE4X(b, …): the four registers from (to) the 32
// floats at element AX of b.
#define LOAD4X(b, r0, r1, r2, r3) \
	VMOVUPS (b)(AX*4), r0 \
	VMOVUPS 32(b)(AX*4), r1 \
	VMOVUPS 64(b)(AX*4), r2 \
	VMOVUPS 96(b)(AX*4), r3

#define STORE4X(b, r0, r1, r2, r3) \
	VMOVUPS r0, (b)(AX*4) \
	VMOVUPS r1, 32(b)(AX*4) \
	VMOVUPS r2, 64(b)(AX*4) \
	VMOVUPS r3, 96(b)(AX*4)

// OP4X(OP, b, s0, s1, s2, s3, d0, d1, d2, d3): dk = OP of the k-th vector
// at element AX of b and sk.
#define OP4X(OP, b, s0, s1, s2, s3, d0, d1, d2, d3) \
	OP (b)(AX*4), s0, d0 \
	OP 32(b)(AX*4), s1, d1 \
	OP 64(b)(AX*4), s2, d2 \
	OP 96(b)(AX*4), s3, d3

// RUNS(BODY32, BODY8, BODY1): BODY32 on 32 elements at a time from
// element AX = 0, then BODY8 on 8, then BODY1 on single elements, up to
// CX; then returns.
#define RUNS(BODY32, BODY8, BODY1) \
	XORQ AX, AX \
	MOVQ CX, DX \
	ANDQ $-32, DX \
run32: \
	CMPQ AX, DX \
	JGE  run8start \
	BODY32 \
	ADDQ $32, AX \
	JMP  run32 \
run8start: \
	MOVQ CX, DX \
	ANDQ $-8, DX \
run8: \
	CMPQ AX, DX \
	JGE  run1 \
	BODY8 \
	ADDQ $8, AX \
	JMP  run8 \
run1: \
	CMPQ AX, CX \
	JGE  rundone \
	BODY1 \
	INCQ AX \
	JMP  run1 \
rundone: \
	VZEROUPPER \
	RET

// dst += src
#define ADD32 \
	LOAD4X(DI, Y0, Y1, Y2, Y3) \
	OP4X(VADDPS, SI, Y0, Y1, Y2, Y3, Y0, Y1, Y2, Y3) \
	STORE4X(DI, Y0, Y1, Y2, Y3)

#define ADD8 \
	VMOVUPS (DI)(AX*4), Y0 \
	VADDPS  (SI)(AX*4), Y0, Y0 \
	VMOVUPS Y0, (DI)(AX*4)

#define ADD1 \
	VMOVSS (DI)(AX*4), X0 \
	VADDSS (SI)(AX*4), X0, X0 \
	VMOVSS X0, (DI)(AX*4)

// func addToAVX2(dst, src []float32)
TEXT ·addToAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	RUNS(ADD32, ADD8, ADD1)

// dst += a·b
#define FMA32 \
	LOAD4X(DI, Y0, Y1, Y2, Y3) \
	LOAD4X(SI, Y4, Y5, Y6, Y7) \
	OP4X(VFMADD231PS, BX, Y4, Y5, Y6, Y7, Y0, Y1, Y2, Y3) \
	STORE4X(DI, Y0, Y1, Y2, Y3)

#define FMA8 \
	VMOVUPS     (DI)(AX*4), Y0 \
	VMOVUPS     (SI)(AX*4), Y4 \
	VFMADD231PS (BX)(AX*4), Y4, Y0 \
	VMOVUPS     Y0, (DI)(AX*4)

#define FMA1 \
	VMOVSS      (DI)(AX*4), X0 \
	VMOVSS      (SI)(AX*4), X4 \
	VFMADD231SS (BX)(AX*4), X4, X0 \
	VMOVSS      X0, (DI)(AX*4)

// func mulAddToAVX2(dst, a, b []float32)
TEXT ·mulAddToAVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), BX
	RUNS(FMA32, FMA8, FMA1)

// dst += c, c in Y4
#define CONST32 \
	OP4X(VADDPS, DI, Y4, Y4, Y4, Y4, Y0, Y1, Y2, Y3) \
	STORE4X(DI, Y0, Y1, Y2, Y3)

#define CONST8 \
	VADDPS  (DI)(AX*4), Y4, Y0 \
	VMOVUPS Y0, (DI)(AX*4)

#define CONST1 \
	VADDSS (DI)(AX*4), X4, X0 \
	VMOVSS X0, (DI)(AX*4)

// func addConstAVX2(dst []float32, c float32)
TEXT ·addConstAVX2(SB), NOSPLIT, $0-28
	MOVQ         dst_base+0(FP), DI
	MOVQ         dst_len+8(FP), CX
	VBROADCASTSS c+24(FP), Y4
	RUNS(CONST32, CONST8, CONST1)

// copyRunsMask<>+32−4r holds r all-ones int32 lanes then zeros: the
// VMASKMOVPS mask of a run's last r < 8 floats.
DATA copyRunsMask<>+0(SB)/8, $0xffffffffffffffff
DATA copyRunsMask<>+8(SB)/8, $0xffffffffffffffff
DATA copyRunsMask<>+16(SB)/8, $0xffffffffffffffff
DATA copyRunsMask<>+24(SB)/8, $0xffffffffffffffff
DATA copyRunsMask<>+32(SB)/8, $0
DATA copyRunsMask<>+40(SB)/8, $0
DATA copyRunsMask<>+48(SB)/8, $0
DATA copyRunsMask<>+56(SB)/8, $0
GLOBL copyRunsMask<>(SB), RODATA|NOPTR, $64

// func copyRunsAVX2(dst *float32, dstStride int, src *float32, srcStride, count, runLen int)
//
// Copies count runs of runLen floats, run i from src + i·srcStride to
// dst + i·dstStride (strides in floats): whole vectors of eight, then the
// last runLen mod 8 under a mask, so nothing past a run is touched.
TEXT ·copyRunsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ dstStride+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ srcStride+24(FP), R9
	SHLQ $2, R9
	MOVQ count+32(FP), CX
	MOVQ runLen+40(FP), DX
	MOVQ DX, R10
	ANDQ $-8, R10           // floats copied by whole vectors
	MOVQ DX, R11
	ANDQ $7, R11            // the masked rest
	LEAQ copyRunsMask<>+32(SB), AX
	SHLQ $2, R11
	SUBQ R11, AX
	VMOVDQU (AX), Y15
	TESTQ CX, CX
	JEQ  runsDone

run:
	XORQ AX, AX

vec:
	CMPQ    AX, R10
	JGE     rest
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     vec

rest:
	TESTQ      R11, R11
	JEQ        next
	VMASKMOVPS (SI)(AX*4), Y15, Y0
	VMASKMOVPS Y0, Y15, (DI)(AX*4)

next:
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ CX
	JNE  run

runsDone:
	VZEROUPPER
	RET
