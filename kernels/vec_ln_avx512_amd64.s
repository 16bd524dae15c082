//go:build amd64 && !noasm

#include "textflag.h"
#include "vec_amd64.h"

// AVX-512 layer-norm row primitives; see vec.go for what each computes and
// vec_amd64.s for the AVX2 versions they follow. Float32 data is widened
// to float64 eight lanes at a time (VCVTPS2PD from 32 bytes into a Z
// register), the maps do the reference's float64 operations one by one in
// its order (no fused multiply-add), narrow with VCVTPD2PS Z→Y and store
// 32 bytes. Main loops take 16 elements (32 for sum), then one step of 8,
// then the last 1…7 elements run the same step under the mask K1 (masked
// loads do not fault past a slice, masked stores write nothing there).
// Elements are indexed by AX (float32 at (p)(AX*4), float64 at (p)(AX*8)).
// Register use: AX-DX, SI, DI, R8-R12, Z0-Z14, K1.

// LNTAILMASK: K1 = the mask of the first CX (1…7) lanes (CX is clobbered).
#define LNTAILMASK MOVL $1, R11; SHLL CX, R11; DECL R11; KMOVW R11, K1

// LNLOOP16(top, step8, STEP16): run STEP16 for 16 elements at a time while
// 16 or more are left (CX counts them, AX indexes them, R10 scratch), then
// leave CX = what is left (< 16) and go on at step8.
#define LNLOOP16(top, step8, STEP16) \
	XORL AX, AX; MOVQ CX, R10; ANDQ $-16, R10; JZ step8; \
top: \
	STEP16; \
	ADDQ $16, AX; CMPQ AX, R10; JB top; \
step8: \
	SUBQ AX, CX

// REDUCEZ(z, y, x, t): x[0] = the sum of z's eight float64 (y, x its lower
// halves; t a Y scratch register whose X name is tx).
#define REDUCEZ(z, y, x, t, tx) VEXTRACTF64X4 $1, z, t; VADDPD t, y, y; HSUMPD(y, x, tx)

// func sumAVX512(x []float32) float64
TEXT ·sumAVX512(SB), NOSPLIT, $0-32
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	XORL AX, AX
	MOVQ CX, R10
	ANDQ $-32, R10
	JZ   su8
su32:
	VCVTPS2PD (SI)(AX*4), Z4
	VCVTPS2PD 32(SI)(AX*4), Z5
	VCVTPS2PD 64(SI)(AX*4), Z6
	VCVTPS2PD 96(SI)(AX*4), Z7
	VADDPD Z4, Z0, Z0
	VADDPD Z5, Z1, Z1
	VADDPD Z6, Z2, Z2
	VADDPD Z7, Z3, Z3
	ADDQ $32, AX
	CMPQ AX, R10
	JB   su32
su8:
	SUBQ AX, CX
su8loop:
	BELOW(CX, 8, sutail)
	VCVTPS2PD (SI)(AX*4), Z4
	VADDPD Z4, Z0, Z0
	ADDQ $8, AX
	AGAIN(CX, 8, su8loop)
sutail:
	IFZERO(CX, sured)
	LNTAILMASK
	VCVTPS2PD.Z (SI)(AX*4), K1, Z4
	VADDPD Z4, Z1, K1, Z1
sured:
	VADDPD Z1, Z0, Z0
	VADDPD Z3, Z2, Z2
	VADDPD Z2, Z0, Z0
	REDUCEZ(Z0, Y0, X0, Y1, X1)
	VMOVSD X0, ret+24(FP)
	VRET

// func sqDevAVX512(x []float32, m float64) float64
TEXT ·sqDevAVX512(SB), NOSPLIT, $0-40
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	VBROADCASTSD m+24(FP), Z8
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	XORL AX, AX
	MOVQ CX, R10
	ANDQ $-32, R10
	JZ   sq8
sq32:
	VCVTPS2PD (SI)(AX*4), Z4
	VCVTPS2PD 32(SI)(AX*4), Z5
	VCVTPS2PD 64(SI)(AX*4), Z6
	VCVTPS2PD 96(SI)(AX*4), Z7
	VSUBPD Z8, Z4, Z4
	VSUBPD Z8, Z5, Z5
	VSUBPD Z8, Z6, Z6
	VSUBPD Z8, Z7, Z7
	VFMADD231PD Z4, Z4, Z0
	VFMADD231PD Z5, Z5, Z1
	VFMADD231PD Z6, Z6, Z2
	VFMADD231PD Z7, Z7, Z3
	ADDQ $32, AX
	CMPQ AX, R10
	JB   sq32
sq8:
	SUBQ AX, CX
sq8loop:
	BELOW(CX, 8, sqtail)
	VCVTPS2PD (SI)(AX*4), Z4
	VSUBPD Z8, Z4, Z4
	VFMADD231PD Z4, Z4, Z0
	ADDQ $8, AX
	AGAIN(CX, 8, sq8loop)
sqtail:
	IFZERO(CX, sqred)
	LNTAILMASK
	VCVTPS2PD.Z (SI)(AX*4), K1, Z4
	VSUBPD Z8, Z4, Z4
	VFMADD231PD Z4, Z4, K1, Z1
sqred:
	VADDPD Z1, Z0, Z0
	VADDPD Z3, Z2, Z2
	VADDPD Z2, Z0, Z0
	REDUCEZ(Z0, Y0, X0, Y1, X1)
	VMOVSD X0, ret+32(FP)
	VRET

// GWSTEP(o, d, v, u): 8 elements at byte offset o: d = dy·w, v = x − m;
// Σg (sg) += d, Σg·(x−m) (sgx) += d·v.
#define GWSTEP(o, d, v, u, sg, sgx) \
	VCVTPS2PD o(SI)(AX*4), d; \
	VCVTPS2PD o(BX)(AX*4), u; \
	VMULPD u, d, d; \
	VCVTPS2PD o(DX)(AX*4), v; \
	VSUBPD Z8, v, v; \
	VADDPD d, sg, sg; \
	VFMADD231PD d, v, sgx

// func gradSumsWAVX512(dy, w, x []float32, m float64) (sg, sgx float64)
TEXT ·gradSumsWAVX512(SB), NOSPLIT, $0-96
	MOVQ dy_base+0(FP), SI
	MOVQ dy_len+8(FP), CX
	MOVQ w_base+24(FP), BX
	MOVQ x_base+48(FP), DX
	VBROADCASTSD m+72(FP), Z8
	VXORPD Z0, Z0, Z0 // Σg
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2 // Σg·(x−m)
	VXORPD Z3, Z3, Z3
	LNLOOP16(gw16, gw8, GWSTEP(0, Z4, Z6, Z9, Z0, Z2); GWSTEP(32, Z5, Z7, Z10, Z1, Z3))
	BELOW(CX, 8, gwtail)
	GWSTEP(0, Z4, Z6, Z9, Z0, Z2)
	ADDQ $8, AX
	SUBQ $8, CX
gwtail:
	IFZERO(CX, gwred)
	LNTAILMASK
	VCVTPS2PD.Z (SI)(AX*4), K1, Z4
	VCVTPS2PD.Z (BX)(AX*4), K1, Z9
	VMULPD Z9, Z4, Z4
	VCVTPS2PD.Z (DX)(AX*4), K1, Z6
	VSUBPD Z8, Z6, Z6
	VADDPD Z4, Z1, K1, Z1
	VFMADD231PD Z4, Z6, K1, Z3
gwred:
	VADDPD Z1, Z0, Z0
	VADDPD Z3, Z2, Z2
	REDUCEZ(Z0, Y0, X0, Y1, X1)
	REDUCEZ(Z2, Y2, X2, Y3, X3)
	VMOVSD X0, sg+80(FP)
	VMOVSD X2, sgx+88(FP)
	VRET

// NSTEP(o, a, ay): y[8 at byte offset o] = float32((x − m)·rs).
#define NSTEP(o, a, ay) \
	VCVTPS2PD o(SI)(AX*4), a; \
	VSUBPD Z8, a, a; \
	VMULPD Z9, a, a; \
	VCVTPD2PS a, ay; \
	VMOVUPS ay, o(DI)(AX*4)

// func lnNormAVX512(y, x []float32, m, rs float64)
TEXT ·lnNormAVX512(SB), NOSPLIT, $0-64
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	VBROADCASTSD m+48(FP), Z8
	VBROADCASTSD rs+56(FP), Z9
	LNLOOP16(ln16, ln8, NSTEP(0, Z0, Y0); NSTEP(32, Z1, Y1))
	BELOW(CX, 8, lntail)
	NSTEP(0, Z0, Y0)
	ADDQ $8, AX
	SUBQ $8, CX
lntail:
	IFZERO(CX, lndone)
	LNTAILMASK
	VCVTPS2PD.Z (SI)(AX*4), K1, Z0
	VSUBPD Z8, Z0, Z0
	VMULPD Z9, Z0, Z0
	VCVTPD2PS Z0, Y0
	VMOVUPS Y0, K1, (DI)(AX*4)
lndone:
	VRET

// ASTEP(o, a, ay, w, b): y[8 at byte offset o] = float32((x − m)·rs·w + b).
#define ASTEP(o, a, ay, w, b) \
	VCVTPS2PD o(SI)(AX*4), a; \
	VSUBPD Z8, a, a; \
	VMULPD Z9, a, a; \
	VCVTPS2PD o(BX)(AX*4), w; \
	VCVTPS2PD o(DX)(AX*4), b; \
	VMULPD w, a, a; \
	VADDPD b, a, a; \
	VCVTPD2PS a, ay; \
	VMOVUPS ay, o(DI)(AX*4)

// func lnApplyAVX512(y, x, w, b []float32, m, rs float64)
TEXT ·lnApplyAVX512(SB), NOSPLIT, $0-112
	MOVQ y_base+0(FP), DI
	MOVQ y_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	MOVQ w_base+48(FP), BX
	MOVQ b_base+72(FP), DX
	VBROADCASTSD m+96(FP), Z8
	VBROADCASTSD rs+104(FP), Z9
	LNLOOP16(la16, la8, ASTEP(0, Z0, Y0, Z2, Z4); ASTEP(32, Z1, Y1, Z3, Z5))
	BELOW(CX, 8, latail)
	ASTEP(0, Z0, Y0, Z2, Z4)
	ADDQ $8, AX
	SUBQ $8, CX
latail:
	IFZERO(CX, ladone)
	LNTAILMASK
	VCVTPS2PD.Z (SI)(AX*4), K1, Z0
	VSUBPD Z8, Z0, Z0
	VMULPD Z9, Z0, Z0
	VCVTPS2PD.Z (BX)(AX*4), K1, Z2
	VCVTPS2PD.Z (DX)(AX*4), K1, Z4
	VMULPD Z2, Z0, Z0
	VADDPD Z4, Z0, Z0
	VCVTPD2PS Z0, Y0
	VMOVUPS Y0, K1, (DI)(AX*4)
ladone:
	VRET

// BSTEP(o, g, gy, w, t): dx[8 at byte offset o] =
// float32(rs·((dy·w − s1) − (x − m)·rs·s2)).
#define BSTEP(o, g, gy, w, t) \
	VCVTPS2PD o(SI)(AX*4), g; \
	VCVTPS2PD o(BX)(AX*4), w; \
	VMULPD w, g, g; \
	VSUBPD Z10, g, g; \
	VCVTPS2PD o(DX)(AX*4), t; \
	VSUBPD Z8, t, t; \
	VMULPD Z9, t, t; \
	VMULPD Z11, t, t; \
	VSUBPD t, g, g; \
	VMULPD Z9, g, g; \
	VCVTPD2PS g, gy; \
	VMOVUPS gy, o(DI)(AX*4)

// func lnBackwardAVX512(dx, dy, w, x []float32, m, rs, s1, s2 float64)
TEXT ·lnBackwardAVX512(SB), NOSPLIT, $0-128
	MOVQ dx_base+0(FP), DI
	MOVQ dx_len+8(FP), CX
	MOVQ dy_base+24(FP), SI
	MOVQ w_base+48(FP), BX
	MOVQ x_base+72(FP), DX
	VBROADCASTSD m+96(FP), Z8
	VBROADCASTSD rs+104(FP), Z9
	VBROADCASTSD s1+112(FP), Z10
	VBROADCASTSD s2+120(FP), Z11
	LNLOOP16(lb16, lb8, BSTEP(0, Z0, Y0, Z2, Z4); BSTEP(32, Z1, Y1, Z3, Z5))
	BELOW(CX, 8, lbtail)
	BSTEP(0, Z0, Y0, Z2, Z4)
	ADDQ $8, AX
	SUBQ $8, CX
lbtail:
	IFZERO(CX, lbdone)
	LNTAILMASK
	VCVTPS2PD.Z (SI)(AX*4), K1, Z0
	VCVTPS2PD.Z (BX)(AX*4), K1, Z2
	VMULPD Z2, Z0, Z0
	VSUBPD Z10, Z0, Z0
	VCVTPS2PD.Z (DX)(AX*4), K1, Z4
	VSUBPD Z8, Z4, Z4
	VMULPD Z9, Z4, Z4
	VMULPD Z11, Z4, Z4
	VSUBPD Z4, Z0, Z0
	VMULPD Z9, Z0, Z0
	VCVTPD2PS Z0, Y0
	VMOVUPS Y0, K1, (DI)(AX*4)
lbdone:
	VRET

// CSTEP(o4, o8, t, d): for 8 elements at byte offsets o4 (float32) and o8
// (float64): aw += dy·((x − m)·rs); ab += dy.
#define CSTEP(o4, o8, t, d) \
	VCVTPS2PD o4(DX)(AX*4), t; \
	VSUBPD Z8, t, t; \
	VMULPD Z9, t, t; \
	VCVTPS2PD o4(SI)(AX*4), d; \
	VMULPD d, t, t; \
	VADDPD o8(DI)(AX*8), t, t; \
	VMOVUPD t, o8(DI)(AX*8); \
	VADDPD o8(R8)(AX*8), d, d; \
	VMOVUPD d, o8(R8)(AX*8)

// func lnColAccAVX512(aw, ab []float64, dy, x []float32, m, rs float64)
TEXT ·lnColAccAVX512(SB), NOSPLIT, $0-112
	MOVQ aw_base+0(FP), DI
	MOVQ aw_len+8(FP), CX
	MOVQ ab_base+24(FP), R8
	MOVQ dy_base+48(FP), SI
	MOVQ x_base+72(FP), DX
	VBROADCASTSD m+96(FP), Z8
	VBROADCASTSD rs+104(FP), Z9
	LNLOOP16(lc16, lc8, CSTEP(0, 0, Z0, Z2); CSTEP(32, 64, Z1, Z3))
	BELOW(CX, 8, lctail)
	CSTEP(0, 0, Z0, Z2)
	ADDQ $8, AX
	SUBQ $8, CX
lctail:
	IFZERO(CX, lcdone)
	LNTAILMASK
	VCVTPS2PD.Z (DX)(AX*4), K1, Z0
	VSUBPD Z8, Z0, Z0
	VMULPD Z9, Z0, Z0
	VCVTPS2PD.Z (SI)(AX*4), K1, Z2
	VMULPD Z2, Z0, Z0
	VADDPD.Z (DI)(AX*8), Z0, K1, Z0
	VMOVUPD Z0, K1, (DI)(AX*8)
	VADDPD.Z (R8)(AX*8), Z2, K1, Z2
	VMOVUPD Z2, K1, (R8)(AX*8)
lcdone:
	VRET

// KSTEP(o4, o8, d, g, gy, t, u): for 8 elements at byte offsets o4
// (float32) and o8 (float64), with t = (x − m)·rs:
// dx = float32(rs·((dy·w − s1) − t·s2)); aw += dy·t; ab += dy.
#define KSTEP(o4, o8, d, g, gy, t, u) \
	VCVTPS2PD o4(SI)(AX*4), d; \
	VCVTPS2PD o4(BX)(AX*4), g; \
	VMULPD d, g, g; \
	VSUBPD Z10, g, g; \
	VCVTPS2PD o4(DX)(AX*4), t; \
	VSUBPD Z8, t, t; \
	VMULPD Z9, t, t; \
	VMULPD Z11, t, u; \
	VSUBPD u, g, g; \
	VMULPD Z9, g, g; \
	VCVTPD2PS g, gy; \
	VMOVUPS gy, o4(DI)(AX*4); \
	VMULPD t, d, u; \
	VADDPD o8(R8)(AX*8), u, u; \
	VMOVUPD u, o8(R8)(AX*8); \
	VADDPD o8(R9)(AX*8), d, d; \
	VMOVUPD d, o8(R9)(AX*8)

// func lnBackwardAccAVX512(dx, dy, w, x []float32, m, rs, s1, s2 float64, aw, ab []float64)
TEXT ·lnBackwardAccAVX512(SB), NOSPLIT, $0-176
	MOVQ dx_base+0(FP), DI
	MOVQ dx_len+8(FP), CX
	MOVQ dy_base+24(FP), SI
	MOVQ w_base+48(FP), BX
	MOVQ x_base+72(FP), DX
	VBROADCASTSD m+96(FP), Z8
	VBROADCASTSD rs+104(FP), Z9
	VBROADCASTSD s1+112(FP), Z10
	VBROADCASTSD s2+120(FP), Z11
	MOVQ aw_base+128(FP), R8
	MOVQ ab_base+152(FP), R9
	LNLOOP16(lk16, lk8, KSTEP(0, 0, Z0, Z2, Y2, Z4, Z6); KSTEP(32, 64, Z1, Z3, Y3, Z5, Z7))
	BELOW(CX, 8, lktail)
	KSTEP(0, 0, Z0, Z2, Y2, Z4, Z6)
	ADDQ $8, AX
	SUBQ $8, CX
lktail:
	IFZERO(CX, lkdone)
	LNTAILMASK
	VCVTPS2PD.Z (SI)(AX*4), K1, Z0
	VCVTPS2PD.Z (BX)(AX*4), K1, Z2
	VMULPD Z0, Z2, Z2
	VSUBPD Z10, Z2, Z2
	VCVTPS2PD.Z (DX)(AX*4), K1, Z4
	VSUBPD Z8, Z4, Z4
	VMULPD Z9, Z4, Z4
	VMULPD Z11, Z4, Z6
	VSUBPD Z6, Z2, Z2
	VMULPD Z9, Z2, Z2
	VCVTPD2PS Z2, Y2
	VMOVUPS Y2, K1, (DI)(AX*4)
	VMULPD Z4, Z0, Z6
	VADDPD.Z (R8)(AX*8), Z6, K1, Z6
	VMOVUPD Z6, K1, (R8)(AX*8)
	VADDPD.Z (R9)(AX*8), Z0, K1, Z0
	VMOVUPD Z0, K1, (R9)(AX*8)
lkdone:
	VRET
