// Steps shared by the optimizer kernels (sgd, adam, adagrad, lamb and their
// split-bfloat16 forms). Each kernel's header says which register holds
// what; a macro here names in its arguments the registers that differ
// between the kernels using it and fixes the ones they agree on. The
// arguments a kernel reads from its frame stay in the kernel's own TEXT
// body, where go vet's asmdecl check sees them.

// CASE: jump to lbl when the option flags in R10 are v.
#define CASE(v, lbl) CMPQ R10, $v; JEQ lbl

// JOINBF16: P = top<<16 | bottom, eight float32 from two rows of uint16
// (T a scratch).
#define JOINBF16(top, bottom, P, T) \
	VPMOVZXWD top, P; \
	VPMOVZXWD bottom, T; \
	VPSLLD    $16, P, P; \
	VPOR      T, P, P

// The split kernels (split_*_amd64.s) walk the element index AX up to CX
// over the master's top (DI) and bottom (R8) halves and a bfloat16 (SI) or
// float32 (R9) gradient, with Y15 the gradient's sign, Y0 d and Y3 a
// scratch.

// LOADMASTER: P = the joined float32 master.
#define LOADMASTER(P) JOINBF16((DI)(AX*2), (R8)(AX*2), P, Y3)

// LOADG16 / LOADG32: d = sign·g, g widened exactly from bfloat16 or read
// as float32.
#define LOADG16 \
	VPMOVZXWD (SI)(AX*2), Y0; \
	VPSLLD    $16, Y0, Y0; \
	VMULPS    Y0, Y15, Y0

#define LOADG32 VMULPS (R9)(AX*4), Y15, Y0

// SPLITDECAY: d = d + wd·p for p in Y1 and wd as float64 in Z6 (Z2, Z3
// scratch).
#define SPLITDECAY \
	VCVTPS2PD   Y0, Z2; \
	VCVTPS2PD   Y1, Z3; \
	VFMADD231PD Z6, Z3, Z2; \
	VCVTPD2PS   Z2, Y0

// STOREMASTER: split the float32 master P (XP its low half) back into top
// and bottom.
#define STOREMASTER(P, XP) \
	VPSRLD  $16, P, Y3; \
	VPMOVDW Y3, X3; \
	VPMOVDW P, XP; \
	VMOVDQU X3, (DI)(AX*2); \
	VMOVDQU XP, (R8)(AX*2)

// NEXT8: on to the next eight elements at lbl, or to done.
#define NEXT8(lbl) \
	ADDQ $8, AX; \
	CMPQ AX, CX; \
	JB   lbl; \
	JMP  done

// The four-lane AVX2 Adam and Adagrad kernels (adam_amd64.s,
// adagrad_amd64.s) keep d in X0, p in X1, the sign in X15, wd as float64
// in Y6 and the option flags in R10.

// LOADDECAY: d = sign·g and p loaded; then, with weight decay (flags&1),
// d = d + wd·p in float64 (Y2, Y3 scratch); either way on at nowd.
#define LOADDECAY(nowd) \
	VMULPS      (SI), X15, X0; \
	VMOVUPS     (DI), X1; \
	TESTQ       $1, R10; \
	JZ          nowd; \
	VCVTPS2PD   X0, Y2; \
	VCVTPS2PD   X1, Y3; \
	VFMADD231PD Y6, Y3, Y2; \
	VCVTPD2PSY  Y2, X0

// The Lamb kernels (lamb_amd64.s, lamb_avx512_amd64.s) sum p² and u² into
// four float64 lanes each, Y7 and Y6, carried in acc (R9) between calls.

// ACCLOAD / ACCSTORE: Y7 and Y6 from / to acc.
#define ACCLOAD \
	VMOVUPD (R9), Y7; \
	VMOVUPD 32(R9), Y6

#define ACCSTORE \
	VMOVUPD Y7, (R9); \
	VMOVUPD Y6, 32(R9)
