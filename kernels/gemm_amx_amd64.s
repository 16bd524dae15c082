//go:build !noasm

#include "textflag.h"

// Go's assembler has no AMX mnemonics: the instructions are VEX-encoded
// bytes (KERNEL-FACTS.md has the table). Their memory operands use
// [base + index*1 + disp], base and index among AX…DI.

// LDTILECFG (AX)
#define LDTILECFG_AX BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x00
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
// TILEZERO tmmT: ModRM C0+8T.
#define TILEZERO(modrm) BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $modrm
// TILELOADD tmm4, (SI)(BX*1) and tmm5, 1024(SI)(BX*1): the strip's two A
// tiles, rows 64 bytes apart (BX = 64).
#define LOAD_A0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x1E
#define LOAD_A1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xAC; BYTE $0x1E; LONG $0x400
// TILELOADD tmm6, (DX)(BX*1) and tmm7, 1024(DX)(BX*1): the block's two B
// panels.
#define LOAD_B0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x34; BYTE $0x1A
#define LOAD_B1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xBC; BYTE $0x1A; LONG $0x400
// TDPBF16PS tmmD, tmmA, tmmB: VEX byte 2 carries B inverted, ModRM
// C0+8D+A. tmm0 += tmm4·tmm6, tmm1 += tmm4·tmm7, tmm2 += tmm5·tmm6,
// tmm3 += tmm5·tmm7.
#define DP_00 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xC4
#define DP_01 BYTE $0xC4; BYTE $0xE2; BYTE $0x42; BYTE $0x5C; BYTE $0xCC
#define DP_10 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xD5
#define DP_11 BYTE $0xC4; BYTE $0xE2; BYTE $0x42; BYTE $0x5C; BYTE $0xDD
// TILESTORED (CX)(AX*1), tmm0; 64(CX)(AX*1), tmm1; 2048(CX)(AX*1), tmm2;
// 2112(CX)(AX*1), tmm3: the 32×32 block, rows 128 bytes apart (AX = 128).
#define STORE_00 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x01
#define STORE_01 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x4C; BYTE $0x01; BYTE $0x40
#define STORE_10 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x94; BYTE $0x01; LONG $0x800
#define STORE_11 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x9C; BYTE $0x01; LONG $0x840

// PREFETCH_B asks for the next step's B (2 KiB from DX) in L1. The
// hardware prefetchers do not keep up with tile loads: with it the kernel
// ran 1.3-1.6x faster on B streaming from L2 on the device's Xeon (a
// 1024³ product at one thread 467-523 -> 651-674 GFLOP/s), and asking two
// steps ahead, or for A too, was no better.
#define PREFETCH_B \
	PREFETCHT0 2048(DX); \
	PREFETCHT0 2112(DX); \
	PREFETCHT0 2176(DX); \
	PREFETCHT0 2240(DX); \
	PREFETCHT0 2304(DX); \
	PREFETCHT0 2368(DX); \
	PREFETCHT0 2432(DX); \
	PREFETCHT0 2496(DX); \
	PREFETCHT0 2560(DX); \
	PREFETCHT0 2624(DX); \
	PREFETCHT0 2688(DX); \
	PREFETCHT0 2752(DX); \
	PREFETCHT0 2816(DX); \
	PREFETCHT0 2880(DX); \
	PREFETCHT0 2944(DX); \
	PREFETCHT0 3008(DX); \
	PREFETCHT0 3072(DX); \
	PREFETCHT0 3136(DX); \
	PREFETCHT0 3200(DX); \
	PREFETCHT0 3264(DX); \
	PREFETCHT0 3328(DX); \
	PREFETCHT0 3392(DX); \
	PREFETCHT0 3456(DX); \
	PREFETCHT0 3520(DX); \
	PREFETCHT0 3584(DX); \
	PREFETCHT0 3648(DX); \
	PREFETCHT0 3712(DX); \
	PREFETCHT0 3776(DX); \
	PREFETCHT0 3840(DX); \
	PREFETCHT0 3904(DX); \
	PREFETCHT0 3968(DX); \
	PREFETCHT0 4032(DX)

// func amxBF16Strip(cfg *amxTileConfig, a *uint16, b *uint32, c *float32, steps, blocks int)
TEXT ·amxBF16Strip(SB), NOSPLIT, $0-48
	MOVQ cfg+0(FP), AX
	LDTILECFG_AX
	MOVQ a+8(FP), DI
	MOVQ b+16(FP), DX
	MOVQ c+24(FP), CX
	MOVQ steps+32(FP), R8
	MOVQ blocks+40(FP), R9
	MOVQ $64, BX
	MOVQ $128, AX

block:
	TILEZERO(0xC0)
	TILEZERO(0xC8)
	TILEZERO(0xD0)
	TILEZERO(0xD8)
	MOVQ DI, SI
	MOVQ R8, R10

step:
	PREFETCH_B
	LOAD_A0
	LOAD_B0
	DP_00
	LOAD_B1
	DP_01
	LOAD_A1
	DP_10
	DP_11
	ADDQ $2048, SI
	ADDQ $2048, DX
	DECQ R10
	JNZ  step

	STORE_00
	STORE_01
	STORE_10
	STORE_11
	ADDQ $4096, CX
	DECQ R9
	JNZ  block

	TILERELEASE
	RET

// func amxPeakLoop(cfg *amxTileConfig, ones *uint16, iters int)
//
// iters rounds of the kernel's four TDPBF16PS on tiles loaded once from
// ones (2 KiB of bfloat16), touching no memory in the loop: the ceiling
// of the AMX kernels.
TEXT ·amxPeakLoop(SB), NOSPLIT, $0-24
	MOVQ cfg+0(FP), AX
	LDTILECFG_AX
	MOVQ ones+8(FP), SI
	MOVQ SI, DX
	MOVQ iters+16(FP), R10
	MOVQ $64, BX
	LOAD_A0
	LOAD_A1
	LOAD_B0
	LOAD_B1
	TILEZERO(0xC0)
	TILEZERO(0xC8)
	TILEZERO(0xD0)
	TILEZERO(0xD8)

peakloop:
	DP_00
	DP_01
	DP_10
	DP_11
	DECQ R10
	JNZ  peakloop

	TILERELEASE
	RET
