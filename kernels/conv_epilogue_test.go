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
