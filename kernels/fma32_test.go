package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestFMA32 holds fma32 to the exactly rounded a·b + c (math/big), on
// random operands of every magnitude, sums that cancel, sums a hair off a
// float32 halfway point (where rounding through float64 would round
// twice), and the special values.
func TestFMA32(t *testing.T) {
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(1000).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(1000).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(1000).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	check := func(a, b, c float32) {
		t.Helper()
		got := fma32(a, b, c)
		var want float32
		switch {
		case a != a || b != b || c != c || math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || math.IsInf(float64(c), 0):
			want = float32(float64(a)*float64(b) + float64(c)) // no rounding question
		default:
			want = exact(a, b, c)
		}
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#x), want %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	r := rand.New(rand.NewPCG(91, 92))
	anyF32 := func() float32 {
		for {
			if f := math.Float32frombits(r.Uint32()); !math.IsInf(float64(f), 0) && f == f {
				return f
			}
		}
	}
	for range 100000 {
		check(anyF32(), anyF32(), anyF32())
		a, b := float32(r.NormFloat64()), float32(r.NormFloat64())
		check(a, b, float32(r.NormFloat64()))
		check(a, b, -float32(float64(a)*float64(b))) // cancels to the product's rounding error
		check(a, b, float32(r.NormFloat64())*1e-30)  // far below the product
	}
	// (1 + 2⁻²³)(1 + 2⁻²³) = 1 + 2⁻²² + 2⁻⁴⁶; with c a tiny amount below
	// or above −2⁻⁴⁶ the exact sum sits a hair off 1 + 2⁻²², and a tie
	// sits at 1 + 2⁻²⁴ for the pair below.
	one := float32(1 + 0x1p-23)
	for _, c := range []float32{-0x1p-46, -0x1p-46 * (1 + 0x1p-23), -0x1p-46 * (1 - 0x1p-23), 0x1p-80, -0x1p-80, 0x1p-24, -0x1p-24} {
		check(one, one, c)
		check(1, 1+0x1p-23, c)
		check(1, 1, 0x1p-24+c)
	}
	check(1, 1, 0x1p-24)
	check(0x1p-75, 0x1p-75, 0x1p-149) // subnormal results
	check(-0x1p-75, 0x1p-75, 0x1p-149)
	check(float32(math.Copysign(0, -1)), 1, float32(math.Copysign(0, -1)))
	check(float32(math.Copysign(0, -1)), 1, 0)
	check(3e38, 3e38, -3e38) // overflows to +Inf
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	check(nan, 1, 1)
	check(inf, 0, 1)
	check(inf, 1, -inf)
	check(inf, 2, 1)
}
