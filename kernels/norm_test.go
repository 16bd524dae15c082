package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// normGuard is written past the end of every output so overruns show.
const normGuard = float32(-12345.5)

// normOut returns a slice of n elements followed by guard values, and a
// check that the guards survived.
func normOut(t *testing.T, name string, n int) ([]float32, func()) {
	buf := make([]float32, n+5)
	for i := n; i < len(buf); i++ {
		buf[i] = normGuard
	}
	return buf[:n], func() {
		t.Helper()
		for i := n; i < len(buf); i++ {
			if buf[i] != normGuard {
				t.Fatalf("%s: write past the end at %d", name, i)
			}
		}
	}
}

func normRandom(r *rand.Rand, n int, shift float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() + shift)
	}
	return v
}

func normClose(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*(1+math.Abs(want[i]))) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// bnReference computes batch norm and its gradients element by element.
func bnReference(s BatchNormShape, x, dy, w []float32, eps float64, batch bool, rm, rv []float64) (y, dx, dw, db, mean, biased []float64) {
	at := func(o, c, i int) int { return (o*s.C+c)*s.Inner + i }
	n := float64(s.Count())
	y, dx = make([]float64, len(x)), make([]float64, len(x))
	dw, db = make([]float64, s.C), make([]float64, s.C)
	mean, biased = make([]float64, s.C), make([]float64, s.C)
	for c := 0; c < s.C; c++ {
		for o := 0; o < s.Outer; o++ {
			for i := 0; i < s.Inner; i++ {
				mean[c] += float64(x[at(o, c, i)])
			}
		}
		mean[c] /= n
		for o := 0; o < s.Outer; o++ {
			for i := 0; i < s.Inner; i++ {
				d := float64(x[at(o, c, i)]) - mean[c]
				biased[c] += d * d
			}
		}
		biased[c] /= n
		m, v := mean[c], biased[c]
		if !batch {
			m, v = rm[c], rv[c]
		}
		is := 1 / math.Sqrt(v+eps)
		var sdy, sdyx float64
		for o := 0; o < s.Outer; o++ {
			for i := 0; i < s.Inner; i++ {
				k := at(o, c, i)
				xh := (float64(x[k]) - m) * is
				y[k] = xh * float64(w[c])
				sdy += float64(dy[k])
				sdyx += float64(dy[k]) * xh
			}
		}
		dw[c], db[c] = sdyx, sdy
		for o := 0; o < s.Outer; o++ {
			for i := 0; i < s.Inner; i++ {
				k := at(o, c, i)
				xh := (float64(x[k]) - m) * is
				g := float64(dy[k])
				if batch {
					g = g - sdy/n - xh*sdyx/n
				}
				dx[k] = float64(w[c]) * is * g
			}
		}
	}
	return
}

func TestBatchNormKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := []BatchNormShape{
		{1, 1, 2}, {2, 1, 1}, {2, 3, 1}, {7, 5, 11}, {3, 13, 1}, {1, 4, 3},
		{4001, 17, 1}, // several row blocks
		{2, 3, 2003},  // channel-parallel runs
		{997, 1, 1},   // one channel, many rows
		{5, 64, 1},    // wide rows
		{1031, 33, 1}, // blocks with a short tail
	}
	for _, s := range shapes {
		for _, batch := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d×%d×%d/batch=%v", s.Outer, s.C, s.Inner, batch), func(t *testing.T) {
				n := s.Outer * s.C * s.Inner
				x, dy, w := normRandom(r, n, 3), normRandom(r, n, 0), normRandom(r, s.C, 1)
				rm, rv := make([]float64, s.C), make([]float64, s.C)
				for c := range rm {
					rm[c], rv[c] = r.NormFloat64(), 0.5+r.Float64()
				}
				const eps = 1e-5
				wy, wdx, wdw, wdb, wmean, wvar := bnReference(s, x, dy, w, eps, batch, rm, rv)
				mean, variance := make([]float64, s.C), make([]float64, s.C)
				BatchNormStats(&s, x, mean, variance)
				for c := range mean {
					if math.Abs(mean[c]-wmean[c]) > 1e-9*(1+math.Abs(wmean[c])) || math.Abs(variance[c]-wvar[c]) > 1e-9*(1+wvar[c]) {
						t.Fatalf("channel %d: stats %v %v, want %v %v", c, mean[c], variance[c], wmean[c], wvar[c])
					}
				}
				invStd := make([]float64, s.C)
				for c := range invStd {
					if batch {
						invStd[c] = 1 / math.Sqrt(variance[c]+eps)
					} else {
						mean[c], invStd[c] = rm[c], 1/math.Sqrt(rv[c]+eps)
					}
				}
				y, yok := normOut(t, "y", n)
				BatchNormForward(&s, x, mean, invStd, w, nil, y)
				yok()
				normClose(t, "y", y, wy, 1e-5)
				dx, dxok := normOut(t, "dx", n)
				dw, dwok := normOut(t, "dw", s.C)
				db, dbok := normOut(t, "db", s.C)
				BatchNormBackward(&s, x, dy, mean, invStd, w, batch, dx, dw, db)
				dxok()
				dwok()
				dbok()
				normClose(t, "dx", dx, wdx, 1e-4)
				normClose(t, "dw", dw, wdw, 1e-5)
				normClose(t, "db", db, wdb, 1e-5)
			})
		}
	}
}

func TestBatchNormKernelShortSlices(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic for a short output")
		}
	}()
	s := BatchNormShape{2, 3, 4}
	BatchNormForward(&s, make([]float32, 24), make([]float64, 3), make([]float64, 3), nil, nil, make([]float32, 23))
}

func TestLayerNormKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, sz := range [][2]int{{1, 1}, {1, 7}, {3, 2}, {13, 31}, {257, 64}, {2, 4099}} {
		rows, n := sz[0], sz[1]
		t.Run(fmt.Sprintf("%d×%d", rows, n), func(t *testing.T) {
			x, dy := normRandom(r, rows*n, 2), normRandom(r, rows*n, 0)
			w, b := normRandom(r, n, 1), normRandom(r, n, 0)
			const eps = 1e-5
			wy, wdx := make([]float64, rows*n), make([]float64, rows*n)
			wdw, wdb := make([]float64, n), make([]float64, n)
			for i := 0; i < rows; i++ {
				xr := x[i*n : (i+1)*n]
				m, v := 0.0, 0.0
				for _, e := range xr {
					m += float64(e)
				}
				m /= float64(n)
				for _, e := range xr {
					v += (float64(e) - m) * (float64(e) - m)
				}
				is := 1 / math.Sqrt(v/float64(n)+eps)
				var sg, sgx float64
				for j, e := range xr {
					xh := (float64(e) - m) * is
					wy[i*n+j] = xh*float64(w[j]) + float64(b[j])
					g := float64(dy[i*n+j]) * float64(w[j])
					sg += g
					sgx += g * xh
					wdw[j] += float64(dy[i*n+j]) * xh
					wdb[j] += float64(dy[i*n+j])
				}
				for j, e := range xr {
					xh := (float64(e) - m) * is
					g := float64(dy[i*n+j]) * float64(w[j])
					wdx[i*n+j] = is * (g - sg/float64(n) - xh*sgx/float64(n))
				}
			}
			y, yok := normOut(t, "y", rows*n)
			mean, rstd := make([]float64, rows), make([]float64, rows)
			LayerNormForward(rows, n, x, w, b, eps, y, mean, rstd)
			yok()
			normClose(t, "y", y, wy, 1e-5)
			dx, dxok := normOut(t, "dx", rows*n)
			dw, dwok := normOut(t, "dw", n)
			db, dbok := normOut(t, "db", n)
			LayerNormBackward(rows, n, x, dy, w, mean, rstd, dx, dw, db)
			dxok()
			dwok()
			dbok()
			normClose(t, "dx", dx, wdx, 1e-4)
			normClose(t, "dw", dw, wdw, 1e-5)
			normClose(t, "db", db, wdb, 1e-5)
		})
	}
}

// closeScaled compares float32 results computed in float64 by two
// variants: within one float32 rounding of want, or a float64 rounding of
// the magnitudes that cancelled to give it.
func closeScaled(t *testing.T, what string, got, want []float32, scale float64) {
	t.Helper()
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if d := math.Abs(g - w); !(d <= 2.5e-7*math.Abs(w)+1e-12*scale) {
			t.Fatalf("%s: element %d of %d = %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
}

func close64(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*(1+math.Abs(want[i]))) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// bnSuiteShapes covers channel tails of the channels-last layout, run
// tails of the planar one, several row blocks, and runs longer than one
// primitive call.
func bnSuiteShapes() []BatchNormShape {
	var out []BatchNormShape
	for _, n := range suiteSizes(8) {
		out = append(out, BatchNormShape{3, n, 1}, BatchNormShape{n, 3, 1}, BatchNormShape{2, 2, n})
	}
	return append(out, BatchNormShape{4001, 17, 1}, BatchNormShape{1031, 33, 1}, BatchNormShape{2, 3, vecChunk + 1009},
		BatchNormShape{2, 40000, 1}, BatchNormShape{0, 3, 1}, BatchNormShape{2, 0, 5})
}

// TestBatchNormLevels runs every variant of the batch-norm building blocks
// (statistics, channel gradient sums, the per-channel maps) against the
// reference, and the kit-built kernels with the pure-Go kit too.
func TestBatchNormLevels(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(41, 42))
		stats, gsums, apply := pick(l, bnStatsVariants), pick(l, bnGradSumsVariants), pick(l, bnApplyVariants)
		for _, s := range bnSuiteShapes() {
			name := fmt.Sprintf("%d×%d×%d", s.Outer, s.C, s.Inner)
			n := s.Outer * s.C * s.Inner
			x, dy := normRandom(r, n, 3), normRandom(r, n, 0)

			wm, wv := make([]float64, s.C), make([]float64, s.C)
			bnStatsGeneric(s, x, wm, wv)
			for _, run := range []bnStatsFunc{stats, func(s BatchNormShape, x []float32, m, v []float64) { bnStatsKit(&vecGo, s, x, m, v) }} {
				m, v := make([]float64, s.C), make([]float64, s.C)
				run(s, x, m, v)
				if s.Count() == 0 {
					for c := range m {
						if !math.IsNaN(m[c]) || !math.IsNaN(v[c]) {
							t.Fatalf("%s: empty statistics %v %v, want NaN", name, m[c], v[c])
						}
					}
					continue
				}
				close64(t, name+" mean", m, wm, 1e-12)
				close64(t, name+" variance", v, wv, 1e-12)
			}
			if s.Count() == 0 {
				continue
			}

			w1, w2 := make([]float64, s.C), make([]float64, s.C)
			bnGradSumsVariants[Generic](s, x, dy, wm, w1, w2)
			g1, g2 := make([]float64, s.C), make([]float64, s.C)
			gsums(s, x, dy, wm, g1, g2)
			scale := math.Sqrt(float64(s.Count()))
			for c := range w1 {
				if math.Abs(g1[c]-w1[c]) > 1e-12*scale || math.Abs(g2[c]-w2[c]) > 1e-12*scale*3 {
					t.Fatalf("%s: channel %d gradient sums %v %v, want %v %v", name, c, g1[c], g2[c], w1[c], w2[c])
				}
			}

			p, q, rr := make([]float64, s.C), make([]float64, s.C), make([]float64, s.C)
			for c := range p {
				p[c], q[c], rr[c] = r.NormFloat64(), r.NormFloat64(), r.NormFloat64()
			}
			want := make([]float32, n)
			for _, c := range []struct{ two, relu bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
				var v []float32
				var qq []float64
				if c.two {
					v, qq = dy, q
				}
				bnApplyGeneric(s, x, v, p, qq, rr, want, c.relu)
				got, ok := guarded(t, n)
				apply(s, x, v, p, qq, rr, got, c.relu)
				ok()
				closeScaled(t, fmt.Sprintf("%s apply %+v", name, c), got, want, 30)
				got, ok = guarded(t, n)
				bnApplyKit(&vecGo, s, x, v, p, qq, rr, got, c.relu)
				ok()
				closeScaled(t, fmt.Sprintf("%s go-kit apply %+v", name, c), got, want, 30)
			}
		}
	})
}

// TestBatchNormReLUForward checks that the fused forward is exactly ReLU
// after BatchNormForward, NaN included, in both layouts.
func TestBatchNormReLUForward(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, s := range []BatchNormShape{{1031, 33, 1}, {3, 5, 1001}, {7, 64, 1}} {
		n := s.Outer * s.C * s.Inner
		x := normRandom(r, n, 1)
		x[n/2] = float32(math.NaN())
		mean, invStd := make([]float64, s.C), make([]float64, s.C)
		w, b := make([]float32, s.C), make([]float32, s.C)
		for c := range s.C {
			mean[c], invStd[c] = r.NormFloat64(), 0.5+r.Float64()
			w[c], b[c] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		want := make([]float32, n)
		BatchNormForward(&s, x, mean, invStd, w, b, want)
		Act{Fn: ActReLU}.Forward(want, want)
		got, ok := guarded(t, n)
		BatchNormReLUForward(&s, x, mean, invStd, w, b, got)
		ok()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%+v: element %d = %v, want %v", s, i, got[i], want[i])
			}
		}
	}
}

// TestBatchNormStatsLargeMean checks that the one-read statistics keep
// the two-pass reference's accuracy when the mean dwarfs the spread.
func TestBatchNormStatsLargeMean(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(43, 44))
		for _, s := range []BatchNormShape{{50000, 3, 1}, {3, 2, 50000}} {
			x := normRandom(r, s.Outer*s.C*s.Inner, 0)
			for i := range x {
				x[i] = 1e4 + x[i]*1e-2
			}
			wm, wv := make([]float64, s.C), make([]float64, s.C)
			bnStatsGeneric(s, x, wm, wv)
			m, v := make([]float64, s.C), make([]float64, s.C)
			pick(l, bnStatsVariants)(s, x, m, v)
			close64(t, "mean", m, wm, 1e-13)
			for c := range v {
				if math.Abs(v[c]-wv[c]) > 1e-8*wv[c] {
					t.Fatalf("%+v channel %d: variance %v, want %v", s, c, v[c], wv[c])
				}
			}
		}
	})
}

// TestBatchNormThreadIndependent checks that the statistics and gradient
// sums do not depend on how the work is split: the same call from one
// worker (a serial Parallel) and from several gives identical bits.
func TestBatchNormThreadIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, s := range []BatchNormShape{{20011, 7, 1}, {5, 3, 3001}} {
		n := s.Outer * s.C * s.Inner
		x, dy := normRandom(r, n, 1), normRandom(r, n, 0)
		m1, v1 := make([]float64, s.C), make([]float64, s.C)
		bnStats(s, x, m1, v1)
		a1, b1 := make([]float64, s.C), make([]float64, s.C)
		bnGradSums(s, x, dy, m1, a1, b1)
		// One block at a time, in reverse order, as a single worker.
		m2, v2 := make([]float64, s.C), make([]float64, s.C)
		a2, b2 := make([]float64, s.C), make([]float64, s.C)
		withSerialParallel(func() {
			bnStats(s, x, m2, v2)
			bnGradSums(s, x, dy, m1, a2, b2)
		})
		for c := range m1 {
			if m1[c] != m2[c] || v1[c] != v2[c] || a1[c] != a2[c] || b1[c] != b2[c] {
				t.Fatalf("%+v channel %d differs between worker counts", s, c)
			}
		}
	}
}

// TestLayerNormThreadIndependent checks that the weight and bias
// gradients, sums over rows, do not depend on the number of workers.
func TestLayerNormThreadIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(47, 49))
	rows, n := 1000, 96
	x, dy, w := normRandom(r, rows*n, 1), normRandom(r, rows*n, 0), normRandom(r, n, 1)
	y, mean, rstd := make([]float32, rows*n), make([]float64, rows), make([]float64, rows)
	LayerNormForward(rows, n, x, w, nil, 1e-5, y, mean, rstd)
	dw1, db1, dw2, db2 := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	LayerNormBackward(rows, n, x, dy, w, mean, rstd, nil, dw1, db1)
	withSerialParallel(func() { LayerNormBackward(rows, n, x, dy, w, mean, rstd, nil, dw2, db2) })
	sameBits32(t, "dweight", dw2, dw1)
	sameBits32(t, "dbias", db2, db1)
}

// withSerialParallel runs f with the worker pool limited to the caller.
func withSerialParallel(f func()) {
	workers.start()
	saved := workers.threads
	workers.threads = 1
	defer func() { workers.threads = saved }()
	f()
}

func TestLayerNormLevels(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(47, 48))
		fwd, bwd := pick(l, lnForwardVariants), pick(l, lnBackwardVariants)
		sizes := append(suiteSizes(8), vecChunk+31)
		for _, n := range sizes {
			rowCounts := []int{1, 3}
			if n == 37 {
				rowCounts = append(rowCounts, 300) // several row blocks
			}
			for _, rows := range rowCounts {
				x, dy := normRandom(r, rows*n, 2), normRandom(r, rows*n, 0)
				w, b := normRandom(r, n, 1), normRandom(r, n, 0)
				for _, aff := range [][2]bool{{true, true}, {false, false}, {true, false}, {false, true}} {
					ww, bb := w, b
					if !aff[0] {
						ww = nil
					}
					if !aff[1] {
						bb = nil
					}
					name := fmt.Sprintf("%d×%d weight=%v bias=%v", rows, n, aff[0], aff[1])
					wy := make([]float32, rows*n)
					wmean, wrstd := make([]float64, rows), make([]float64, rows)
					lnForwardGeneric(rows, n, x, ww, bb, 1e-5, wy, wmean, wrstd)
					y, ok := guarded(t, rows*n)
					mean, rstd := make([]float64, rows), make([]float64, rows)
					fwd(rows, n, x, ww, bb, 1e-5, y, mean, rstd)
					ok()
					close64(t, name+" mean", mean, wmean, 1e-12)
					close64(t, name+" rstd", rstd, wrstd, 1e-10)
					closeScaled(t, name+" y", y, wy, 30)

					wdx, wdw, wdb := make([]float32, rows*n), make([]float32, n), make([]float32, n)
					lnBackwardGeneric(rows, n, x, dy, ww, wmean, wrstd, wdx, wdw, wdb)
					dx, okx := guarded(t, rows*n)
					dw, okw := guarded(t, n)
					db, okb := guarded(t, n)
					bwd(rows, n, x, dy, ww, wmean, wrstd, dx, dw, db)
					okx()
					okw()
					okb()
					closeScaled(t, name+" dx", dx, wdx, 100)
					closeScaled(t, name+" dweight", dw, wdw, 30)
					closeScaled(t, name+" dbias", db, wdb, 30)
					// Each gradient alone.
					dw2 := make([]float32, n)
					bwd(rows, n, x, dy, ww, wmean, wrstd, nil, dw2, nil)
					sameBits32(t, name+" dweight alone", dw2, dw)
				}
			}
		}
	})
}

func TestNormKernelsDoNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	if level == Generic {
		t.Skip("the pure-Go reference allocates; only the vector path promises not to")
	}
	r := rand.New(rand.NewPCG(49, 50))
	for _, s := range []BatchNormShape{{4096, 64, 1}, {8, 16, 1024}} {
		n := s.Outer * s.C * s.Inner
		x, dy, y, dx := normRandom(r, n, 1), normRandom(r, n, 0), make([]float32, n), make([]float32, n)
		w, b := normRandom(r, s.C, 1), normRandom(r, s.C, 0)
		dw, db := make([]float32, s.C), make([]float32, s.C)
		mean, v, invStd := make([]float64, s.C), make([]float64, s.C), make([]float64, s.C)
		BatchNormStats(&s, x, mean, v)
		for c := range v {
			invStd[c] = 1 / math.Sqrt(v[c]+1e-5)
		}
		for name, f := range map[string]func(){
			"BatchNormStats":    func() { BatchNormStats(&s, x, mean, v) },
			"BatchNormForward":  func() { BatchNormForward(&s, x, mean, invStd, w, b, y) },
			"BatchNormBackward": func() { BatchNormBackward(&s, x, dy, mean, invStd, w, true, dx, dw, db) },
		} {
			f()
			if a := testing.AllocsPerRun(5, f); a != 0 {
				t.Errorf("%s %+v allocates %v times per call", name, s, a)
			}
		}
	}
	rows, n := 512, 256
	x, dy, y, dx := normRandom(r, rows*n, 1), normRandom(r, rows*n, 0), make([]float32, rows*n), make([]float32, rows*n)
	w, b, dw, db := normRandom(r, n, 1), normRandom(r, n, 0), make([]float32, n), make([]float32, n)
	mean, rstd := make([]float64, rows), make([]float64, rows)
	fwd := func() { LayerNormForward(rows, n, x, w, b, 1e-5, y, mean, rstd) }
	bwd := func() { LayerNormBackward(rows, n, x, dy, w, mean, rstd, dx, dw, db) }
	fwd()
	bwd()
	if a := testing.AllocsPerRun(5, fwd); a != 0 {
		t.Errorf("LayerNormForward allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(5, bwd); a != 0 {
		t.Errorf("LayerNormBackward allocates %v times per call", a)
	}
}

// BenchmarkBatchNormTrain times one training step of batch norm (the
// statistics, the forward map and the full backward) on ResNet-sized
// activations in both layouts. GB/s counts x, y, dy and dx once each.
func BenchmarkBatchNormTrain(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][4]int{{16, 256, 56, 56}, {16, 64, 112, 112}} {
		N, C, HW := sh[0], sh[1], sh[2]*sh[3]
		n := N * C * HW
		x, dy := normRandom(r, n, 0), normRandom(r, n, 0)
		y, dx := make([]float32, n), make([]float32, n)
		w, bias := normRandom(r, C, 1), normRandom(r, C, 0)
		dw, db := make([]float32, C), make([]float32, C)
		mean, v := make([]float64, C), make([]float64, C)
		for _, cl := range []bool{true, false} {
			s := BatchNormShape{N, C, HW}
			layout := "nchw"
			if cl {
				s, layout = BatchNormShape{N * HW, C, 1}, "nhwc"
			}
			b.Run(fmt.Sprintf("%dx%dx%dx%d/%s", sh[0], sh[1], sh[2], sh[3], layout), func(b *testing.B) {
				m := startMeter()
				for b.Loop() {
					BatchNormStats(&s, x, mean, v)
					for c := range v {
						v[c] = 1 / math.Sqrt(v[c]+1e-5)
					}
					BatchNormForward(&s, x, mean, v, w, bias, y)
					BatchNormBackward(&s, x, dy, mean, v, w, true, dx, dw, db)
				}
				m.report(b, float64(16*n))
			})
		}
	}
}

// BenchmarkBatchNormEval times the inference map alone (x read, y
// written).
func BenchmarkBatchNormEval(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	N, C, HW := 16, 64, 112*112
	n := N * C * HW
	x, y := normRandom(r, n, 0), make([]float32, n)
	w, bias := normRandom(r, C, 1), normRandom(r, C, 0)
	mean, invStd := make([]float64, C), make([]float64, C)
	for c := range C {
		mean[c], invStd[c] = r.NormFloat64(), 1+r.Float64()
	}
	for _, s := range []BatchNormShape{{N * HW, C, 1}, {N, C, HW}} {
		b.Run(fmt.Sprintf("inner=%d", s.Inner), func(b *testing.B) {
			m := startMeter()
			for b.Loop() {
				BatchNormForward(&s, x, mean, invStd, w, bias, y)
			}
			m.report(b, float64(8*n))
		})
	}
}

// BenchmarkLayerNorm times a [4096, 1024] layer norm. GB/s counts x and y
// (forward) or x, dy and dx (backward) once each.
func BenchmarkLayerNorm(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	rows, n := 4096, 1024
	x, dy := normRandom(r, rows*n, 0), normRandom(r, rows*n, 0)
	y, dx := make([]float32, rows*n), make([]float32, rows*n)
	w, bias := normRandom(r, n, 1), normRandom(r, n, 0)
	dw, db := make([]float32, n), make([]float32, n)
	mean, rstd := make([]float64, rows), make([]float64, rows)
	b.Run("forward", func(b *testing.B) {
		m := startMeter()
		for b.Loop() {
			LayerNormForward(rows, n, x, w, bias, 1e-5, y, mean, rstd)
		}
		m.report(b, float64(8*rows*n))
	})
	b.Run("backward", func(b *testing.B) {
		m := startMeter()
		for b.Loop() {
			LayerNormBackward(rows, n, x, dy, w, mean, rstd, dx, dw, db)
		}
		m.report(b, float64(12*rows*n))
	})
}

// TestBatchNormStreamedApply checks the channels-last map of a large
// float32 output, which streams its stores (bnStreamRows), against the
// same map into a misaligned output, which does not: identical bits, the
// rows of a short last block and the ReLU included.
func TestBatchNormStreamedApply(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, C := range []int{64, 96} {
		s := BatchNormShape{Outer: streamMinElems*Threads()/C + 7, C: C, Inner: 1}
		n := s.Outer * C
		x, dy := normRandom(r, n, 1), normRandom(r, n, 0)
		p, q, rr := make([]float64, C), make([]float64, C), make([]float64, C)
		for c := range p {
			p[c], q[c], rr[c] = r.NormFloat64(), r.NormFloat64(), r.NormFloat64()
		}
		k := kitAt(level)
		for _, c := range []struct{ two, relu bool }{{false, false}, {true, false}, {false, true}} {
			var v []float32
			var qq []float64
			if c.two {
				v, qq = dy, q
			}
			got := make([]float32, n)
			if !bnStreams(bnArgs{k: k, s: s, u: x, v: v, out: got}) {
				t.Fatalf("C=%d: the map of %d elements does not stream", C, n)
			}
			bnApplyKit(k, s, x, v, p, qq, rr, got, c.relu)
			want := make([]float32, n+1)[1:] // off a cache line: stored normally
			bnApplyKit(k, s, x, v, p, qq, rr, want, c.relu)
			sameBits32(t, fmt.Sprintf("C=%d %+v", C, c), got, want)
		}
	}
}
