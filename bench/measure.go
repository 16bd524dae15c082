package bench

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kilnml/kiln/internal/gcheadroom"
)

// Timing method, shared with torch_bench.py (keep the two in step):
// calls for at least WarmUp (and at least one, or the workload's
// WarmUpCalls), whose mean time sets how
// many calls make up one sample (enough for MinSample, so microsecond
// workloads are not timed one call at a time), then Runs samples; the
// result is the median sample divided by the calls per sample. The
// warm-up is timed rather than counted because after the pause between
// rows an idle core has lowered its clock and a parked thread takes a
// while to wake: a single warm-up call left the first 1 MiB rows 2×
// slower than the same rows run later.
const (
	WarmUp      = 50 * time.Millisecond
	MinSample   = 2 * time.Millisecond
	MaxInner    = 1000
	DefaultRuns = 5
)

// Result is one workload's timing on one side at one thread count.
type Result struct {
	Name string `json:"name"`
	// Median is the median time of one call in seconds.
	Median float64 `json:"median_s"`
	// Samples are the per-call times of every timed sample, in seconds.
	Samples []float64 `json:"samples_s"`
	// Inner is how many calls each sample timed.
	Inner int `json:"inner"`
	// PeakRSS and StartRSS are the results of a Footprint row, in bytes:
	// the fresh process's peak resident memory, and its resident memory
	// after start-up (runtime, interpreter, imported libraries) before
	// the model and data were built.
	PeakRSS  int64 `json:"peak_rss_bytes,omitempty"`
	StartRSS int64 `json:"start_rss_bytes,omitempty"`
	// P50 and P99 are a serving row's request latencies in seconds, over
	// every request of its timed calls (a call may be several clients'
	// requests at once).
	P50   float64 `json:"latency_p50_s,omitempty"`
	P99   float64 `json:"latency_p99_s,omitempty"`
	Error string  `json:"error,omitempty"`
}

// Report is what one side (Kiln or PyTorch) at one thread count produces.
// The sides' processes first send a Report with no results (who they are,
// their versions), then one Result per Workload they are sent.
type Report struct {
	Side    string            `json:"side"`
	Threads int               `json:"threads"`
	Info    map[string]string `json:"info"`
	Results []Result          `json:"results"`
}

// Measure times run by the method above, with at least one warm-up call,
// and returns the median and the samples, both per call.
func Measure(run func(), runs int) (median float64, samples []float64, inner int) {
	return MeasureWarm(run, runs, 1)
}

// MeasureWarm is Measure with at least warmCalls untimed calls.
func MeasureWarm(run func(), runs, warmCalls int) (median float64, samples []float64, inner int) {
	return MeasureSetup(nil, run, runs, warmCalls)
}

// MeasureSetup is MeasureWarm where, when setup is not nil, each call of
// run follows a call of setup that is not timed: the warm-up lasts
// WarmUp in all, but its calls' mean time, which sets the calls per
// sample, and the samples time run alone.
func MeasureSetup(setup, run func(), runs, warmCalls int) (median float64, samples []float64, inner int) {
	timed := func(calls int) time.Duration {
		if setup == nil {
			t0 := time.Now()
			for range calls {
				run()
			}
			return time.Since(t0)
		}
		var d time.Duration
		for range calls {
			setup()
			t0 := time.Now()
			run()
			d += time.Since(t0)
		}
		return d
	}
	t0 := time.Now()
	calls := 0
	var spent time.Duration
	for calls < max(warmCalls, 1) || time.Since(t0) < WarmUp {
		spent += timed(1)
		calls++
	}
	perCall := spent / time.Duration(calls)
	inner = 1
	if perCall < MinSample {
		inner = int(min(math.Ceil(float64(MinSample)/float64(max(perCall, time.Microsecond))), MaxInner))
	}
	samples = make([]float64, runs)
	for i := range samples {
		samples[i] = timed(inner).Seconds() / float64(inner)
	}
	return Median(samples), samples, inner
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// RunKiln prepares and times w in this process, or for a Footprint row
// measures it in a fresh process (RunFresh). A workload that fails to
// prepare or panics comes back with its error.
func RunKiln(w Workload, runs int) (r Result) {
	if w.Bound == Footprint {
		return RunFresh(w)
	}
	r.Name = w.Name
	defer func() {
		if e := recover(); e != nil {
			r = Result{Name: w.Name, Error: fmt.Sprint(e)}
		}
	}()
	var lat *requestLatencies
	var setup, run func()
	var err error
	if w.Kind == KindResNet50Serve {
		// Timed per request too, for the latency percentiles.
		lat = new(requestLatencies)
		if err = checkDims(w, 4); err == nil {
			run, err = resNet50Serve(w.Dims, lat)
		}
	} else {
		setup, run, err = prepareSplit(w)
	}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	if strings.HasPrefix(w.Kind, "dlrm") {
		// As examples/dlrm runs: its tables are most of the heap, so it
		// sizes the collector's headroom to a few steps' garbage rather
		// than GOGC's 100 % of them (fresh memory every call otherwise,
		// page-faulted in).
		prev := debug.SetGCPercent(100)
		debug.SetGCPercent(prev)
		gcheadroom.Set(gcheadroom.DLRM)
		defer debug.SetGCPercent(prev)
	}
	runtime.GC() // start from a clean heap, not the last workload's garbage
	r.Median, r.Samples, r.Inner = MeasureSetup(setup, run, runs, w.WarmUpCalls)
	if lat != nil {
		r.P50, r.P99 = lat.percentiles(len(r.Samples) * r.Inner * w.Dims[2])
	}
	return r
}

// requestLatencies records the latency of every request a serving row
// sends, in the order they complete.
type requestLatencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *requestLatencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// percentiles returns the nearest-rank 50th and 99th percentiles, in
// seconds, of the last n requests: the timed calls', after the warm-up's.
func (l *requestLatencies) percentiles(n int) (p50, p99 float64) {
	d := slices.Clone(l.d[max(len(l.d)-n, 0):])
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	rank := func(p float64) float64 {
		return d[max(int(math.Ceil(p/100*float64(len(d))))-1, 0)].Seconds()
	}
	return rank(50), rank(99)
}

// FormatDuration prints seconds with a unit that keeps three or four
// significant digits.
func FormatDuration(s float64) string {
	switch {
	case math.IsNaN(s):
		return "—"
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	default:
		return fmt.Sprintf("%.3g µs", s*1e6)
	}
}

// FormatBytes prints a byte count in MiB or GiB.
func FormatBytes(b int64) string {
	const mi, gi = 1 << 20, 1 << 30
	if b >= gi {
		return fmt.Sprintf("%.2f GiB", float64(b)/gi)
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/mi)
}

// OK reports whether r holds a time, or a peak memory.
func (r Result) OK() bool { return r.Error == "" && (r.Median > 0 || r.PeakRSS > 0) }

// NA reports whether r could not be measured on this platform (a
// Footprint row off Linux, an INT8 row the installed torch has no
// quantized engine or op for): the table shows "n/a", not "error".
func (r Result) NA() bool { return strings.HasPrefix(r.Error, naPrefix) }

const naPrefix = "n/a: "
