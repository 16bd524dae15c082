// Steps shared by the AVX2 row kernels (vec_amd64.s, stream_amd64.s,
// convert_amd64.s, peak_amd64.s). Each expands to exactly the instructions
// it replaces, in the same order, so the machine code is what the spelled
// out sequences gave. Unrolled steps keep one instruction kind per group
// (all loads, then all adds, ...) rather than interleaving lanes.

// QUAD4(name, bits): a 32-byte read-only constant, one 64-bit pattern
// four times, usable as a memory operand of packed instructions.
#define QUAD4(name, bits) DATA name<>+0(SB)/8, bits; DATA name<>+8(SB)/8, bits; DATA name<>+16(SB)/8, bits; DATA name<>+24(SB)/8, bits; GLOBL name<>(SB), RODATA|NOPTR, $32

// Loop control.

// BELOW(r, n, out): go to out when r < n.
#define BELOW(r, n, out) CMPQ r, $n; JL out
// IFZERO(r, out): go to out when r is 0.
#define IFZERO(r, out) TESTQ r, r; JZ out
// AGAIN(r, n, top): count n elements off r and go back to top.
#define AGAIN(r, n, top) SUBQ $n, r; JMP top
// AGAIN1(r, top): count one element off r and go back to top.
#define AGAIN1(r, top) DECQ r; JMP top
// DECJNZ(r, top): count r down and go back to top while it is not 0.
#define DECJNZ(r, top) DECQ r; JNZ top
// VRET: clear the YMM upper halves (no AVX-SSE transition stall in the
// caller) and return.
#define VRET VZEROUPPER; RET
// ADDQ2(n, a, b), ADDQ3(n, a, b, c): advance each pointer by n bytes.
#define ADDQ2(n, a, b) ADDQ $n, a; ADDQ $n, b
#define ADDQ3(n, a, b, c) ADDQ $n, a; ADDQ $n, b; ADDQ $n, c

// Unrolled vector steps over registers a, b (, c, d).

// ZERO4(op, a, b, c, d): a, b, c, d = 0 (op is VXORPD or VXORPS).
#define ZERO4(op, a, b, c, d) op a, a, a; op b, b, b; op c, c, c; op d, d, d
// COPY4(s, a, b, c, d): a, b, c, d = s.
#define COPY4(s, a, b, c, d) VMOVAPS s, a; VMOVAPS s, b; VMOVAPS s, c; VMOVAPS s, d
// CVT4(p, a, b, c, d): a…d = the 16 float32 at (p) widened to float64.
#define CVT4(p, a, b, c, d) VCVTPS2PD (p), a; VCVTPS2PD 16(p), b; VCVTPS2PD 32(p), c; VCVTPS2PD 48(p), d
// CVT2(p, a, b): a, b = the 8 float32 at (p) widened to float64.
#define CVT2(p, a, b) VCVTPS2PD (p), a; VCVTPS2PD 16(p), b
// LD4(op, p, a, b, c, d): load a…d from the 128 bytes at (p) with op.
#define LD4(op, p, a, b, c, d) op (p), a; op 32(p), b; op 64(p), c; op 96(p), d
// ST4(op, p, a, b, c, d): store a…d to the 128 bytes at (p) with op.
#define ST4(op, p, a, b, c, d) op a, (p); op b, 32(p); op c, 64(p); op d, 96(p)
// ST2(op, p, a, b): store a, b to the 64 bytes at (p) with op.
#define ST2(op, p, a, b) op a, (p); op b, 32(p)
// MEM4(op, p, a, b, c, d): x = x op the vector at 0, 32, 64, 96(p), for x in a…d.
#define MEM4(op, p, a, b, c, d) op (p), a, a; op 32(p), b, b; op 64(p), c, c; op 96(p), d, d
// MEM2(op, p, a, b): a, b = a, b op the vectors at 0, 32(p).
#define MEM2(op, p, a, b) op (p), a, a; op 32(p), b, b
// OP4(op, s, a, b, c, d): x = x op s, for x in a…d.
#define OP4(op, s, a, b, c, d) op s, a, a; op s, b, b; op s, c, c; op s, d, d
// OP2(op, s, a, b): a, b = a, b op s.
#define OP2(op, s, a, b) op s, a, a; op s, b, b
// ACC4(op, w, x, y, z, a, b, c, d): a = a op w, b = b op x, c = c op y, d = d op z.
#define ACC4(op, w, x, y, z, a, b, c, d) op w, a, a; op x, b, b; op y, c, c; op z, d, d
// ACC2(op, w, x, a, b): a = a op w, b = b op x.
#define ACC2(op, w, x, a, b) op w, a, a; op x, b, b
// FMA4(w, x, y, z, s, t, u, v, a, b, c, d): a += w·s, b += x·t, c += y·u, d += z·v.
#define FMA4(w, x, y, z, s, t, u, v, a, b, c, d) VFMADD231PD w, s, a; VFMADD231PD x, t, b; VFMADD231PD y, u, c; VFMADD231PD z, v, d

// Narrowing stores of float64 results in Y0… (X0…) to float32 at (p).

// PUT16(p): the 16 of Y0…Y3.
#define PUT16(p) \
	VCVTPD2PSY Y0, X0; VCVTPD2PSY Y1, X1; VCVTPD2PSY Y2, X2; VCVTPD2PSY Y3, X3 \
	VMOVUPS X0, (p); VMOVUPS X1, 16(p); VMOVUPS X2, 32(p); VMOVUPS X3, 48(p)
// PUT8(p): the 8 of Y0, Y1.
#define PUT8(p) VCVTPD2PSY Y0, X0; VCVTPD2PSY Y1, X1; VMOVUPS X0, (p); VMOVUPS X1, 16(p)
// PUT4(p): the 4 of Y0.
#define PUT4(p) VCVTPD2PSY Y0, X0; VMOVUPS X0, (p)
// PUT1(p): the one of X0.
#define PUT1(p) VCVTSD2SS X0, X0, X0; VMOVSS X0, (p)

// Horizontal sums.

// HSUMPD(y, x, t): x[0] = the sum of y's four float64 (x is y's low half; t scratch).
#define HSUMPD(y, x, t) VEXTRACTF128 $1, y, t; VADDPD t, x, x; VHADDPD x, x, x
// REDUCE4PD: Y0 += Y1 + Y2 + Y3 (four float64 accumulators), then X0[0] = the total.
#define REDUCE4PD VADDPD Y1, Y0, Y0; VADDPD Y3, Y2, Y2; VADDPD Y2, Y0, Y0; HSUMPD(Y0, X0, X1)
// REDUCE2x2PD: X0[0] = the total of Y0 and Y1, X2[0] = that of Y2 and Y3.
#define REDUCE2x2PD VADDPD Y1, Y0, Y0; VADDPD Y3, Y2, Y2; HSUMPD(Y0, X0, X1); HSUMPD(Y2, X2, X3)
