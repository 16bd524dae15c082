package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// softmaxShapes cover single rows and columns, primes, tails of the tile
// width and sizes large enough for the worker pool.
var softmaxShapes = []SoftmaxShape{
	{1, 1, 1}, {1, 7, 1}, {5, 1, 3}, {3, 13, 1}, {2, 5, 17}, {1, 3, softmaxTile + 1},
	{2, 4, 2*softmaxTile + 37}, {4099, 11, 1}, {3, 257, 129}, {0, 4, 3}, {2, 0, 3},
}

const softmaxGuard = 3

// softmaxBuf returns n random values with guard cells on each side.
func softmaxBuf(rng *rand.Rand, n int, scale float64) []float32 {
	b := make([]float32, n+2*softmaxGuard)
	for i := range b {
		b[i] = float32(rng.NormFloat64() * scale)
	}
	return b
}

func softmaxGuarded(n int) []float32 {
	b := make([]float32, n+2*softmaxGuard)
	for i := range b {
		b[i] = 12345
	}
	return b
}

func softmaxCheckGuards(t *testing.T, what string, b []float32) {
	t.Helper()
	n := len(b) - 2*softmaxGuard
	for i := 0; i < softmaxGuard; i++ {
		if b[i] != 12345 || b[softmaxGuard+n+i] != 12345 {
			t.Fatalf("%s: guard cells overwritten", what)
		}
	}
}

// softmaxRows calls fn with the flat indices of each softmax of s.
func softmaxRows(s SoftmaxShape, fn func(idx []int)) {
	idx := make([]int, s.N)
	for o := 0; o < s.Outer; o++ {
		for i := 0; i < s.Inner; i++ {
			for k := range idx {
				idx[k] = (o*s.N+k)*s.Inner + i
			}
			fn(idx)
		}
	}
}

func TestSoftmaxExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	worst := 0.0
	for i := 0; i < 200000; i++ {
		x := -708 + rng.Float64()*1417
		if i%4 == 0 {
			x = rng.NormFloat64() * 3
		}
		want := math.Exp(x)
		if e := math.Abs(softmaxExp(x)-want) / want; e > worst {
			worst = e
		}
	}
	if worst > 3e-12 {
		t.Errorf("worst relative error %g", worst)
	}
	special := [][2]float64{{0, 1}, {-709, 0}, {math.Inf(-1), 0}, {math.Inf(1), math.Inf(1)}, {710, math.Inf(1)}}
	for _, c := range special {
		if got := softmaxExp(c[0]); got != c[1] {
			t.Errorf("softmaxExp(%v) = %v, want %v", c[0], got, c[1])
		}
	}
	if got := softmaxExp(math.NaN()); !math.IsNaN(got) {
		t.Errorf("softmaxExp(NaN) = %v", got)
	}
}

func TestSoftmaxKernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range softmaxShapes {
		t.Run(fmt.Sprintf("%d×%d×%d", s.Outer, s.N, s.Inner), func(t *testing.T) {
			n := s.Outer * s.N * s.Inner
			xb, gb := softmaxBuf(rng, n, 3), softmaxBuf(rng, n, 1)
			x, g := xb[softmaxGuard:softmaxGuard+n], gb[softmaxGuard:softmaxGuard+n]
			yb, lb, dyb, dlb := softmaxGuarded(n), softmaxGuarded(n), softmaxGuarded(n), softmaxGuarded(n)
			y, l := yb[softmaxGuard:softmaxGuard+n], lb[softmaxGuard:softmaxGuard+n]
			dy, dl := dyb[softmaxGuard:softmaxGuard+n], dlb[softmaxGuard:softmaxGuard+n]
			Softmax(&s, x, y)
			LogSoftmax(&s, x, l)
			SoftmaxBackward(&s, y, g, dy)
			LogSoftmaxBackward(&s, l, g, dl)
			for name, b := range map[string][]float32{"y": yb, "logy": lb, "dx": dyb, "dlogx": dlb} {
				softmaxCheckGuards(t, name, b)
			}
			softmaxRows(s, func(idx []int) {
				m := math.Inf(-1)
				for _, i := range idx {
					m = math.Max(m, float64(x[i]))
				}
				sum := 0.0
				for _, i := range idx {
					sum += math.Exp(float64(x[i]) - m)
				}
				dot, gsum := 0.0, 0.0
				for _, i := range idx {
					p := math.Exp(float64(x[i])-m) / sum
					dot += float64(g[i]) * p
					gsum += float64(g[i])
				}
				for _, i := range idx {
					p := math.Exp(float64(x[i])-m) / sum
					checks := [][2]float64{
						{float64(y[i]), p},
						{float64(l[i]), float64(x[i]) - m - math.Log(sum)},
						{float64(dy[i]), p * (float64(g[i]) - dot)},
						{float64(dl[i]), float64(g[i]) - p*gsum},
					}
					for c, v := range checks {
						if math.Abs(v[0]-v[1]) > 1e-6*(1+math.Abs(v[1])) {
							t.Fatalf("result %d at %d: %v, want %v", c, i, v[0], v[1])
						}
					}
				}
			})
		})
	}
}

// BenchmarkSoftmax times a softmax along the last dim of [64, 12, 128, 128]
// attention scores and one along dim 1 of a [32, 64, 32, 32] row-major
// feature map (Inner = 1024).
func BenchmarkSoftmax(b *testing.B) {
	for _, s := range []SoftmaxShape{{64 * 12 * 128, 128, 1}, {32, 64, 1024}} {
		b.Run(fmt.Sprintf("%dx%dx%d", s.Outer, s.N, s.Inner), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			n := s.Outer * s.N * s.Inner
			x := softmaxBuf(rng, n, 2)[:n]
			y := make([]float32, n)
			b.ReportAllocs()
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				Softmax(&s, x, y)
			}
		})
	}
}

// smClose reports whether a variant's result matches the reference's: the
// same float32 or one ulp apart (their exponentials are the same float32,
// their float64 sums add in different orders), or, for
// gradients that cancel, within 1e-12.
func smClose(got, want float32) bool {
	if actULPs(got, want) <= 1 {
		return true
	}
	d := math.Abs(float64(got) - float64(want))
	return d <= 1e-12
}

// smSuiteShapes puts suite sizes along N with Inner = 1 (the row kernels)
// and along Inner (the column kernels, tails of four included).
func smSuiteShapes() []SoftmaxShape {
	var out []SoftmaxShape
	for _, n := range suiteSizes(8) {
		out = append(out, SoftmaxShape{Outer: 3, N: n, Inner: 1})
		if n <= 2*softmaxTile+40 {
			out = append(out, SoftmaxShape{Outer: 2, N: 5, Inner: n})
		}
	}
	return out
}

// TestSoftmaxConformance compares every level's softmax, log-softmax and
// their backward passes with the reference kernels, with guard cells, on
// rows and columns that include NaN, infinite and huge logits.
func TestSoftmaxConformance(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		k := smKernelsFor(l)
		rng := rand.New(rand.NewPCG(51, 52))
		for _, s := range smSuiteShapes() {
			n := s.Outer * s.N * s.Inner
			x, g := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 4)
				g[i] = float32(rng.NormFloat64())
				if rng.IntN(60) == 0 {
					x[i] = actSpecials[rng.IntN(len(actSpecials))]
				}
			}
			var want, got [4][]float32
			for kind := range want {
				want[kind] = make([]float32, n)
			}
			run := func(k *smKernels, kind int, out []float32, y []float32) {
				old := smImpl
				smImpl = k
				defer func() { smImpl = old }()
				smRun(kind, s, x, y, g, out)
			}
			for kind := range want {
				wantOut, check := want[kind], func() {}
				got[kind], check = guarded(t, n)
				gotOut := got[kind]
				switch kind {
				case smForward, smLogForward:
					run(&smGeneric, kind, nil, wantOut)
					run(k, kind, nil, gotOut)
				case smBackward:
					run(&smGeneric, kind, wantOut, want[smForward])
					run(k, kind, gotOut, want[smForward])
				case smLogBackward:
					run(&smGeneric, kind, wantOut, want[smLogForward])
					run(k, kind, gotOut, want[smLogForward])
				}
				check()
				for i := range wantOut {
					if !smClose(gotOut[i], wantOut[i]) {
						t.Fatalf("%+v kind %d: element %d (x %v) = %v, reference %v", s, kind, i, x[i], gotOut[i], wantOut[i])
					}
				}
			}
		}
	})
}

func TestSoftmaxDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	for _, s := range []SoftmaxShape{{256, 128, 1}, {4, 64, 300}} {
		n := s.Outer * s.N * s.Inner
		x, y, dx := make([]float32, n), make([]float32, n), make([]float32, n)
		for name, f := range map[string]func(){
			"Softmax":            func() { Softmax(&s, x, y) },
			"LogSoftmax":         func() { LogSoftmax(&s, x, y) },
			"SoftmaxBackward":    func() { SoftmaxBackward(&s, y, x, dx) },
			"LogSoftmaxBackward": func() { LogSoftmaxBackward(&s, y, x, dx) },
		} {
			if a := testing.AllocsPerRun(10, f); a != 0 {
				t.Errorf("%s(%+v) allocates %v times per call", name, s, a)
			}
		}
	}
}

// useSmLevel switches softmax to level l's kernels until the returned
// function restores them.
func useSmLevel(l Level) (restore func()) {
	old := smImpl
	smImpl = smKernelsFor(l)
	return func() { smImpl = old }
}

// BenchmarkSoftmaxLevels times softmax forward (and backward) over rows of
// 1024 logits (Inner = 1) and along dim 1 of a row-major [N, 64, 16384]
// tensor (Inner = 16384), at 1M and 25M elements, for each level.
func BenchmarkSoftmaxLevels(b *testing.B) {
	for _, sz := range benchSizes {
		rows := SoftmaxShape{Outer: sz.n / 1024, N: 1024, Inner: 1}
		cols := SoftmaxShape{Outer: sz.n / (64 * 16384), N: 64, Inner: 16384}
		if cols.Outer == 0 {
			cols = SoftmaxShape{Outer: 1, N: 64, Inner: sz.n / 64}
		}
		for _, s := range []SoftmaxShape{rows, cols} {
			n := s.Outer * s.N * s.Inner
			rng := rand.New(rand.NewPCG(1, 1))
			x := softmaxBuf(rng, n, 2)[:n]
			y, dx := make([]float32, n), make([]float32, n)
			for _, l := range Levels() {
				name := fmt.Sprintf("%s/%dx%dx%d/%v", sz.name, s.Outer, s.N, s.Inner, l)
				b.Run("fwd/"+name, func(b *testing.B) {
					defer useSmLevel(l)()
					b.SetBytes(int64(8 * n))
					for b.Loop() {
						Softmax(&s, x, y)
					}
					reportElems(b, n)
				})
				b.Run("bwd/"+name, func(b *testing.B) {
					defer useSmLevel(l)()
					b.SetBytes(int64(12 * n))
					for b.Loop() {
						SoftmaxBackward(&s, y, x, dx)
					}
					reportElems(b, n)
				})
			}
		}
	}
}
