package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// cvtSpecialBits are float32 bit patterns where the rounding is delicate:
// NaNs whose top half alone would read as an infinity, ties to even in both
// directions, carries into the exponent and up to infinity, subnormals and
// signed zeros.
var cvtSpecialBits = []uint32{
	0x7f800001, 0xff800001, 0x7fc00000, 0xffffffff, 0x7f80ffff, 0x7f800000, 0xff800000,
	0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0x3fffffff, 0x7f7fffff, 0xff7fffff, 0x7f7f8000,
	0x00000001, 0x00008000, 0x00018000, 0x807fffff, 0x00000000, 0x80000000,
}

// cvtInputs returns n float32 bit patterns: random ones and specials.
func cvtInputs(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		b := r.Uint32()
		if r.IntN(5) == 0 {
			b = cvtSpecialBits[r.IntN(len(cvtSpecialBits))]
		}
		x[i] = math.Float32frombits(b)
	}
	return x
}

// guarded16 is guarded for uint16 outputs.
func guarded16(t *testing.T, n int) ([]uint16, func()) {
	const pad, guard = 9, 0xa5c3
	buf := make([]uint16, n+2*pad)
	for i := range buf {
		buf[i] = guard
	}
	s := buf[pad : pad+n : pad+n]
	clear(s)
	return s, func() {
		t.Helper()
		for i, v := range buf {
			if (i < pad || i >= pad+n) && v != guard {
				t.Fatalf("guard cell %d (around %d elements) overwritten: %#x", i, n, v)
			}
		}
	}
}

// TestConvertConformance checks every level's conversions against
// BF16FromF32 and F32FromBF16 bit for bit, on suite sizes with guards.
func TestConvertConformance(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		narrow, widen, round := f32ToBF16For(l), bf16ToF32For(l), roundBF16For(l)
		r := rand.New(rand.NewPCG(41, 42))
		for _, n := range suiteSizes(8) {
			x := cvtInputs(r, n)
			h, check := guarded16(t, n)
			narrow(h, x)
			check()
			for i := range x {
				if want := BF16FromF32(x[i]); h[i] != want {
					t.Fatalf("n=%d: %#08x narrows to %#04x, want %#04x", n, math.Float32bits(x[i]), h[i], want)
				}
			}
			g, check := guarded(t, n)
			copy(g, x)
			round(g)
			check()
			for i := range x {
				if want := uint32(BF16FromF32(x[i])) << 16; math.Float32bits(g[i]) != want {
					t.Fatalf("n=%d: %#08x rounds to %#08x, want %#08x", n, math.Float32bits(x[i]), math.Float32bits(g[i]), want)
				}
			}
			for i := range h {
				h[i] = uint16(r.Uint32())
			}
			f, check := guarded(t, n)
			widen(f, h)
			check()
			for i := range h {
				if math.Float32bits(f[i]) != uint32(h[i])<<16 {
					t.Fatalf("n=%d: %#04x widens to %#08x", n, h[i], math.Float32bits(f[i]))
				}
			}
		}
	})
}

// TestConvertSweep narrows every 251st float32 bit pattern (17 million,
// every exponent and both signs) and widens every bfloat16 through the
// exported, parallel entry points.
func TestConvertSweep(t *testing.T) {
	const stride = 251
	x := make([]float32, 0, 1<<32/stride+1)
	for b := uint64(0); b < 1<<32; b += stride {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	h := make([]uint16, len(x))
	F32ToBF16(h, x)
	for i, f := range x {
		if want := BF16FromF32(f); h[i] != want {
			t.Fatalf("%#08x narrows to %#04x, want %#04x", math.Float32bits(f), h[i], want)
		}
	}
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	f := make([]float32, len(all))
	BF16ToF32(f, all)
	for i, v := range f {
		if math.Float32bits(v) != uint32(i)<<16 {
			t.Fatalf("%#04x widens to %#08x", i, math.Float32bits(v))
		}
	}
}

func TestBF16FromF32Rounding(t *testing.T) {
	for _, c := range []struct{ in, want uint32 }{
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81},
		{0x7f7fffff, 0x7f80}, // rounds up to +Inf
		{0x7f800001, 0x7fc0}, // a NaN stays NaN
		{0xff800001, 0xffc0},
		{0x00018000, 0x0002}, // subnormals are kept
	} {
		if got := BF16FromF32(math.Float32frombits(c.in)); uint32(got) != c.want {
			t.Errorf("BF16FromF32(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestConvertDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	n := 1 << 16
	x, h := make([]float32, n), make([]uint16, n)
	if a := testing.AllocsPerRun(10, func() { F32ToBF16(h, x) }); a != 0 {
		t.Errorf("F32ToBF16 allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(10, func() { BF16ToF32(x, h) }); a != 0 {
		t.Errorf("BF16ToF32 allocates %v times per call", a)
	}
}

// useCvtLevel switches the conversions to level l's variants until the
// returned function restores them.
func useCvtLevel(l Level) (restore func()) {
	n, w, r := f32ToBF16Impl, bf16ToF32Impl, roundBF16Impl
	f32ToBF16Impl, bf16ToF32Impl, roundBF16Impl = f32ToBF16For(l), bf16ToF32For(l), roundBF16For(l)
	return func() { f32ToBF16Impl, bf16ToF32Impl, roundBF16Impl = n, w, r }
}

func BenchmarkConvert(b *testing.B) {
	for _, sz := range benchSizes {
		x, h := make([]float32, sz.n), make([]uint16, sz.n)
		for i := range x {
			x[i] = float32(i) * 1.001
		}
		for _, l := range Levels() {
			b.Run(fmt.Sprintf("f32tobf16/%s/%v", sz.name, l), func(b *testing.B) {
				defer useCvtLevel(l)()
				b.SetBytes(int64(6 * sz.n))
				for b.Loop() {
					F32ToBF16(h, x)
				}
				reportElems(b, sz.n)
			})
			b.Run(fmt.Sprintf("bf16tof32/%s/%v", sz.name, l), func(b *testing.B) {
				defer useCvtLevel(l)()
				b.SetBytes(int64(6 * sz.n))
				for b.Loop() {
					BF16ToF32(x, h)
				}
				reportElems(b, sz.n)
			})
		}
	}
}
