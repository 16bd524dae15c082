package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestConvForwardEpilogueBF16To checks every convolution case, both layouts,
// with prepared weights and without (packed by the first epilogue's
// forward, reused by the others), at two blockings, against
// ConvForwardBF16To followed by BinaryBF16 and Act.ForwardBF16, bit for
// bit, with guards around the output. The residual holds a NaN and zeros
// of both signs so the stage's edge cases meet the epilogue.
func TestConvForwardEpilogueBF16To(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	acts := []Act{{Fn: ActReLU}, {Fn: ActSigmoid}, {Fn: ActSiLU}, {Fn: ActHardTanh, A: -0.5, B: 0.5}, {Fn: ActELU, A: 1}, {Fn: ActGELU}}
	cases := append(append([]convCase{}, convCases...), convBF16Cases...)
	for _, blocking := range [][2]int{{0, 0}, {64, 1}} {
		restore := setConvBlocking(blocking[0], blocking[1])
		bytes := convBF16BlockBytes
		if blocking[0] > 0 {
			convBF16BlockBytes = 1 // im2col blocks of the least pixel count
		}
		for _, c := range cases {
			for _, cl := range []bool{true, false} {
				s := c.shape(cl)
				x, _ := randBF16(r, s.xLen())
				w, _ := randBF16(r, s.wLen())
				res, _ := randBF16(r, s.yLen())
				if len(res) > 3 {
					res[0], res[1], res[2] = 0x8000, 0, 0x7fc0
				}
				var bias []float32
				if r.IntN(4) > 0 {
					bias = randSlice(r, s.O)
				}
				prepared := PrepareConvWeightsBF16(&s, w)
				for i, ep := range []ConvEpilogueBF16{
					{},
					{Residual: res},
					{Act: acts[r.IntN(len(acts))], Activate: true},
					{Residual: res, Act: Act{Fn: ActReLU}, Activate: true},
					{Residual: res, Act: acts[r.IntN(len(acts))], Activate: true},
				} {
					want := make([]uint16, s.yLen())
					ConvForwardBF16To(&s, x, w, bias, want)
					if ep.Residual != nil {
						BinaryBF16(BinAdd, want, want, ep.Residual)
					}
					if ep.Activate {
						ep.Act.ForwardBF16(want, want)
					}
					for _, cw := range []*ConvWeightsBF16{nil, prepared} {
						name := fmt.Sprintf("%s (channels-last %v, blocking %v, epilogue %d %+v, prepared %v)", c.name, cl, blocking, i, ep.Act, cw != nil)
						got, check := guarded16(t, s.yLen())
						ConvForwardEpilogueBF16To(&s, x, w, cw, bias, got, ep)
						check()
						for k := range want {
							if got[k] != want[k] {
								t.Fatalf("%s: y[%d] = %#x, decomposed %#x", name, k, got[k], want[k])
							}
						}
					}
				}
			}
		}
		convBF16BlockBytes = bytes
		restore()
	}
}

// TestConvForwardEpilogueBF16ToChecks: operands that do not fit the shape
// fail with ErrShape naming the problem, before any kernel runs.
func TestConvForwardEpilogueBF16ToChecks(t *testing.T) {
	s := convCases[1].shape(true)
	x, w, y := make([]uint16, s.xLen()), make([]uint16, s.wLen()), make([]uint16, s.yLen())
	other := s
	other.O *= 2
	otherW := make([]uint16, other.wLen())
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"short residual", func() {
			ConvForwardEpilogueBF16To(&s, x, w, nil, nil, y, ConvEpilogueBF16{Residual: y[:len(y)-1]})
		}},
		{"short output", func() { ConvForwardEpilogueBF16To(&s, x, w, nil, nil, y[:1], ConvEpilogueBF16{}) }},
		{"weights prepared for another shape", func() {
			cw := PrepareConvWeightsBF16(&other, otherW)
			if cw == nil {
				cw = &ConvWeightsBF16{s: other}
			}
			ConvForwardEpilogueBF16To(&s, x, w, cw, nil, y, ConvEpilogueBF16{})
		}},
	} {
		func() {
			defer func() {
				e, ok := recover().(*Error)
				if !ok || !errors.Is(e, ErrShape) {
					t.Errorf("%s: panic %v, want an *Error of kind ErrShape", c.name, e)
				}
			}()
			c.run()
		}()
	}
}

// TestBF16StageFused checks each level's fused stage kernels against the
// composed stage, bit for bit, on every float32 class: NaNs, infinities,
// ties, values that round to −0 from below, subnormals, with residuals
// holding NaNs and zeros of both signs.
func TestBF16StageFused(t *testing.T) {
	defer func(k bf16FusedKernels) { bf16Fused = k }(bf16Fused)
	forEachLevel(t, func(t *testing.T, l Level) {
		defer useCvtLevel(l)()
		r := rand.New(rand.NewPCG(93, 94))
		for _, n := range append(suiteSizes(16), bf16Stretch+17) {
			f := cvtInputs(r, n)
			for i := range f {
				if r.IntN(8) == 0 { // around −2^-134, where rounding meets −0
					f[i] = math.Float32frombits(0x80008000 + uint32(r.IntN(3)) - 1)
				}
			}
			res := make([]uint16, n)
			for i := range res {
				res[i] = uint16(r.Uint32())
				if r.IntN(6) == 0 {
					res[i] = []uint16{0, 0x8000, 0x7fc1, 0xffc0, 0x7f80, 0xff80}[r.IntN(6)]
				}
			}
			for _, st := range []bf16Stage{
				{act: Act{Fn: ActReLU}, activate: true},
				{res: res},
				{res: res, act: Act{Fn: ActReLU}, activate: true},
				{res: res, act: Act{Fn: ActSigmoid}, activate: true},
			} {
				want := make([]uint16, n)
				bf16Fused = bf16FusedKernels{}
				st.y = want
				st.store(slices.Clone(f), 0, getStretches())
				got, check := guarded16(t, n)
				bf16Fused = bf16FusedFor(l)
				st.y = got
				st.store(slices.Clone(f), 0, getStretches())
				check()
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("n=%d, residual %v, activation %v: y[%d] = %#04x, composed %#04x (f %#08x, res %#04x)",
							n, st.res != nil, st.activate, i, got[i], want[i], math.Float32bits(f[i]), res[i])
					}
				}
			}
		}
	})
}

// TestPreparedConvWeightsBF16Concurrent: prepared weights whose layouts are
// packed by the first forward that reads them serve forwards from several
// goroutines at once (a frozen graph run concurrently), every one with the
// unprepared forward's bits. Run under -race it also checks the packing is
// published safely.
func TestPreparedConvWeightsBF16Concurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(93, 94))
	for _, c := range []convCase{convBF16Cases[0], convBF16Cases[len(convBF16Cases)-2]} {
		s := c.shape(true)
		x, _ := randBF16(r, s.xLen())
		w, _ := randBF16(r, s.wLen())
		want := make([]uint16, s.yLen())
		ConvForwardEpilogueBF16To(&s, x, w, nil, nil, want, ConvEpilogueBF16{})
		cw := PrepareConvWeightsBF16(&s, w)
		const workers = 4
		got := make([][]uint16, workers)
		done := make(chan int)
		for g := range workers {
			got[g] = make([]uint16, s.yLen())
			go func() {
				ConvForwardEpilogueBF16To(&s, x, w, cw, nil, got[g], ConvEpilogueBF16{})
				done <- g
			}()
		}
		for range workers {
			g := <-done
			if !slices.Equal(got[g], want) {
				t.Fatalf("%s: goroutine %d's forward with prepared weights differs from the unprepared one", c.name, g)
			}
		}
	}
}

// TestConvForwardBF16ToSubnormal: the bfloat16 output stage rounds
// subnormal float32 sums as F32ToBF16 does (the kernels' one-instruction
// rounding flushes them, so rows holding one take the exact path), with
// and without the rectifier, against the float32 forward rounded.
func TestConvForwardBF16ToSubnormal(t *testing.T) {
	r := rand.New(rand.NewPCG(95, 96))
	for _, c := range []convCase{
		{"pointwise", 2, 64, 32, 1, [3]int{1, 5, 7}, one3, one3, [3]int{}, one3},
		{"direct 3x3", 1, 8, 32, 1, [3]int{1, 6, 12}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
		{"gathered 3x3", 3, 32, 64, 1, [3]int{1, 7, 7}, [3]int{1, 3, 3}, one3, [3]int{0, 1, 1}, one3},
	} {
		s := c.shape(true)
		// Sums near the smallest normal (VDPBF16PS flushes subnormal
		// products and sums) plus a bias of the same size: results on both
		// sides of it.
		scaled := func(n int, scale float32) []uint16 {
			f := randSlice(r, n)
			for i := range f {
				f[i] *= scale
			}
			h := make([]uint16, n)
			F32ToBF16(h, f)
			return h
		}
		x, w := scaled(s.xLen(), 0x1p-62), scaled(s.wLen(), 0x1p-62)
		bias := randSlice(r, s.O)
		for i := range bias {
			bias[i] *= 0x1p-122
		}
		y := make([]float32, s.yLen())
		ConvForwardBF16(&s, x, w, bias, y)
		subnormal := 0
		for _, v := range y {
			if v != 0 && math.Abs(float64(v)) < 0x1p-126 {
				subnormal++
			}
		}
		if subnormal == 0 {
			t.Fatalf("%s: no subnormal sums to test", c.name)
		}
		for _, relu := range []bool{false, true} {
			want := make([]uint16, s.yLen())
			F32ToBF16(want, y)
			ep := ConvEpilogueBF16{}
			if relu {
				ep = ConvEpilogueBF16{Act: Act{Fn: ActReLU}, Activate: true}
				ep.Act.ForwardBF16(want, want)
			}
			got := make([]uint16, s.yLen())
			ConvForwardEpilogueBF16To(&s, x, w, nil, bias, got, ep)
			for k := range want {
				if got[k] != want[k] {
					t.Fatalf("%s, relu %v: y[%d] = %#x, want %#x (float32 %g)", c.name, relu, k, got[k], want[k], y[k])
				}
			}
		}
	}
}
