//go:build amd64 && !noasm

#include "textflag.h"

// func maxU8AVX2(y, x []uint8)
TEXT ·maxU8AVX2(SB), NOSPLIT, $0-48
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ x_base+24(FP), SI

loop32:
	CMPQ CX, $32
	JB   tail
	VMOVDQU (DI), Y0
	VPMAXUB (SI), Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $32, CX
	JMP  loop32

tail:
	TESTQ CX, CX
	JZ    done
	MOVBLZX (DI), AX
	MOVBLZX (SI), BX
	CMPL    BX, AX
	JBE     next
	MOVB    BX, (DI)

next:
	INCQ DI
	INCQ SI
	DECQ CX
	JMP  tail

done:
	VZEROUPPER
	RET
