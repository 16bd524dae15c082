//go:build amd64 && !noasm

#include "textflag.h"

// func addToAVX2(dst, src []float32)
TEXT ·addToAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-32, DX

add32:
	CMPQ AX, DX
	JGE  add8start
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS 32(DI)(AX*4), Y1
	VMOVUPS 64(DI)(AX*4), Y2
	VMOVUPS 96(DI)(AX*4), Y3
	VADDPS  (SI)(AX*4), Y0, Y0
	VADDPS  32(SI)(AX*4), Y1, Y1
	VADDPS  64(SI)(AX*4), Y2, Y2
	VADDPS  96(SI)(AX*4), Y3, Y3
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	ADDQ    $32, AX
	JMP     add32

add8start:
	MOVQ CX, DX
	ANDQ $-8, DX

add8:
	CMPQ AX, DX
	JGE  add1
	VMOVUPS (DI)(AX*4), Y0
	VADDPS  (SI)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     add8

add1:
	CMPQ AX, CX
	JGE  adddone
	VMOVSS (DI)(AX*4), X0
	VADDSS (SI)(AX*4), X0, X0
	VMOVSS X0, (DI)(AX*4)
	INCQ   AX
	JMP    add1

adddone:
	VZEROUPPER
	RET

// func mulAddToAVX2(dst, a, b []float32)
TEXT ·mulAddToAVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), BX
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-32, DX

fma32:
	CMPQ AX, DX
	JGE  fma8start
	VMOVUPS     (DI)(AX*4), Y0
	VMOVUPS     32(DI)(AX*4), Y1
	VMOVUPS     64(DI)(AX*4), Y2
	VMOVUPS     96(DI)(AX*4), Y3
	VMOVUPS     (SI)(AX*4), Y4
	VMOVUPS     32(SI)(AX*4), Y5
	VMOVUPS     64(SI)(AX*4), Y6
	VMOVUPS     96(SI)(AX*4), Y7
	VFMADD231PS (BX)(AX*4), Y4, Y0
	VFMADD231PS 32(BX)(AX*4), Y5, Y1
	VFMADD231PS 64(BX)(AX*4), Y6, Y2
	VFMADD231PS 96(BX)(AX*4), Y7, Y3
	VMOVUPS     Y0, (DI)(AX*4)
	VMOVUPS     Y1, 32(DI)(AX*4)
	VMOVUPS     Y2, 64(DI)(AX*4)
	VMOVUPS     Y3, 96(DI)(AX*4)
	ADDQ        $32, AX
	JMP         fma32

fma8start:
	MOVQ CX, DX
	ANDQ $-8, DX

fma8:
	CMPQ AX, DX
	JGE  fma1
	VMOVUPS     (DI)(AX*4), Y0
	VMOVUPS     (SI)(AX*4), Y4
	VFMADD231PS (BX)(AX*4), Y4, Y0
	VMOVUPS     Y0, (DI)(AX*4)
	ADDQ        $8, AX
	JMP         fma8

fma1:
	CMPQ AX, CX
	JGE  fmadone
	VMOVSS      (DI)(AX*4), X0
	VMOVSS      (SI)(AX*4), X4
	VFMADD231SS (BX)(AX*4), X4, X0
	VMOVSS      X0, (DI)(AX*4)
	INCQ        AX
	JMP         fma1

fmadone:
	VZEROUPPER
	RET

// func addConstAVX2(dst []float32, c float32)
TEXT ·addConstAVX2(SB), NOSPLIT, $0-28
	MOVQ         dst_base+0(FP), DI
	MOVQ         dst_len+8(FP), CX
	VBROADCASTSS c+24(FP), Y4
	XORQ         AX, AX
	MOVQ         CX, DX
	ANDQ         $-32, DX

const32:
	CMPQ    AX, DX
	JGE     const8start
	VADDPS  (DI)(AX*4), Y4, Y0
	VADDPS  32(DI)(AX*4), Y4, Y1
	VADDPS  64(DI)(AX*4), Y4, Y2
	VADDPS  96(DI)(AX*4), Y4, Y3
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	ADDQ    $32, AX
	JMP     const32

const8start:
	MOVQ CX, DX
	ANDQ $-8, DX

const8:
	CMPQ    AX, DX
	JGE     const1
	VADDPS  (DI)(AX*4), Y4, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     const8

const1:
	CMPQ   AX, CX
	JGE    constdone
	VADDSS (DI)(AX*4), X4, X0
	VMOVSS X0, (DI)(AX*4)
	INCQ   AX
	JMP    const1

constdone:
	VZEROUPPER
	RET

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
