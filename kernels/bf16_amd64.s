//go:build !noasm

#include "textflag.h"
#include "bf16_amd64.h"

// Probes of the macros in bf16_amd64.h, one instruction each on registers
// chosen to exercise every EVEX extension bit; bf16_amd64_test.go checks
// them against the pure-Go reference. They are the building blocks' proof,
// kept beside them until the BF16 kernels use every macro.

// func bf16DotProbe(acc *float32, a, b *uint16, high bool)
TEXT ·bf16DotProbe(SB), NOSPLIT, $0-25
	MOVQ    acc+0(FP), DI
	MOVQ    a+8(FP), SI
	MOVQ    b+16(FP), DX
	MOVB    high+24(FP), AX
	TESTB   AX, AX
	JNE     dothigh
	VMOVUPS (DI), Z0
	VMOVUPS (SI), Z1
	VMOVUPS (DX), Z2
	VDPBF16PS_Z(0, 1, 2)
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET
dothigh:
	VMOVUPS (DI), Z31
	VMOVUPS (SI), Z30
	VMOVUPS (DX), Z29
	VDPBF16PS_Z(31, 30, 29)
	VMOVUPS (DI), Z8
	VMOVUPS (SI), Z9
	VMOVUPS (DX), Z20
	VDPBF16PS_Z(8, 9, 20)
	VSUBPS  (DI), Z8, Z8 // what the second dot product added
	VADDPS  Z8, Z31, Z31
	VMOVUPS Z31, (DI)
	VZEROUPPER
	RET

// func bf16DotBcstProbe(acc *float32, pairs, b *uint16)
// acc += dot of b with pairs[2:4] (base SI, offset 4) broadcast, then with
// pairs[4:6] (base R9, offset 8) into a high register, summed.
TEXT ·bf16DotBcstProbe(SB), NOSPLIT, $0-24
	MOVQ    acc+0(FP), DI
	MOVQ    pairs+8(FP), SI
	MOVQ    SI, R9
	MOVQ    b+16(FP), DX
	VMOVUPS (DX), Z1
	VMOVUPS (DI), Z0
	VDPBF16PS_BCST(0, 1, 6, 4)
	VPXORD  Z20, Z20, Z20
	VMOVUPS (DX), Z17
	VDPBF16PS_BCST(20, 17, 9, 8)
	VADDPS  Z20, Z0, Z0
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET

// func bf16PackProbe(dst *uint16, lo, hi *float32, high bool)
// dst[0:16] = bf16(lo), dst[16:32] = bf16(hi).
TEXT ·bf16PackProbe(SB), NOSPLIT, $0-25
	MOVQ    dst+0(FP), DI
	MOVQ    lo+8(FP), SI
	MOVQ    hi+16(FP), DX
	MOVB    high+24(FP), AX
	TESTB   AX, AX
	JNE     packhigh
	VMOVUPS (DX), Z1
	VMOVUPS (SI), Z2
	VCVTNE2PS2BF16_Z(0, 1, 2)
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET
packhigh:
	VMOVUPS (DX), Z17
	VMOVUPS (SI), Z18
	VCVTNE2PS2BF16_Z(16, 17, 18)
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// func bf16NarrowProbe(dst *uint16, src *float32, high bool)
// dst[0:16] = bf16(src).
TEXT ·bf16NarrowProbe(SB), NOSPLIT, $0-17
	MOVQ      dst+0(FP), DI
	MOVQ      src+8(FP), SI
	MOVB      high+16(FP), AX
	TESTB     AX, AX
	JNE       narrowhigh
	VMOVUPS   (SI), Z1
	VCVTNEPS2BF16_Y(0, 1)
	VMOVDQU   Y0, (DI)
	VZEROUPPER
	RET
narrowhigh:
	VMOVUPS   (SI), Z17
	VCVTNEPS2BF16_Y(16, 17)
	VMOVDQU32 Y16, (DI)
	VZEROUPPER
	RET
