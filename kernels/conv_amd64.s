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
