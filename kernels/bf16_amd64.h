// The AVX512_BF16 instructions Go's assembler does not know, as EVEX
// bytes built from register numbers (0–31 for Z registers; for a memory
// operand the base is a general register number: AX=0 … DI=7, R8=8 … R15=15,
// except SP, BP, R12 and R13, which would need a SIB byte or change the
// addressing mode). Every macro is checked against the pure-Go result by
// bf16_amd64_test.go. (The encodings were verified with gas; see
// ../shared/KERNEL-FACTS.md.)

// evexR etc. are EVEX's inverted register-extension bits.
#define evexR(r) ((((r)^31)>>3)&1)
#define evexR2(r) ((((r)^31)>>4)&1)

// P0 for a register operand reg (ModRM.reg) and rm (ModRM.rm), map 0F38.
#define evexP0(reg, rm) BYTE $((evexR(reg)<<7) | (evexR2(rm)<<6) | (evexR(rm)<<5) | (evexR2(reg)<<4) | 2)

// P0 for ModRM.reg and a memory base (no index: X stays set).
#define evexP0M(reg, base) BYTE $((evexR(reg)<<7) | (1<<6) | (evexR(base)<<5) | (evexR2(reg)<<4) | 2)

// P1 with W=0, the second source v and prefix pp (2 = F3, 3 = F2).
#define evexP1(v, pp) BYTE $(((((v)^15)&15)<<3) | 4 | (pp))

// P2 for 512-bit vectors, the second source's high bit, and the broadcast
// bit b.
#define evexP2(v, b) BYTE $(0x40 | ((b)<<4) | (evexR2(v)<<3))

// VDPBF16PS_Z(dst, src1, src2): for each float32 lane i of Z<dst>,
// dst[i] += src1.bf16[2i+1]·src2.bf16[2i+1], then += src1.bf16[2i]·src2.bf16[2i]
// (Intel order; each sum rounded to nearest even, subnormals flushed).
#define VDPBF16PS_Z(dst, src1, src2) \
	BYTE $0x62; evexP0(dst, src2); evexP1(src1, 2); evexP2(src1, 0); \
	BYTE $0x52; BYTE $(0xC0 | (((dst)&7)<<3) | ((src2)&7))

// VDPBF16PS_BCST(dst, src1, base, off): as VDPBF16PS_Z with src2 the 32-bit
// pair at off(base) broadcast to every lane; off must be a multiple of 4
// below 512 (EVEX's compressed 8-bit displacement).
#define VDPBF16PS_BCST(dst, src1, base, off) \
	BYTE $0x62; evexP0M(dst, base); evexP1(src1, 2); evexP2(src1, 1); \
	BYTE $0x52; BYTE $(0x40 | (((dst)&7)<<3) | ((base)&7)); BYTE $((off)/4)

// VCVTNE2PS2BF16_Z(dst, src1, src2): Z<dst> holds the 32 bfloat16s of
// src2's 16 floats (low half) then src1's (high half), rounded to nearest
// even, subnormals flushed to zero.
#define VCVTNE2PS2BF16_Z(dst, src1, src2) \
	BYTE $0x62; evexP0(dst, src2); evexP1(src1, 3); evexP2(src1, 0); \
	BYTE $0x72; BYTE $(0xC0 | (((dst)&7)<<3) | ((src2)&7))

// VCVTNEPS2BF16_Y(dst, src): Y<dst> holds the 16 bfloat16s of Z<src>'s
// floats, rounded to nearest even, subnormals flushed to zero.
#define VCVTNEPS2BF16_Y(dst, src) \
	BYTE $0x62; evexP0(dst, src); evexP1(0, 2); evexP2(0, 0); \
	BYTE $0x72; BYTE $(0xC0 | (((dst)&7)<<3) | ((src)&7))
