// The AVX-512 column primitives, written once for float32 rows
// (vec_amd64.s) and bfloat16 rows (vec_bf16_amd64.s), for channel counts
// that are multiples of 16 (the Go wrappers take the AVX2 forms of
// colwalk_amd64.h for the others): blocks of 16 channels, eight float64
// lanes per register, each lane doing the AVX2 form's operations in its
// order, so every bit is the same. Include after vec_amd64.h and
// colwalk_amd64.h (COLROWS and COLNEXT walk the rows).
//
// Element macros, for ES-byte elements:
//   ZQ(off, p, y, z): z = the eight elements at off(p) widened to float64
//     (y is z's low half, free for the widening to use).
//   ZP(p): narrow the 16 float64 of Z0, Z1 and store them as elements at
//     (p), Z2 and Z3 scratch.

// ZQ8(ZQ, ES, p): Z16–Z23 = the 64 elements at (p) widened to float64.
#define ZQ8(ZQ, ES, p) \
	ZQ(0, p, Y16, Z16); ZQ(8*ES, p, Y17, Z17); ZQ(16*ES, p, Y18, Z18); ZQ(24*ES, p, Y19, Z19); \
	ZQ(32*ES, p, Y20, Z20); ZQ(40*ES, p, Y21, Z21); ZQ(48*ES, p, Y22, Z22); ZQ(56*ES, p, Y23, Z23)

// LDZ8(p), STZ8(p): Z0–Z7 = the 64 float64 at (p), and back.
#define LDZ8(p) \
	VMOVUPD (p), Z0; VMOVUPD 64(p), Z1; VMOVUPD 128(p), Z2; VMOVUPD 192(p), Z3; \
	VMOVUPD 256(p), Z4; VMOVUPD 320(p), Z5; VMOVUPD 384(p), Z6; VMOVUPD 448(p), Z7
#define STZ8(p) \
	VMOVUPD Z0, (p); VMOVUPD Z1, 64(p); VMOVUPD Z2, 128(p); VMOVUPD Z3, 192(p); \
	VMOVUPD Z4, 256(p); VMOVUPD Z5, 320(p); VMOVUPD Z6, 384(p); VMOVUPD Z7, 448(p)

// ZCOLSUM: s[c] += Σ_r x[r][c], with s in DI, its length in BX, x in SI,
// rows in CX and the row step in R8. 64 channels at a time while they
// last: eight sums in flight, where one block's two waited on each other's
// latency, row by row.
#define ZCOLSUM(ZQ, ES, b64, r64, b16, r16, done) \
b64:                                        \
	CMPQ BX, $64;                           \
	JB b16;                                 \
	LDZ8(DI);                               \
	COLROWS;                                \
r64:                                        \
	ZQ8(ZQ, ES, R9);                        \
	VADDPD Z16, Z0, Z0;                     \
	VADDPD Z17, Z1, Z1;                     \
	VADDPD Z18, Z2, Z2;                     \
	VADDPD Z19, Z3, Z3;                     \
	VADDPD Z20, Z4, Z4;                     \
	VADDPD Z21, Z5, Z5;                     \
	VADDPD Z22, Z6, Z6;                     \
	VADDPD Z23, Z7, Z7;                     \
	COLNEXT(r64);                           \
	STZ8(DI);                               \
	ADDQ $512, DI;                          \
	ADDQ $(64*ES), SI;                      \
	AGAIN(BX, 64, b64);                     \
b16:                                        \
	IFZERO(BX, done);                       \
	VMOVUPD (DI), Z0;                       \
	VMOVUPD 64(DI), Z1;                     \
	COLROWS;                                \
r16:                                        \
	ZQ(0, R9, Y4, Z4);                      \
	ZQ(8*ES, R9, Y5, Z5);                   \
	VADDPD Z4, Z0, Z0;                      \
	VADDPD Z5, Z1, Z1;                      \
	COLNEXT(r16);                           \
	VMOVUPD Z0, (DI);                       \
	VMOVUPD Z1, 64(DI);                     \
	ADDQ $128, DI;                          \
	ADDQ $(16*ES), SI;                      \
	AGAIN(BX, 16, b16)

// ZCOLSQDEV: s[c] += Σ_r (x[r][c] − m[c])², registers as ZCOLSUM's, m in
// DX.
#define ZCOLSQDEV(ZQ, ES, b64, r64, b16, r16, done) \
b64:                                        \
	CMPQ BX, $64;                           \
	JB b16;                                 \
	LDZ8(DI);                               \
	VMOVUPD (DX), Z8;                       \
	VMOVUPD 64(DX), Z9;                     \
	VMOVUPD 128(DX), Z10;                   \
	VMOVUPD 192(DX), Z11;                   \
	VMOVUPD 256(DX), Z12;                   \
	VMOVUPD 320(DX), Z13;                   \
	VMOVUPD 384(DX), Z14;                   \
	VMOVUPD 448(DX), Z15;                   \
	COLROWS;                                \
r64:                                        \
	ZQ8(ZQ, ES, R9);                        \
	VSUBPD Z8, Z16, Z16;                    \
	VSUBPD Z9, Z17, Z17;                    \
	VSUBPD Z10, Z18, Z18;                   \
	VSUBPD Z11, Z19, Z19;                   \
	VSUBPD Z12, Z20, Z20;                   \
	VSUBPD Z13, Z21, Z21;                   \
	VSUBPD Z14, Z22, Z22;                   \
	VSUBPD Z15, Z23, Z23;                   \
	VFMADD231PD Z16, Z16, Z0;               \
	VFMADD231PD Z17, Z17, Z1;               \
	VFMADD231PD Z18, Z18, Z2;               \
	VFMADD231PD Z19, Z19, Z3;               \
	VFMADD231PD Z20, Z20, Z4;               \
	VFMADD231PD Z21, Z21, Z5;               \
	VFMADD231PD Z22, Z22, Z6;               \
	VFMADD231PD Z23, Z23, Z7;               \
	COLNEXT(r64);                           \
	STZ8(DI);                               \
	ADDQ2(512, DI, DX);                     \
	ADDQ $(64*ES), SI;                      \
	AGAIN(BX, 64, b64);                     \
b16:                                        \
	IFZERO(BX, done);                       \
	VMOVUPD (DI), Z0;                       \
	VMOVUPD 64(DI), Z1;                     \
	VMOVUPD (DX), Z8;                       \
	VMOVUPD 64(DX), Z9;                     \
	COLROWS;                                \
r16:                                        \
	ZQ(0, R9, Y4, Z4);                      \
	ZQ(8*ES, R9, Y5, Z5);                   \
	VSUBPD Z8, Z4, Z4;                      \
	VSUBPD Z9, Z5, Z5;                      \
	VFMADD231PD Z4, Z4, Z0;                 \
	VFMADD231PD Z5, Z5, Z1;                 \
	COLNEXT(r16);                           \
	VMOVUPD Z0, (DI);                       \
	VMOVUPD Z1, 64(DI);                     \
	ADDQ2(128, DI, DX);                     \
	ADDQ $(16*ES), SI;                      \
	AGAIN(BX, 16, b16)

// ZCOLGRADSUMS: s1[c] += Σ_r g[r][c], s2[c] += Σ_r g[r][c]·(x[r][c] −
// m[c]), with s1 in DI (length BX), s2 in R11, g in SI, x in R12, m in DX,
// rows in CX and the row step in R8.
#define ZCOLGRADSUMS(ZQ, ES, b16, r16, done) \
b16:                                        \
	IFZERO(BX, done);                       \
	VMOVUPD (DI), Z0;                       \
	VMOVUPD 64(DI), Z1;                     \
	VMOVUPD (R11), Z2;                      \
	VMOVUPD 64(R11), Z3;                    \
	VMOVUPD (DX), Z8;                       \
	VMOVUPD 64(DX), Z9;                     \
	COLROWS2;                               \
r16:                                        \
	ZQ(0, R9, Y12, Z12);                    \
	ZQ(8*ES, R9, Y13, Z13);                 \
	ZQ(0, R13, Y14, Z14);                   \
	ZQ(8*ES, R13, Y15, Z15);                \
	VSUBPD Z8, Z14, Z14;                    \
	VSUBPD Z9, Z15, Z15;                    \
	VADDPD Z12, Z0, Z0;                     \
	VADDPD Z13, Z1, Z1;                     \
	VFMADD231PD Z12, Z14, Z2;               \
	VFMADD231PD Z13, Z15, Z3;               \
	COLNEXT2(r16);                          \
	VMOVUPD Z0, (DI);                       \
	VMOVUPD Z1, 64(DI);                     \
	VMOVUPD Z2, (R11);                      \
	VMOVUPD Z3, 64(R11);                    \
	ADDQ3(128, DI, R11, DX);                \
	ADDQ2(16*ES, SI, R12);                  \
	AGAIN(BX, 16, b16)

// ZCOLAFFINE: y[r][c] = a[c]·x[r][c] + b[c], with y in DI, x in SI, a in
// R11 (length R12), b in R13 and rows in CX (BX, DX and R8 walk a row).
#define ZCOLAFFINE(ZQ, ZP, ES, row, b16, next) \
row:                                        \
	MOVQ R11, BX;                           \
	MOVQ R13, DX;                           \
	MOVQ R12, R8;                           \
b16:                                        \
	IFZERO(R8, next);                       \
	ZQ(0, SI, Y0, Z0);                      \
	ZQ(8*ES, SI, Y1, Z1);                   \
	VMULPD (BX), Z0, Z0;                    \
	VMULPD 64(BX), Z1, Z1;                  \
	VADDPD (DX), Z0, Z0;                    \
	VADDPD 64(DX), Z1, Z1;                  \
	ZP(DI);                                 \
	ADDQ2(16*ES, SI, DI);                   \
	ADDQ2(128, BX, DX);                     \
	AGAIN(R8, 16, b16);                     \
next:                                       \
	DECJNZ(CX, row)

// ZCOLAFFINE2: y[r][c] = p[c]·u[r][c] + q[c]·v[r][c] + r[c], with y in DI,
// u in SI, v in R8, p in R11 (length R12) and rows in CX (BX, R9, DX and
// R10 walk a row; q and r are reloaded from the arguments).
#define ZCOLAFFINE2(ZQ, ZP, ES, row, b16, next) \
row:                                        \
	MOVQ R11, BX;                           \
	MOVQ q_base+96(FP), R9;                 \
	MOVQ r_base+120(FP), DX;                \
	MOVQ R12, R10;                          \
b16:                                        \
	IFZERO(R10, next);                      \
	ZQ(0, SI, Y0, Z0);                      \
	ZQ(8*ES, SI, Y1, Z1);                   \
	ZQ(0, R8, Y4, Z4);                      \
	ZQ(8*ES, R8, Y6, Z6);                   \
	VMULPD (BX), Z0, Z0;                    \
	VMULPD 64(BX), Z1, Z1;                  \
	VMULPD (R9), Z4, Z4;                    \
	VMULPD 64(R9), Z6, Z6;                  \
	VADDPD Z4, Z0, Z0;                      \
	VADDPD Z6, Z1, Z1;                      \
	VADDPD (DX), Z0, Z0;                    \
	VADDPD 64(DX), Z1, Z1;                  \
	ZP(DI);                                 \
	ADDQ3(16*ES, SI, R8, DI);               \
	ADDQ3(128, BX, R9, DX);                 \
	AGAIN(R10, 16, b16);                    \
next:                                       \
	DECJNZ(CX, row)
