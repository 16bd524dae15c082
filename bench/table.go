package bench

import (
	"fmt"
	"math"
	"strings"
)

// Peaks are this machine's measured ceilings, by thread count: FMA in
// GFLOP/s, Copy and Triad in GB/s.
type Peaks struct {
	FMA, Copy, Triad map[int]float64
}

// Row is one line of the table: a workload at a thread count, timed on
// both sides.
type Row struct {
	Workload        Workload
	Threads         int
	Kiln, Torch     Result
	KilnOK, TorchOK bool
}

// Ratio is Kiln's speed relative to PyTorch's (PyTorch time / Kiln time):
// above 1 Kiln is faster. NaN when either side has no time, and for
// Footprint rows (see MemoryRatio).
func (r Row) Ratio() float64 {
	if !r.KilnOK || !r.TorchOK || r.Workload.Bound == Footprint {
		return math.NaN()
	}
	return r.Torch.Median / r.Kiln.Median
}

// MemoryRatio is Kiln's peak memory relative to PyTorch's (Kiln / PyTorch)
// for a Footprint row: below 1 Kiln uses less. NaN for other rows and
// when either side has no measurement.
func (r Row) MemoryRatio() float64 {
	if !r.KilnOK || !r.TorchOK || r.Workload.Bound != Footprint {
		return math.NaN()
	}
	return float64(r.Kiln.PeakRSS) / float64(r.Torch.PeakRSS)
}

// RatioText is the ratio cell of r: the speed ratio, or for a Footprint
// row the memory ratio marked as such, since there lower is better.
func (r Row) RatioText() string {
	if r.Workload.Bound == Footprint {
		if q := r.MemoryRatio(); !math.IsNaN(q) {
			return FormatRatio(q) + " memory (lower is better)"
		}
		return "—"
	}
	return FormatRatio(r.Ratio())
}

// Rate is the throughput of a per-call time t for w: GFLOP/s for
// compute-bound rows, GB/s for memory-bound ones, NaN for Footprint rows.
func Rate(w Workload, t float64) float64 {
	switch w.Bound {
	case Compute:
		return w.Flops / t / 1e9
	case Memory:
		return w.Bytes / t / 1e9
	}
	return math.NaN()
}

// PeakFraction is a rate as a fraction of the ceiling that applies to w
// at threads: the FMA peak for compute-bound rows, the copy bandwidth for
// memory-bound ones.
func (p Peaks) PeakFraction(w Workload, threads int, rate float64) float64 {
	var ceil float64
	switch w.Bound {
	case Compute:
		ceil = p.FMA[threads]
	case Memory:
		ceil = p.Copy[threads]
	}
	if !(ceil > 0) {
		return math.NaN()
	}
	return rate / ceil
}

func rateUnit(w Workload) string {
	if w.Bound == Compute {
		return "GFLOP/s"
	}
	return "GB/s"
}

// Table renders rows as one Markdown table with a section line for each
// group. Rows that process images show images/s before their GFLOP/s;
// Footprint rows show each side's peak RSS with its resident memory at
// start in the rate column, and the memory ratio.
func Table(rows []Row, peaks Peaks) string {
	var b strings.Builder
	b.WriteString("| Workload | Threads | Kiln | Kiln rate | PyTorch | PyTorch rate | Kiln/PyTorch (speed) | Kiln % peak | PyTorch % peak |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	group := ""
	for _, r := range rows {
		w := r.Workload
		if w.Group != group {
			group = w.Group
			fmt.Fprintf(&b, "| **%s** | | | | | | | | |\n", group)
		}
		kt, kr, kp := side(r.Kiln, r.KilnOK, w, r.Threads, peaks)
		tt, tr, tp := side(r.Torch, r.TorchOK, w, r.Threads, peaks)
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n",
			w.Name, r.Threads, kt, kr, tt, tr, r.RatioText(), kp, tp)
	}
	return b.String()
}

func side(res Result, ok bool, w Workload, threads int, peaks Peaks) (t, rate, pct string) {
	if !ok {
		msg := "—"
		switch {
		case res.NA():
			msg = "n/a"
		case res.Error != "":
			msg = "error"
		}
		return msg, "—", "—"
	}
	if w.Bound == Footprint {
		return FormatBytes(res.PeakRSS), FormatBytes(res.StartRSS) + " at start", "—"
	}
	r := Rate(w, res.Median)
	rate = fmt.Sprintf("%.3g %s", r, rateUnit(w))
	if w.Images > 0 {
		rate = fmt.Sprintf("%.3g img/s, %s", float64(w.Images)/res.Median, rate)
	}
	return FormatDuration(res.Median), rate, formatPct(peaks.PeakFraction(w, threads, r))
}

func formatPct(f float64) string {
	if math.IsNaN(f) {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// FormatRatio prints a speed ratio with two significant digits at least.
func FormatRatio(r float64) string {
	switch {
	case math.IsNaN(r):
		return "—"
	case r >= 10:
		return fmt.Sprintf("%.0f×", r)
	case r >= 0.1:
		return fmt.Sprintf("%.2f×", r)
	default:
		return fmt.Sprintf("%.3f×", r)
	}
}

// Summary renders the geometric mean of Kiln/PyTorch speed per group and
// thread count, in the order groups first appear; Footprint rows, which
// have no speed ratio, are left out.
func Summary(rows []Row, threads []int) string {
	type key struct {
		group   string
		threads int
	}
	logSum, count := map[key]float64{}, map[key]int{}
	var groups []string
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Workload.Group] {
			seen[r.Workload.Group] = true
			groups = append(groups, r.Workload.Group)
		}
		if q := r.Ratio(); q > 0 && !math.IsInf(q, 0) {
			k := key{r.Workload.Group, r.Threads}
			logSum[k] += math.Log(q)
			count[k]++
		}
	}
	var b strings.Builder
	b.WriteString("| Group |")
	for _, t := range threads {
		fmt.Fprintf(&b, " %d thread(s) |", t)
	}
	b.WriteString("\n|---|")
	for range threads {
		b.WriteString("--:|")
	}
	b.WriteString("\n")
	for _, g := range groups {
		fmt.Fprintf(&b, "| %s |", g)
		for _, t := range threads {
			k := key{g, t}
			if count[k] == 0 {
				b.WriteString(" — |")
				continue
			}
			fmt.Fprintf(&b, " %s (%d rows) |", FormatRatio(math.Exp(logSum[k]/float64(count[k]))), count[k])
		}
		b.WriteString("\n")
	}
	return b.String()
}
