package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestCrossEntropyKernelMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shapes := []SoftmaxShape{{7, 5, 1}, {3, 4, 9}, {2, 3, softmaxTile + 5}, {5000, 10, 1}, {1, 1, 1}}
	for _, sh := range shapes {
		for _, eps := range []float64{0, 0.2} {
			s := CrossEntropyShape{Outer: sh.Outer, Classes: sh.N, Inner: sh.Inner, Smoothing: eps, IgnoreIndex: 0, HasIgnore: true}
			np, n := sh.Outer*sh.Inner, sh.Outer*sh.N*sh.Inner
			x := softmaxBuf(rng, n, 2)[softmaxGuard:][:n]
			target := make([]int64, np)
			for i := range target {
				target[i] = int64(rng.IntN(sh.N))
			}
			loss, lse := make([]float64, np), make([]float64, np)
			CrossEntropyForward(&s, x, target, loss, lse)
			g := []float32{0.7}
			dxb := softmaxGuarded(n)
			dx := dxb[softmaxGuard : softmaxGuard+n]
			CrossEntropyBackward(&s, x, target, lse, g, 1.5, dx)
			softmaxCheckGuards(t, "dx", dxb)
			p := 0
			softmaxRows(sh, func(idx []int) {
				defer func() { p++ }()
				if target[p] == 0 { // the ignore index
					for _, i := range idx {
						if dx[i] != 0 {
							t.Fatalf("%+v: ignored position %d has gradient %v", s, p, dx[i])
						}
					}
					if loss[p] != 0 {
						t.Fatalf("%+v: ignored position %d has loss %v", s, p, loss[p])
					}
					return
				}
				m, mean := math.Inf(-1), 0.0
				for _, i := range idx {
					m = math.Max(m, float64(x[i]))
					mean += float64(x[i]) / float64(sh.N)
				}
				sum := 0.0
				for _, i := range idx {
					sum += math.Exp(float64(x[i]) - m)
				}
				l := m + math.Log(sum)
				want := (1-eps)*(l-float64(x[idx[target[p]]])) + eps*(l-mean)
				if math.Abs(loss[p]-want) > 1e-9*(1+want) {
					t.Fatalf("%+v: loss %d = %v, want %v", s, p, loss[p], want)
				}
				for k, i := range idx {
					d := math.Exp(float64(x[i])-l) - eps/float64(sh.N)
					if int64(k) == target[p] {
						d -= 1 - eps
					}
					if w := 1.5 * 0.7 * d; math.Abs(float64(dx[i])-w) > 1e-6*(1+math.Abs(w)) {
						t.Fatalf("%+v: dx[%d] = %v, want %v", s, i, dx[i], w)
					}
				}
			})
		}
	}
}

// TestLossSumIndependentOfThreads checks that a reduced loss is the same
// however the blocks are shared out, and matches a plain float64 sum.
func TestLossSumIndependentOfThreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	n := 5*lossBlock + 123
	x, tg := softmaxBuf(rng, n, 10)[:n], softmaxBuf(rng, n, 1)[:n]
	want := 0.0
	for i := range x {
		d := float64(x[i]) - float64(tg[i])
		want += d * d
	}
	a := MSESum(x, tg)
	b := MSESum(x, tg)
	if a != b || math.Abs(a-want) > 1e-12*want {
		t.Fatalf("sums %v, %v, want %v", a, b, want)
	}
	// A block-by-block sequential evaluation gives the identical bits.
	seq := 0.0
	for lo := 0; lo < n; lo += lossBlock {
		seq += MSESum(x[lo:min(n, lo+lossBlock)], tg[lo:min(n, lo+lossBlock)])
	}
	if seq != a {
		t.Fatalf("parallel sum %v differs from blockwise %v", a, seq)
	}
}

func TestLossKernelsRejectBadLengths(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	x := make([]float32, 6)
	mustPanic("softmax y", func() { Softmax(&SoftmaxShape{2, 3, 1}, x, x[:5]) })
	mustPanic("mse target", func() { MSE(x, x[:5], x) })
	mustPanic("bce grad", func() { BCEWithLogitsBackward(x, x, x[:2], 1, x, nil) })
	mustPanic("ce target", func() {
		CrossEntropyForward(&CrossEntropyShape{Outer: 2, Classes: 3, Inner: 1}, x, []int64{0}, make([]float64, 2), make([]float64, 2))
	})
	mustPanic("ce classes", func() {
		CrossEntropyForward(&CrossEntropyShape{Outer: 2, Classes: 0, Inner: 1}, x, []int64{0, 0}, make([]float64, 2), make([]float64, 2))
	})
}

// BenchmarkCrossEntropy times the fused forward and backward over a batch
// of 256 rows of 1000 classes (an ImageNet classifier head).
func BenchmarkCrossEntropy(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	s := CrossEntropyShape{Outer: 256, Classes: 1000, Inner: 1, Smoothing: 0.1}
	x := softmaxBuf(rng, s.Outer*s.Classes, 3)[:s.Outer*s.Classes]
	target := make([]int64, s.Outer)
	for i := range target {
		target[i] = int64(rng.IntN(s.Classes))
	}
	loss, lse := make([]float64, s.Outer), make([]float64, s.Outer)
	dx := make([]float32, len(x))
	g := []float32{1}
	b.ReportAllocs()
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		CrossEntropyForward(&s, x, target, loss, lse)
		CrossEntropyBackward(&s, x, target, lse, g, 1.0/256, dx)
	}
}
