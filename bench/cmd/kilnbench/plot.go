package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/kilnml/kiln/bench"
	"github.com/kilnml/kiln/internal/charts"
)

// ratioAxis labels the bars' axis of every chart.
const ratioAxis = "Kiln/PyTorch speed: PyTorch time ÷ Kiln time (log scale; right of 1×: Kiln faster)"

// writePlots draws each group of rows, in the order groups first appear,
// as a bar chart of its rows' Kiln/PyTorch speed ratios, one bar for each
// of threads, in dir/<slug of the group>.svg. Rows without a speed ratio
// at any thread count (Kiln-only and peak-memory rows, rows that failed)
// are left out, and so is a group left with none. It returns the files
// written.
func writePlots(dir string, rows []bench.Row, threads []int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sets := make([]string, len(threads))
	for i, t := range threads {
		sets[i] = strconv.Itoa(t) + " thread"
		if t != 1 {
			sets[i] += "s"
		}
	}
	var files []string
	used := map[string]bool{}
	for _, g := range groupRows(rows, threads) {
		if len(g.bars) == 0 {
			continue
		}
		fig, err := charts.RatioBars(charts.Ratios{Title: g.name, Axis: ratioAxis, Sets: sets, Rows: g.bars,
			Format: bench.FormatRatio})
		if err != nil {
			return files, fmt.Errorf("group %s: %w", g.name, err)
		}
		name := slug(g.name)
		for i := 2; used[name]; i++ {
			name = slug(g.name) + "-" + strconv.Itoa(i)
		}
		used[name] = true
		f := filepath.Join(dir, name+".svg")
		if err := fig.Save(f); err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

// barGroup is one group's rows as bars: a BarRow for each workload with a
// speed ratio at one thread count at least.
type barGroup struct {
	name string
	bars []charts.BarRow
}

func groupRows(rows []bench.Row, threads []int) []barGroup {
	var groups []barGroup
	at := map[string]int{}  // group → index in groups
	bar := map[string]int{} // group, workload → index in its bars
	for _, r := range rows {
		q := r.Ratio()
		if math.IsNaN(q) {
			continue
		}
		t := slices.Index(threads, r.Threads)
		if t < 0 {
			continue
		}
		g, ok := at[r.Workload.Group]
		if !ok {
			g = len(groups)
			at[r.Workload.Group] = g
			groups = append(groups, barGroup{name: r.Workload.Group})
		}
		k := r.Workload.Group + "\x00" + r.Workload.Name
		b, ok := bar[k]
		if !ok {
			b = len(groups[g].bars)
			bar[k] = b
			vals := make([]float64, len(threads))
			for i := range vals {
				vals[i] = math.NaN()
			}
			groups[g].bars = append(groups[g].bars, charts.BarRow{Label: r.Workload.Name, Values: vals})
		}
		groups[g].bars[b].Values[t] = q
	}
	return groups
}

// slug is a group's name as a file name: lower-case letters and digits,
// other runs of characters a single hyphen ("GEMM DL shapes (m×n×k)" →
// "gemm-dl-shapes-m-n-k").
func slug(s string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range strings.ToLower(s) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			hyphen = false
			continue
		}
		hyphen = true
	}
	if b.Len() == 0 {
		return "group"
	}
	return b.String()
}
