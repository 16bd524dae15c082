package kernels

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The peak measurements give benchmark tables a ceiling to compare with:
// a kernel's GFLOP/s or GB/s means little until it is set against what
// this machine can do at best. They are measured, not computed from a
// datasheet, because clock speeds, cache sizes and memory channels on a
// shared or virtual machine are rarely what the model name promises.

// peakTrials is how many timed windows a measurement is split into; the
// median of their rates is reported, so one window disturbed by another
// process does not move the result.
const peakTrials = 5

// MeasurePeakFMA returns this CPU's float32 multiply-add throughput in
// GFLOP/s (a fused multiply-add counts as two flops) over threads
// concurrent OS threads, measured for about d.
//
// With AVX2 and FMA3 (whatever KILN_ISA selects for the kernels: the
// ceiling is the CPU's) each thread runs a loop of twelve independent
// VFMADD231PS chains on YMM registers, enough to keep two FMA pipes busy
// through a four-cycle latency, and touches no memory. Without them, or in
// a -tags noasm build, it times a pure-Go loop of eight independent
// multiply-add chains, which shows what scalar Go reaches, not what the
// hardware could. The threads only run in parallel when GOMAXPROCS is at
// least threads.
func MeasurePeakFMA(threads int, d time.Duration) float64 {
	// One call is some tens of microseconds: assembly cannot be preempted,
	// and the timing loop checks the clock between calls.
	const iters = 1 << 15
	loop := pick(caps.best, fmaLoopVariants)
	return median(peakRun(threads, d, func(int) float64 { return loop(iters) })) / 1e9
}

// fmaLoopGeneric runs iters rounds of eight independent multiply-add
// chains and returns the flops done. Each chain converges to a fixed point
// (a = a/2 + 1 → 2), so the values stay normal however long it runs.
func fmaLoopGeneric(iters int) float64 {
	a0, a1, a2, a3, a4, a5, a6, a7 := peakSeed[0], peakSeed[1], peakSeed[2], peakSeed[3], peakSeed[4], peakSeed[5], peakSeed[6], peakSeed[7]
	const m, c = 0.5, 1
	for range iters {
		a0 = a0*m + c
		a1 = a1*m + c
		a2 = a2*m + c
		a3 = a3*m + c
		a4 = a4*m + c
		a5 = a5*m + c
		a6 = a6*m + c
		a7 = a7*m + c
	}
	peakSink.Store(math.Float32bits(a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7))
	return float64(iters) * 8 * 2
}

// peakSeed and peakSink keep the compiler from folding fmaLoopGeneric's
// chains away.
var (
	peakSeed = [8]float32{1, 2, 3, 4, 5, 6, 7, 8}
	peakSink atomic.Uint32
)

// peakBandwidthElems is the float32 length of each array the bandwidth
// measurements stream through: 64 MiB, twice a 32 MiB L3, so each pass
// goes to memory rather than cache.
const peakBandwidthElems = 16 << 20

// peakChunkElems is how much of an array one call copies or updates; it
// keeps every non-preemptible call short.
const peakChunkElems = 64 << 10

// MeasureCopyBandwidth returns the memory bandwidth of a large copy in
// GB/s (10⁹ bytes per second, counting the bytes read and the bytes
// written, as STREAM's Copy does) over threads concurrent OS threads, each
// copying its own share of two 64 MiB arrays with Go's copy, measured for
// about d. It is the ceiling for kernels that stream operands from and to
// memory.
func MeasureCopyBandwidth(threads int, d time.Duration) float64 {
	src, dst := peakArray(1), peakArray(0)
	return measureStream(threads, d, 8, func(lo, hi int) {
		for i := lo; i < hi; i += peakChunkElems {
			j := min(i+peakChunkElems, hi)
			copy(dst[i:j], src[i:j])
		}
	})
}

// MeasureTriadBandwidth returns the bandwidth of STREAM's Triad,
// a[i] = b[i] + s·c[i], in GB/s (counting two arrays read and one written)
// over threads concurrent OS threads on 64 MiB arrays, measured for about
// d. With AVX2 the loop is vectorised; it is the pattern of a fused
// elementwise kernel or an optimizer step.
func MeasureTriadBandwidth(threads int, d time.Duration) float64 {
	a, b, c := peakArray(0), peakArray(1), peakArray(2)
	triad := pick(caps.best, triadVariants)
	return measureStream(threads, d, 12, func(lo, hi int) {
		for i := lo; i < hi; i += peakChunkElems {
			j := min(i+peakChunkElems, hi)
			triad(a[i:j], b[i:j], c[i:j], 0.5)
		}
	})
}

// triadGeneric computes a[i] = b[i] + s·c[i] over len(a) elements; b and
// c must be at least as long.
func triadGeneric(a, b, c []float32, s float32) {
	b, c = b[:len(a)], c[:len(a)]
	for i := range a {
		a[i] = b[i] + s*c[i]
	}
}

// peakArray returns a bandwidth-test array with its pages already touched,
// so page faults are not timed.
func peakArray(v float32) []float32 {
	a := make([]float32, peakBandwidthElems)
	for i := range a {
		a[i] = v
	}
	return a
}

// measureStream runs pass over disjoint shares of [0, peakBandwidthElems)
// on threads OS threads and returns the median rate in GB/s, bytesPerElem
// being the traffic each element of a pass causes.
func measureStream(threads int, d time.Duration, bytesPerElem float64, pass func(lo, hi int)) float64 {
	threads = max(threads, 1)
	// Shares are whole multiples of 64 elements (256 bytes), so no two
	// threads write the same cache line.
	share := (peakBandwidthElems/threads + 63) &^ 63
	pass(0, peakBandwidthElems) // warm up: TLB, pages, frequency
	rates := peakRun(threads, d, func(t int) float64 {
		lo := min(t*share, peakBandwidthElems)
		hi := min(lo+share, peakBandwidthElems)
		pass(lo, hi)
		return float64(hi-lo) * bytesPerElem
	})
	return median(rates) / 1e9
}

// peakRun measures peakTrials windows of d/peakTrials each. In a window
// every one of threads OS threads calls work (with its thread index)
// repeatedly until the window's deadline; the window's rate is the sum of
// what work returned over the wall time from the common start until the
// last thread finished. It returns the rates.
func peakRun(threads int, d time.Duration, work func(t int) float64) []float64 {
	threads = max(threads, 1)
	window := max(d/peakTrials, time.Millisecond)
	rates := make([]float64, 0, peakTrials)
	for range peakTrials {
		var (
			ready, done sync.WaitGroup
			start       = make(chan struct{})
			totals      = make([]float64, threads)
			deadline    time.Time
		)
		ready.Add(threads)
		done.Add(threads)
		for t := range threads {
			go func() {
				// A locked goroutine owns its OS thread, so threads
				// goroutines are threads OS threads.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				defer done.Done()
				ready.Done()
				<-start
				var sum float64
				for {
					sum += work(t)
					if !time.Now().Before(deadline) {
						break
					}
				}
				totals[t] = sum
			}()
		}
		ready.Wait()
		t0 := time.Now()
		deadline = t0.Add(window)
		close(start)
		done.Wait()
		elapsed := time.Since(t0).Seconds()
		var sum float64
		for _, v := range totals {
			sum += v
		}
		rates = append(rates, sum/elapsed)
	}
	return rates
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
