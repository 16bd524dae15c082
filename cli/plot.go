package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/internal/charts"
)

// plotCmd draws training curves from metrics files (JSON Lines, one
// record a line): loss against step in one panel, accuracy (or AUC) in
// another, a line for each split of each run.
func plotCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plot", "METRICS.jsonl [MORE.jsonl ...] [-o OUT.svg|OUT.png]", stderr)
	out := fs.String("o", "curves.svg", "write the picture to this `file` (.svg or .png)")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("missing METRICS.jsonl, a file of metrics records (one JSON object a line)")
	}
	if _, err := charts.Format(*out); err != nil {
		return usagef("-o %v", err)
	}
	var runs []*metricsRun
	for i, f := range files {
		if slices.Contains(files[:i], f) {
			continue
		}
		rs, err := readMetrics(f)
		if err != nil {
			return err
		}
		runs = append(runs, rs...)
	}
	nameRuns(runs)
	panels := curvePanels(runs)
	fig, err := charts.Lines(panels)
	if err != nil {
		return err
	}
	if err := fig.Save(*out); err != nil {
		return err
	}
	what := make([]string, len(panels))
	for i, p := range panels {
		what[i] = p.YLabel
	}
	fmt.Fprintf(stdout, "wrote %s: %s of %d run(s)\n", *out, strings.Join(what, " and "), len(runs))
	return nil
}

// The metrics kiln plot draws; other keys of a record are left alone.
const (
	metricLoss     = "loss"
	metricAccuracy = "accuracy"
	metricAUC      = "auc"
)

// metricsRun is one run's curves: for each split and metric, its points
// in increasing order of step.
type metricsRun struct {
	label, file string
	points      map[curveKey][]curvePoint
	splits      []string // in the order they first appear
}

type curveKey struct{ split, metric string }

type curvePoint struct {
	step int64
	v    float64
}

// has reports whether r has a point of metric in any split.
func (r *metricsRun) has(metric string) bool {
	for k, ps := range r.points {
		if k.metric == metric && len(ps) > 0 {
			return true
		}
	}
	return false
}

// maxLine is the longest record readMetrics accepts.
const maxLine = 1 << 20

// readMetrics reads a metrics file: one JSON object a line with "split"
// and "step", an optional "run" label (the file's name without its
// extension when absent) and metric values as numbers, or as the strings
// "NaN", "+Inf" and "-Inf", which are left out. It returns the file's runs
// in the order they first appear, and fails, naming the file and line, on
// a record it cannot read, or when the file has no point to draw.
func readMetrics(path string) ([]*metricsRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	var runs []*metricsRun
	byLabel := map[string]*metricsRun{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line, records, points := 0, 0, 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		rec, err := parseRecord(b)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		records++
		label := cmp.Or(rec.run, base)
		r := byLabel[label]
		if r == nil {
			r = &metricsRun{label: label, file: path, points: map[curveKey][]curvePoint{}}
			byLabel[label] = r
			runs = append(runs, r)
		}
		if !slices.Contains(r.splits, rec.split) {
			r.splits = append(r.splits, rec.split)
		}
		for m, v := range rec.values {
			k := curveKey{rec.split, m}
			ps := r.points[k]
			if n := len(ps); n > 0 && ps[n-1].step >= rec.step {
				// A run resumed from a checkpoint logs again from the
				// checkpoint's step: what the interrupted run logged from
				// there on is superseded, as TensorBoard discards it.
				ps = ps[:sort.Search(n, func(i int) bool { return ps[i].step >= rec.step })]
			}
			r.points[k] = append(ps, curvePoint{rec.step, v})
			points++
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", path, line+1, maxLine)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if points == 0 {
		if records == 0 {
			return nil, fmt.Errorf("%s: no records to plot", path)
		}
		return nil, fmt.Errorf("%s: no records to plot: none of its %d records has a finite %s, %s or %s",
			path, records, metricLoss, metricAccuracy, metricAUC)
	}
	return runs, nil
}

// record is what kiln plot takes from one metrics line.
type record struct {
	run, split string
	step       int64
	values     map[string]float64 // the finite plotted metrics it has
}

func parseRecord(b []byte) (record, error) {
	var rec record
	if b[0] != '{' {
		return rec, errors.New("not a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return rec, fmt.Errorf("bad JSON: %w", err)
	}
	if raw, ok := fields["run"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &rec.run); err != nil {
			return rec, fmt.Errorf("run: want a string, got %s", raw)
		}
	}
	raw, ok := fields["split"]
	if !ok {
		return rec, errors.New(`no "split"`)
	}
	if err := json.Unmarshal(raw, &rec.split); err != nil || rec.split == "" {
		return rec, fmt.Errorf(`split: want "train" or "eval", got %s`, raw)
	}
	raw, ok = fields["step"]
	if !ok {
		return rec, errors.New(`no "step"`)
	}
	step, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return rec, fmt.Errorf("step: want an integer, got %s", raw)
	}
	rec.step = step
	for _, m := range []string{metricLoss, metricAccuracy, metricAUC} {
		raw, ok := fields[m]
		if !ok {
			continue
		}
		v, err := metricValue(raw)
		if err != nil {
			return rec, fmt.Errorf("%s: %w", m, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if rec.values == nil {
			rec.values = map[string]float64{}
		}
		rec.values[m] = v
	}
	return rec, nil
}

// metricValue reads a metric: a JSON number, null, or one of the strings
// that stand for the non-finite values JSON cannot hold (NaN for null).
func metricValue(raw json.RawMessage) (float64, error) {
	if string(raw) == "null" {
		return math.NaN(), nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "NaN", "+Inf", "-Inf", "Inf", "Infinity", "+Infinity", "-Infinity":
			return math.NaN(), nil
		}
		return 0, fmt.Errorf(`want a number or "NaN", "+Inf", "-Inf", got %s`, raw)
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, fmt.Errorf("want a number, got %s", raw)
	}
	return v, nil
}

// nameRuns gives runs of the same label from different files the file's
// name too, so that each line of the legend is one run.
func nameRuns(runs []*metricsRun) {
	files := map[string]map[string]bool{}
	for _, r := range runs {
		if files[r.label] == nil {
			files[r.label] = map[string]bool{}
		}
		files[r.label][r.file] = true
	}
	for _, r := range runs {
		if len(files[r.label]) > 1 {
			r.label += " (" + r.file + ")"
		}
	}
}

// curvePanels lays the runs out: a loss panel when any run has a loss,
// and an accuracy panel when any has an accuracy or an AUC (a run's AUC
// where it has no accuracy), each with a line for each split of each run:
// solid for train, dashed with a dot at each point for the others.
func curvePanels(runs []*metricsRun) []charts.Panel {
	loss := charts.Panel{XLabel: "step", YLabel: "loss"}
	acc := charts.Panel{XLabel: "step"}
	var accRuns, aucRuns []string
	for i, r := range runs {
		addCurves(&loss, r, i, metricLoss)
		switch {
		case r.has(metricAccuracy):
			accRuns = append(accRuns, r.label)
			addCurves(&acc, r, i, metricAccuracy)
		case r.has(metricAUC):
			aucRuns = append(aucRuns, r.label)
			addCurves(&acc, r, i, metricAUC)
		}
	}
	switch {
	case len(aucRuns) == 0:
		acc.YLabel = "accuracy"
	case len(accRuns) == 0:
		acc.YLabel = "AUC"
	default:
		acc.YLabel = "accuracy; AUC for " + strings.Join(aucRuns, ", ")
	}
	var panels []charts.Panel
	for _, p := range []charts.Panel{loss, acc} {
		if len(p.Series) > 0 {
			panels = append(panels, p)
		}
	}
	return panels
}

// addCurves adds run r's lines of metric to p, train first, in the run's
// colour.
func addCurves(p *charts.Panel, r *metricsRun, color int, metric string) {
	splits := slices.Clone(r.splits)
	slices.SortStableFunc(splits, func(a, b string) int { return cmp.Compare(splitRank(a), splitRank(b)) })
	for _, split := range splits {
		ps := r.points[curveKey{split, metric}]
		if len(ps) == 0 {
			continue
		}
		s := charts.Series{Label: r.label + " " + split, Color: color, Dashed: split != "train",
			X: make([]float64, len(ps)), Y: make([]float64, len(ps))}
		for i, pt := range ps {
			s.X[i], s.Y[i] = float64(pt.step), pt.v
		}
		p.Series = append(p.Series, s)
	}
}

// splitRank orders train before eval before any other split.
func splitRank(s string) int {
	switch s {
	case "train":
		return 0
	case "eval":
		return 1
	}
	return 2
}
