package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The peak measurements are timings, so the tests check only that they
// produce usable numbers; the benchmarks report the values.

func TestMeasurePeaksSane(t *testing.T) {
	const d = 25 * time.Millisecond
	for _, threads := range []int{1, 2} {
		for name, f := range map[string]func(int, time.Duration) float64{
			"fma": MeasurePeakFMA, "copy": MeasureCopyBandwidth, "triad": MeasureTriadBandwidth,
		} {
			v := f(threads, d)
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("%s with %d threads = %v, want a positive finite rate", name, threads, v)
			}
		}
	}
}

// TestMeasurePeakBF16: the BF16 peak is 0 without AVX512_BF16 (the
// header then says n/a) and a plausible rate with it: one VDPBF16PS per
// cycle is 64 flops a cycle, so even a slow, shared core passes 10 GFLOP/s.
func TestMeasurePeakBF16(t *testing.T) {
	const d = 25 * time.Millisecond
	has := asmBuild && caps.best >= AVX512BF16
	for _, threads := range []int{1, 2} {
		v := MeasurePeakBF16(threads, d)
		switch {
		case !has && v != 0:
			t.Errorf("without AVX512_BF16, %d threads: %v, want 0", threads, v)
		case has && !(v > 10*float64(threads)) || math.IsInf(v, 0):
			t.Errorf("%d threads: %v GFLOP/s, want a finite rate above %d", threads, v, 10*threads)
		}
	}
	if has {
		// The loop reports the flops it was asked for.
		loop := bf16PeakLoop()
		for _, iters := range []int{1, 7, 1000} {
			if got, want := loop(iters), float64(iters)*16*64; got != want {
				t.Errorf("%d rounds: %v flops, want %v", iters, got, want)
			}
		}
	} else if bf16PeakLoop() != nil {
		t.Error("a BF16 peak loop on a CPU without AVX512_BF16")
	}
}

// TestMeasurePeakAMX: the AMX peak is 0 where the CPU cannot run AMX and
// a plausible rate where it can: a TDPBF16PS every 16 cycles is 1024
// flops a cycle, so even a slow, shared core passes 200 GFLOP/s.
func TestMeasurePeakAMX(t *testing.T) {
	const d = 25 * time.Millisecond
	has := asmBuild && caps.best >= AMX
	for _, threads := range []int{1, 2} {
		v := MeasurePeakAMX(threads, d)
		switch {
		case !has && v != 0:
			t.Errorf("without AMX, %d threads: %v, want 0", threads, v)
		case has && !(v > 200*float64(threads)) || math.IsInf(v, 0):
			t.Errorf("%d threads: %v GFLOP/s, want a finite rate above %d", threads, v, 200*threads)
		}
	}
	if has {
		t.Logf("AMX peak: %.0f GFLOP/s on one thread", MeasurePeakAMX(1, d))
	}
}

// TestFMALoopVariants checks each FMA loop reports the flops it was asked
// for: the figure every peak is derived from.
func TestFMALoopVariants(t *testing.T) {
	want := [levelCount]float64{Generic: 8 * 2, AVX2: 12 * 8 * 2}
	forEachLevel(t, func(t *testing.T, l Level) {
		if l > AVX2 {
			t.Skip("no AVX-512 peak loop; the AVX2 one stands in")
		}
		loop := fmaLoopVariants[l]
		if loop == nil {
			t.Fatalf("no FMA loop for %v", l)
		}
		for _, iters := range []int{1, 7, 1000} {
			if got := loop(iters); got != float64(iters)*want[l] {
				t.Errorf("%d rounds: %v flops, want %v", iters, got, float64(iters)*want[l])
			}
		}
	})
}

// TestTriadConformance runs every triad variant against the Go reference
// on tail sizes with guarded output.
func TestTriadConformance(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	forEachLevel(t, func(t *testing.T, l Level) {
		triad := pick(l, triadVariants)
		for _, n := range suiteSizes(8) {
			b, c := make([]float32, n), make([]float32, n)
			for i := range b {
				b[i], c[i] = rng.Float32()*2-1, rng.Float32()*2-1
			}
			want := make([]float32, n)
			triadGeneric(want, b, c, 0.37)
			got, check := guarded(t, n)
			triad(got, b, c, 0.37)
			check()
			for i := range want {
				// A fused multiply-add rounds once, the reference twice.
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("n=%d: a[%d] = %v, want %v", n, i, got[i], want[i])
				}
			}
		}
	})
}

func BenchmarkPeakFMA(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(threadsName(threads), func(b *testing.B) {
			var v float64
			for b.Loop() {
				v = MeasurePeakFMA(threads, 100*time.Millisecond)
			}
			b.ReportMetric(v, "GFLOP/s")
		})
	}
}

func BenchmarkPeakBF16(b *testing.B) {
	if bf16PeakLoop() == nil {
		b.Skip("no AVX512_BF16")
	}
	for _, threads := range []int{1, 2} {
		b.Run(threadsName(threads), func(b *testing.B) {
			var v float64
			for b.Loop() {
				v = MeasurePeakBF16(threads, 100*time.Millisecond)
			}
			b.ReportMetric(v, "GFLOP/s")
		})
	}
}

func BenchmarkPeakCopy(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(threadsName(threads), func(b *testing.B) {
			var v float64
			for b.Loop() {
				v = MeasureCopyBandwidth(threads, 200*time.Millisecond)
			}
			b.ReportMetric(v, "GB/s")
		})
	}
}

func BenchmarkPeakTriad(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(threadsName(threads), func(b *testing.B) {
			var v float64
			for b.Loop() {
				v = MeasureTriadBandwidth(threads, 200*time.Millisecond)
			}
			b.ReportMetric(v, "GB/s")
		})
	}
}

func threadsName(n int) string {
	if n == 1 {
		return "1thread"
	}
	return string(rune('0'+n)) + "threads"
}
