//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"

// func streamStoreAVX512(dst, src []float32)
//
// Copies len(dst) floats (a multiple of 32; dst 64-byte aligned) from src
// with non-temporal stores, which write whole cache lines to memory
// without first reading them. Call storeFence after the last one. A ZMM
// store covers a line; with two YMM halves (streamStoreAVX2) the 1-core
// gain measured on Zen 5 was lost.
TEXT ·streamStoreAVX512(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	SHRQ $5, CX
	JZ   done

loop:
	VMOVUPS  (SI), Z0
	VMOVUPS  64(SI), Z1
	VMOVNTPS Z0, (DI)
	VMOVNTPS Z1, 64(DI)
	ADDQ2(128, SI, DI)
	DECJNZ(CX, loop)

done:
	VRET

// func streamStoreAVX2(dst, src []float32)
//
// streamStoreAVX512 with YMM registers.
TEXT ·streamStoreAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	SHRQ $5, CX
	JZ   done2

loop2:
	LD4(VMOVUPS, SI, Y0, Y1, Y2, Y3)
	ST4(VMOVNTPS, DI, Y0, Y1, Y2, Y3)
	ADDQ2(128, SI, DI)
	DECJNZ(CX, loop2)

done2:
	VRET

// func storeFence()
//
// Orders the non-temporal stores before everything after: a fence per
// block would stall on each block's stores reaching memory.
TEXT ·storeFence(SB), NOSPLIT, $0-0
	SFENCE
	RET
