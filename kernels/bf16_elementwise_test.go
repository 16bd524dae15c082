package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestBF16Elementwise checks every bfloat16 elementwise kernel against its
// definition, element by element: widen exactly, run the float32 reference
// on the one element, round to nearest even. Sizes cross the stretch and
// vector widths; guards catch writes past the end.
func TestBF16Elementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ref := func(a Act, x float32) float32 {
		d := []float32{0}
		a.forward(d, []float32{x})
		return d[0]
	}
	refBack := func(a Act, dy, v float32) float32 {
		d := []float32{0}
		a.backward(d, []float32{dy}, []float32{v})
		return d[0]
	}
	acts := []Act{{Fn: ActReLU}, {Fn: ActSigmoid}, {Fn: ActTanh}, {Fn: ActHardTanh, A: -1, B: 1}}
	for _, n := range append(suiteSizes(16), bf16Stretch-1, bf16Stretch+3, 3*bf16Stretch+17, 40001) {
		a, af := randBF16(r, n)
		b, bf := randBF16(r, n)
		for _, act := range acts {
			dst, check := guarded16(t, n)
			act.ForwardBF16(dst, a)
			check()
			for i := range n {
				if want := BF16FromF32(ref(act, af[i])); dst[i] != want {
					t.Fatalf("%v.ForwardBF16 n=%d [%d]: f(%g) = %#x, want %#x", act.Fn, n, i, af[i], dst[i], want)
				}
			}
			v, vf := a, af
			if act.ReadsOutput() {
				v = append([]uint16(nil), dst...)
				vf = make([]float32, n)
				for i := range v {
					vf[i] = F32FromBF16(v[i])
				}
			}
			dx, check := guarded16(t, n)
			act.BackwardBF16(dx, b, v)
			check()
			for i := range n {
				if want := BF16FromF32(refBack(act, bf[i], vf[i])); dx[i] != want {
					t.Fatalf("%v.BackwardBF16 n=%d [%d]: got %#x, want %#x", act.Fn, n, i, dx[i], want)
				}
			}
		}
		for op := range binOpCount {
			dst, check := guarded16(t, n)
			BinaryBF16(op, dst, a, b)
			check()
			for i := range n {
				d := []float32{0}
				binarySame(op, d, af[i:i+1], bf[i:i+1])
				if want := BF16FromF32(d[0]); dst[i] != want {
					t.Fatalf("BinaryBF16(%v) n=%d [%d]: got %#x, want %#x", op, n, i, dst[i], want)
				}
			}
		}
		for op := range binOpCount {
			for _, left := range []bool{false, true} {
				s := float32(2.7)
				dst, check := guarded16(t, n)
				BinaryScalarBF16(op, dst, a, s, left)
				check()
				for i := range n {
					d := []float32{0}
					binaryScalar(op, d, af[i:i+1], s, left)
					if want := BF16FromF32(d[0]); dst[i] != want {
						t.Fatalf("BinaryScalarBF16(%v, left %v) n=%d [%d]: got %#x, want %#x", op, left, n, i, dst[i], want)
					}
				}
			}
		}
		dst, check := guarded16(t, n)
		AddReLUBF16(dst, a, b)
		check()
		for i := range n {
			if want := BF16FromF32(max(0, af[i]+bf[i])); dst[i] != want {
				t.Fatalf("AddReLUBF16 n=%d [%d]: got %#x, want %#x", n, i, dst[i], want)
			}
		}
		// In place: dst is the first operand.
		AddReLUBF16(a, a, b)
		for i := range n {
			if a[i] != dst[i] {
				t.Fatalf("AddReLUBF16 in place n=%d [%d]: %#x, out of place %#x", n, i, a[i], dst[i])
			}
		}
	}
}

func TestBF16ElementwisePanics(t *testing.T) {
	cases := []struct {
		name string
		f    func()
	}{
		{"forward lengths", func() { Act{Fn: ActReLU}.ForwardBF16(make([]uint16, 3), make([]uint16, 4)) }},
		{"backward lengths", func() { Act{Fn: ActReLU}.BackwardBF16(make([]uint16, 3), make([]uint16, 3), make([]uint16, 2)) }},
		{"binary lengths", func() { BinaryBF16(BinAdd, make([]uint16, 3), make([]uint16, 3), make([]uint16, 2)) }},
		{"binary scalar lengths", func() { BinaryScalarBF16(BinDiv, make([]uint16, 3), make([]uint16, 2), 1, false) }},
		{"add relu lengths", func() { AddReLUBF16(make([]uint16, 3), make([]uint16, 1), make([]uint16, 3)) }},
		{"unknown op", func() { BinaryBF16(binOpCount, nil, nil, nil) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			c.f()
		})
	}
}

// TestBF16ElemFused checks each level's fused bfloat16 elementwise kernels
// bit for bit against widening, the float32 definition and F32ToBF16's
// rounding, on operands with NaNs (quiet and signalling), zeros of both
// signs, infinities, subnormals and sums that overflow; each kernel must
// write exactly the first len&^15 elements.
func TestBF16ElemFused(t *testing.T) {
	specials := []uint16{0, 0x8000, 0x7fc1, 0xffc0, 0x7f81, 0x7f80, 0xff80, 0x0001, 0x8003, 0x7f7f, 0xff7f}
	r := rand.New(rand.NewPCG(9, 10))
	half := func(n int) []uint16 {
		h, _ := randBF16(r, n)
		for i := range h {
			if r.IntN(5) == 0 {
				h[i] = specials[r.IntN(len(specials))]
			}
		}
		return h
	}
	relu := func(x float32) float32 {
		if x < 0 {
			return 0
		}
		return x
	}
	forEachLevel(t, func(t *testing.T, l Level) {
		k := bf16ElemFor(l)
		if k.add == nil {
			t.Skipf("no fused bfloat16 elementwise kernels at %v", l)
		}
		for _, n := range []int{0, 15, 16, 47, 1024, 4099} {
			a, b := half(n), half(n)
			m := n &^ 15
			for _, rect := range []bool{false, true} {
				dst, check := guarded16(t, m)
				k.add(dst, a[:m], b[:m], rect)
				check()
				for i := range m {
					x := F32FromBF16(a[i]) + F32FromBF16(b[i])
					if rect {
						x = relu(x)
					}
					if want := BF16FromF32(x); dst[i] != want {
						t.Fatalf("%v add relu=%v n=%d [%d]: %#x + %#x = %#x, want %#x", l, rect, n, i, a[i], b[i], dst[i], want)
					}
				}
			}
			dst, check := guarded16(t, m)
			k.reluBwd(dst, a[:m], b[:m])
			check()
			for i := range m {
				g := F32FromBF16(a[i])
				if F32FromBF16(b[i]) <= 0 {
					g = 0
				}
				if want := BF16FromF32(g); dst[i] != want {
					t.Fatalf("%v reluBwd n=%d [%d]: dy %#x y %#x: %#x, want %#x", l, n, i, a[i], b[i], dst[i], want)
				}
			}
		}
	})
}
