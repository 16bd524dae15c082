//go:build amd64 && !noasm

#include "textflag.h"
#include "optim_amd64.h"

// The Lamb passes in AVX-512, sixteen elements per iteration: float32 work
// on zmm, float64 work on two zmm halves (elements 0–7 and 8–15), following
// lambMomentsAVX2 and lambApplyAVX2 operation by operation. The squares are
// added to the same four-lane ymm accumulators as there, a quarter of the
// sixteen elements at a time and in element order, so lane j still sums
// the elements i with i mod 4 = j in the same order.
//
// Every load of an iteration comes before its stores: the arrays are often
// allocated at the same offset modulo 4 KiB, and a load behind a store to
// an address with the same low twelve bits waits for that store.

// WIDEN: the float32 Z (Y its low half) as float64: its low half in LO,
// its high half in HI (extracted into YHI first).
#define WIDEN(Z, Y, LO, HI, YHI) \
	VCVTPS2PD     Y, LO; \
	VEXTRACTF64X4 $1, Z, YHI; \
	VCVTPS2PD     YHI, HI

// NARROW: the float64 halves LO and HI rounded back into the float32 Z
// (Y its low half, YHI a scratch).
#define NARROW(LO, HI, YHI, Z, Y) \
	VCVTPD2PS    LO, Y; \
	VCVTPD2PS    HI, YHI; \
	VINSERTF64X4 $1, YHI, Z, Z

// DECAYA: with weight decay (flags&1), a = a + wd·p, rounded to float32
// and widened again, for a's float64 halves ALO and AHI (YALO and YAHI
// their ymm) and p's PLO and PHI; either way on at nowd.
#define DECAYA(nowd, PLO, PHI, ALO, YALO, AHI, YAHI) \
	TESTQ       $1, R10; \
	JZ          nowd; \
	VFMADD231PD Z14, PLO, ALO; \
	VFMADD231PD Z14, PHI, AHI; \
	VCVTPD2PS   ALO, YALO; \
	VCVTPD2PS   AHI, YAHI; \
	VCVTPS2PD   YALO, ALO; \
	VCVTPS2PD   YAHI, AHI

// func lambMomentsAVX512(p, g, m, v []float32, acc *[8]float64, k1, wd float64, b1, b2, k2, bc1, bc2, eps float32, flags int)
//
// Registers: Z15 Keep1 and Z14 wd as float64, Z13 β1, Z12 β2, Z11 Keep2,
// Z10 bias correction 1, Z9 bias correction 2, Z8 eps, Y7 and Y6 the p²
// and u² lanes.
TEXT ·lambMomentsAVX512(SB), NOSPLIT, $0-152
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         m_base+48(FP), DX
	MOVQ         v_base+72(FP), R8
	MOVQ         acc+96(FP), R9
	VBROADCASTSD k1+104(FP), Z15
	VBROADCASTSD wd+112(FP), Z14
	VBROADCASTSS b1+120(FP), Z13
	VBROADCASTSS b2+124(FP), Z12
	VBROADCASTSS k2+128(FP), Z11
	VBROADCASTSS bc1+132(FP), Z10
	VBROADCASTSS bc2+136(FP), Z9
	VBROADCASTSS eps+140(FP), Z8
	MOVQ         flags+144(FP), R10
	ACCLOAD
	SHRQ         $4, CX
	JZ           mdone

mloop:
	VMOVUPS       (SI), Z0
	VCVTPS2PD     (SI), Z18   // g, low half
	VCVTPS2PD     32(SI), Z19 // g, high half
	VMULPS        (DX), Z13, Z1 // m·β1
	VMULPS        (R8), Z12, Z3 // v·β2
	VCVTPS2PD     (DI), Z5   // p, low half
	VCVTPS2PD     32(DI), Z2 // p, high half
	WIDEN(Z1, Y1, Z16, Z17, Y17)
	VFMADD231PD   Z15, Z18, Z16 // m·β1 + Keep1·g
	VFMADD231PD   Z15, Z19, Z17
	NARROW(Z16, Z17, Y17, Z1, Y1)
	VMOVUPS       Z1, (DX)
	WIDEN(Z3, Y3, Z20, Z21, Y21)
	VMULPS        Z11, Z0, Z4 // Keep2·g
	WIDEN(Z4, Y4, Z22, Z23, Y23)
	VFMADD231PD   Z22, Z18, Z20 // v·β2 + (Keep2·g)·g
	VFMADD231PD   Z23, Z19, Z21
	NARROW(Z20, Z21, Y21, Z3, Y3)
	VMOVUPS       Z3, (R8)
	VDIVPS        Z9, Z3, Z3 // v / bc2
	VSQRTPS       Z3, Z3
	VADDPS        Z8, Z3, Z3 // + eps
	VDIVPS        Z10, Z1, Z1 // m / bc1
	VDIVPS        Z3, Z1, Z1
	WIDEN(Z1, Y1, Z24, Z25, Y25)
	DECAYA(mnowd, Z5, Z2, Z24, Y24, Z25, Y25)

mnowd:
	VEXTRACTF64X4 $1, Z5, Y26
	VEXTRACTF64X4 $1, Z2, Y27
	VEXTRACTF64X4 $1, Z24, Y28
	VEXTRACTF64X4 $1, Z25, Y29
	VFMADD231PD   Y5, Y5, Y7 // p² lanes, elements 0–3
	VFMADD231PD   Y24, Y24, Y6 // u² lanes
	VFMADD231PD   Y26, Y26, Y7 // elements 4–7
	VFMADD231PD   Y28, Y28, Y6
	VFMADD231PD   Y2, Y2, Y7 // elements 8–11
	VFMADD231PD   Y25, Y25, Y6
	VFMADD231PD   Y27, Y27, Y7 // elements 12–15
	VFMADD231PD   Y29, Y29, Y6
	ADDQ          $64, DI
	ADDQ          $64, SI
	ADDQ          $64, DX
	ADDQ          $64, R8
	DECQ          CX
	JNZ           mloop

mdone:
	ACCSTORE
	VZEROUPPER
	RET

// func lambApplyAVX512(p, m, v []float32, wd, negScale float64, bc1, bc2, eps float32, flags int)
//
// Registers: Z14 wd and Z7 the scale as float64, Z10 and Z9 the bias
// corrections, Z8 eps.
TEXT ·lambApplyAVX512(SB), NOSPLIT, $0-112
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         m_base+24(FP), DX
	MOVQ         v_base+48(FP), R8
	VBROADCASTSD wd+72(FP), Z14
	VBROADCASTSD negScale+80(FP), Z7
	VBROADCASTSS bc1+88(FP), Z10
	VBROADCASTSS bc2+92(FP), Z9
	VBROADCASTSS eps+96(FP), Z8
	MOVQ         flags+104(FP), R10
	SHRQ         $4, CX
	JZ           adone

aloop:
	VMOVUPS       (R8), Z3
	VDIVPS        Z9, Z3, Z3 // v / bc2
	VSQRTPS       Z3, Z3
	VADDPS        Z8, Z3, Z3 // + eps
	VMOVUPS       (DX), Z1
	VDIVPS        Z10, Z1, Z1 // m / bc1
	VDIVPS        Z3, Z1, Z1
	VCVTPS2PD     (DI), Z5   // p, low half
	VCVTPS2PD     32(DI), Z6 // p, high half
	WIDEN(Z1, Y1, Z16, Z17, Y17)
	DECAYA(anowd, Z5, Z6, Z16, Y16, Z17, Y17)

anowd:
	VFMADD231PD Z7, Z16, Z5 // p + scale·u
	VFMADD231PD Z7, Z17, Z6
	VCVTPD2PS   Z5, Y5
	VCVTPD2PS   Z6, Y6
	VMOVUPS     Y5, (DI)
	VMOVUPS     Y6, 32(DI)
	ADDQ        $64, DI
	ADDQ        $64, DX
	ADDQ        $64, R8
	DECQ        CX
	JNZ         aloop

adone:
	VZEROUPPER
	RET
