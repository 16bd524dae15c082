//go:build amd64 && !noasm

#include "textflag.h"
#include "optim_amd64.h"

// func sgdAVX2(p, g, b []float32, negLR, wd, keep float64, m, sign float32, flags int)
//
// One SGD update of len(p) elements (a multiple of 8) in one pass over p, g
// and b, following SGDStep's reference operation by operation: the float32
// products (sign·g, b·m) in float32, each "x + α·y" in float64 (where the
// product of two float32 values is exact, so a fused multiply-add there is
// the reference's multiply and add) rounded once to float32. flags:
// 1 weight decay, 2 momentum, 4 first step (b = d), 8 Nesterov.
//
// The float32 steps run on four-lane xmm halves and the float64 ones on
// ymm, so no lanes are shuffled; each combination of options has its own
// loop without branches, two halves per iteration. Without that the loop
// is compute-bound on one core rather than memory-bound.
//
// Registers: X15 sign, X14 m, Y10 m as float64, Y11 −lr, Y12 keep, Y13 wd;
// each half uses a float32 d, a float64 p and two temporaries.

// Each step below works on one half, four elements at offset o: d in D
// (T as float64), p as float64 in P (XP when rounded), b in B (TB as
// float64). Every step takes all seven so that H0 and H1 can apply any of
// them to the first or the second half.
#define H0(step) step(0, X0, Y4, Y2, X2, X6, Y7)
#define H1(step) step(16, X1, Y5, Y3, X3, X8, Y9)

// LOAD: d = sign·g; p widened.
#define LOAD(o, D, T, P, XP, B, TB) \
	VMULPS    o(SI), X15, D; \
	VCVTPS2PD o(DI), P

// DECAY: d = d + wd·p.
#define DECAY(o, D, T, P, XP, B, TB) \
	VCVTPS2PD   D, T; \
	VFMADD231PD Y13, P, T; \
	VCVTPD2PSY  T, D

// FIRST: b = d, stored (d then serves as b).
#define FIRST(o, D, T, P, XP, B, TB) \
	VMOVUPS D, o(DX)

// MOM: b = b·m + keep·d, stored.
#define MOM(o, D, T, P, XP, B, TB) \
	VMULPS      o(DX), X14, B; \
	VCVTPS2PD   B, TB; \
	VCVTPS2PD   D, T; \
	VFMADD231PD Y12, T, TB; \
	VCVTPD2PSY  TB, B; \
	VMOVUPS     B, o(DX)

// USEB: d = b.
#define USEB(o, D, T, P, XP, B, TB) \
	VMOVAPS B, D

// NEST: d = d + m·b; FNEST the same after FIRST, where b is d.
#define NEST(o, D, T, P, XP, B, TB) \
	VCVTPS2PD   D, T; \
	VCVTPS2PD   B, TB; \
	VFMADD231PD Y10, TB, T; \
	VCVTPD2PSY  T, D

#define FNEST(o, D, T, P, XP, B, TB) NEST(o, D, T, P, XP, D, TB)

// UPDATE: p = p − lr·d, stored.
#define UPDATE(o, D, T, P, XP, B, TB) \
	VCVTPS2PD   D, T; \
	VFMADD231PD Y11, T, P; \
	VCVTPD2PSY  P, XP; \
	VMOVUPS     XP, o(DI)

// NONE: no step, for an option that is off.
#define NONE(o, D, T, P, XP, B, TB)

// ITER: one iteration's steps, all of the first half's and then the
// second's: load, decay, the step on b, the use of b, update.
#define ITER(decay, bstep, useb) \
	H0(LOAD); H0(decay); H0(bstep); H0(useb); H0(UPDATE); \
	H1(LOAD); H1(decay); H1(bstep); H1(useb); H1(UPDATE)

// NEXT / NEXTB: on to the next eight elements at lbl (NEXTB also moving
// b), or to done.
#define NEXT(lbl) \
	ADDQ $32, SI; \
	ADDQ $32, DI; \
	DECQ CX; \
	JNZ  lbl; \
	JMP  done

#define NEXTB(lbl) \
	ADDQ $32, SI; \
	ADDQ $32, DI; \
	ADDQ $32, DX; \
	DECQ CX; \
	JNZ  lbl; \
	JMP  done

TEXT ·sgdAVX2(SB), NOSPLIT, $0-112
	MOVQ         p_base+0(FP), DI
	MOVQ         p_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         b_base+48(FP), DX
	VBROADCASTSD negLR+72(FP), Y11
	VBROADCASTSD wd+80(FP), Y13
	VBROADCASTSD keep+88(FP), Y12
	VBROADCASTSS m+96(FP), X14
	VBROADCASTSS sign+100(FP), X15
	MOVQ         flags+104(FP), R10
	VCVTPS2PD    X14, Y10
	SHRQ         $3, CX
	JZ           done
	ANDQ         $15, R10

	CASE(0, plain0)
	CASE(6, first0)
	CASE(2, mom0)
	CASE(14, firstnest0)
	CASE(10, nest0)
	CASE(1, plain1)
	CASE(7, first1)
	CASE(3, mom1)
	CASE(15, firstnest1)
	CASE(11, nest1)
	JMP done

// The loops, one per combination of options: ITER(decay, the step on b,
// the use of b).
plain0:     ITER(NONE, NONE, NONE);    NEXT(plain0)
first0:     ITER(NONE, FIRST, NONE);   NEXTB(first0)
mom0:       ITER(NONE, MOM, USEB);     NEXTB(mom0)
firstnest0: ITER(NONE, FIRST, FNEST);  NEXTB(firstnest0)
nest0:      ITER(NONE, MOM, NEST);     NEXTB(nest0)
plain1:     ITER(DECAY, NONE, NONE);   NEXT(plain1)
first1:     ITER(DECAY, FIRST, NONE);  NEXTB(first1)
mom1:       ITER(DECAY, MOM, USEB);    NEXTB(mom1)
firstnest1: ITER(DECAY, FIRST, FNEST); NEXTB(firstnest1)
nest1:      ITER(DECAY, MOM, NEST);    NEXTB(nest1)

done:
	VZEROUPPER
	RET
