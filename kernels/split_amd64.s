//go:build amd64 && !noasm

#include "textflag.h"
#include "optim_amd64.h"

// func joinBF16AVX2(dst []float32, top, bottom []uint16)
//
// dst[i] = top[i]<<16 | bottom[i] for the first len(dst)&^7 elements.
TEXT ·joinBF16AVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ top_base+24(FP), SI
	MOVQ bottom_base+48(FP), DX
	SUBQ $16, CX
	JL   jone

jloop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPMOVZXWD (DX), Y2
	VPMOVZXWD 16(DX), Y3
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VPOR      Y2, Y0, Y0
	VPOR      Y3, Y1, Y1
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $32, DX
	ADDQ      $64, DI
	SUBQ      $16, CX
	JGE       jloop

jone:
	ADDQ      $8, CX
	JL        jdone
	JOINBF16((SI), (DX), Y0, Y2)
	VMOVDQU   Y0, (DI)

jdone:
	VZEROUPPER
	RET

// func splitBF16AVX2(top, bottom []uint16, src []float32)
//
// top[i] = src[i]>>16, bottom[i] = src[i]&0xffff for the first
// len(src)&^7 elements.
TEXT ·splitBF16AVX2(SB), NOSPLIT, $0-72
	MOVQ top_base+0(FP), DI
	MOVQ bottom_base+24(FP), DX
	MOVQ src_base+48(FP), SI
	MOVQ src_len+56(FP), CX
	SUBQ $8, CX
	JL   sdone

sloop:
	VMOVDQU      (SI), Y0
	VPSRLD       $16, Y0, Y1
	VPSLLD       $16, Y0, Y2
	VPSRLD       $16, Y2, Y2
	// Per 128-bit lane: top halves then bottom halves; then gather the
	// two lanes' tops into the low 128 bits and bottoms into the high.
	VPACKUSDW    Y2, Y1, Y3
	VPERMQ       $0xD8, Y3, Y3
	VMOVDQU      X3, (DI)
	VEXTRACTI128 $1, Y3, (DX)
	ADDQ         $32, SI
	ADDQ         $16, DI
	ADDQ         $16, DX
	SUBQ         $8, CX
	JGE          sloop

sdone:
	VZEROUPPER
	RET
