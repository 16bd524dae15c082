package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Peaks are this machine's measured ceilings, by thread count: FMA and
// BF16 in GFLOP/s, INT8 in GOP/s, Copy and Triad in GB/s.
type Peaks struct {
	FMA, Copy, Triad map[int]float64
	// BF16 is the VDPBF16PS throughput (kernels.MeasurePeakBF16): 0 where
	// the CPU lacks AVX512_BF16, absent from reports made before it was
	// measured.
	BF16 map[int]float64 `json:",omitempty"`
	// Int8 is the INT8 multiply-add throughput of the route Kiln's INT8
	// kernels take, Int8Route (kernels.MeasurePeakInt8: VPDPBUSD with
	// AVX512_VNNI, else VPMADDWD on AVX2): 0 where they run Go loops,
	// absent from reports made before it was measured.
	Int8      map[int]float64 `json:",omitempty"`
	Int8Route string          `json:",omitempty"`
	// AMX is the TDPBF16PS throughput (kernels.MeasurePeakAMX): 0 where
	// the CPU cannot run AMX, absent from reports made before it was
	// measured.
	AMX map[int]float64 `json:",omitempty"`
}

// AMXMeasured reports whether p has an AMX peak at every one of threads.
func (p Peaks) AMXMeasured(threads []int) bool { return measuredAt(p.AMX, threads) }

// BF16Measured reports whether p has a BF16 peak at every one of threads.
func (p Peaks) BF16Measured(threads []int) bool { return measuredAt(p.BF16, threads) }

// Int8Measured reports whether p has an INT8 peak at every one of threads.
func (p Peaks) Int8Measured(threads []int) bool { return measuredAt(p.Int8, threads) }

func measuredAt(peak map[int]float64, threads []int) bool {
	for _, t := range threads {
		if !(peak[t] > 0) {
			return false
		}
	}
	return len(threads) > 0
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

// Rate is the throughput of a per-call time t for w: GFLOP/s (GOP/s for
// INT8 rows) for compute-bound rows, GB/s for memory-bound ones, NaN for
// Footprint rows.
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
// at threads: for compute-bound rows the AMX peak for the BF16 GEMM where
// it was measured (the rows Kiln runs on tiles), the BF16 peak for other
// BF16 rows where it was measured, the INT8 peak for an INT8 row (none where it was not: no
// float32 ceiling bounds integer work), and the FMA peak otherwise; the
// copy bandwidth for memory-bound rows.
func (p Peaks) PeakFraction(w Workload, threads int, rate float64) float64 {
	var ceil float64
	switch w.Bound {
	case Compute:
		ceil = p.FMA[threads]
		switch w.Precision() {
		case PrecisionBF16:
			if p.BF16[threads] > 0 {
				ceil = p.BF16[threads]
			}
			if w.Kind == KindGemmBF16 && p.AMX[threads] > 0 {
				ceil = p.AMX[threads]
			}
		case PrecisionInt8:
			ceil = p.Int8[threads]
		}
	case Memory:
		ceil = p.Copy[threads]
	}
	if !(ceil > 0) {
		return math.NaN()
	}
	return rate / ceil
}

func rateUnit(w Workload) string {
	switch {
	case w.Bound != Compute:
		return "GB/s"
	case w.Precision() == PrecisionInt8:
		return "GOP/s"
	}
	return "GFLOP/s"
}

// Table renders rows as one Markdown table with a section line for each
// group. Rows that process images show images/s before their GFLOP/s,
// rows that process samples (DLRM) samples/s; Footprint rows show each
// side's peak RSS with its resident memory at start in the rate column
// (and, where the row has a MemBound, the growth from start to peak
// against it), and the memory ratio.
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
		rate = FormatBytes(res.StartRSS) + " at start"
		if w.MemBound > 0 {
			growth := res.PeakRSS - res.StartRSS
			rate += fmt.Sprintf("; +%s, %s the %s bound", FormatBytes(growth), FormatRatio(float64(growth)/w.MemBound), FormatBytes(int64(w.MemBound)))
		}
		return FormatBytes(res.PeakRSS), rate, "—"
	}
	r := Rate(w, res.Median)
	rate = fmt.Sprintf("%.3g %s", r, rateUnit(w))
	if w.Images > 0 {
		rate = fmt.Sprintf("%s img/s, %s", formatCountRate(float64(w.Images)/res.Median), rate)
	}
	if w.Samples > 0 {
		rate = fmt.Sprintf("%s samples/s, %s", formatCountRate(float64(w.Samples)/res.Median), rate)
	}
	return FormatDuration(res.Median), rate, formatPct(peaks.PeakFraction(w, threads, r))
}

// formatCountRate prints images or samples per second: three significant
// digits, and whole numbers from 1000 up (12800, not 1.28e+04).
func formatCountRate(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
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

// Speedups renders Kiln's speed on each row of precision p (BF16 or
// INT8) that names an FP32Row relative to its speed on that row at the
// same thread count, from rows of one run (or one merge): FP32 time ÷
// low-precision time for the same work, so above 1 the low precision is
// faster; each cell also gives both times. A cell is "—" where either row
// is missing from rows or failed on the Kiln side. It returns "" when rows
// have no such row.
func Speedups(rows []Row, threads []int, p Precision) string {
	label := strings.ToUpper(string(p))
	return pairTable(rows, threads, label+" row", "Kiln FP32 row",
		func(w Workload) string {
			if w.Precision() != p {
				return ""
			}
			return w.FP32Row
		},
		func(low, fp32 Row) string {
			return fmt.Sprintf("%s (FP32 %s, %s %s)", FormatRatio(Speedup(low, fp32)),
				FormatDuration(fp32.Kiln.Median), label, FormatDuration(low.Kiln.Median))
		})
}

// pairTable renders one line for each row that other names a second row
// of (other returns "" for none), with a cell per thread count that cell
// fills from the two rows' results, or "—" where either row is missing or
// failed on the Kiln side. It returns "" when no row names another.
func pairTable(rows []Row, threads []int, head, otherHead string, other func(Workload) string, cell func(r, o Row) string) string {
	type key struct {
		name    string
		threads int
	}
	byName := map[key]Row{}
	var named []Workload
	seen := map[string]bool{}
	for _, r := range rows {
		byName[key{r.Workload.Name, r.Threads}] = r
		if w := r.Workload; other(w) != "" && !seen[w.Name] {
			seen[w.Name] = true
			named = append(named, w)
		}
	}
	if len(named) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | %s |", head, otherHead)
	for _, t := range threads {
		fmt.Fprintf(&b, " %d thread(s) |", t)
	}
	b.WriteString("\n|---|---|")
	for range threads {
		b.WriteString("--:|")
	}
	b.WriteString("\n")
	for _, w := range named {
		fmt.Fprintf(&b, "| %s | %s |", w.Name, other(w))
		for _, t := range threads {
			r, rok := byName[key{w.Name, t}]
			o, ook := byName[key{other(w), t}]
			if !rok || !ook || !r.KilnOK || !o.KilnOK {
				b.WriteString(" — |")
				continue
			}
			fmt.Fprintf(&b, " %s |", cell(r, o))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Speedup is Kiln's speed on the BF16 or INT8 row low relative to its
// speed on the FP32 row fp32: the ratio of their rates (work per second),
// which for the same work is FP32 time ÷ low-precision time. NaN when
// either has no Kiln time.
func Speedup(low, fp32 Row) float64 {
	if !low.KilnOK || !fp32.KilnOK || !(low.Kiln.Median > 0) || !(fp32.Kiln.Median > 0) {
		return math.NaN()
	}
	if low.Workload.Flops > 0 && fp32.Workload.Flops > 0 {
		return Rate(low.Workload, low.Kiln.Median) / Rate(fp32.Workload, fp32.Kiln.Median)
	}
	return fp32.Kiln.Median / low.Kiln.Median
}

// Against renders, for each row that names a Baseline, Kiln's images a
// second on it ÷ on the baseline row at each thread count, with both
// rates; "—" where either is missing or failed. It returns "" when no row
// names a baseline.
func Against(rows []Row, threads []int) string {
	return pairTable(rows, threads, "row", "baseline",
		func(w Workload) string { return w.Baseline },
		func(r, base Row) string {
			if r.Workload.Images == 0 || base.Workload.Images == 0 {
				return "—"
			}
			rr := float64(r.Workload.Images) / r.Kiln.Median
			br := float64(base.Workload.Images) / base.Kiln.Median
			cell := fmt.Sprintf("%s (%s vs %s img/s", FormatRatio(rr/br), formatCountRate(rr), formatCountRate(br))
			if r.Kiln.P99 > 0 {
				cell += fmt.Sprintf("; request p50 %s, p99 %s", FormatDuration(r.Kiln.P50), FormatDuration(r.Kiln.P99))
			}
			return cell + ")"
		})
}

// Scaling renders Kiln's own speed-up from 1 thread to each thread count
// of the run on its whole-model FP32 ResNet-50 rows (the training step and
// the frozen graph): time at 1 thread ÷ time at t threads, and that ÷ t
// (the parallel efficiency). It returns "" when the run has no such rows
// at 1 thread and at a higher count.
func Scaling(rows []Row, threads []int) string {
	if !slices.Contains(threads, 1) || len(threads) < 2 {
		return ""
	}
	type key struct {
		name    string
		threads int
	}
	at := map[key]Row{}
	var names []string
	for _, r := range rows {
		if k := r.Workload.Kind; k != KindResNet50Train && k != KindResNet50Graph {
			continue
		}
		if _, seen := at[key{r.Workload.Name, 1}]; !seen && r.Threads == 1 {
			names = append(names, r.Workload.Name)
		}
		at[key{r.Workload.Name, r.Threads}] = r
	}
	var b strings.Builder
	b.WriteString("| row |")
	for _, t := range threads[1:] {
		fmt.Fprintf(&b, " 1 → %d threads |", t)
	}
	b.WriteString("\n|---|")
	for range threads[1:] {
		b.WriteString("--:|")
	}
	b.WriteString("\n")
	n := 0
	for _, name := range names {
		one := at[key{name, 1}]
		if !one.KilnOK {
			continue
		}
		n++
		fmt.Fprintf(&b, "| %s |", name)
		for _, t := range threads[1:] {
			r, ok := at[key{name, t}]
			if !ok || !r.KilnOK || !(r.Kiln.Median > 0) {
				b.WriteString(" — |")
				continue
			}
			s := one.Kiln.Median / r.Kiln.Median
			fmt.Fprintf(&b, " %s (%.0f%% of %d×) |", FormatRatio(s), 100*s/float64(t), t)
		}
		b.WriteString("\n")
	}
	if n == 0 {
		return ""
	}
	return b.String()
}
