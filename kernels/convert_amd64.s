//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"
#include "tobf16_amd64.h"

// float32 ↔ bfloat16 conversion; TOBF16, TOBF16512 and their constants
// are in tobf16_amd64.h.

// BF16ARGS3 loads dst into DI and its length into CX and the operands into
// SI and DX; BF16ARGS512 also the conversion constants, and zeroes Z31.
#define BF16ARGS3 \
	MOVQ   dst_base+0(FP), DI; \
	MOVQ   dst_len+8(FP), CX; \
	MOVQ   a_base+24(FP), SI; \
	MOVQ   b_base+48(FP), DX

#define BF16ARGS512 BF16ARGS3; CVTCONSTS512; VPXORD Z31, Z31, Z31

// WIDEN512(p, z): z = the sixteen bfloat16 at (p) as float32.
#define WIDEN512(p, z) VPMOVZXWD (p), z; VPSLLD $16, z, z

// STAGEARGS loads y into DI, f into SI, the element count into CX and
// the conversion constants, and zeroes Z31.
#define STAGEARGS \
	MOVQ   y_base+0(FP), DI; \
	MOVQ   y_len+8(FP), CX; \
	MOVQ   f_base+24(FP), SI; \
	CVTCONSTS512; \
	VPXORD Z31, Z31, Z31

// ADDSTAGE(RELU): the residual stage, the rectifier applied when RELU is
// VMAXPS Z0, Z31, Z0 (or nothing for NOP).
#define ADDSTAGE(RELU, loop, done) \
	MOVQ      res_base+48(FP), DX; \
	SUBQ      $16, CX; \
	JL        done; \
loop: \
	VMOVDQU32 (SI), Z0; \
	TOBF16512(Z0, Z2, Z3, K1); \
	VPSLLD    $16, Z0, Z0; \
	VPMOVZXWD (DX), Z1; \
	VPSLLD    $16, Z1, Z1; \
	VADDPS    Z1, Z0, Z0; \
	RELU; \
	TOBF16512(Z0, Z2, Z3, K1); \
	VPMOVDW   Z0, (DI); \
	ADDQ      $64, SI; \
	ADDQ      $32, DX; \
	ADDQ      $32, DI; \
	SUBQ      $16, CX; \
	JGE       loop; \
done: \
	VRET

#define MAXZERO VMAXPS Z0, Z31, Z0
#define NOP

// STAGEARGS2 is STAGEARGS for the AVX2 stages: zero in Y15.
#define STAGEARGS2 \
	MOVQ   y_base+0(FP), DI; \
	MOVQ   y_len+8(FP), CX; \
	MOVQ   f_base+24(FP), SI; \
	VPXOR  Y15, Y15, Y15

// ROUND2: Y0 and Y1, sixteen float32 from SI, rounded to bfloat16
// precision.
#define ROUND2 \
	VMOVDQU (SI), Y0; \
	VMOVDQU 32(SI), Y1; \
	TOBF16(Y0, Y2, Y3); \
	TOBF16(Y1, Y4, Y5); \
	VPSLLD  $16, Y0, Y0; \
	VPSLLD  $16, Y1, Y1

// STORE2: the bfloat16 halves of Y0 and Y1 to DI, in order.
#define STORE2 \
	VPSRLD    $16, Y0, Y0; \
	VPSRLD    $16, Y1, Y1; \
	VPACKUSDW Y1, Y0, Y0; \
	VPERMQ    $0xd8, Y0, Y0; \
	VMOVDQU   Y0, (DI)

#define MAXZERO2 \
	VMAXPS Y0, Y15, Y0; \
	VMAXPS Y1, Y15, Y1

// ADDSTAGE2(RELU, loop, done): ADDSTAGE on sixteen elements an iteration
// of two YMM vectors.
#define ADDSTAGE2(RELU, loop, done) \
	MOVQ      res_base+48(FP), DX; \
	SUBQ      $16, CX; \
	JL        done; \
loop: \
	ROUND2; \
	VPMOVZXWD (DX), Y6; \
	VPMOVZXWD 16(DX), Y7; \
	VPSLLD    $16, Y6, Y6; \
	VPSLLD    $16, Y7, Y7; \
	VADDPS    Y6, Y0, Y0; \
	VADDPS    Y7, Y1, Y1; \
	RELU; \
	PUTBF16x16(DI); \
	ADDQ      $64, SI; \
	ADDQ      $32, DX; \
	ADDQ      $32, DI; \
	SUBQ      $16, CX; \
	JGE       loop; \
done: \
	VRET

// func f32ToBF16AVX2(dst []uint16, src []float32)
//
// Converts the first len(src)&^7 elements; the caller does the rest.
TEXT ·f32ToBF16AVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SUBQ $16, CX
	JL   one

loop:
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	PUTBF16x16(DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JGE       loop

one:
	ADDQ      $8, CX
	JL        done
	VMOVDQU   (SI), Y0
	TOBF16(Y0, Y2, Y3)
	VPACKUSDW Y0, Y0, Y0
	VPERMQ    $0xd8, Y0, Y0
	VMOVDQU   X0, (DI)

done:
	VRET

// func bf16ToF32AVX2(dst []float32, src []uint16)
//
// Widens the first len(src)&^7 elements; the caller does the rest.
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SUBQ $16, CX
	JL   wone

wloop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JGE       wloop

wone:
	ADDQ      $8, CX
	JL        wdone
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)

wdone:
	VRET

// func f32ToBF16AVX512(dst []uint16, src []float32)
//
// Converts the first len(src)&^15 elements; the caller does the rest.
TEXT ·f32ToBF16AVX512(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	CVTCONSTS512
	SUBQ $32, CX
	JL   one512

loop512:
	VMOVDQU32 (SI), Z0
	VMOVDQU32 64(SI), Z1
	TOBF16512(Z0, Z2, Z3, K1)
	TOBF16512(Z1, Z4, Z5, K2)
	VPMOVDW   Z0, (DI)
	VPMOVDW   Z1, 32(DI)
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	JGE       loop512

one512:
	ADDQ      $16, CX
	JL        done512
	VMOVDQU32 (SI), Z0
	TOBF16512(Z0, Z2, Z3, K1)
	VPMOVDW   Z0, (DI)

done512:
	VRET

// func bf16ToF32AVX512(dst []float32, src []uint16)
//
// Widens the first len(src)&^15 elements; the caller does the rest.
TEXT ·bf16ToF32AVX512(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SUBQ $32, CX
	JL   wone512

wloop512:
	VPMOVZXWD (SI), Z0
	VPMOVZXWD 32(SI), Z1
	VPSLLD    $16, Z0, Z0
	VPSLLD    $16, Z1, Z1
	VMOVDQU32 Z0, (DI)
	VMOVDQU32 Z1, 64(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	JGE       wloop512

wone512:
	ADDQ      $16, CX
	JL        wdone512
	VPMOVZXWD (SI), Z0
	VPSLLD    $16, Z0, Z0
	VMOVDQU32 Z0, (DI)

wdone512:
	VRET

// func roundBF16AVX2(x []float32)
//
// Rounds the first len(x)&^7 elements to bfloat16 precision in place (the
// float32 whose top half is TOBF16's result); the caller does the rest.
TEXT ·roundBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	SUBQ $8, CX
	JL   rdone

rloop:
	VMOVDQU (SI), Y0
	TOBF16(Y0, Y2, Y3)
	VPSLLD  $16, Y0, Y0
	VMOVDQU Y0, (SI)
	ADDQ    $32, SI
	SUBQ    $8, CX
	JGE     rloop

rdone:
	VRET

// func roundBF16AVX512(x []float32)
//
// roundBF16AVX2 on sixteen lanes: the first len(x)&^15 elements.
TEXT ·roundBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	CVTCONSTS512
	SUBQ $16, CX
	JL   rdone512

rloop512:
	VMOVDQU32 (SI), Z0
	TOBF16512(Z0, Z2, Z3, K1)
	VPSLLD    $16, Z0, Z0
	VMOVDQU32 Z0, (SI)
	ADDQ      $64, SI
	SUBQ      $16, CX
	JGE       rloop512

rdone512:
	VRET

// The fused bfloat16 output stages of a BF16 convolution (bf16Stage) on
// sixteen lanes, the first len(y)&^15 elements. Each is the composed
// stage bit for bit: f rounded to bfloat16 precision, the residual's
// widened value added, the rectifier max(x, 0) that keeps −0 and NaN
// (VMAXPS with 0 as its first source returns x unless 0 > x), the result
// narrowed. The rectifier commutes with the last rounding: the sum of two
// bfloat16 values never rounds to −0 from below.

// func bf16ReLUStageAVX512(y []uint16, f []float32)
TEXT ·bf16ReLUStageAVX512(SB), NOSPLIT, $0-48
	STAGEARGS
	SUBQ $16, CX
	JL   rsdone

rsloop:
	VMOVDQU32 (SI), Z0
	TOBF16512(Z0, Z2, Z3, K1)
	VPSLLD    $16, Z0, Z0
	VMAXPS    Z0, Z31, Z0
	VPSRLD    $16, Z0, Z0
	VPMOVDW   Z0, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JGE       rsloop

rsdone:
	VRET

// func bf16AddStageAVX512(y []uint16, f []float32, res []uint16)
TEXT ·bf16AddStageAVX512(SB), NOSPLIT, $0-72
	STAGEARGS
	ADDSTAGE(NOP, asloop, asdone)

// func bf16AddReLUStageAVX512(y []uint16, f []float32, res []uint16)
TEXT ·bf16AddReLUStageAVX512(SB), NOSPLIT, $0-72
	STAGEARGS
	ADDSTAGE(MAXZERO, arsloop, arsdone)

// func bf16ReLUStageAVX2(y []uint16, f []float32)
TEXT ·bf16ReLUStageAVX2(SB), NOSPLIT, $0-48
	STAGEARGS2
	SUBQ $16, CX
	JL   rs2done

rs2loop:
	ROUND2
	MAXZERO2
	STORE2
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	JGE  rs2loop

rs2done:
	VRET

// func bf16AddStageAVX2(y []uint16, f []float32, res []uint16)
TEXT ·bf16AddStageAVX2(SB), NOSPLIT, $0-72
	STAGEARGS2
	ADDSTAGE2(NOP, as2loop, as2done)

// func bf16AddReLUStageAVX2(y []uint16, f []float32, res []uint16)
TEXT ·bf16AddReLUStageAVX2(SB), NOSPLIT, $0-72
	STAGEARGS2
	ADDSTAGE2(MAXZERO2, ars2loop, ars2done)

// Elementwise kernels on bfloat16 operands with float32 arithmetic inside,
// bit for bit what widening, the float32 kernel and F32ToBF16 give, on
// the first len(dst)&^15 elements (the caller does the rest).

// BF16MAP(OP, loop, done): the kernels' loop: sixteen elements of each
// operand widened into Z0 and Z1, OP leaving the float32 result in Z0,
// rounded and stored.
#define BF16MAP(OP, loop, done) \
	SUBQ    $16, CX;                  \
	JL      done;                     \
loop:                                     \
	WIDEN512(SI, Z0);                 \
	WIDEN512(DX, Z1);                 \
	OP;                               \
	TOBF16512(Z0, Z2, Z3, K1);        \
	VPMOVDW Z0, Y0;                   \
	VMOVDQU Y0, (DI);                 \
	ADDQ    $32, SI;                  \
	ADDQ    $32, DX;                  \
	ADDQ    $32, DI;                  \
	SUBQ    $16, CX;                  \
	JGE     loop;                     \
done:                                     \
	VRET

// ADDRELU: Z0 + Z1, rectified where K3 is set; RELUBWD: Z0 where Z1 > 0
// or is NaN, else 0.
#define ADDRELU VADDPS Z1, Z0, Z0; VCMPPS $0x11, Z31, Z0, K3, K2; VMOVAPS Z31, K2, Z0
#define RELUBWD VCMPPS $0x12, Z31, Z1, K2; VMOVAPS Z31, K2, Z0

// func bf16AddAVX512(dst, a, b []uint16, relu bool)
//
// dst = a + b, rectified (x < 0 → 0, −0 and NaN kept) when relu.
TEXT ·bf16AddAVX512(SB), NOSPLIT, $0-73
	BF16ARGS512
	MOVBLZX relu+72(FP), AX
	NEGL    AX
	KMOVW   AX, K3
	BF16MAP(ADDRELU, baloop, badone)

// func bf16ReLUBackwardAVX512(dst, a, b []uint16)
//
// dst = a (the gradient) where b (the ReLU's output) > 0 or is NaN, else 0.
TEXT ·bf16ReLUBackwardAVX512(SB), NOSPLIT, $0-72
	BF16ARGS512
	BF16MAP(RELUBWD, brloop, brdone)

// BF16MAP2(OP, loop, done): BF16MAP on AVX2: sixteen elements of each
// operand in Y0, Y1 and Y4, Y5, OP leaving the float32 results in Y0, Y1,
// rounded, packed and stored.
#define BF16MAP2(OP, loop, done) \
	SUBQ      $16, CX;            \
	JL        done;               \
loop:                                 \
	VPMOVZXWD (SI), Y0;           \
	VPMOVZXWD 16(SI), Y1;         \
	VPMOVZXWD (DX), Y4;           \
	VPMOVZXWD 16(DX), Y5;         \
	VPSLLD    $16, Y0, Y0;        \
	VPSLLD    $16, Y1, Y1;        \
	VPSLLD    $16, Y4, Y4;        \
	VPSLLD    $16, Y5, Y5;        \
	OP;                           \
	PUTBF16x16(DI);               \
	ADDQ      $32, SI;            \
	ADDQ      $32, DX;            \
	ADDQ      $32, DI;            \
	SUBQ      $16, CX;            \
	JGE       loop;               \
done:                                 \
	VRET

// ADDRELU2: Y0, Y1 + Y4, Y5, rectified where Y7 is all ones (Y15 zero);
// RELUBWD2: Y0, Y1 where Y4, Y5 > 0 or are NaN, else 0.
#define ADDRELU2 \
	VADDPS  Y4, Y0, Y0;           \
	VADDPS  Y5, Y1, Y1;           \
	VCMPPS  $0x11, Y15, Y0, Y2;   \
	VCMPPS  $0x11, Y15, Y1, Y3;   \
	VANDPS  Y7, Y2, Y2;           \
	VANDPS  Y7, Y3, Y3;           \
	VANDNPS Y0, Y2, Y0;           \
	VANDNPS Y1, Y3, Y1

#define RELUBWD2 \
	VCMPPS  $0x12, Y15, Y4, Y2;   \
	VCMPPS  $0x12, Y15, Y5, Y3;   \
	VANDNPS Y0, Y2, Y0;           \
	VANDNPS Y1, Y3, Y1

// func bf16AddAVX2(dst, a, b []uint16, relu bool)
TEXT ·bf16AddAVX2(SB), NOSPLIT, $0-73
	BF16ARGS3
	VPXOR        Y15, Y15, Y15
	MOVBLZX      relu+72(FP), AX
	NEGL         AX
	VMOVD        AX, X7
	VPBROADCASTD X7, Y7
	BF16MAP2(ADDRELU2, aaloop, aadone)

// func bf16ReLUBackwardAVX2(dst, a, b []uint16)
TEXT ·bf16ReLUBackwardAVX2(SB), NOSPLIT, $0-72
	BF16ARGS3
	VPXOR Y15, Y15, Y15
	BF16MAP2(RELUBWD2, arloop, ardone)
