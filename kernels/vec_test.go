package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"syscall"
	"testing"
	"time"
)

// The row primitives of every level are checked against the pure-Go kit on
// the suite's sizes, with guard cells around everything they write.
// Reductions may add in a different order than the reference (several
// vector accumulators), so they compare within a few float64 roundings;
// everything else (maps, row accumulation, window sums and maxima) does
// the reference's operations in its order and must give identical bits.

func vecRand(r *rand.Rand, n int, shift float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() + shift)
	}
	return v
}

func vecRand64(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return v
}

// closeSum compares float64 accumulations over n terms of size about mag.
func closeSum(t *testing.T, what string, got, want float64, n int, mag float64) {
	t.Helper()
	if d := math.Abs(got - want); !(d <= 1e-13*float64(n+1)*mag+1e-300) {
		t.Fatalf("%s = %v, want %v (diff %g)", what, got, want, d)
	}
}

func sameBits32(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("%s: element %d of %d = %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
}

// guarded64 is guarded for float64 outputs that start from given values.
func guarded64(t *testing.T, init []float64) ([]float64, func()) {
	const pad, guard = 7, -9.25e9
	buf := make([]float64, len(init)+2*pad)
	for i := range buf {
		buf[i] = guard
	}
	s := buf[pad : pad+len(init) : pad+len(init)]
	copy(s, init)
	return s, func() {
		t.Helper()
		for i, v := range buf {
			if (i < pad || i >= pad+len(init)) && v != guard {
				t.Fatalf("float64 guard cell %d overwritten: %v", i, v)
			}
		}
	}
}

// TestVecKitComplete checks that every kit fills every primitive.
func TestVecKitComplete(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		v := reflect.ValueOf(*kitAt(l))
		for i := range v.NumField() {
			if v.Field(i).IsNil() {
				t.Errorf("%v kit has no %s", l, v.Type().Field(i).Name)
			}
		}
	})
}

func TestVecReductions(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(21, 22))
		for _, n := range suiteSizes(8) {
			x, g, w := vecRand(r, n, 3), vecRand(r, n, 0), vecRand(r, n, 1)
			m := r.NormFloat64() + 3
			closeSum(t, fmt.Sprintf("sum n=%d", n), k.sum(x), sumGo(x), n, 4)
			closeSum(t, fmt.Sprintf("sqDev n=%d", n), k.sqDev(x, m), sqDevGo(x, m), n, 16)
			a1, a2 := k.gradSums(g, x, m)
			b1, b2 := gradSumsGo(g, x, m)
			closeSum(t, fmt.Sprintf("gradSums.sg n=%d", n), a1, b1, n, 4)
			closeSum(t, fmt.Sprintf("gradSums.sgx n=%d", n), a2, b2, n, 16)
			a1, a2 = k.gradSumsW(g, w, x, m)
			b1, b2 = gradSumsWGo(g, w, x, m)
			closeSum(t, fmt.Sprintf("gradSumsW.sg n=%d", n), a1, b1, n, 16)
			closeSum(t, fmt.Sprintf("gradSumsW.sgx n=%d", n), a2, b2, n, 64)
			closeSum(t, fmt.Sprintf("dot n=%d", n), k.dot(g, x), dotGo(g, x), n, 16)
		}
		if k.sum(nil) != 0 || k.dot(nil, nil) != 0 {
			t.Fatal("empty reductions are not 0")
		}
	})
}

func TestVecColumnSums(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(23, 24))
		for _, C := range suiteSizes(8) {
			// 37 rows: several of colTiles' calls at every C.
			for _, rows := range []int{1, 2, 7, 37} {
				x, g := vecRand(r, rows*C, 3), vecRand(r, rows*C, 0)
				m, init1, init2 := vecRand64(r, C), vecRand64(r, C), vecRand64(r, C)
				name := fmt.Sprintf("C=%d rows=%d", C, rows)

				got, ok := guarded64(t, init1)
				want := append([]float64(nil), init1...)
				k.colSum(got, x)
				colSumGo(want, x)
				ok()
				for c := range want {
					closeSum(t, "colSum "+name, got[c], want[c], rows, 4)
				}

				got, ok = guarded64(t, init1)
				want = append(want[:0], init1...)
				k.colSqDev(got, x, m)
				colSqDevGo(want, x, m)
				ok()
				for c := range want {
					closeSum(t, "colSqDev "+name, got[c], want[c], rows, 32)
				}

				got1, ok1 := guarded64(t, init1)
				got2, ok2 := guarded64(t, init2)
				want1 := append([]float64(nil), init1...)
				want2 := append([]float64(nil), init2...)
				k.colGradSums(got1, got2, g, x, m)
				colGradSumsGo(want1, want2, g, x, m)
				ok1()
				ok2()
				for c := range want1 {
					closeSum(t, "colGradSums.s1 "+name, got1[c], want1[c], rows, 4)
					closeSum(t, "colGradSums.s2 "+name, got2[c], want2[c], rows, 32)
				}
			}
		}
	})
}

func TestVecAffine(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(25, 26))
		for _, n := range suiteSizes(8) {
			u, v, w, b := vecRand(r, n, 2), vecRand(r, n, -1), vecRand(r, n, 1), vecRand(r, n, 0)
			p, q, s := r.NormFloat64(), r.NormFloat64(), r.NormFloat64()
			want := make([]float32, n)
			name := fmt.Sprintf("n=%d", n)

			y, ok := guarded(t, n)
			k.affine(y, u, p, s)
			affineGo(want, u, p, s)
			ok()
			sameBits32(t, "affine "+name, y, want)

			y, ok = guarded(t, n)
			k.affine2(y, u, v, p, q, s)
			affine2Go(want, u, v, p, q, s)
			ok()
			sameBits32(t, "affine2 "+name, y, want)

			y, ok = guarded(t, n)
			k.lnApply(y, u, w, b, q, math.Abs(p)+0.5)
			lnApplyGo(want, u, w, b, q, math.Abs(p)+0.5)
			ok()
			sameBits32(t, "lnApply "+name, y, want)

			y, ok = guarded(t, n)
			k.lnNorm(y, u, q, math.Abs(p)+0.5)
			lnNormGo(want, u, q, math.Abs(p)+0.5)
			ok()
			sameBits32(t, "lnNorm "+name, y, want)

			y, ok = guarded(t, n)
			k.lnBackward(y, v, w, u, q, math.Abs(p)+0.5, s, 0.3)
			lnBackwardGo(want, v, w, u, q, math.Abs(p)+0.5, s, 0.3)
			ok()
			sameBits32(t, "lnBackward "+name, y, want)

			init1, init2 := vecRand64(r, n), vecRand64(r, n)
			aw, okw := guarded64(t, init1)
			ab, okb := guarded64(t, init2)
			k.lnColAcc(aw, ab, v, u, 1.5, -2.25)
			lnColAccGo(init1, init2, v, u, 1.5, -2.25)
			okw()
			okb()
			// The same operations as the reference, so the same bits.
			for j := range init1 {
				if aw[j] != init1[j] || ab[j] != init2[j] {
					t.Fatalf("lnColAcc %s: element %d = %v %v, want %v %v", name, j, aw[j], ab[j], init1[j], init2[j])
				}
			}

			bw, okbw := guarded64(t, init1)
			bb, okbb := guarded64(t, init2)
			y, ok = guarded(t, n)
			k.lnBackwardAcc(y, v, w, u, 1.5, -2.25, s, 0.3, bw, bb)
			okbw()
			okbb()
			ok()
			lnBackwardAccGo(want, v, w, u, 1.5, -2.25, s, 0.3, init1, init2)
			sameBits32(t, "lnBackwardAcc "+name, y, want)
			for j := range init1 {
				if bw[j] != init1[j] || bb[j] != init2[j] {
					t.Fatalf("lnBackwardAcc %s: sums %d = %v %v, want %v %v", name, j, bw[j], bb[j], init1[j], init2[j])
				}
			}
		}
	})
}

func TestVecColumnAffine(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(27, 28))
		for _, C := range suiteSizes(8) {
			for _, rows := range []int{1, 3} {
				n := rows * C
				u, v := vecRand(r, n, 2), vecRand(r, n, -1)
				p, q, s := vecRand64(r, C), vecRand64(r, C), vecRand64(r, C)
				want := make([]float32, n)
				name := fmt.Sprintf("C=%d rows=%d", C, rows)

				y, ok := guarded(t, n)
				k.colAffine(y, u, p, s)
				colAffineGo(want, u, p, s)
				ok()
				sameBits32(t, "colAffine "+name, y, want)

				y, ok = guarded(t, n)
				k.colAffine2(y, u, v, p, q, s)
				colAffine2Go(want, u, v, p, q, s)
				ok()
				sameBits32(t, "colAffine2 "+name, y, want)
			}
		}
	})
}

// TestVecColumnBF16 checks the bfloat16 column primitives of every kit
// against that kit's float32 primitives on the widened rows, rounded with
// F32ToBF16: the bits must agree, NaNs, zeros and infinities included.
func TestVecColumnBF16(t *testing.T) {
	specials := []uint16{0, 0x8000, 0x7fc1, 0xffc0, 0x7f80, 0xff80, 0x0001, 0x8003}
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(29, 30))
		for _, C := range suiteSizes(8) {
			for _, rows := range []int{1, 3, 8, 37} {
				n := rows * C
				name := fmt.Sprintf("C=%d rows=%d", C, rows)
				half := func(shift float64) []uint16 {
					h := narrow32(vecRand(r, n, shift))
					if C > 2 {
						h[r.IntN(n)] = specials[r.IntN(len(specials))]
					}
					return h
				}
				x, g := half(3), half(0)
				xf, gf := widen16(x), widen16(g)
				m, init1, init2 := vecRand64(r, C), vecRand64(r, C), vecRand64(r, C)

				sums := []struct {
					what      string
					got, want func(s1, s2 []float64)
				}{
					{"colSumH", func(s1, _ []float64) { k.colSumH(s1, x) }, func(s1, _ []float64) { k.colSum(s1, xf) }},
					{"colSqDevH", func(s1, _ []float64) { k.colSqDevH(s1, x, m) }, func(s1, _ []float64) { k.colSqDev(s1, xf, m) }},
					{"colGradSumsH", func(s1, s2 []float64) { k.colGradSumsH(s1, s2, g, x, m) }, func(s1, s2 []float64) { k.colGradSums(s1, s2, gf, xf, m) }},
				}
				for _, c := range sums {
					got1, ok1 := guarded64(t, init1)
					got2, ok2 := guarded64(t, init2)
					want1 := append([]float64(nil), init1...)
					want2 := append([]float64(nil), init2...)
					c.got(got1, got2)
					c.want(want1, want2)
					ok1()
					ok2()
					sameBits64(t, c.what+" "+name, got1, want1)
					sameBits64(t, c.what+" s2 "+name, got2, want2)
				}

				p, q, s := vecRand64(r, C), vecRand64(r, C), vecRand64(r, C)
				yf := make([]float32, n)
				for _, relu := range []bool{false, true} {
					k.colAffine(yf, xf, p, s)
					if relu {
						actForwardImpl(Act{Fn: ActReLU}, yf, yf)
					}
					y, ok := guarded16(t, n)
					k.colAffineH(y, x, p, s, relu)
					ok()
					sameBits16(t, fmt.Sprintf("colAffineH relu=%v %s", relu, name), y, narrow32(yf))
				}
				k.colAffine2(yf, xf, gf, p, q, s)
				y, ok := guarded16(t, n)
				k.colAffine2H(y, x, g, p, q, s)
				ok()
				sameBits16(t, "colAffine2H "+name, y, narrow32(yf))
			}
		}
	})
}

func TestVecRowAccumulate(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(29, 30))
		for _, n := range suiteSizes(8) {
			x := vecRand(r, n, 0)
			init := vecRand64(r, n)
			name := fmt.Sprintf("n=%d", n)

			got, ok := guarded64(t, init)
			want := append([]float64(nil), init...)
			k.accRow(got, x)
			accRowGo(want, x)
			ok()
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("accRow %s: element %d = %v, want %v", name, i, got[i], want[i])
				}
			}

			got, ok = guarded64(t, init)
			want = append(want[:0], init...)
			k.accRowScaled(got, x, -0.75)
			accRowScaledGo(want, x, -0.75)
			ok()
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("accRowScaled %s: element %d = %v, want %v", name, i, got[i], want[i])
				}
			}

			y, oky := guarded(t, n)
			wy := make([]float32, n)
			k.storeScaled(y, init, 1.0/3)
			storeScaledGo(wy, init, 1.0/3)
			oky()
			sameBits32(t, "storeScaled "+name, y, wy)
		}
	})
}

func TestVecAccRows(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(37, 38))
		for _, dim := range suiteSizes(8) {
			const num = 6
			table := vecRand(r, num*dim, 0)
			for _, n := range []int{0, 1, 5} {
				idx := make([]int64, n)
				for i := range idx {
					idx[i] = int64(r.IntN(num))
				}
				w := vecRand(r, n, 0)
				for _, off := range []int{0, dim / 3} {
					init := vecRand64(r, dim-off)
					name := fmt.Sprintf("dim=%d rows=%d offset=%d", dim, n, off)
					for _, scaled := range []bool{false, true} {
						got, ok := guarded64(t, init)
						want := append([]float64(nil), init...)
						if scaled {
							k.accRowsScaled(got, table[off:], idx, w, dim)
							accRowsScaledGo(want, table[off:], idx, w, dim)
						} else {
							k.accRows(got, table[off:], idx, dim)
							accRowsGo(want, table[off:], idx, dim)
						}
						ok()
						for j := range want {
							if got[j] != want[j] {
								t.Fatalf("accRows %s scaled=%v: element %d = %v, want %v", name, scaled, j, got[j], want[j])
							}
						}
					}
				}
			}
		}
	})
}

func TestVecMaxRowArg(t *testing.T) {
	nan := float32(math.NaN())
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(31, 32))
		for _, n := range suiteSizes(8) {
			y0 := vecRand(r, n, 0)
			am0 := make([]int64, n)
			for i := range am0 {
				am0[i] = int64(r.IntN(5))
			}
			y, oky := guarded(t, n)
			copy(y, y0)
			am := make([]int64, n)
			copy(am, am0)
			wy, wam := append([]float32(nil), y0...), append([]int64(nil), am0...)
			for row := range 4 {
				x := vecRand(r, n, 0)
				for i := range x {
					switch r.IntN(9) {
					case 0:
						x[i] = nan
					case 1:
						y[i], wy[i] = nan, nan // a NaN best stays
					case 2:
						x[i] = wy[i] // ties keep the earlier row
					}
				}
				k.maxRowArg(y, am, x, int64(100+row))
				maxRowArgGo(wy, wam, x, int64(100+row))
			}
			oky()
			sameBits32(t, fmt.Sprintf("maxRowArg n=%d", n), y, wy)
			for i := range wam {
				if am[i] != wam[i] {
					t.Fatalf("maxRowArg n=%d: argmax %d = %d, want %d", n, i, am[i], wam[i])
				}
			}
		}
	})
}

// windowCase lays out taps as channels-last pooling does: W pixels of
// stride C per row, dilation d.
type windowCase struct{ nh, nw, sh, sw, size int }

func newWindowCase(C, nh, nw, d int) windowCase {
	const W = 5
	sw, sh := d*C, d*W*C
	size := C
	if nh > 0 && nw > 0 {
		size += (nh-1)*sh + (nw-1)*sw
	}
	return windowCase{nh, nw, sh, sw, size}
}

func TestVecWindows(t *testing.T) {
	nan := float32(math.NaN())
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(33, 34))
		for _, C := range suiteSizes(8) {
			for _, hw := range [][3]int{{0, 2, 1}, {1, 1, 1}, {2, 3, 1}, {3, 3, 2}, {3, 0, 1}} {
				wc := newWindowCase(C, hw[0], hw[1], hw[2])
				name := fmt.Sprintf("C=%d window=%v", C, hw)
				x := vecRand(r, wc.size, 0)
				for i := range x {
					switch r.IntN(40) {
					case 0:
						x[i] = nan
					case 1:
						x[i] = float32(math.Inf(-1))
					}
				}
				y, oky := guarded(t, C)
				idx := make([]int32, C+2)
				idx[0], idx[C+1] = -77, -77
				wy, widx := make([]float32, C), make([]int32, C)
				k.maxWindow(y, idx[1:C+1], x, wc.nh, wc.nw, wc.sh, wc.sw, 11, 100, 3)
				maxWindowGo(wy, widx, x, wc.nh, wc.nw, wc.sh, wc.sw, 11, 100, 3)
				oky()
				if idx[0] != -77 || idx[C+1] != -77 {
					t.Fatalf("maxWindow %s: index guard overwritten", name)
				}
				sameBits32(t, "maxWindow "+name, y, wy)
				for c := range widx {
					if idx[1+c] != widx[c] {
						t.Fatalf("maxWindow %s: index %d = %d, want %d", name, c, idx[1+c], widx[c])
					}
				}

				x = vecRand(r, wc.size, 0)
				y, oky = guarded(t, C)
				k.sumWindow(y, x, wc.nh, wc.nw, wc.sh, wc.sw, 7)
				sumWindowGo(wy, x, wc.nh, wc.nw, wc.sh, wc.sw, 7)
				oky()
				sameBits32(t, "sumWindow "+name, y, wy)

				g := vecRand(r, C, 0)
				got, okx := guarded(t, wc.size)
				copy(got, x)
				want := append([]float32(nil), x...)
				k.addWindow(got, wc.nh, wc.nw, wc.sh, wc.sw, g, 3)
				addWindowGo(want, wc.nh, wc.nw, wc.sh, wc.sw, g, 3)
				okx()
				sameBits32(t, "addWindow "+name, got, want)
			}
		}
	})
}

// benchMeter records the process CPU time at the start of a benchmark's
// loop. On a shared machine wall time includes waiting for other tenants'
// processes; CPU time does not, so both are reported.
type benchMeter struct{ cpu time.Duration }

func startMeter() benchMeter { return benchMeter{cpuTime()} }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report gives the throughput in GB/s for bytes moved per operation (each
// operand read or written counted once) by wall time, and the process CPU
// time per operation (all workers together).
func (m benchMeter) report(b *testing.B, bytes float64) {
	b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	b.ReportMetric(float64((cpuTime()-m.cpu).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
}

func TestVecTranspose(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		k := kitAt(l)
		r := rand.New(rand.NewPCG(35, 36))
		sizes := suiteSizes(8)
		for _, rows := range sizes {
			for _, cols := range []int{1, 7, 8, 9, 16, 31, 33} {
				for _, pad := range []int{0, 3} {
					lds, ldd := cols+pad, rows+pad
					src := vecRand(r, (rows-1)*lds+cols, 0)
					n := (cols-1)*ldd + rows
					got, ok := guarded(t, n)
					poolGarbage(got)
					want := make([]float32, n)
					for i := range want {
						want[i] = 99 // cells between rows stay as they were
					}
					k.transpose(got, ldd, src, lds, rows, cols)
					transposeGo(want, ldd, src, lds, rows, cols)
					ok()
					sameBits32(t, fmt.Sprintf("transpose %d×%d pad %d", rows, cols, pad), got, want)
				}
			}
		}
	})
}

// BenchmarkVecColumnBF16 times the bfloat16 column primitives on a block
// the batch norms hand them (256 channels, L2-resident) at this level.
func BenchmarkVecColumnBF16(b *testing.B) {
	const C, rows = 256, 64
	k := kitAt(level)
	r := rand.New(rand.NewPCG(31, 32))
	x, g := narrow32(vecRand(r, rows*C, 1)), narrow32(vecRand(r, rows*C, 0))
	y := make([]uint16, rows*C)
	s1, s2, m, p, q := make([]float64, C), make([]float64, C), vecRand64(r, C), vecRand64(r, C), vecRand64(r, C)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"colSumH", func() { k.colSumH(s1, x) }},
		{"colSqDevH", func() { k.colSqDevH(s1, x, m) }},
		{"colGradSumsH", func() { k.colGradSumsH(s1, s2, g, x, m) }},
		{"colAffineH", func() { k.colAffineH(y, x, p, q, true) }},
		{"colAffine2H", func() { k.colAffine2H(y, x, g, p, q, m) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f()
			}
			reportElems(b, rows*C)
		})
	}
}
