//go:build !noasm

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func needBF16(t *testing.T) {
	t.Helper()
	if level < AVX512BF16 {
		t.Skip("no AVX512_BF16 on this CPU")
	}
}

// bf16HW is the hardware's float32→bfloat16 conversion: round to nearest
// even like BF16FromF32, but a subnormal input (or result) becomes a zero
// of its sign (VCVTNEPS2BF16 and VCVTNE2PS2BF16 flush them).
func bf16HW(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7f800000 == 0 {
		return uint16(b>>16) & 0x8000
	}
	return BF16FromF32(f)
}

// bf16Inputs returns n floats: normals over many magnitudes, with every
// special value and subnormals of both signs at the front.
func bf16Inputs(r *rand.Rand, n int) []float32 {
	x := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-39, -3e-39, math.MaxFloat32, -math.MaxFloat32,
		1.00390625, 1.01171875, 3.3895314e38} // ties to even, and a value that rounds to infinity
	for len(x) < n {
		x = append(x, float32(r.NormFloat64()*math.Pow(2, float64(r.IntN(60)-30))))
	}
	return x[:n]
}

func TestBF16ConvertMacros(t *testing.T) {
	needBF16(t)
	r := rand.New(rand.NewPCG(61, 62))
	for rep := range 50 {
		src := bf16Inputs(r, 32)
		if rep > 0 {
			r.Shuffle(len(src), func(i, j int) { src[i], src[j] = src[j], src[i] })
		}
		for _, high := range []bool{false, true} {
			var pair [32]uint16
			bf16PackProbe(&pair[0], &src[0], &src[16], high)
			var one [16]uint16
			bf16NarrowProbe(&one[0], &src[0], high)
			for i, f := range src {
				want := bf16HW(f)
				if math.IsNaN(float64(f)) {
					if pair[i]&0x7fc0 != 0x7fc0 || (i < 16 && one[i]&0x7fc0 != 0x7fc0) {
						t.Fatalf("high=%v: NaN became %#x / %#x", high, pair[i], one[i])
					}
					continue
				}
				if pair[i] != want || (i < 16 && one[i] != want) {
					t.Fatalf("high=%v: bf16(%v) = %#x (pair) %#x (one), want %#x", high, f, pair[i], one[i], want)
				}
			}
		}
	}
}

// bf16DotRef is one lane of VDPBF16PS: acc + a1·b1 then + a0·b0, each sum
// rounded to float32 (the products of two bfloat16s are exact).
func bf16DotRef(acc float32, a0, a1, b0, b1 uint16) float32 {
	acc += F32FromBF16(a1) * F32FromBF16(b1)
	return acc + F32FromBF16(a0)*F32FromBF16(b0)
}

func TestBF16DotMacros(t *testing.T) {
	needBF16(t)
	r := rand.New(rand.NewPCG(63, 64))
	for range 100 {
		a, b := bf16Rand(r, 32), bf16Rand(r, 32)
		acc := make([]float32, 16)
		for i := range acc {
			acc[i] = float32(r.NormFloat64())
		}
		for _, high := range []bool{false, true} {
			got := append([]float32(nil), acc...)
			bf16DotProbe(&got[0], &a[0], &b[0], high)
			for i := range got {
				want := bf16DotRef(acc[i], a[2*i], a[2*i+1], b[2*i], b[2*i+1])
				if high {
					// Z31 got the dot product; Z8's identical one was added
					// as (acc+dot)−acc, which is exact only up to rounding.
					d := bf16DotRef(acc[i], a[2*i], a[2*i+1], b[2*i], b[2*i+1]) - acc[i]
					want += d
				}
				if got[i] != want {
					t.Fatalf("high=%v: lane %d = %v, want %v", high, i, got[i], want)
				}
			}
		}
		pairs := bf16Rand(r, 6)
		got := append([]float32(nil), acc...)
		bf16DotBcstProbe(&got[0], &pairs[0], &b[0])
		for i := range got {
			want := bf16DotRef(acc[i], pairs[2], pairs[3], b[2*i], b[2*i+1])
			want += bf16DotRef(0, pairs[4], pairs[5], b[2*i], b[2*i+1])
			if got[i] != want {
				t.Fatalf("broadcast: lane %d = %v, want %v", i, got[i], want)
			}
		}
	}
}
