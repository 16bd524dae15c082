//go:build amd64 && !noasm

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// The AVX-512 layer-norm row primitives against the pure-Go references
// (and the AVX2 versions): the maps and the per-element accumulations bit
// for bit, NaN and ±Inf inputs included; the reductions within a few
// float64 roundings, NaN and ±Inf propagating as in the reference.

var lnAVX512Sizes = []int{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1023, 1024, 1025}

func skipNoAVX512(tb testing.TB) {
	tb.Helper()
	if caps.best < AVX512 {
		tb.Skip("the CPU lacks AVX-512 F, BW, VL and DQ")
	}
}

// lnAVX512Kit is the AVX2 kit with the AVX-512 layer-norm primitives.
func lnAVX512Kit() *vecKit {
	k := *vecAVX2
	withLNAVX512(&k)
	return &k
}

// lnInput is n random float32 starting one element into its backing array
// (off any vector alignment); special mixes in NaN, ±Inf, ±0, subnormals
// and values whose results overflow float32.
func lnInput(r *rand.Rand, n int, shift float64, special bool) []float32 {
	v := vecRand(r, n+1, shift)[1:]
	if special {
		odd := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0,
			float32(math.Copysign(0, -1)), 1e-45, -3e-39, 3e38, -3.4e38}
		for i := range v {
			if r.IntN(3) == 0 {
				v[i] = odd[r.IntN(len(odd))]
			}
		}
	}
	return v
}

// sameBitsNaN64 compares float64 accumulations bit for bit (any NaN matches
// any NaN).
func sameBitsNaN64(t *testing.T, what string, got, want []float64) {
	t.Helper()
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("%s: element %d of %d = %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
}

// closeOrSpecial is closeSum where the reference is finite; otherwise the
// result must be NaN, or the same infinity, as the reference's.
func closeOrSpecial(t *testing.T, what string, got, want float64, n int, mag float64) {
	t.Helper()
	switch {
	case math.IsNaN(want):
		if !math.IsNaN(got) {
			t.Fatalf("%s = %v, want NaN", what, got)
		}
	case math.IsInf(want, 0):
		if got != want {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	default:
		closeSum(t, what, got, want, n, mag)
	}
}

func TestLNAVX512Maps(t *testing.T) {
	skipNoAVX512(t)
	k := lnAVX512Kit()
	r := rand.New(rand.NewPCG(51, 52))
	for _, special := range []bool{false, true} {
		for _, n := range lnAVX512Sizes {
			for rep := range 4 {
				name := fmt.Sprintf("n=%d special=%v rep=%d", n, special, rep)
				x, dy, w, b := lnInput(r, n, 2, special), lnInput(r, n, 0, special), lnInput(r, n, 1, special), lnInput(r, n, 0, special)
				m, rs, s1, s2 := r.NormFloat64()+2, math.Abs(r.NormFloat64())+0.5, r.NormFloat64(), r.NormFloat64()
				switch rep {
				case 2:
					rs *= 1e30 // results beyond float32's range
				case 3:
					// Cancellation: dy·w − s1 ≈ (x − m)·rs·s2 and
					// (x − m)·rs·w ≈ −b, so a product fused into the
					// following subtraction or addition (one rounding
					// fewer) shows in the float32 result.
					for i := range x {
						t := (float64(x[i]) - m) * rs
						dy[i] = float32((s1 + t*s2) / float64(w[i]))
						b[i] = -float32(t * float64(w[i]))
					}
				}
				want, want2 := make([]float32, n), make([]float32, n)
				for _, c := range []struct {
					name      string
					got, avx2 func(y []float32)
					ref       func(y []float32)
				}{
					{"lnNorm",
						func(y []float32) { k.lnNorm(y, x, m, rs) },
						func(y []float32) { lnNormAVX2(y, x, m, rs) },
						func(y []float32) { lnNormGo(y, x, m, rs) }},
					{"lnApply",
						func(y []float32) { k.lnApply(y, x, w, b, m, rs) },
						func(y []float32) { lnApplyAVX2(y, x, w, b, m, rs) },
						func(y []float32) { lnApplyGo(y, x, w, b, m, rs) }},
					{"lnBackward",
						func(y []float32) { k.lnBackward(y, dy, w, x, m, rs, s1, s2) },
						func(y []float32) { lnBackwardAVX2(y, dy, w, x, m, rs, s1, s2) },
						func(y []float32) { lnBackwardGo(y, dy, w, x, m, rs, s1, s2) }},
				} {
					y, ok := guarded(t, n)
					c.got(y)
					ok()
					c.ref(want)
					c.avx2(want2)
					sameBits32(t, c.name+" "+name, y, want)
					sameBits32(t, c.name+" vs AVX2 "+name, y, want2)
				}

				init1, init2 := vecRand64(r, n), vecRand64(r, n)
				aw, okw := guarded64(t, init1)
				ab, okb := guarded64(t, init2)
				k.lnColAcc(aw, ab, dy, x, m, rs)
				okw()
				okb()
				rw, rb := append([]float64(nil), init1...), append([]float64(nil), init2...)
				lnColAccGo(rw, rb, dy, x, m, rs)
				sameBitsNaN64(t, "lnColAcc aw "+name, aw, rw)
				sameBitsNaN64(t, "lnColAcc ab "+name, ab, rb)

				aw, okw = guarded64(t, init1)
				ab, okb = guarded64(t, init2)
				y, ok := guarded(t, n)
				k.lnBackwardAcc(y, dy, w, x, m, rs, s1, s2, aw, ab)
				okw()
				okb()
				ok()
				rw, rb = append([]float64(nil), init1...), append([]float64(nil), init2...)
				lnBackwardAccGo(want, dy, w, x, m, rs, s1, s2, rw, rb)
				sameBits32(t, "lnBackwardAcc dx "+name, y, want)
				sameBitsNaN64(t, "lnBackwardAcc aw "+name, aw, rw)
				sameBitsNaN64(t, "lnBackwardAcc ab "+name, ab, rb)
				rw, rb = append([]float64(nil), init1...), append([]float64(nil), init2...)
				lnBackwardAccAVX2(want2, dy, w, x, m, rs, s1, s2, rw, rb)
				sameBits32(t, "lnBackwardAcc dx vs AVX2 "+name, y, want2)
				sameBitsNaN64(t, "lnBackwardAcc aw vs AVX2 "+name, aw, rw)
				sameBitsNaN64(t, "lnBackwardAcc ab vs AVX2 "+name, ab, rb)
			}
		}
	}
}

func TestLNAVX512Reductions(t *testing.T) {
	skipNoAVX512(t)
	k := lnAVX512Kit()
	r := rand.New(rand.NewPCG(53, 54))
	// Special inputs: NaN, or infinities of one sign, or of both, in one
	// operand; every one must propagate as in the reference.
	specials := []struct {
		name string
		vals []float32
	}{
		{"", nil},
		{"NaN", []float32{float32(math.NaN())}},
		{"+Inf", []float32{float32(math.Inf(1))}},
		{"-Inf", []float32{float32(math.Inf(-1))}},
		{"±Inf", []float32{float32(math.Inf(1)), float32(math.Inf(-1))}},
	}
	for _, sp := range specials {
		for _, n := range lnAVX512Sizes {
			for which := range 3 { // the operand that gets the special values
				if sp.vals == nil && which > 0 {
					continue
				}
				name := fmt.Sprintf("n=%d %s in operand %d", n, sp.name, which)
				x, g, w := lnInput(r, n, 3, false), lnInput(r, n, 0, false), lnInput(r, n, 1, false)
				if n > 0 {
					for _, v := range sp.vals {
						[][]float32{x, g, w}[which][r.IntN(n)] = v
					}
				}
				m := r.NormFloat64() + 3
				closeOrSpecial(t, "sum "+name, k.sum(x), sumGo(x), n, 4)
				closeOrSpecial(t, "sqDev "+name, k.sqDev(x, m), sqDevGo(x, m), n, 16)
				a1, a2 := k.gradSumsW(g, w, x, m)
				b1, b2 := gradSumsWGo(g, w, x, m)
				closeOrSpecial(t, "gradSumsW.sg "+name, a1, b1, n, 16)
				closeOrSpecial(t, "gradSumsW.sgx "+name, a2, b2, n, 64)
			}
		}
	}
	if k.sum(nil) != 0 || k.sqDev(nil, 1) != 0 {
		t.Fatal("empty reductions are not 0")
	}
	if a, b := k.gradSumsW(nil, nil, nil, 1); a != 0 || b != 0 {
		t.Fatal("empty gradSumsW is not 0")
	}
}

// BenchmarkLNRowAVX512 times each layer-norm row primitive on a row of
// 1024 (L1-resident) with the AVX2 and the AVX-512 versions.
func BenchmarkLNRowAVX512(b *testing.B) {
	skipNoAVX512(b)
	const n = 1024
	r := rand.New(rand.NewPCG(55, 56))
	// Every row 64-byte aligned, so timings do not depend on where the
	// allocator put them.
	at64 := func(v []float32) []float32 {
		buf := make([]float32, len(v)+16)
		o := int(-uintptr(unsafe.Pointer(&buf[0])) & 63 / 4)
		copy(buf[o:], v)
		return buf[o : o+len(v)]
	}
	at64d := func(n int) []float64 {
		buf := make([]float64, n+8)
		o := int(-uintptr(unsafe.Pointer(&buf[0])) & 63 / 8)
		return buf[o : o+n]
	}
	x, dy, w, bias := at64(vecRand(r, n, 2)), at64(vecRand(r, n, 0)), at64(vecRand(r, n, 1)), at64(vecRand(r, n, 0))
	y := at64(make([]float32, n))
	aw, ab := at64d(n), at64d(n)
	const m, rs, s1, s2 = 0.25, 1.5, 0.125, -0.375
	var sink float64
	for _, kit := range []struct {
		name string
		k    *vecKit
	}{{"avx2", vecAVX2}, {"avx512", lnAVX512Kit()}} {
		k := kit.k
		for _, c := range []struct {
			name string
			f    func()
		}{
			{"sum", func() { sink += k.sum(x) }},
			{"sqDev", func() { sink += k.sqDev(x, m) }},
			{"gradSumsW", func() { a, c := k.gradSumsW(dy, w, x, m); sink += a + c }},
			{"lnNorm", func() { k.lnNorm(y, x, m, rs) }},
			{"lnApply", func() { k.lnApply(y, x, w, bias, m, rs) }},
			{"lnBackward", func() { k.lnBackward(y, dy, w, x, m, rs, s1, s2) }},
			{"lnColAcc", func() { k.lnColAcc(aw, ab, dy, x, m, rs) }},
			{"lnBackwardAcc", func() { k.lnBackwardAcc(y, dy, w, x, m, rs, s1, s2, aw, ab) }},
		} {
			b.Run(c.name+"/"+kit.name, func(b *testing.B) {
				for b.Loop() {
					c.f()
				}
			})
		}
	}
	_ = sink
}
