package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// useBNLevel switches batch norm's dispatch (the float32 variants, the
// bfloat16 kernels' kit and the conversions) to level l until the
// returned function restores it, so one process checks every level's
// exported kernels against the composition at the same level.
func useBNLevel(l Level) (restore func()) {
	st, gs, ap, k := bnStats, bnGradSums, bnApply, bnKitBF16
	cvt := useCvtLevel(l)
	bnStats, bnGradSums, bnApply = pick(l, bnStatsVariants), pick(l, bnGradSumsVariants), pick(l, bnApplyVariants)
	bnKitBF16 = pick(l, bnBF16Kits)
	return func() {
		bnStats, bnGradSums, bnApply, bnKitBF16 = st, gs, ap, k
		cvt()
	}
}

// bnBF16Shapes covers both layouts: channels-last with odd channel counts,
// row counts that leave a short last block (in the reductions' bnBlock/C
// and the maps' vecChunk/C rows), channels wide enough that a block is one
// row, wider than a block, and empty; planar with runs longer than a
// vecChunk piece.
func bnBF16Shapes() []BatchNormShape {
	return []BatchNormShape{
		{70001, 1, 1}, {30001, 3, 1}, {4001, 17, 1}, {1500, 64, 1}, {501, 200, 1},
		{5, 20000, 1}, {2, 40000, 1}, {1, 7, 1}, {0, 17, 1},
		{2, 3, 1001}, {3, 17, 49}, {2, 1, vecChunk + 1009}, {2, 64, 7}, {0, 3, 5},
	}
}

// bnBF16Input returns n bfloat16 values about shift, with ±0 sprinkled
// in, and with nan a NaN in channel 0 (of c channels, layout s).
func bnBF16Input(r *rand.Rand, s BatchNormShape, shift float64, nan bool) []uint16 {
	n := s.Outer * s.C * s.Inner
	x := make([]uint16, n)
	for i := range x {
		x[i] = BF16FromF32(float32(r.NormFloat64() + shift))
		switch r.IntN(97) {
		case 0:
			x[i] = 0
		case 1:
			x[i] = 0x8000
		}
	}
	if nan && n > 0 {
		x[0] = 0x7fc1 // channel 0, in either layout
	}
	return x
}

func widen16(h []uint16) []float32 {
	f := make([]float32, len(h))
	BF16ToF32(f, h)
	return f
}

func narrow32(f []float32) []uint16 {
	h := make([]uint16, len(f))
	F32ToBF16(h, f)
	return h
}

func sameBitsF32(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d of %d = %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
}

func sameBits64(t *testing.T, what string, got, want []float64) {
	t.Helper()
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("%s: element %d of %d = %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
}

// TestBatchNormBF16 checks the bfloat16 kernels at every level against
// widening the whole tensor, running the float32 kernel and rounding with
// F32ToBF16, bit for bit, with guards around every output.
func TestBatchNormBF16(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		defer useBNLevel(l)()
		r := rand.New(rand.NewPCG(61, 62))
		for _, s := range bnBF16Shapes() {
			n, C := s.Outer*s.C*s.Inner, s.C
			x := bnBF16Input(r, s, 3, C > 1)
			dy := bnBF16Input(r, s, 0, false)
			xf, dyf := widen16(x), widen16(dy)
			w, b := normRandom(r, C, 1), normRandom(r, C, 0)

			wm, wv := make([]float64, C), make([]float64, C)
			BatchNormStats(&s, xf, wm, wv)
			mean, vari := make([]float64, C), make([]float64, C)
			BatchNormStatsBF16(&s, x, mean, vari)
			name := fmt.Sprintf("%d×%d×%d", s.Outer, s.C, s.Inner)
			sameBits64(t, name+" mean", mean, wm)
			sameBits64(t, name+" variance", vari, wv)

			// Batch statistics, and constants as in evaluation.
			invStd := make([]float64, C)
			runMean, runInv := make([]float64, C), make([]float64, C)
			for c := range C {
				invStd[c] = 1 / math.Sqrt(vari[c]+1e-5)
				runMean[c], runInv[c] = r.NormFloat64(), 0.5+r.Float64()
			}

			for _, affine := range []bool{true, false} {
				var ww, bb []float32
				if affine {
					ww, bb = w, b
				}
				for _, relu := range []bool{false, true} {
					what := fmt.Sprintf("%s affine=%v relu=%v forward", name, affine, relu)
					yf := make([]float32, n)
					if relu {
						BatchNormReLUForward(&s, xf, mean, invStd, ww, bb, yf)
					} else {
						BatchNormForward(&s, xf, mean, invStd, ww, bb, yf)
					}
					want := narrow32(yf)
					y, ok := guarded16(t, n)
					BatchNormForwardBF16(&s, x, mean, invStd, ww, bb, y, relu)
					ok()
					sameBits16(t, what, y, want)
					in := append([]uint16(nil), x...)
					BatchNormForwardBF16(&s, in, mean, invStd, ww, bb, in, relu)
					sameBits16(t, what+" in place", in, want)
				}
				for _, batch := range []bool{true, false} {
					m, is := mean, invStd
					if !batch {
						m, is = runMean, runInv
					}
					what := fmt.Sprintf("%s affine=%v batchStats=%v backward", name, affine, batch)
					dxf, dwf, dbf := make([]float32, n), make([]float32, C), make([]float32, C)
					BatchNormBackward(&s, xf, dyf, m, is, ww, batch, dxf, dwf, dbf)
					dx, ok := guarded16(t, n)
					dw, okw := guarded(t, C)
					db, okb := guarded(t, C)
					BatchNormBackwardBF16(&s, x, dy, m, is, ww, batch, dx, dw, db)
					ok()
					okw()
					okb()
					sameBits16(t, what+" dx", dx, narrow32(dxf))
					sameBitsF32(t, what+" dweight", dw, dwf)
					sameBitsF32(t, what+" dbias", db, dbf)

					// Parameter gradients alone, and dx alone.
					clear(dw)
					clear(db)
					BatchNormBackwardBF16(&s, x, dy, m, is, ww, batch, nil, dw, db)
					sameBitsF32(t, what+" dweight without dx", dw, dwf)
					sameBitsF32(t, what+" dbias without dx", db, dbf)
					dx2, ok2 := guarded16(t, n)
					BatchNormBackwardBF16(&s, x, dy, m, is, ww, batch, dx2, nil, nil)
					ok2()
					sameBits16(t, what+" dx alone", dx2, dx)
				}
			}
		}
	})
}

// TestBatchNormBF16Shapes checks that the bfloat16 kernels reject
// mismatched lengths as the float32 ones do.
func TestBatchNormBF16Shapes(t *testing.T) {
	s := BatchNormShape{4, 3, 1}
	m, v := make([]float64, 3), make([]float64, 3)
	x := make([]uint16, 12)
	for name, f := range map[string]func(){
		"stats":    func() { BatchNormStatsBF16(&s, x[:11], m, v) },
		"forward":  func() { BatchNormForwardBF16(&s, x, m, v, nil, nil, x[:11], false) },
		"backward": func() { BatchNormBackwardBF16(&s, x, x, m, v, make([]float32, 2), true, x, nil, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic on a short slice", name)
				}
			}()
			f()
		}()
	}
}

func TestBatchNormBF16DoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	if bnKitBF16 == nil {
		t.Skip("the pure-Go reference allocates; only the vector path promises not to")
	}
	r := rand.New(rand.NewPCG(63, 64))
	for _, s := range []BatchNormShape{{4096, 64, 1}, {8, 16, 1024}} {
		n := s.Outer * s.C * s.Inner
		x, dy := bnBF16Input(r, s, 1, false), bnBF16Input(r, s, 0, false)
		y, dx := make([]uint16, n), make([]uint16, n)
		w, b := normRandom(r, s.C, 1), normRandom(r, s.C, 0)
		dw, db := make([]float32, s.C), make([]float32, s.C)
		mean, v, invStd := make([]float64, s.C), make([]float64, s.C), make([]float64, s.C)
		BatchNormStatsBF16(&s, x, mean, v)
		for c := range v {
			invStd[c] = 1 / math.Sqrt(v[c]+1e-5)
		}
		for name, f := range map[string]func(){
			"BatchNormStatsBF16":    func() { BatchNormStatsBF16(&s, x, mean, v) },
			"BatchNormForwardBF16":  func() { BatchNormForwardBF16(&s, x, mean, invStd, w, b, y, true) },
			"BatchNormBackwardBF16": func() { BatchNormBackwardBF16(&s, x, dy, mean, invStd, w, true, dx, dw, db) },
		} {
			f()
			if a := testing.AllocsPerRun(5, f); a != 0 {
				t.Errorf("%s %+v allocates %v times per call", name, s, a)
			}
		}
	}
}

// BenchmarkBatchNormBF16 times a training step's batch norm (statistics
// and forward; backward) on a channels-last bfloat16 activation, natively
// and as the whole-tensor widen, float32 kernel, narrow composition.
// GB/s counts the bfloat16 tensors read and written once each.
func BenchmarkBatchNormBF16(b *testing.B) {
	r := rand.New(rand.NewPCG(65, 66))
	N, H, W, C := 8, 56, 56, 256
	s := BatchNormShape{N * H * W, C, 1}
	n := s.Outer * C
	x, dy := bnBF16Input(r, s, 1, false), bnBF16Input(r, s, 0, false)
	y, dx := make([]uint16, n), make([]uint16, n)
	w, bias := normRandom(r, C, 1), normRandom(r, C, 0)
	dw, db := make([]float32, C), make([]float32, C)
	mean, v, invStd := make([]float64, C), make([]float64, C), make([]float64, C)
	inv := func() {
		for c := range v {
			invStd[c] = 1 / math.Sqrt(v[c]+1e-5)
		}
	}
	BatchNormStatsBF16(&s, x, mean, v)
	inv()
	xf, gf, dxf := make([]float32, n), make([]float32, n), make([]float32, n)
	for _, c := range []struct {
		name  string
		bytes int
		f     func()
	}{
		{"forward/native", 4 * n, func() {
			BatchNormStatsBF16(&s, x, mean, v)
			inv()
			BatchNormForwardBF16(&s, x, mean, invStd, w, bias, y, true)
		}},
		{"forward/widen", 4 * n, func() {
			BF16ToF32(xf, x)
			BatchNormStats(&s, xf, mean, v)
			inv()
			BatchNormReLUForward(&s, xf, mean, invStd, w, bias, xf)
			F32ToBF16(y, xf)
		}},
		{"backward/native", 6 * n, func() {
			BatchNormBackwardBF16(&s, x, dy, mean, invStd, w, true, dx, dw, db)
		}},
		{"backward/widen", 6 * n, func() {
			BF16ToF32(xf, x)
			BF16ToF32(gf, dy)
			BatchNormBackward(&s, xf, gf, mean, invStd, w, true, dxf, dw, db)
			F32ToBF16(dx, dxf)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(c.bytes))
			for b.Loop() {
				c.f()
			}
		})
	}
}
