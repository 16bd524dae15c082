// Loop pieces shared by the AVX2 elementwise kernels (activation_amd64.s,
// binary_amd64.s, softmax_amd64.s). Include after vmath_amd64.h where
// MAP8X2 is used (it needs TAILMASK).

// LOAD4(b, r0, r1, r2, r3): r0–r3 = the four vectors at (b) on.
#define LOAD4(b, r0, r1, r2, r3) \
	VMOVUPS (b), r0 \
	VMOVUPS 32(b), r1 \
	VMOVUPS 64(b), r2 \
	VMOVUPS 96(b), r3

// STORE4(b, r0, r1, r2, r3): r0–r3 to the four vectors at (b) on.
#define STORE4(b, r0, r1, r2, r3) \
	VMOVUPS r0, (b) \
	VMOVUPS r1, 32(b) \
	VMOVUPS r2, 64(b) \
	VMOVUPS r3, 96(b)

// MAP8X2(BODY, B, OUT): eight float32 at a time, then a masked tail, BODY
// maps Y0 (loaded from SI) and B (from DX) to OUT (stored at DI); it may
// clobber Y15, the tail mask, which is reloaded from R8. CX = n.
#define MAP8X2(BODY, B, OUT) \
	SUBQ    $8, CX \
	JL      m8tail \
m8loop: \
	VMOVUPS (SI), Y0 \
	VMOVUPS (DX), B \
	BODY \
	VMOVUPS OUT, (DI) \
	ADDQ    $32, SI \
	ADDQ    $32, DX \
	ADDQ    $32, DI \
	SUBQ    $8, CX \
	JGE     m8loop \
m8tail: \
	ADDQ    $8, CX \
	JZ      m8done \
	TAILMASK(CX, R8, Y15) \
	VMASKMOVPS (SI), Y15, Y0 \
	VMASKMOVPS (DX), Y15, B \
	BODY \
	VMOVDQU (R8), Y15 \
	VMASKMOVPS OUT, Y15, (DI) \
m8done: \
	VZEROUPPER \
	RET
