// Rounding float32 to bfloat16 on AVX2, shared by convert_amd64.s and
// vec_bf16_amd64.s (include after vec_amd64.h, which defines QUAD4; each
// includer gets its own file-local copy of the constants). AVX2 has no
// BF16 instructions, so the rounding is done on the bits as in
// BF16FromF32: add 0x7fff plus the lowest kept bit and truncate (round to
// nearest, ties to even), and turn a NaN into its top half with the quiet
// bit set rather than letting the addition carry it into an infinity.

QUAD4(cvtOne, $0x0000000100000001)
QUAD4(cvtRound, $0x00007fff00007fff)
QUAD4(cvtQuiet, $0x0000004000000040)

// TOBF16(R, T, U): R = the bfloat16 bits (in the low half of each lane) of
// the eight float32 in R.
#define TOBF16(R, T, U) \
	VPSRLD    $16, R, T;            \
	VPAND     cvtOne<>(SB), T, T;   \
	VPADDD    cvtRound<>(SB), R, U; \
	VPADDD    T, U, U;              \
	VPSRLD    $16, U, U;            \
	VPSRLD    $16, R, T;            \
	VPOR      cvtQuiet<>(SB), T, T; \
	VCMPPS    $3, R, R, R;          \
	VPBLENDVB R, T, U, R

// PUTBF16x16(p): the sixteen float32 of Y0, Y1 rounded to bfloat16 and
// stored in order at (p) (Y2, Y3 scratch).
#define PUTBF16x16(p) \
	TOBF16(Y0, Y2, Y3);    \
	TOBF16(Y1, Y2, Y3);    \
	VPACKUSDW Y1, Y0, Y0;  \
	VPERMQ $0xd8, Y0, Y0;  \
	VMOVDQU Y0, (p)

// AVX-512: sixteen lanes, the same rounding, the NaN lanes found by an
// unordered compare and merged under its mask, the halves stored with
// VPMOVDW. The constants live in Z26, Z27 and Z30, broadcast once
// per call.
#define CVTCONSTS512 \
	MOVL         $1, AX;          \
	VPBROADCASTD AX, Z26;         \
	MOVL         $0x7fff, AX;     \
	VPBROADCASTD AX, Z27;         \
	MOVL         $0x40, AX;       \
	VPBROADCASTD AX, Z30

// TOBF16512(R, T, U, K): R = the bfloat16 bits (low half of each lane) of
// the sixteen float32 in R; the NaN lanes (K) take their top half with the
// quiet bit set.
#define TOBF16512(R, T, U, K) \
	VPSRLD    $16, R, T;   \
	VPANDD    Z26, T, U;   \
	VPADDD    Z27, U, U;   \
	VPADDD    R, U, U;     \
	VCMPPS    $3, R, R, K; \
	VPSRLD    $16, U, R;   \
	VPORD     Z30, T, K, R
