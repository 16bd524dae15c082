package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvForwardEpilogue checks every convolution case, both layouts,
// packed and not, with a residual, an activation or both, against
// ConvForward followed by Binary and Act.Forward, bit for bit. The input
// holds zeros of both signs and a NaN so the activation's edge cases meet
// the epilogue.
func TestConvForwardEpilogue(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	acts := []Act{{Fn: ActReLU}, {Fn: ActSigmoid}, {Fn: ActSiLU}, {Fn: ActHardTanh, A: -0.5, B: 0.5}, {Fn: ActELU, A: 1}}
	for _, blocking := range [][2]int{{0, 0}, {64, 1}} {
		restore := setConvBlocking(blocking[0], blocking[1])
		for _, c := range convCases {
			for _, cl := range []bool{true, false} {
				s := c.shape(cl)
				x, w := randSlice(r, s.xLen()), randSlice(r, s.wLen())
				if len(x) > 2 {
					x[0], x[1] = float32(math.Copysign(0, -1)), 0
				}
				res := randSlice(r, s.yLen())
				var cw *ConvWeights
				if c.groups == 1 {
					cw = PackConvWeights(&s, w)
				}
				bias := randSlice(r, s.O)
				for i, ep := range []ConvEpilogue{
					{Residual: res},
					{Act: acts[r.IntN(len(acts))], Activate: true},
					{Act: Act{Fn: ActReLU}, Activate: true},
					{Residual: res, Act: Act{Fn: ActReLU}, Activate: true},
					{Residual: res, Act: acts[r.IntN(len(acts))], Activate: true},
				} {
					want := make([]float32, s.yLen())
					ConvForward(&s, x, w, bias, want)
					if ep.Residual != nil {
						Binary(BinAdd, want, want, ep.Residual)
					}
					if ep.Activate {
						ep.Act.Forward(want, want)
					}
					got, check := guardedNaN(t, s.yLen())
					ConvForwardEpilogue(&s, x, w, cw, bias, got, ep)
					check()
					for k := range want {
						if math.Float32bits(got[k]) != math.Float32bits(want[k]) && !(got[k] != got[k] && want[k] != want[k]) {
							t.Fatalf("%s (channels-last %v, blocking %v, epilogue %d %+v): y[%d] = %v, decomposed %v",
								c.name, cl, blocking, i, ep.Act, k, got[k], want[k])
						}
					}
				}
			}
		}
		restore()
	}
}

// TestSgemmEpilogueResidual: a residual in the GEMM's epilogue gives the
// product, bias, Binary add and activation in turn, bit for bit, on odd
// sizes that leave partial tiles, with a row stride wider than the rows.
func TestSgemmEpilogueResidual(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, sz := range [][3]int{{1, 1, 1}, {7, 13, 5}, {37, 50, 64}, {130, 33, 300}} {
		m, n, k := sz[0], sz[1], sz[2]
		ldc := n + 3
		a, b, bias := randSlice(r, m*k), randSlice(r, k*n), randSlice(r, n)
		res := randSlice(r, m*ldc)
		for _, act := range []Act{{Fn: ActReLU}, {Fn: ActSigmoid}} {
			want := make([]float32, m*ldc)
			SgemmEpilogue(false, false, m, n, k, 1, a, k, b, n, 0, want, ldc, Epilogue{Bias: bias})
			for i := range m {
				row := want[i*ldc : i*ldc+n]
				Binary(BinAdd, row, row, res[i*ldc:i*ldc+n])
				act.Forward(row, row)
			}
			got := make([]float32, m*ldc)
			SgemmEpilogue(false, false, m, n, k, 1, a, k, b, n, 0, got, ldc, Epilogue{Bias: bias, Residual: res, Act: act, Activate: true})
			for i := range m {
				for j := range n {
					if g, w := got[i*ldc+j], want[i*ldc+j]; math.Float32bits(g) != math.Float32bits(w) {
						t.Fatalf("%v %v: c[%d,%d] = %v, want %v", sz, act.Fn, i, j, g, w)
					}
				}
			}
		}
	}
}
