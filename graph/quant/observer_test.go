package quant

import (
	"math"
	"strings"
	"testing"
)

var goldenSeqs = []string{"normal_grow", "relu", "uniform", "small", "laplace", "shifted"}

// TestCascadeSumGolden pins cascadeSum to torch.sum of 2048 float32 values
// spanning 16 orders of magnitude, where any other order of additions gives
// other last bits.
func TestCascadeSumGolden(t *testing.T) {
	g := loadGolden(t)
	x := g.float32s(t, "sum.x")
	want := g.float32s(t, "sum.total")[0]
	if got := cascadeSum(x); got != want {
		var seq float32
		for _, v := range x {
			seq += v
		}
		t.Errorf("cascadeSum = %v, torch.sum = %v (a sequential sum gives %v)", got, want, seq)
	}
}

// TestObserversGolden runs each algorithm over the golden batches and
// compares the range with PyTorch 1.13's observers, bit for bit: each
// port does PyTorch's float32 tensor operations and float64 Python steps in
// PyTorch's order (ATen's cascade sum included), and no tolerance would help
// the histogram anyway, where a difference in the last bit of one error sum
// moves the range by a whole bin, 1/2048 of it.
func TestObserversGolden(t *testing.T) {
	g := loadGolden(t)
	for _, seq := range goldenSeqs {
		for _, c := range []struct {
			algo, key string
		}{{"min_max", "minmax"}, {"moving_averager_min_max", "moving"}, {"histogram", "hist"}} {
			o, err := NewObserver(c.algo)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, ok := o.Range(); ok {
				t.Fatalf("%s: Range ok before any Observe", c.algo)
			}
			for k := range 3 {
				if err := o.Observe(g.float32s(t, seq+".b"+string(rune('0'+k)))); err != nil {
					t.Fatal(err)
				}
			}
			lo, hi, ok := o.Range()
			want := g.float32s(t, seq+"."+c.key)
			if !ok || lo != want[0] || hi != want[1] {
				t.Errorf("%s %s: range [%v, %v] ok %v, PyTorch [%v, %v]", seq, c.algo, lo, hi, ok, want[0], want[1])
			}
			if h, isHist := o.(*histogramObserver); isHist {
				state := g.float32s(t, seq+".hist_state")
				if h.lo != state[0] || h.hi != state[1] {
					t.Errorf("%s: histogram over [%v, %v], PyTorch's over [%v, %v]", seq, h.lo, h.hi, state[0], state[1])
				}
				wantHist := g.float32s(t, seq+".histogram")
				for i := range wantHist {
					if h.hist[i] != wantHist[i] {
						t.Errorf("%s: histogram bin %d = %v, PyTorch %v", seq, i, h.hist[i], wantHist[i])
						break
					}
				}
			}
		}
	}
}

func TestObserverRejectsNonFinite(t *testing.T) {
	for _, algo := range []string{"min_max", "moving_averager_min_max", "histogram"} {
		o, _ := NewObserver(algo)
		if err := o.Observe([]float32{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			err := o.Observe([]float32{0, 100, bad})
			if err == nil || !strings.Contains(err.Error(), "value 2") {
				t.Errorf("%s: Observe with %v: error %v, want one naming value 2", algo, bad, err)
			}
		}
		// The rejected batches must not have widened the range.
		if lo, hi, ok := o.Range(); !ok || lo < 1 || hi > 3 {
			t.Errorf("%s: range [%v, %v] after rejected batches, want within [1, 3]", algo, lo, hi)
		}
	}
}

func TestNewObserverUnknown(t *testing.T) {
	_, err := NewObserver("kl_divergence")
	if err == nil || !strings.Contains(err.Error(), `"kl_divergence"`) {
		t.Errorf("error %v, want one naming the algorithm", err)
	}
}

// TestHistogramNarrowThenWide covers a first range too narrow to re-grid
// onto the second, where PyTorch divides by zero: the observer must keep
// working and cover both batches.
func TestHistogramNarrowThenWide(t *testing.T) {
	o, _ := NewObserver("histogram")
	for _, x := range [][]float32{{1, 1 + 1e-7}, {-50, 50, 3, 4}} {
		if err := o.Observe(x); err != nil {
			t.Fatal(err)
		}
	}
	lo, hi, ok := o.Range()
	if !ok || lo < -50 || hi > 50.01 || lo >= hi {
		t.Errorf("range [%v, %v] ok %v, want a range within [-50, 50]", lo, hi, ok)
	}
}
