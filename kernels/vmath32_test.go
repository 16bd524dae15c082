package kernels

import (
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// vmath32Case is one float32 core with the float64 function it
// approximates and its documented maximum error in ulps (vmath32.go).
type vmath32Case struct {
	name   string
	f      func(float32) float32
	exact  func(float64) float64
	maxULP float64
}

var vmath32Cases = []vmath32Case{
	{"expf32", expf32, math.Exp, 0.9},
	{"tanhf32", tanhf32, math.Tanh, 1.37},
	{"erff32", erff32, math.Erf, 1.13},
	{"logf32", logf32, math.Log, 0.93},
}

// ulpError is |got − exact| in units of the float32 spacing at exact (the
// spacing of subnormals below 2⁻¹²⁶); 0 when both are the same infinity or
// both NaN, +Inf when only one is NaN or infinite.
func ulpError(got float32, exact float64) float64 {
	g := float64(got)
	switch {
	case math.IsNaN(exact) || math.IsNaN(g):
		if math.IsNaN(exact) && math.IsNaN(g) {
			return 0
		}
		return math.Inf(1)
	case math.IsInf(g, 0):
		if g == exact || (math.Abs(exact) >= math.MaxFloat32*(1+0x1p-25)) && math.Signbit(g) == math.Signbit(exact) {
			return 0 // rounds to infinity
		}
		return math.Inf(1)
	}
	a := math.Abs(exact)
	e := max(math.Floor(math.Log2(a)), -126)
	if a == 0 {
		e = -126
	}
	ulp := math.Ldexp(1, int(e)-23)
	return math.Abs(g-exact) / ulp
}

// vmath32Worst returns the largest ulp error of c over the bit patterns
// b = start, start+stride, … below 2³², and an input where it occurs,
// using every CPU.
func vmath32Worst(c vmath32Case, start, stride uint64) (worst float64, at float32) {
	workers := runtime.GOMAXPROCS(0)
	var mu sync.Mutex
	var wg sync.WaitGroup
	span := (1<<32 - start + uint64(workers) - 1) / uint64(workers)
	span = (span + stride - 1) / stride * stride
	for w := range workers {
		wg.Add(1)
		go func(lo uint64) {
			defer wg.Done()
			hi := min(lo+span, 1<<32)
			var mine float64
			var mineAt float32
			for b := lo; b < hi; b += stride {
				x := math.Float32frombits(uint32(b))
				if e := ulpError(c.f(x), c.exact(float64(x))); e > mine || e != e {
					mine, mineAt = e, x
				}
			}
			mu.Lock()
			if mine > worst || mine != mine {
				worst, at = mine, mineAt
			}
			mu.Unlock()
		}(start + uint64(w)*span)
	}
	wg.Wait()
	return worst, at
}

// TestVMath32ULP holds each core to its documented error on every 257th
// float32 bit pattern (16 million inputs of every sign and magnitude,
// subnormals, infinities and NaNs included) and on the edges of its
// pieces.
func TestVMath32ULP(t *testing.T) {
	stride := uint64(257)
	if testing.Short() {
		stride = 4099
	}
	edges := []float32{0, 1e-45, 1e-38, 0.3466, 0.625, 0.62499994, 1, 0.99999994, 1.0000001, 3.92, 3.93, 4,
		4.0000005, 8.664339742, 8.6643405, 88.72, 88.73, -87.33, -103.9, -104, -104.1}
	for _, c := range vmath32Cases {
		t.Run(c.name, func(t *testing.T) {
			worst, at := vmath32Worst(c, 0, stride)
			for _, x := range edges {
				for _, v := range []float32{x, -x} {
					if e := ulpError(c.f(v), c.exact(float64(v))); e > worst || e != e {
						worst, at = e, v
					}
				}
			}
			if !(worst <= c.maxULP) {
				t.Errorf("%s(%v) is %.3g ulp from %v (%v), documented at most %g", c.name, at, worst,
					c.exact(float64(at)), c.f(at), c.maxULP)
			}
			t.Logf("%s: worst %.3f ulp at %v", c.name, worst, at)
		})
	}
}

// TestVMath32Exhaustive measures each core over all 2³² inputs, for the
// numbers in vmath32.go's doc comment. It takes minutes per core, so it
// runs only with KILN_EXHAUSTIVE set: to 1 for every core, or to a
// comma-separated list of their names (expf32,logf32).
func TestVMath32Exhaustive(t *testing.T) {
	which := os.Getenv("KILN_EXHAUSTIVE")
	if which == "" {
		t.Skip("set KILN_EXHAUSTIVE=1 to run over every float32")
	}
	for _, c := range vmath32Cases {
		if which != "1" && !slices.Contains(strings.Split(which, ","), c.name) {
			continue
		}
		worst, at := vmath32Worst(c, 0, 1)
		t.Logf("%s: worst %.3f ulp at %v (%#x)", c.name, worst, at, math.Float32bits(at))
		if !(worst <= c.maxULP) {
			t.Errorf("%s: %.3g ulp, documented at most %g", c.name, worst, c.maxULP)
		}
	}
}
