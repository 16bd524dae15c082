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
				BatchNormStats(s, x, mean, variance)
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
				BatchNormForward(s, x, mean, invStd, w, nil, y)
				yok()
				normClose(t, "y", y, wy, 1e-5)
				dx, dxok := normOut(t, "dx", n)
				dw, dwok := normOut(t, "dw", s.C)
				db, dbok := normOut(t, "db", s.C)
				BatchNormBackward(s, x, dy, mean, invStd, w, batch, dx, dw, db)
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
	BatchNormForward(s, make([]float32, 24), make([]float64, 3), make([]float64, 3), nil, nil, make([]float32, 23))
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

func BenchmarkBatchNormForwardBackward(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []BatchNormShape{{32, 64, 56 * 56}, {32 * 56 * 56, 64, 1}} {
		n := s.Outer * s.C * s.Inner
		x, dy := normRandom(r, n, 0), normRandom(r, n, 0)
		y, dx := make([]float32, n), make([]float32, n)
		w := normRandom(r, s.C, 1)
		dw, db := make([]float32, s.C), make([]float32, s.C)
		mean, v := make([]float64, s.C), make([]float64, s.C)
		b.Run(fmt.Sprintf("inner=%d", s.Inner), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				BatchNormStats(s, x, mean, v)
				for c := range v {
					v[c] = 1 / math.Sqrt(v[c]+1e-5)
				}
				BatchNormForward(s, x, mean, v, w, nil, y)
				BatchNormBackward(s, x, dy, mean, v, w, true, dx, dw, db)
			}
		})
	}
}
