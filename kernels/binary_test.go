package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// binInputs returns n operands with every tenth element special (zeros of
// both signs, infinities, NaN, subnormals, huge), so that 0/0, Inf−Inf and
// overflow are exercised in vectors and tails.
func binInputs(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		if r.IntN(10) == 0 {
			x[i] = actSpecials[r.IntN(len(actSpecials))]
		} else {
			x[i] = float32(r.NormFloat64() * 4)
		}
	}
	return x
}

func binCheck(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if !actSame(got[i], want[i]) {
			t.Fatalf("%s: element %d = %v, reference %v", what, i, got[i], want[i])
		}
	}
}

// TestBinaryConformance compares every level's same-length, scalar and
// strided kernels with the reference, bit for bit, with guard cells.
func TestBinaryConformance(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		same, scalar, strided := binarySameFor(l), binaryScalarFor(l), binaryStridedFor(l)
		r := rand.New(rand.NewPCG(21, 22))
		for op := BinAdd; op < binOpCount; op++ {
			t.Run(op.String(), func(t *testing.T) {
				for _, n := range suiteSizes(8) {
					a, b := binInputs(r, n), binInputs(r, n)
					want := make([]float32, n)
					binarySame(op, want, a, b)
					got, check := guarded(t, n)
					same(op, got, a, b)
					check()
					binCheck(t, fmt.Sprintf("n=%d same", n), got, want)

					for _, left := range []bool{false, true} {
						s := b[0]
						binaryScalar(op, want, a, s, left)
						got, check := guarded(t, n)
						scalar(op, got, a, s, left)
						check()
						binCheck(t, fmt.Sprintf("n=%d scalar left=%v", n, left), got, want)
					}

					// Strided: a read with stride 3, b with stride 5 (and 0),
					// dst contiguous and with stride 2.
					for _, st := range [][3]int{{1, 3, 5}, {1, 3, 0}, {1, 0, 2}, {2, 1, 1}, {1, 1, 1}} {
						ds, as, bs := st[0], st[1], st[2]
						sa, sb := binInputs(r, (n-1)*as+1), binInputs(r, (n-1)*bs+1)
						m := (n-1)*ds + 1
						want := make([]float32, m)
						binaryStrided(op, n, want, ds, sa, as, sb, bs)
						got, check := guarded(t, m)
						strided(op, n, got, ds, sa, as, sb, bs)
						check()
						binCheck(t, fmt.Sprintf("n=%d strides %v", n, st), got, want)
					}
				}
			})
		}
	})
}

// TestBinaryEntryPoints checks the exported functions (worker pool and
// dispatch of BinaryStrided to the contiguous and scalar kernels included)
// against a plain loop, with dst aliasing an operand.
func TestBinaryEntryPoints(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	n := 100003
	a, b := binInputs(r, n), binInputs(r, n)
	ref := func(op BinOp, x, y float32) float32 {
		switch op {
		case BinAdd:
			return x + y
		case BinSub:
			return x - y
		case BinMul:
			return x * y
		}
		return x / y
	}
	for op := BinAdd; op < binOpCount; op++ {
		got := append([]float32(nil), a...)
		Binary(op, got, got, b)
		for i := range got {
			if !actSame(got[i], ref(op, a[i], b[i])) {
				t.Fatalf("Binary(%v): element %d = %v", op, i, got[i])
			}
		}
		for _, left := range []bool{false, true} {
			BinaryScalar(op, got, a, 1.5, left)
			for i := range got {
				want := ref(op, a[i], 1.5)
				if left {
					want = ref(op, 1.5, a[i])
				}
				if !actSame(got[i], want) {
					t.Fatalf("BinaryScalar(%v, left=%v): element %d = %v, want %v", op, left, i, got[i], want)
				}
			}
		}
		for _, st := range [][2]int{{1, 1}, {1, 0}, {0, 1}, {2, 1}} {
			m := n / 2
			BinaryStrided(op, m, got, 1, a, st[0], b, st[1])
			for i := 0; i < m; i++ {
				if want := ref(op, a[i*st[0]], b[i*st[1]]); !actSame(got[i], want) {
					t.Fatalf("BinaryStrided(%v, strides %v): element %d = %v, want %v", op, st, i, got[i], want)
				}
			}
		}
	}
}

func TestBinaryPanics(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"length", func() { Binary(BinAdd, make([]float32, 3), make([]float32, 3), make([]float32, 2)) }, "Binary(Add): dst has 3 elements, a 3, b 2"},
		{"scalar", func() { BinaryScalar(BinDiv, make([]float32, 3), make([]float32, 4), 1, false) }, "BinaryScalar(Div): dst has 3 elements, a 4"},
		{"strided", func() {
			BinaryStrided(BinMul, 3, make([]float32, 3), 1, make([]float32, 5), 3, make([]float32, 1), 0)
		}, "3 elements with strides 1, 3, 0 do not fit"},
		{"negative", func() {
			BinaryStrided(BinSub, 2, make([]float32, 3), 1, make([]float32, 5), -1, make([]float32, 1), 0)
		}, "strides 1, -1, 0"},
		{"op", func() { Binary(BinOp(7), nil, nil, nil) }, "unknown operation BinOp(7)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if e, ok := r.(*Error); !ok || !strings.Contains(e.Error(), c.want) {
					t.Fatalf("panic %v, want one containing %q", r, c.want)
				}
			}()
			c.f()
		})
	}
}

func TestBinaryDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	n := 1 << 16
	a, b, d := make([]float32, n), make([]float32, n), make([]float32, n)
	for name, f := range map[string]func(){
		"Binary":        func() { Binary(BinAdd, d, a, b) },
		"BinaryScalar":  func() { BinaryScalar(BinDiv, d, a, 3, true) },
		"BinaryStrided": func() { BinaryStrided(BinMul, n/4, d, 1, a, 2, b, 3) },
	} {
		if avg := testing.AllocsPerRun(10, f); avg != 0 {
			t.Errorf("%s allocates %v times per call", name, avg)
		}
	}
}

// useBinLevel switches the binary kernels to level l's variants until the
// returned function restores them.
func useBinLevel(l Level) (restore func()) {
	s, c, g := binarySameImpl, binaryScalarImpl, binaryStridedImpl
	binarySameImpl, binaryScalarImpl, binaryStridedImpl = binarySameFor(l), binaryScalarFor(l), binaryStridedFor(l)
	return func() { binarySameImpl, binaryScalarImpl, binaryStridedImpl = s, c, g }
}

// BenchmarkBinary times c = a + b (and a + s) over whole slices through the
// exported entry points at 1M and 25M elements, and a strided run (a read
// with stride 1, b with stride 16, as when a contiguous and a channels-last
// operand meet) of 1M elements.
func BenchmarkBinary(b *testing.B) {
	for _, sz := range benchSizes {
		x, y, z := make([]float32, sz.n), make([]float32, sz.n), make([]float32, sz.n)
		for i := range x {
			x[i], y[i] = float32(i%100), float32(i%7+1)
		}
		for _, l := range Levels() {
			b.Run(fmt.Sprintf("add/%s/%v", sz.name, l), func(b *testing.B) {
				defer useBinLevel(l)()
				b.SetBytes(int64(12 * sz.n))
				for b.Loop() {
					Binary(BinAdd, z, x, y)
				}
				reportElems(b, sz.n)
			})
			b.Run(fmt.Sprintf("addscalar/%s/%v", sz.name, l), func(b *testing.B) {
				defer useBinLevel(l)()
				b.SetBytes(int64(8 * sz.n))
				for b.Loop() {
					BinaryScalar(BinAdd, z, x, 2, false)
				}
				reportElems(b, sz.n)
			})
		}
	}
	n := 1 << 20
	x, y, z := make([]float32, n), make([]float32, 16*n), make([]float32, n)
	for _, l := range Levels() {
		b.Run(fmt.Sprintf("addstrided/1M/%v", l), func(b *testing.B) {
			defer useBinLevel(l)()
			b.SetBytes(int64(12 * n))
			for b.Loop() {
				BinaryStrided(BinAdd, n, z, 1, x, 1, y[:16*(n-1)+1], 16)
			}
			reportElems(b, n)
		})
	}
}

// TestAddReLU checks the fused kernel against Binary then ReLU, bit for
// bit (NaN and signed zeros included), on every suite size, in place and
// not, with guards around the output.
func TestAddReLU(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, n := range append(suiteSizes(16), 3*addReLUChunk+5, 1<<16+3) {
		a, b := randSlice(r, n), randSlice(r, n)
		if n > 2 {
			a[1], b[2] = float32(math.NaN()), float32(math.Copysign(0, -1))
		}
		want := make([]float32, n)
		Binary(BinAdd, want, a, b)
		Act{Fn: ActReLU}.Forward(want, want)
		got, ok := guarded(t, n)
		AddReLU(got, a, b)
		ok()
		inPlace := append([]float32(nil), a...)
		AddReLU(inPlace, inPlace, b)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(inPlace[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: element %d = %v (in place %v), want %v", n, i, got[i], inPlace[i], want[i])
			}
		}
	}
}
