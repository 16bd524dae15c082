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

// func sumAVX2(x []float32) float32
TEXT ·sumAVX2(SB), NOSPLIT, $0-28
	MOVQ   x_base+0(FP), SI
	MOVQ   x_len+8(FP), CX
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   CX, DX
	ANDQ   $-32, DX

sum32:
	CMPQ   AX, DX
	JGE    sum8start
	VADDPS (SI)(AX*4), Y0, Y0
	VADDPS 32(SI)(AX*4), Y1, Y1
	VADDPS 64(SI)(AX*4), Y2, Y2
	VADDPS 96(SI)(AX*4), Y3, Y3
	ADDQ   $32, AX
	JMP    sum32

sum8start:
	MOVQ CX, DX
	ANDQ $-8, DX

sum8:
	CMPQ   AX, DX
	JGE    sumreduce
	VADDPS (SI)(AX*4), Y0, Y0
	ADDQ   $8, AX
	JMP    sum8

sumreduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0

sum1:
	CMPQ   AX, CX
	JGE    sumdone
	VADDSS (SI)(AX*4), X0, X0
	INCQ   AX
	JMP    sum1

sumdone:
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func transpose8AVX2(dst []float32, ldd int, src []float32, lds, tiles int)
//
// Per tile: eight source rows in Y0–Y7 are interleaved in pairs
// (unpack), in fours (shuffle) and across 128-bit halves (perm2f128), the
// usual three-stage 8×8 transpose, and stored as eight destination rows.
TEXT ·transpose8AVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ ldd+24(FP), R9
	MOVQ src_base+32(FP), SI
	MOVQ lds+56(FP), R8
	MOVQ tiles+64(FP), CX
	SHLQ $2, R8                 // strides in bytes
	SHLQ $2, R9
	LEAQ (R8)(R8*2), R11        // 3·lds
	LEAQ (R9)(R9*2), R13        // 3·ldd

tile:
	TESTQ CX, CX
	JZ    tdone
	LEAQ  (SI)(R8*4), R12
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R8*1), Y1
	VMOVUPS (SI)(R8*2), Y2
	VMOVUPS (SI)(R11*1), Y3
	VMOVUPS (R12), Y4
	VMOVUPS (R12)(R8*1), Y5
	VMOVUPS (R12)(R8*2), Y6
	VMOVUPS (R12)(R11*1), Y7

	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15

	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7

	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15

	LEAQ    (DI)(R9*4), R14
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(R9*1)
	VMOVUPS Y10, (DI)(R9*2)
	VMOVUPS Y11, (DI)(R13*1)
	VMOVUPS Y12, (R14)
	VMOVUPS Y13, (R14)(R9*1)
	VMOVUPS Y14, (R14)(R9*2)
	VMOVUPS Y15, (R14)(R13*1)

	ADDQ $32, SI
	LEAQ (R14)(R9*4), DI
	DECQ CX
	JMP  tile

tdone:
	VZEROUPPER
	RET
