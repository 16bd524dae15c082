package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// quantCase is one value and what QuantizeU8 and QuantizeS8 make of it.
type quantCase struct {
	x      float32
	scale  float32
	zu, zs int32 // zero points for uint8 and int8
	u8     uint8
	s8     int8
}

func quantCases() []quantCase {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	return []quantCase{
		{0, 0.5, 10, -3, 10, -3},
		{negZero, 0.5, 10, -3, 10, -3},
		{1, 1, 0, 0, 1, 1},
		// Ties, x·(1/s) exactly k + ½: half to even.
		{0.5, 1, 0, 0, 0, 0},
		{1.5, 1, 0, 0, 2, 2},
		{2.5, 1, 0, 0, 2, 2},
		{-0.5, 1, 100, 0, 100, 0},
		{-1.5, 1, 100, 0, 98, -2},
		{-2.5, 1, 100, 0, 98, -2},
		{0.25, 0.5, 0, 0, 0, 0}, // 0.25·2 = 0.5 → 0
		{0.75, 0.5, 0, 0, 2, 2}, // 1.5 → 2
		// The reciprocal is rounded to float32 first: 1/0.1f = 10.0000001…
		// rounds to 10, so 0.25·10 = 2.5 is a tie, → 2.
		{0.25, 0.1, 0, 0, 2, 2},
		// Clamping at both ends, and the zero point added before it.
		{1000, 1, 0, 0, 255, 127},
		{-1000, 1, 0, 0, 0, -128},
		{250, 1, 10, 0, 255, 127},
		{-5, 1, 3, -126, 0, -128},
		{inf, 1, 7, 7, 255, 127},
		{-inf, 1, 7, 7, 0, -128},
		{3e38, 1e-3, 7, 7, 255, 127}, // the product overflows to +Inf
		// NaN: the zero point.
		{nan, 1, 77, -9, 77, -9},
		{-nan, 0.25, 0, 0, 0, 0},
	}
}

func TestQuantizeValues(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		qu, qs := pick(l, quantizeU8Variants), pick(l, quantizeS8Variants)
		for _, c := range quantCases() {
			// Alone and inside a vector (lane 5 of 21), so a tail and a full
			// vector of each variant see it.
			for _, n := range []int{1, 21} {
				x := make([]float32, n)
				x[n/4] = c.x
				du, ds := make([]uint8, n), make([]int8, n)
				qu(du, x, 1/c.scale, c.zu)
				qs(ds, x, 1/c.scale, c.zs)
				if du[n/4] != c.u8 || ds[n/4] != c.s8 {
					t.Errorf("x=%v scale=%v: u8 (zero %d) %d, s8 (zero %d) %d; want %d, %d", c.x, c.scale, c.zu, du[n/4], c.zs, ds[n/4], c.u8, c.s8)
				}
			}
		}
	})
}

// TestQuantizeSweep compares every variant with the reference over random
// values around and beyond the representable range, many of them exact
// ties, at every length up to a few vectors.
func TestQuantizeSweep(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 18))
	x := make([]float32, 1100)
	for i := range x {
		switch i % 4 {
		case 0:
			x[i] = float32(r.NormFloat64() * 10)
		case 1:
			x[i] = float32(r.IntN(800)-400) / 2 // ties at scale 1 or 0.5
		case 2:
			x[i] = float32(r.NormFloat64() * 1e6)
		default:
			x[i] = math.Float32frombits(r.Uint32()) // anything, NaNs included
		}
	}
	forEachLevel(t, func(t *testing.T, l Level) {
		qu, qs := pick(l, quantizeU8Variants), pick(l, quantizeS8Variants)
		du, dq := pick(l, dequantizeU8Variants), pick(l, dequantizeS8Variants)
		for _, p := range []struct {
			scale  float32
			zu, zs int32
		}{{1, 0, 0}, {0.5, 128, -1}, {0.037, 255, 127}, {3.3, 17, -128}} {
			inv := 1 / p.scale
			for _, n := range append(suiteSizes(16), len(x)) {
				gu, wu := make([]uint8, n), make([]uint8, n)
				gs, ws := make([]int8, n), make([]int8, n)
				qu(gu, x[:n], inv, p.zu)
				quantizeU8Generic(wu, x[:n], inv, p.zu)
				qs(gs, x[:n], inv, p.zs)
				quantizeS8Generic(ws, x[:n], inv, p.zs)
				for i := range n {
					if gu[i] != wu[i] || gs[i] != ws[i] {
						t.Fatalf("scale %v n=%d: x[%d]=%v gives u8 %d s8 %d, want %d %d", p.scale, n, i, x[i], gu[i], gs[i], wu[i], ws[i])
					}
				}
				fu, fs := make([]float32, n), make([]float32, n)
				du(fu, gu, p.scale, p.zu)
				dq(fs, gs, p.scale, p.zs)
				for i := range n {
					if want := float32(int32(gu[i])-p.zu) * p.scale; math.Float32bits(fu[i]) != math.Float32bits(want) {
						t.Fatalf("DequantizeU8 %d: %v, want %v", gu[i], fu[i], want)
					}
					if want := float32(int32(gs[i])-p.zs) * p.scale; math.Float32bits(fs[i]) != math.Float32bits(want) {
						t.Fatalf("DequantizeS8 %d: %v, want %v", gs[i], fs[i], want)
					}
				}
			}
		}
	})
}

// TestQuantizeRoundTrip: every uint8 and int8 code reads back to a value
// that quantizes to the same code.
func TestQuantizeRoundTrip(t *testing.T) {
	u := make([]uint8, 256)
	s := make([]int8, 256)
	for i := range u {
		u[i], s[i] = uint8(i), int8(i-128)
	}
	f := make([]float32, 256)
	u2, s2 := make([]uint8, 256), make([]int8, 256)
	DequantizeU8(f, u, 0.0173, 99)
	QuantizeU8(u2, f, 0.0173, 99)
	DequantizeS8(f, s, 0.0173, -7)
	QuantizeS8(s2, f, 0.0173, -7)
	for i := range u {
		if u2[i] != u[i] || s2[i] != s[i] {
			t.Fatalf("code %d: uint8 back as %d, int8 %d back as %d", i, u2[i], s[i], s2[i])
		}
	}
}

func TestQuantizeLarge(t *testing.T) {
	// Longer than a chunk of the assembly and split across the pool.
	n := 3*quantChunkForTest + 5
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%1000) / 7
	}
	got, want := make([]uint8, n), make([]uint8, n)
	QuantizeU8(got, x, 0.5, 3)
	quantizeU8Generic(want, x, 2, 3)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("element %d: %d, want %d", i, got[i], want[i])
		}
	}
	f, fw := make([]float32, n), make([]float32, n)
	DequantizeU8(f, got, 0.5, 3)
	dequantizeU8Generic(fw, got, 0.5, 3)
	sameBits32(t, "DequantizeU8", f, fw)
}

// quantChunkForTest is longer than any assembly chunk.
const quantChunkForTest = 1 << 16

func TestQuantizeMisuse(t *testing.T) {
	cases := []misuseCase{
		{"lengths", ErrShape, func() { QuantizeU8(make([]uint8, 2), make([]float32, 3), 1, 0) }},
		{"zero scale", ErrArgument, func() { QuantizeU8(nil, nil, 0, 0) }},
		{"negative scale", ErrArgument, func() { QuantizeS8(nil, nil, -1, 0) }},
		{"NaN scale", ErrArgument, func() { DequantizeU8(nil, nil, float32(math.NaN()), 0) }},
		{"infinite scale", ErrArgument, func() { DequantizeS8(nil, nil, float32(math.Inf(1)), 0) }},
		{"subnormal scale", ErrArgument, func() { QuantizeU8(nil, nil, 1e-40, 0) }},
		{"u8 zero", ErrArgument, func() { QuantizeU8(nil, nil, 1, 256) }},
		{"s8 zero", ErrArgument, func() { QuantizeS8(nil, nil, 1, 128) }},
	}
	checkMisuse(t, cases)
}

func TestQuantizeAllocs(t *testing.T) {
	x, q := make([]float32, 100000), make([]uint8, 100000)
	if n := testing.AllocsPerRun(10, func() { QuantizeU8(q, x, 0.1, 5) }); n != 0 {
		t.Errorf("QuantizeU8 allocates %v times a call", n)
	}
}
