//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"
#include "bf16_amd64.h"

// FMALOOP(top, r0, …, r13): zero r0…r13, then CX times add r12·r13 into
// each of r0…r11 (twelve independent chains); the loop starts at top.
#define FMALOOP(top, r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13) \
	ZERO4(VXORPS, r0, r1, r2, r3); ZERO4(VXORPS, r4, r5, r6, r7); ZERO4(VXORPS, r8, r9, r10, r11) \
	VXORPS r12, r12, r12; VXORPS r13, r13, r13 \
top: \
	VFMADD231PS r12, r13, r0; VFMADD231PS r12, r13, r1; VFMADD231PS r12, r13, r2; VFMADD231PS r12, r13, r3 \
	VFMADD231PS r12, r13, r4; VFMADD231PS r12, r13, r5; VFMADD231PS r12, r13, r6; VFMADD231PS r12, r13, r7 \
	VFMADD231PS r12, r13, r8; VFMADD231PS r12, r13, r9; VFMADD231PS r12, r13, r10; VFMADD231PS r12, r13, r11 \
	DECJNZ(CX, top)

// func fmaLoopAVX2(iters int)
// Twelve accumulators: an FMA has a latency of four cycles and two issue
// per cycle, so at least eight independent chains are needed to fill the
// pipes; twelve leave slack for the loop counter.
TEXT ·fmaLoopAVX2(SB), NOSPLIT, $0-8
	MOVQ iters+0(FP), CX
	FMALOOP(fmaloop, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13)
	VRET

// func fmaLoopAVX512(iters int)
// fmaLoopAVX2 on ZMM registers: on a core with full-width 512-bit FMA
// units this doubles the rate, on one that splits them in two it does not.
TEXT ·fmaLoopAVX512(SB), NOSPLIT, $0-8
	MOVQ iters+0(FP), CX
	FMALOOP(fma512loop, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13)
	VRET

// func triadAVX2Blocks(a, b, c []float32, s float32)
// a[i] = b[i] + s*c[i], 32 elements (four YMM) per round, len(a)/32 rounds.
TEXT ·triadAVX2Blocks(SB), NOSPLIT, $0-76
	MOVQ         a_base+0(FP), DI
	MOVQ         a_len+8(FP), CX
	MOVQ         b_base+24(FP), SI
	MOVQ         c_base+48(FP), DX
	VBROADCASTSS s+72(FP), Y15
	SHRQ         $5, CX
	JZ           triaddone

triadloop:
	LD4(VMOVUPS, DX, Y0, Y1, Y2, Y3)
	VFMADD213PS (SI), Y15, Y0
	VFMADD213PS 32(SI), Y15, Y1
	VFMADD213PS 64(SI), Y15, Y2
	VFMADD213PS 96(SI), Y15, Y3
	ST4(VMOVUPS, DI, Y0, Y1, Y2, Y3)
	ADDQ3(128, DI, SI, DX)
	DECJNZ(CX, triadloop)

triaddone:
	VRET

// DPBF16x4(s1, s2, a, b, c, d): Z<a>…Z<d> += Z<s1>·Z<s2> as bfloat16 pairs,
// four independent VDPBF16PS (register numbers, as bf16_amd64.h takes).
#define DPBF16x4(s1, s2, a, b, c, d) \
	VDPBF16PS_Z(a, s1, s2); VDPBF16PS_Z(b, s1, s2); VDPBF16PS_Z(c, s1, s2); VDPBF16PS_Z(d, s1, s2)

// func dpbf16Loop(iters int)
// The BF16 ceiling: CX rounds of sixteen independent VDPBF16PS chains on
// ZMM registers, Z0…Z15 accumulating Z16·Z17, no memory operands:
// more chains than the FMA loop's twelve, since a VDPBF16PS takes longer
// than an FMA on some cores, and enough for two issued a cycle through a
// latency of up to eight cycles. Every register starts at zero, so the
// sums stay zero (no subnormals, no overflow) however long it runs.
TEXT ·dpbf16Loop(SB), NOSPLIT, $0-8
	MOVQ iters+0(FP), CX
	ZERO4(VPXORD, Z0, Z1, Z2, Z3); ZERO4(VPXORD, Z4, Z5, Z6, Z7)
	ZERO4(VPXORD, Z8, Z9, Z10, Z11); ZERO4(VPXORD, Z12, Z13, Z14, Z15)
	VPXORD Z16, Z16, Z16; VPXORD Z17, Z17, Z17

dpbf16loop:
	DPBF16x4(16, 17, 0, 1, 2, 3)
	DPBF16x4(16, 17, 4, 5, 6, 7)
	DPBF16x4(16, 17, 8, 9, 10, 11)
	DPBF16x4(16, 17, 12, 13, 14, 15)
	DECJNZ(CX, dpbf16loop)
	VRET
