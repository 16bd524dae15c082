//go:build amd64 && !noasm

#include "textflag.h"

// func fmaLoopAVX2(iters int)
// Twelve accumulators: an FMA has a latency of four cycles and two issue
// per cycle, so at least eight independent chains are needed to fill the
// pipes; twelve leave slack for the loop counter.
TEXT ·fmaLoopAVX2(SB), NOSPLIT, $0-8
	MOVQ   iters+0(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13

fmaloop:
	VFMADD231PS Y12, Y13, Y0
	VFMADD231PS Y12, Y13, Y1
	VFMADD231PS Y12, Y13, Y2
	VFMADD231PS Y12, Y13, Y3
	VFMADD231PS Y12, Y13, Y4
	VFMADD231PS Y12, Y13, Y5
	VFMADD231PS Y12, Y13, Y6
	VFMADD231PS Y12, Y13, Y7
	VFMADD231PS Y12, Y13, Y8
	VFMADD231PS Y12, Y13, Y9
	VFMADD231PS Y12, Y13, Y10
	VFMADD231PS Y12, Y13, Y11
	DECQ        CX
	JNZ         fmaloop
	VZEROUPPER
	RET

// func fmaLoopAVX512(iters int)
// fmaLoopAVX2 on ZMM registers: on a core with full-width 512-bit FMA
// units this doubles the rate, on one that splits them in two it does not.
TEXT ·fmaLoopAVX512(SB), NOSPLIT, $0-8
	MOVQ   iters+0(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z8, Z8, Z8
	VXORPS Z9, Z9, Z9
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11
	VXORPS Z12, Z12, Z12
	VXORPS Z13, Z13, Z13

fma512loop:
	VFMADD231PS Z12, Z13, Z0
	VFMADD231PS Z12, Z13, Z1
	VFMADD231PS Z12, Z13, Z2
	VFMADD231PS Z12, Z13, Z3
	VFMADD231PS Z12, Z13, Z4
	VFMADD231PS Z12, Z13, Z5
	VFMADD231PS Z12, Z13, Z6
	VFMADD231PS Z12, Z13, Z7
	VFMADD231PS Z12, Z13, Z8
	VFMADD231PS Z12, Z13, Z9
	VFMADD231PS Z12, Z13, Z10
	VFMADD231PS Z12, Z13, Z11
	DECQ        CX
	JNZ         fma512loop
	VZEROUPPER
	RET

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
	VMOVUPS     (DX), Y0
	VMOVUPS     32(DX), Y1
	VMOVUPS     64(DX), Y2
	VMOVUPS     96(DX), Y3
	VFMADD213PS (SI), Y15, Y0
	VFMADD213PS 32(SI), Y15, Y1
	VFMADD213PS 64(SI), Y15, Y2
	VFMADD213PS 96(SI), Y15, Y3
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, 32(DI)
	VMOVUPS     Y2, 64(DI)
	VMOVUPS     Y3, 96(DI)
	ADDQ        $128, DI
	ADDQ        $128, SI
	ADDQ        $128, DX
	DECQ        CX
	JNZ         triadloop

triaddone:
	VZEROUPPER
	RET
