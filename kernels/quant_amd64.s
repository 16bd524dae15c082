//go:build amd64 && !noasm

#include "textflag.h"

// QBOUNDS sets the clamp bounds of QUANT16 from the zero point (Z2) and
// the integer range [lo, hi] (Z3, Z4): Z6 = float32(lo − zero), Z5 =
// float32(hi − zero), small integers, so exact.
#define QBOUNDS \
	VPSUBD    Z2, Z3, Z6 \
	VCVTDQ2PS Z6, Z6 \
	VPSUBD    Z2, Z4, Z5 \
	VCVTDQ2PS Z5, Z5

// QUANT16: Z7 = sixteen quantized int32 of the floats Z0·inv (Z1). The
// product is clamped to [lo − zero, hi − zero] before VCVTPS2DQ rounds it
// half to even (under Go's MXCSR): the bounds are integers, so clamping
// first and rounding gives what rounding and clamping gives, and no value
// reaches VCVTPS2DQ's overflow. NaN lanes give 0 before the zero point is
// added, as quantizeOne's do.
#define QUANT16 \
	VMULPS      Z1, Z0, Z0 \
	VCMPPS      $0, Z0, Z0, K1 \
	VMINPS      Z5, Z0, Z0 \
	VMAXPS      Z6, Z0, Z0 \
	VCVTPS2DQ.Z Z0, K1, Z7 \
	VPADDD      Z2, Z7, Z7

// DQLOOP(EXTEND, loop, full): dequantize CX bytes from SI into float32 at
// DI, sixteen at a time, the last (partial) sixteen under the mask K2;
// EXTEND widens the bytes (zero- or sign-extending). Ends at dqdone.
#define DQLOOP(EXTEND, loop, full) \
loop: \
	CMPQ        CX, $16; \
	JGE         full; \
	TESTQ       CX, CX; \
	JZ          dqdone; \
	MOVQ        $1, AX; \
	SHLQ        CX, AX; \
	DECQ        AX; \
	KMOVW       AX, K2; \
	MOVQ        $16, CX; \
full: \
	EXTEND.Z    (SI), K2, Z0; \
	VPSUBD      Z2, Z0, Z0; \
	VCVTDQ2PS   Z0, Z0; \
	VMULPS      Z1, Z0, Z0; \
	VMOVUPS     Z0, K2, (DI); \
	ADDQ        $16, SI; \
	ADDQ        $64, DI; \
	SUBQ        $16, CX; \
	JMP         loop

// func quantizeAVX512(dst *uint8, x *float32, n int, inv float32, zero, lo, hi int32)
TEXT ·quantizeAVX512(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS inv+24(FP), Z1
	MOVL         zero+28(FP), AX
	VPBROADCASTD AX, Z2
	MOVL         lo+32(FP), AX
	VPBROADCASTD AX, Z3
	MOVL         hi+36(FP), AX
	VPBROADCASTD AX, Z4
	QBOUNDS

quantloop:
	CMPQ    CX, $16
	JLT     quanttail
	VMOVUPS (SI), Z0
	QUANT16
	VPMOVDB Z7, (DI)
	ADDQ    $64, SI
	ADDQ    $16, DI
	SUBQ    $16, CX
	JMP     quantloop

quanttail:
	TESTQ     CX, CX
	JZ        quantdone
	MOVQ      $1, AX
	SHLQ      CX, AX
	DECQ      AX
	KMOVW     AX, K2
	VMOVUPS.Z (SI), K2, Z0
	QUANT16
	VPMOVDB   Z7, K2, (DI)

quantdone:
	VZEROUPPER
	RET

// func dequantizeAVX512(dst *float32, q *uint8, n int, scale float32, zero int32, signed int)
TEXT ·dequantizeAVX512(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS scale+24(FP), Z1
	MOVL         zero+28(FP), AX
	VPBROADCASTD AX, Z2
	MOVQ         $-1, AX
	KMOVW        AX, K2
	CMPQ         signed+32(FP), $0
	JNE          dqsigned

	DQLOOP(VPMOVZXBD, dqloop, dqfull)

dqsigned:
	DQLOOP(VPMOVSXBD, dqsloop, dqsfull)

dqdone:
	VZEROUPPER
	RET

// func int8DequantAVX512(y *float32, acc, corr *int32, cs, bias *float32, n int)
// y[c] = float32(acc[c] − corr[c])·cs[c] + bias[c] (bias nil: no add), the
// product rounded before the add as int8Dequant's two float32 steps are.
TEXT ·int8DequantAVX512(SB), NOSPLIT, $0-48
	MOVQ  y+0(FP), DI
	MOVQ  acc+8(FP), SI
	MOVQ  corr+16(FP), DX
	MOVQ  cs+24(FP), R8
	MOVQ  bias+32(FP), R9
	MOVQ  n+40(FP), CX
	MOVQ  $-1, AX
	KMOVW AX, K2

dqrloop:
	CMPQ  CX, $16
	JGE   dqrfull
	TESTQ CX, CX
	JZ    dqrdone
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
	KMOVW AX, K2
	MOVQ  $16, CX

dqrfull:
	VMOVDQU32.Z (SI), K2, Z0
	VPSUBD.Z    (DX), Z0, K2, Z0
	VCVTDQ2PS   Z0, Z0
	VMULPS.Z    (R8), Z0, K2, Z0
	TESTQ       R9, R9
	JZ          dqrstore
	VADDPS.Z    (R9), Z0, K2, Z0
	ADDQ        $64, R9

dqrstore:
	VMOVUPS Z0, K2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, R8
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     dqrloop

dqrdone:
	VZEROUPPER
	RET

// FINSTART loads the rows of an int8FinishArgs at R8: dst (R12), acc
// (R11), rq (R13) and the row count (R14).
#define FINSTART \
	MOVQ 0(R8), R12; \
	MOVQ 8(R8), R11; \
	MOVQ 40(R8), R13; \
	MOVQ 80(R8), R14

// FINROW starts a row: dst (DI), acc (SI), corr (DX), cs (BX), bias (R9),
// rq (R10) and the columns (CX).
#define FINROW \
	MOVQ R12, DI; \
	MOVQ R11, SI; \
	MOVQ 16(R8), DX; \
	MOVQ 24(R8), BX; \
	MOVQ 32(R8), R9; \
	MOVQ R13, R10; \
	MOVQ 48(R8), CX

// FINNEXT(done) moves to the next row, past the strides at 96(R8) (dst
// and rq) and 88(R8) (acc); done is the label for a nil rq.
#define FINNEXT(done) \
	ADDQ  96(R8), R12; \
	ADDQ  88(R8), R11; \
	TESTQ R13, R13; \
	JZ    done; \
	ADDQ  96(R8), R13; \
done: \
	DECQ R14

// The fast steps of int8FinishAVX512, for calls whose every value y·inv
// lies well inside int32 (int8Finish.fast): rounding with VCVTPS2DQ, then
// adding the zero point, raising to lo and saturating to bytes in the
// packs gives what clamping first gives, as the bounds are integers, and
// skips the float clamps, the NaN mask and VPMOVDB's two uops.
//
// FDQ(o, z): z = float32(acc − corr)·cs + bias of the sixteen columns at
// byte o past AX.
#define FDQ(o, z) \
	VMOVDQU32 o(SI)(AX*1), z; \
	VPSUBD    o(DX)(AX*1), z, z; \
	VCVTDQ2PS z, z; \
	VMULPS    o(BX)(AX*1), z, z; \
	VADDPS    o(R9)(AX*1), z, z

// FRES(ro, z, t): z += float32(rq − zr)·sr of the sixteen residual bytes
// at ro(R10), t a temporary.
#define FRES(ro, z, t) \
	VPMOVZXBD ro(R10), t; \
	VPSUBD    Z9, t, t; \
	VCVTDQ2PS t, t; \
	VMULPS    Z8, t, t; \
	VADDPS    t, z, z

// FQ(z): z = max(round(z·inv) + zo, lo) as int32.
#define FQ(z) \
	VMULPS    Z1, z, z; \
	VCVTPS2DQ z, z; \
	VPADDD    Z2, z, z; \
	VPMAXSD   Z3, z, z

// FPACK(PACKB): pack Z13…Z16 (64 columns in order) to bytes with PACKB
// (VPACKUSWB for uint8, VPACKSSWB for int8) and store them at DI. The
// packs interleave the four vectors by 128-bit lane; VPERMD with the
// index in Z12 puts the columns back in order.
#define FPACK(PACKB) \
	VPACKSSDW Z14, Z13, Z13; \
	VPACKSSDW Z16, Z15, Z15; \
	PACKB     Z15, Z13, Z13; \
	VPERMD    Z13, Z12, Z13; \
	VMOVDQU32 Z13, (DI)

// F64(PACKB): the 64 columns at AX without a residual.
#define F64(PACKB) \
	FDQ(0, Z13); FDQ(64, Z14); FDQ(128, Z15); FDQ(192, Z16); \
	FQ(Z13); FQ(Z14); FQ(Z15); FQ(Z16); \
	FPACK(PACKB)

// F64R(PACKB): the 64 columns at AX with the residual at R10.
#define F64R(PACKB) \
	FDQ(0, Z13); FDQ(64, Z14); FDQ(128, Z15); FDQ(192, Z16); \
	FRES(0, Z13, Z17); FRES(16, Z14, Z18); FRES(32, Z15, Z19); FRES(48, Z16, Z20); \
	FQ(Z13); FQ(Z14); FQ(Z15); FQ(Z16); \
	FPACK(PACKB)

// The dword order that undoes the packs' interleaving.
DATA packOrder<>+0(SB)/4, $0
DATA packOrder<>+4(SB)/4, $4
DATA packOrder<>+8(SB)/4, $8
DATA packOrder<>+12(SB)/4, $12
DATA packOrder<>+16(SB)/4, $1
DATA packOrder<>+20(SB)/4, $5
DATA packOrder<>+24(SB)/4, $9
DATA packOrder<>+28(SB)/4, $13
DATA packOrder<>+32(SB)/4, $2
DATA packOrder<>+36(SB)/4, $6
DATA packOrder<>+40(SB)/4, $10
DATA packOrder<>+44(SB)/4, $14
DATA packOrder<>+48(SB)/4, $3
DATA packOrder<>+52(SB)/4, $7
DATA packOrder<>+56(SB)/4, $11
DATA packOrder<>+60(SB)/4, $15
GLOBL packOrder<>(SB), RODATA|NOPTR, $64

// func int8FinishAVX512(p *int8FinishArgs)
// One pass of the INT8 GEMM's epilogue for a quantized result, row after
// row: per element, y = float32(acc − corr)·cs, + bias (when not nil), +
// float32(rq − zr)·sr (when rq is not nil), each step rounded as the
// separate passes round it, then quantized as quantizeAVX512 does with
// [lo, hi], the low byte stored. The offsets are int8FinishArgs's; R12,
// R11 and R13 hold the current row of dst, acc and rq, R14 the rows left.
TEXT ·int8FinishAVX512(SB), NOSPLIT, $0-8
	MOVQ         p+0(FP), R8
	VBROADCASTSS 56(R8), Z8
	MOVL         60(R8), AX
	VPBROADCASTD AX, Z9
	VBROADCASTSS 64(R8), Z1
	MOVL         68(R8), AX
	VPBROADCASTD AX, Z2
	MOVL         72(R8), AX
	VPBROADCASTD AX, Z3
	MOVL         76(R8), AX
	VPBROADCASTD AX, Z4
	QBOUNDS
	VMOVDQU32    packOrder<>(SB), Z12
	FINSTART

finrow:
	FINROW
	XORQ  AX, AX
	TESTQ R9, R9
	JZ    finslow
	CMPQ  104(R8), $0
	JEQ   finslow
	CMPL  72(R8), $0
	JL    finfasts

// Fast rows of uint8 results (lo ≥ 0) with a bias: 64 columns a step,
// then the rest by the steps below.
	TESTQ R10, R10
	JNZ   finfastur

finfastu:
	CMPQ CX, $64
	JL   finbias
	F64(VPACKUSWB)
	ADDQ $256, AX
	ADDQ $64, DI
	SUBQ $64, CX
	JMP  finfastu

finfastur:
	CMPQ CX, $64
	JL   finres
	F64R(VPACKUSWB)
	ADDQ $256, AX
	ADDQ $64, DI
	ADDQ $64, R10
	SUBQ $64, CX
	JMP  finfastur

// The same for int8 results.
finfasts:
	TESTQ R10, R10
	JNZ   finfastsr

finfastsl:
	CMPQ CX, $64
	JL   finbias
	F64(VPACKSSWB)
	ADDQ $256, AX
	ADDQ $64, DI
	SUBQ $64, CX
	JMP  finfastsl

finfastsr:
	CMPQ CX, $64
	JL   finres
	F64R(VPACKSSWB)
	ADDQ $256, AX
	ADDQ $64, DI
	ADDQ $64, R10
	SUBQ $64, CX
	JMP  finfastsr

finslow:
	TESTQ R10, R10
	JNZ   finres
	TESTQ R9, R9
	JNZ   finbias

// The full vectors without a residual, branch-free: acc, corr, cs and
// bias at AX, the output at DI.
finplain:
	CMPQ      CX, $16
	JL        fintail
	VMOVDQU32 (SI)(AX*1), Z0
	VPSUBD    (DX)(AX*1), Z0, Z0
	VCVTDQ2PS Z0, Z0
	VMULPS    (BX)(AX*1), Z0, Z0
	QUANT16
	VPMOVDB   Z7, (DI)
	ADDQ      $64, AX
	ADDQ      $16, DI
	SUBQ      $16, CX
	JMP       finplain

finbias:
	CMPQ      CX, $16
	JL        fintail
	VMOVDQU32 (SI)(AX*1), Z0
	VPSUBD    (DX)(AX*1), Z0, Z0
	VCVTDQ2PS Z0, Z0
	VMULPS    (BX)(AX*1), Z0, Z0
	VADDPS    (R9)(AX*1), Z0, Z0
	QUANT16
	VPMOVDB   Z7, (DI)
	ADDQ      $64, AX
	ADDQ      $16, DI
	SUBQ      $16, CX
	JMP       finbias

// The residual's rows, and the last columns of every row under the mask
// K2, go through the general step finstep.
finres:
	MOVQ  $-1, R15
	KMOVW R15, K2
	CMPQ  CX, $16
	JGE   finstep

fintail:
	TESTQ CX, CX
	JZ    finnext
	MOVQ  $1, R15
	SHLQ  CX, R15
	DECQ  R15
	KMOVW R15, K2
	MOVQ  $16, CX

finstep:
	VMOVDQU32.Z (SI)(AX*1), K2, Z0
	VPSUBD.Z    (DX)(AX*1), Z0, K2, Z0
	VCVTDQ2PS   Z0, Z0
	VMULPS.Z    (BX)(AX*1), Z0, K2, Z0
	TESTQ       R9, R9
	JZ          finnobias
	VADDPS.Z    (R9)(AX*1), Z0, K2, Z0

finnobias:
	TESTQ       R10, R10
	JZ          finquant
	VPMOVZXBD.Z (R10), K2, Z10
	VPSUBD      Z9, Z10, Z10
	VCVTDQ2PS   Z10, Z10
	VMULPS      Z8, Z10, Z10
	VADDPS      Z10, Z0, Z0
	ADDQ        $16, R10

finquant:
	QUANT16
	VPMOVDB Z7, K2, (DI)
	ADDQ    $64, AX
	ADDQ    $16, DI
	SUBQ    $16, CX
	JZ      finnext
	CMPQ    CX, $16
	JGE     finstep
	JMP     fintail

finnext:
	FINNEXT(finrq)
	JNZ finrow
	VZEROUPPER
	RET

// The 16-bit lanes' low bytes, for packing results to bytes.
DATA lowBytes16<>+0(SB)/4, $0x00ff00ff
GLOBL lowBytes16<>(SB), RODATA|NOPTR, $4

// func int8FinishAVX2(p *int8FinishArgs)
// int8FinishAVX512 on eight lanes of YMM registers, for n a multiple of
// eight (the caller finishes the columns past). NaN lanes are zeroed
// after VCVTPS2DQ by the mask of ordered lanes; the clamped int32 results
// pack to 16 bits exactly and keep their low bytes.
TEXT ·int8FinishAVX2(SB), NOSPLIT, $0-8
	MOVQ         p+0(FP), R8
	VBROADCASTSS 56(R8), Y8
	VPBROADCASTD 60(R8), Y9
	VBROADCASTSS 64(R8), Y1
	VPBROADCASTD 68(R8), Y2
	VPBROADCASTD 72(R8), Y3
	VPBROADCASTD 76(R8), Y4
	VPSUBD       Y2, Y3, Y6
	VCVTDQ2PS    Y6, Y6
	VPSUBD       Y2, Y4, Y5
	VCVTDQ2PS    Y5, Y5
	VPBROADCASTD lowBytes16<>(SB), X10
	FINSTART

f2row:
	FINROW
	TESTQ CX, CX
	JZ    f2next

f2loop:
	VMOVDQU   (SI), Y0
	VPSUBD    (DX), Y0, Y0
	VCVTDQ2PS Y0, Y0
	VMULPS    (BX), Y0, Y0
	TESTQ     R9, R9
	JZ        f2nobias
	VADDPS    (R9), Y0, Y0
	ADDQ      $32, R9

f2nobias:
	TESTQ     R10, R10
	JZ        f2quant
	VPMOVZXBD (R10), Y11
	VPSUBD    Y9, Y11, Y11
	VCVTDQ2PS Y11, Y11
	VMULPS    Y8, Y11, Y11
	VADDPS    Y11, Y0, Y0
	ADDQ      $8, R10

f2quant:
	VMULPS       Y1, Y0, Y0
	VCMPPS       $0, Y0, Y0, Y12
	VMINPS       Y5, Y0, Y0
	VMAXPS       Y6, Y0, Y0
	VCVTPS2DQ    Y0, Y7
	VPAND        Y12, Y7, Y7
	VPADDD       Y2, Y7, Y7
	VEXTRACTI128 $1, Y7, X13
	VPACKSSDW    X13, X7, X7
	VPAND        X10, X7, X7
	VPACKUSWB    X7, X7, X7
	VMOVQ        X7, (DI)
	ADDQ         $32, SI
	ADDQ         $32, DX
	ADDQ         $32, BX
	ADDQ         $8, DI
	SUBQ         $8, CX
	JNZ          f2loop

f2next:
	FINNEXT(f2rq)
	JNZ f2row
	VZEROUPPER
	RET
