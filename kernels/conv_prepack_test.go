package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestConvForwardPacked runs every convolution case with one group in
// channels-last layout through ConvForwardPacked and checks it against
// ConvForward bit for bit (the packed panels are the ones ConvForward packs
// itself), with and without bias, under the default and small blockings
// (so the im2col path's blocks and the implicit GEMM both read them).
func TestConvForwardPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, blocking := range [][2]int{{0, 0}, {64, 1}} {
		restore := setConvBlocking(blocking[0], blocking[1])
		for _, c := range convCases {
			if c.groups != 1 {
				continue
			}
			s := c.shape(true)
			x, w := randSlice(r, s.xLen()), randSlice(r, s.wLen())
			cw := PackConvWeights(&s, w)
			if level < AVX2 {
				if cw != nil {
					t.Fatalf("%s: packed weights at level %v, which has no path to read them", c.name, level)
				}
				continue
			}
			for _, bias := range [][]float32{nil, randSlice(r, s.O)} {
				want := make([]float32, s.yLen())
				ConvForward(&s, x, w, bias, want)
				got, check := guardedNaN(t, s.yLen())
				ConvForwardPacked(&s, x, w, cw, bias, got)
				check()
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s (blocking %v, bias %v): y[%d] = %v, ConvForward %v", c.name, blocking, bias != nil, i, got[i], want[i])
					}
				}
			}
		}
		restore()
	}
}

// TestPackConvWeightsRefuses: geometries no path reads packed weights for
// get none, and weights packed for one geometry are refused by another.
func TestPackConvWeightsRefuses(t *testing.T) {
	c := convCase{name: "3x3", n: 1, c: 8, o: 16, groups: 1, in: [3]int{1, 5, 5}, k: [3]int{1, 3, 3}, stride: one3, pad: [3]int{0, 1, 1}, dil: one3}
	s := c.shape(true)
	w := make([]float32, s.wLen())
	if cf := c.shape(false); PackConvWeights(&cf, w) != nil {
		t.Error("channels-first weights were packed")
	}
	g2 := c
	g2.groups = 2
	if sg := g2.shape(true); PackConvWeights(&sg, make([]float32, sg.wLen())) != nil {
		t.Error("grouped weights were packed")
	}
	cw := PackConvWeights(&s, w)
	if cw == nil {
		if level >= AVX2 {
			t.Fatal("no packed weights at an assembly level")
		}
		return
	}
	other := c
	other.o = 32
	so := other.shape(true)
	defer func() {
		r := recover()
		e, ok := r.(*Error)
		if msg := fmt.Sprint(r); !ok || !errors.Is(e, ErrShape) || !strings.Contains(msg, "weights packed for 8→16") {
			t.Errorf("mismatched geometry: panic %v", r)
		}
	}()
	ConvForwardPacked(&so, make([]float32, so.xLen()), make([]float32, so.wLen()), cw, nil, make([]float32, so.yLen()))
}
