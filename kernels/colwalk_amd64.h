// The AVX2 column primitives (vecKit's col* and col*H), written once for
// float32 rows (vec_amd64.s) and bfloat16 rows (vec_bf16_amd64.s). An
// expansion names the element's loads, stores and size, and its own
// labels; everything else, and so every float64 operation and its order,
// is shared. Include after vec_amd64.h.
//
// Element macros, for ES-byte elements:
//   Q(off, p, x, y): y = the four elements at off(p) widened to float64 (x
//     is y's low half); S(p, x): x[0] = the element at (p) as float64.
//   P8(p), P4(p), P1(p): narrow the float64 results in Y0, Y1 (X0) and
//     store them as elements at (p) (X2 and X3 scratch).
// Loads and stores of bfloat16 use AX as scratch.

// The sums walk channel blocks of 16, 4 and 1, each block's sums held in
// registers while the rows stream past (row step R8 bytes).

// COLROWS: R9 walks the rows from the block's column SI, R10 counts them
// down from CX; COLNEXT(top) steps to the next row, back to top while one
// is left. COLROWS2 and COLNEXT2 walk a second matrix (R12, R13) along.
#define COLROWS MOVQ SI, R9; MOVQ CX, R10
#define COLNEXT(top) ADDQ R8, R9; DECJNZ(R10, top)
#define COLROWS2 MOVQ SI, R9; MOVQ R12, R13; MOVQ CX, R10
#define COLNEXT2(top) ADDQ R8, R9; ADDQ R8, R13; DECJNZ(R10, top)

// COLSUM: s[c] += Σ_r x[r][c], with s in DI, its length in BX, x in SI,
// rows in CX and the row step in R8.
#define COLSUM(Q, S, ES, b16, r16, b4, r4, b1, r1, done) \
b16:                                                      \
	BELOW(BX, 16, b4);                                    \
	LD4(VMOVUPD, DI, Y0, Y1, Y2, Y3);                     \
	COLROWS;                                              \
r16:                                                      \
	Q(0, R9, X4, Y4); Q(4*ES, R9, X5, Y5);                \
	Q(8*ES, R9, X6, Y6); Q(12*ES, R9, X7, Y7);            \
	ACC4(VADDPD, Y4, Y5, Y6, Y7, Y0, Y1, Y2, Y3);         \
	COLNEXT(r16);                                         \
	ST4(VMOVUPD, DI, Y0, Y1, Y2, Y3);                     \
	ADDQ $128, DI;                                        \
	ADDQ $(16*ES), SI;                                    \
	AGAIN(BX, 16, b16);                                   \
b4:                                                       \
	BELOW(BX, 4, b1);                                     \
	VMOVUPD (DI), Y0;                                     \
	COLROWS;                                              \
r4:                                                       \
	Q(0, R9, X4, Y4);                                     \
	VADDPD Y4, Y0, Y0;                                    \
	COLNEXT(r4);                                          \
	VMOVUPD Y0, (DI);                                     \
	ADDQ $32, DI;                                         \
	ADDQ $(4*ES), SI;                                     \
	AGAIN(BX, 4, b4);                                     \
b1:                                                       \
	IFZERO(BX, done);                                     \
	VMOVSD (DI), X0;                                      \
	COLROWS;                                              \
r1:                                                       \
	S(R9, X4);                                            \
	VADDSD X4, X0, X0;                                    \
	COLNEXT(r1);                                          \
	VMOVSD X0, (DI);                                      \
	ADDQ $8, DI;                                          \
	ADDQ $ES, SI;                                         \
	AGAIN1(BX, b1)

// COLSQDEV: s[c] += Σ_r (x[r][c] − m[c])², registers as COLSUM's, m in DX.
#define COLSQDEV(Q, S, ES, b16, r16, b4, r4, b1, r1, done) \
b16:                                                       \
	BELOW(BX, 16, b4);                                     \
	LD4(VMOVUPD, DI, Y0, Y1, Y2, Y3);                      \
	LD4(VMOVUPD, DX, Y8, Y9, Y10, Y11);                    \
	COLROWS;                                               \
r16:                                                       \
	Q(0, R9, X4, Y4); Q(4*ES, R9, X5, Y5);                 \
	Q(8*ES, R9, X6, Y6); Q(12*ES, R9, X7, Y7);             \
	ACC4(VSUBPD, Y8, Y9, Y10, Y11, Y4, Y5, Y6, Y7);        \
	FMA4(Y4, Y5, Y6, Y7, Y4, Y5, Y6, Y7, Y0, Y1, Y2, Y3);  \
	COLNEXT(r16);                                          \
	ST4(VMOVUPD, DI, Y0, Y1, Y2, Y3);                      \
	ADDQ2(128, DI, DX);                                    \
	ADDQ $(16*ES), SI;                                     \
	AGAIN(BX, 16, b16);                                    \
b4:                                                        \
	BELOW(BX, 4, b1);                                      \
	VMOVUPD (DI), Y0;                                      \
	VMOVUPD (DX), Y8;                                      \
	COLROWS;                                               \
r4:                                                        \
	Q(0, R9, X4, Y4);                                      \
	VSUBPD Y8, Y4, Y4;                                     \
	VFMADD231PD Y4, Y4, Y0;                                \
	COLNEXT(r4);                                           \
	VMOVUPD Y0, (DI);                                      \
	ADDQ2(32, DI, DX);                                     \
	ADDQ $(4*ES), SI;                                      \
	AGAIN(BX, 4, b4);                                      \
b1:                                                        \
	IFZERO(BX, done);                                      \
	VMOVSD (DI), X0;                                       \
	VMOVSD (DX), X8;                                       \
	COLROWS;                                               \
r1:                                                        \
	S(R9, X4);                                             \
	VSUBSD X8, X4, X4;                                     \
	VFMADD231SD X4, X4, X0;                                \
	COLNEXT(r1);                                           \
	VMOVSD X0, (DI);                                       \
	ADDQ2(8, DI, DX);                                      \
	ADDQ $ES, SI;                                          \
	AGAIN1(BX, b1)

// GRAD4(Q, off, m, s1, s2): one block of four channels of the gradient
// sums, g at off(R9), x at off(R13): s1 += g, s2 += g·(x − m).
#define GRAD4(Q, off, m, s1, s2) \
	Q(off, R9, X12, Y12);        \
	Q(off, R13, X13, Y13);       \
	VSUBPD m, Y13, Y13;          \
	VADDPD Y12, s1, s1;          \
	VFMADD231PD Y12, Y13, s2

// COLGRADSUMS: s1[c] += Σ_r g[r][c], s2[c] += Σ_r g[r][c]·(x[r][c] − m[c]),
// with s1 in DI (length BX), s2 in R11, g in SI, x in R12, m in DX, rows
// in CX and the row step in R8.
#define COLGRADSUMS(Q, S, ES, b16, r16, b4, r4, b1, r1, done) \
b16:                                                          \
	BELOW(BX, 16, b4);                                        \
	LD4(VMOVUPD, DI, Y0, Y1, Y2, Y3);                         \
	LD4(VMOVUPD, R11, Y4, Y5, Y6, Y7);                        \
	LD4(VMOVUPD, DX, Y8, Y9, Y10, Y11);                       \
	COLROWS2;                                                 \
r16:                                                          \
	GRAD4(Q, 0, Y8, Y0, Y4);                                  \
	GRAD4(Q, 4*ES, Y9, Y1, Y5);                               \
	GRAD4(Q, 8*ES, Y10, Y2, Y6);                              \
	GRAD4(Q, 12*ES, Y11, Y3, Y7);                             \
	COLNEXT2(r16);                                            \
	ST4(VMOVUPD, DI, Y0, Y1, Y2, Y3);                         \
	ST4(VMOVUPD, R11, Y4, Y5, Y6, Y7);                        \
	ADDQ3(128, DI, R11, DX);                                  \
	ADDQ2(16*ES, SI, R12);                                    \
	AGAIN(BX, 16, b16);                                       \
b4:                                                           \
	BELOW(BX, 4, b1);                                         \
	VMOVUPD (DI), Y0;                                         \
	VMOVUPD (R11), Y4;                                        \
	VMOVUPD (DX), Y8;                                         \
	COLROWS2;                                                 \
r4:                                                           \
	GRAD4(Q, 0, Y8, Y0, Y4);                                  \
	COLNEXT2(r4);                                             \
	VMOVUPD Y0, (DI);                                         \
	VMOVUPD Y4, (R11);                                        \
	ADDQ3(32, DI, R11, DX);                                   \
	ADDQ2(4*ES, SI, R12);                                     \
	AGAIN(BX, 4, b4);                                         \
b1:                                                           \
	IFZERO(BX, done);                                         \
	VMOVSD (DI), X0;                                          \
	VMOVSD (R11), X4;                                         \
	VMOVSD (DX), X8;                                          \
	COLROWS2;                                                 \
r1:                                                           \
	S(R9, X12);                                               \
	S(R13, X13);                                              \
	VSUBSD X8, X13, X13;                                      \
	VADDSD X12, X0, X0;                                       \
	VFMADD231SD X12, X13, X4;                                 \
	COLNEXT2(r1);                                             \
	VMOVSD X0, (DI);                                          \
	VMOVSD X4, (R11);                                         \
	ADDQ3(8, DI, R11, DX);                                    \
	ADDQ2(ES, SI, R12);                                       \
	AGAIN1(BX, b1)

// The maps walk each row's channels in blocks of 8, 4 and 1.

// COLAFFINE: y[r][c] = a[c]·x[r][c] + b[c], with y in DI, x in SI, a in
// R11 (length R12), b in R13 and rows in CX (BX, DX and R8 walk a row).
#define COLAFFINE(Q, S, P8, P4, P1, ES, row, b8, b4, b1, next) \
row:                                  \
	MOVQ R11, BX;                     \
	MOVQ R13, DX;                     \
	MOVQ R12, R8;                     \
b8:                                   \
	BELOW(R8, 8, b4);                 \
	Q(0, SI, X0, Y0);                 \
	Q(4*ES, SI, X1, Y1);              \
	MEM2(VMULPD, BX, Y0, Y1);         \
	MEM2(VADDPD, DX, Y0, Y1);         \
	P8(DI);                           \
	ADDQ2(8*ES, SI, DI);              \
	ADDQ2(64, BX, DX);                \
	AGAIN(R8, 8, b8);                 \
b4:                                   \
	BELOW(R8, 4, b1);                 \
	Q(0, SI, X0, Y0);                 \
	VMULPD (BX), Y0, Y0;              \
	VADDPD (DX), Y0, Y0;              \
	P4(DI);                           \
	ADDQ2(4*ES, SI, DI);              \
	ADDQ2(32, BX, DX);                \
	SUBQ $4, R8;                      \
b1:                                   \
	IFZERO(R8, next);                 \
	S(SI, X0);                        \
	VMULSD (BX), X0, X0;              \
	VADDSD (DX), X0, X0;              \
	P1(DI);                           \
	ADDQ2(ES, SI, DI);                \
	ADDQ2(8, BX, DX);                 \
	AGAIN1(R8, b1);                   \
next:                                 \
	DECJNZ(CX, row)

// COLAFFINE2: y[r][c] = p[c]·u[r][c] + q[c]·v[r][c] + r[c], with y in DI,
// u in SI, v in R8, p in R11 (length R12) and rows in CX (BX, R9, DX and
// R10 walk a row; q and r are reloaded from the arguments).
#define COLAFFINE2(Q, S, P8, P4, P1, ES, row, b8, b4, b1, next) \
row:                                      \
	MOVQ R11, BX;                         \
	MOVQ q_base+96(FP), R9;               \
	MOVQ r_base+120(FP), DX;              \
	MOVQ R12, R10;                        \
b8:                                       \
	BELOW(R10, 8, b4);                    \
	Q(0, SI, X0, Y0);                     \
	Q(4*ES, SI, X1, Y1);                  \
	Q(0, R8, X4, Y4);                     \
	Q(4*ES, R8, X6, Y6);                  \
	MEM2(VMULPD, BX, Y0, Y1);             \
	MEM2(VMULPD, R9, Y4, Y6);             \
	ACC2(VADDPD, Y4, Y6, Y0, Y1);         \
	MEM2(VADDPD, DX, Y0, Y1);             \
	P8(DI);                               \
	ADDQ3(8*ES, SI, R8, DI);              \
	ADDQ3(64, BX, R9, DX);                \
	AGAIN(R10, 8, b8);                    \
b4:                                       \
	BELOW(R10, 4, b1);                    \
	Q(0, SI, X0, Y0);                     \
	Q(0, R8, X4, Y4);                     \
	VMULPD (BX), Y0, Y0;                  \
	VMULPD (R9), Y4, Y4;                  \
	VADDPD Y4, Y0, Y0;                    \
	VADDPD (DX), Y0, Y0;                  \
	P4(DI);                               \
	ADDQ3(4*ES, SI, R8, DI);              \
	ADDQ3(32, BX, R9, DX);                \
	SUBQ $4, R10;                         \
b1:                                       \
	IFZERO(R10, next);                    \
	S(SI, X0);                            \
	S(R8, X4);                            \
	VMULSD (BX), X0, X0;                  \
	VMULSD (R9), X4, X4;                  \
	VADDSD X4, X0, X0;                    \
	VADDSD (DX), X0, X0;                  \
	P1(DI);                               \
	ADDQ3(ES, SI, R8, DI);                \
	ADDQ3(8, BX, R9, DX);                 \
	AGAIN1(R10, b1);                      \
next:                                     \
	DECJNZ(CX, row)
