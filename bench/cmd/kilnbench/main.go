// Command kilnbench measures Kiln and PyTorch on the same workloads at 1
// and 2 threads and prints one Markdown report: time and throughput of
// each, their speed ratio, and each as a share of this machine's measured
// peak. `make bench` runs it; `make bench-deps` installs the PyTorch
// reference (Debian's python3-torch with OpenBLAS).
//
//	go run ./bench/cmd/kilnbench [-quick] [-out FILE] [-json FILE] [-plot DIR] [-filter REGEXP]
//	go run ./bench/cmd/kilnbench -merge a.json,b.json,... [-out FILE] [-plot DIR]
//
// Kiln and PyTorch run in child processes, one pair per thread count:
// Kiln with KILN_NUM_THREADS and GOMAXPROCS set to the count (its worker
// pool is sized once at start), PyTorch in /usr/bin/python3 with
// OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS set and
// torch.set_num_threads called (torch.set_num_threads alone does not limit
// OpenBLAS). The two take turns workload by workload, so both sides of a
// row see the same machine load.
//
// The ResNet-50 peak-memory row is measured in fresh processes instead:
// the Kiln side re-executes this binary with a hidden first argument
// (bench.FreshArg), the PyTorch side starts a new python3 running the
// script in its --footprint mode; both inherit the thread settings above.
//
// -merge renders one report from the -json files of several runs, each
// row's times being the median over the runs: on a shared machine one run
// can be disturbed where another is not.
//
// -plot DIR also draws each group of rows (the report's sections) as a bar
// chart of its Kiln/PyTorch speed ratios at each thread count, in
// DIR/<group>.svg (see plot.go): after a run, or from saved runs with
// -merge (one file or several), without running anything.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kilnml/kiln/bench"
	"github.com/kilnml/kiln/kernels"
	"github.com/klauspost/cpuid/v2"
)

func main() {
	bench.ServeFresh() // the hidden fresh-process mode exits here
	var (
		quick    = flag.Bool("quick", false, "run a representative subset instead of every workload")
		out      = flag.String("out", "", "also write the report (Markdown) to this file")
		jsonOut  = flag.String("json", "", "write the raw measurements (peaks, every sample) as JSON to this file")
		merge    = flag.String("merge", "", "comma-separated -json files of earlier runs: report the per-row median over them instead of running")
		plotDir  = flag.String("plot", "", "also draw a bar chart of each group's Kiln/PyTorch speed ratios, as `DIR`/<group>.svg (with -merge: from the saved runs, running nothing)")
		filter   = flag.String("filter", "", "run only workloads whose name matches this regular expression")
		threadsF = flag.String("threads", "1,2", "comma-separated thread counts")
		runs     = flag.Int("runs", bench.DefaultRuns, "timed samples per workload (the median is reported)")
		python   = flag.String("python", "/usr/bin/python3", "Python interpreter with Debian's python3-torch")
		peakTime = flag.Duration("peak-time", time.Second, "time spent on each peak measurement")
		child    = flag.Bool("child", false, "internal: serve the Kiln side (workloads on stdin, results on stdout)")
	)
	flag.Parse()
	var err error
	switch {
	case *child:
		err = childMain(*runs)
	case *merge != "":
		err = mergeMain(strings.Split(*merge, ","), *out, *plotDir)
	default:
		err = runMain(options{quick: *quick, filter: *filter, threads: *threadsF, runs: *runs,
			python: *python, peakTime: *peakTime}, *out, *jsonOut, *plotDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kilnbench:", err)
		os.Exit(1)
	}
}

// childMain is the Kiln side at one thread count (the parent has set
// KILN_NUM_THREADS and GOMAXPROCS): a Report header, then one Result per
// Workload read from stdin, one JSON value per line, until stdin ends.
func childMain(runs int) error {
	enc := json.NewEncoder(os.Stdout)
	err := enc.Encode(bench.Report{Side: "kiln", Threads: kernels.Threads(), Info: map[string]string{
		"features": kernels.Features(), "gomaxprocs": strconv.Itoa(runtime.GOMAXPROCS(0)),
	}})
	if err != nil {
		return err
	}
	dec := json.NewDecoder(os.Stdin)
	for {
		var w bench.Workload
		if err := dec.Decode(&w); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading a workload: %w", err)
		}
		if err := enc.Encode(bench.RunKiln(w, runs)); err != nil {
			return err
		}
	}
}

type options struct {
	quick    bool
	filter   string
	threads  string
	runs     int
	python   string
	peakTime time.Duration
}

// raw is one run's measurements, as -json writes them and -merge reads
// them.
type raw struct {
	Date      string            `json:"date"`
	ElapsedS  float64           `json:"elapsed_s"`
	LoadStart string            `json:"load_start"`
	LoadEnd   string            `json:"load_end"`
	Quick     bool              `json:"quick"`
	Filter    string            `json:"filter,omitempty"`
	Runs      int               `json:"runs"`
	Threads   []int             `json:"threads"`
	Kiln      string            `json:"kiln_features"`
	CPU       string            `json:"cpu"`
	Go        string            `json:"go"`
	GoEnv     string            `json:"go_env,omitempty"` // GODEBUG and GOGC as Kiln's children got them
	Torch     map[string]string `json:"torch"`
	Peaks     bench.Peaks       `json:"peaks"`
	Workloads []bench.Workload  `json:"workloads"`
	Reports   []bench.Report    `json:"reports"`
}

func runMain(o options, out, jsonOut, plotDir string) error {
	start := time.Now()
	if o.runs < 1 {
		return fmt.Errorf("-runs must be at least 1, got %d", o.runs)
	}
	threads, err := parseThreads(o.threads)
	if err != nil {
		return err
	}
	ws, err := bench.Filter(bench.Workloads(o.quick), o.filter)
	if err != nil {
		return fmt.Errorf("-filter: %w", err)
	}
	if len(ws) == 0 {
		return errors.New("no workload matches -filter")
	}

	// The reference must be usable before anything is timed.
	tmp, err := os.MkdirTemp("", "kilnbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "torch_bench.py")
	if err := os.WriteFile(script, bench.TorchScript, 0o644); err != nil {
		return err
	}
	torchInfo, err := checkTorch(o.python, script)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(torchInfo["blas"], "OpenBLAS") && torchInfo["blas"] != "MKL" {
		fmt.Fprintf(os.Stderr, "kilnbench: WARNING: torch uses %s; its GEMM rows are not a fair reference\n", torchInfo["blas"])
	}
	if torchInfo["torchvision"] == "" && slices.ContainsFunc(ws, func(w bench.Workload) bool { return strings.HasPrefix(w.Kind, "resnet50_") }) {
		fmt.Fprintf(os.Stderr, "kilnbench: WARNING: %s cannot import torchvision: the PyTorch side of the ResNet-50 rows will fail (apt install python3-torchvision)\n", o.python)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r := raw{
		Date: start.Format(time.RFC3339), LoadStart: loadAvg(), Quick: o.quick, Filter: o.filter, Runs: o.runs,
		Threads: threads, Kiln: kernels.Features(), CPU: cpuDescription(), Go: runtime.Version(), GoEnv: goEnv(),
		Torch: torchInfo, Workloads: ws,
	}
	fmt.Fprintf(os.Stderr, "kilnbench: %d workloads × %d thread counts\n", len(ws), len(threads))
	r.Peaks = measurePeaks(threads, o.peakTime, bench.Peaks{})

	for _, t := range threads {
		reps, err := runThreads(ws, t, o, self, script)
		if err != nil {
			return err
		}
		r.Reports = append(r.Reports, reps...)
	}
	// A peak is the best the machine does; measuring again at the end
	// keeps a burst of load at the start from lowering it.
	r.Peaks = measurePeaks(threads, o.peakTime, r.Peaks)
	r.LoadEnd = loadAvg()
	r.ElapsedS = time.Since(start).Seconds()

	if jsonOut != "" {
		b, err := json.MarshalIndent(r, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	if err := emit([]raw{r}, out, plotDir); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kilnbench: done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// runThreads runs every workload at t threads. Both sides run as servers
// and take turns, workload by workload, so a change in the machine's load
// (it may be shared) hits both sides of a row alike.
func runThreads(ws []bench.Workload, t int, o options, self, script string) ([]bench.Report, error) {
	ts, runs := strconv.Itoa(t), strconv.Itoa(o.runs)
	kiln, err := startSide("Kiln", t, exec.Command(self, "-child", "-runs", runs),
		"KILN_NUM_THREADS="+ts, "GOMAXPROCS="+ts)
	if err != nil {
		return nil, err
	}
	defer kiln.close()
	torch, err := startSide("PyTorch", t, exec.Command(o.python, script, "--threads", ts, "--runs", runs),
		"OPENBLAS_NUM_THREADS="+ts, "OMP_NUM_THREADS="+ts, "MKL_NUM_THREADS="+ts)
	if err != nil {
		return nil, err
	}
	defer torch.close()
	if bt := torch.report.Info["blas_threads"]; bt != "" && bt != ts {
		fmt.Fprintf(os.Stderr, "kilnbench: WARNING: OpenBLAS reports %s threads, want %d\n", bt, t)
	}
	for i, w := range ws {
		if !w.RunsAt(t) {
			continue
		}
		// OpenBLAS's workers spin for a while after a call before they
		// sleep; let them settle so they do not take a core from Kiln.
		time.Sleep(200 * time.Millisecond)
		kr, err := kiln.run(w)
		if err != nil {
			return nil, err
		}
		var tr bench.Result
		if !w.KilnOnly {
			if tr, err = torch.run(w); err != nil {
				return nil, err
			}
		}
		row := bench.Row{Workload: w, Threads: t, Kiln: kr, Torch: tr, KilnOK: kr.OK(), TorchOK: tr.OK()}
		fmt.Fprintf(os.Stderr, "  [%d/%d] %d thread(s) %s: Kiln %s, PyTorch %s, Kiln/PyTorch %s\n", i+1, len(ws), t, w.Name,
			resultText(kr), resultText(tr), row.RatioText())
	}
	if err := kiln.close(); err != nil {
		return nil, err
	}
	if err := torch.close(); err != nil {
		return nil, err
	}
	return []bench.Report{kiln.report, torch.report}, nil
}

func mergeMain(files []string, out, plotDir string) error {
	var raws []raw
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r raw
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		raws = append(raws, r)
	}
	if len(raws) == 0 {
		return errors.New("-merge: no files")
	}
	return emit(raws, out, plotDir)
}

// emit prints the report of raws, writes it to out where set, and draws
// its charts in plotDir where set.
func emit(raws []raw, out, plotDir string) error {
	rows, peaks := merged(raws)
	report := render(raws, rows, peaks)
	fmt.Print(report)
	if out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			return err
		}
	}
	if plotDir == "" {
		return nil
	}
	files, err := writePlots(plotDir, rows, raws[0].Threads)
	for _, f := range files {
		fmt.Fprintln(os.Stderr, "kilnbench: wrote", f)
	}
	return err
}

// merged is the rows of one run, or of several runs of the same
// workloads with each row's times the median over the runs, and the
// peaks (each the best over the runs).
func merged(raws []raw) ([]bench.Row, bench.Peaks) {
	first := raws[0]
	peaks := newPeaks()
	peaks.Int8Route = first.Peaks.Int8Route
	results := map[string][]bench.Result{}
	for _, r := range raws {
		for _, t := range first.Threads {
			peaks.FMA[t] = max(peaks.FMA[t], r.Peaks.FMA[t])
			peaks.BF16[t] = max(peaks.BF16[t], r.Peaks.BF16[t])
			peaks.Int8[t] = max(peaks.Int8[t], r.Peaks.Int8[t])
			peaks.AMX[t] = max(peaks.AMX[t], r.Peaks.AMX[t])
			peaks.Copy[t] = max(peaks.Copy[t], r.Peaks.Copy[t])
			peaks.Triad[t] = max(peaks.Triad[t], r.Peaks.Triad[t])
		}
		for _, rep := range r.Reports {
			for _, res := range rep.Results {
				k := key(rep.Side, rep.Threads, res.Name)
				results[k] = append(results[k], res)
			}
		}
	}
	var rows []bench.Row
	for _, w := range first.Workloads {
		for _, t := range first.Threads {
			if !w.RunsAt(t) {
				continue
			}
			k := combine(results[key("kiln", t, w.Name)])
			p := combine(results[key("pytorch", t, w.Name)])
			rows = append(rows, bench.Row{Workload: w, Threads: t, Kiln: k, Torch: p, KilnOK: k.OK(), TorchOK: p.OK()})
		}
	}
	return rows, peaks
}

// render builds the report of raws from their merged rows and peaks.
func render(raws []raw, rows []bench.Row, peaks bench.Peaks) string {
	first := raws[0]
	return header(raws, peaks) +
		"\n### Summary: geometric mean of Kiln/PyTorch speed per group\n\n" + bench.Summary(rows, first.Threads) +
		speedupSection(rows, first.Threads, bench.PrecisionBF16) +
		speedupSection(rows, first.Threads, bench.PrecisionInt8) +
		againstSection(rows, first.Threads) +
		scalingSection(rows, first.Threads) +
		"\n### All rows\n\n" + bench.Table(rows, peaks) + errorsSection(rows)
}

// speedupSection sets Kiln's BF16 or INT8 rows beside its FP32 rows of
// the same run, when the run has such rows.
func speedupSection(rows []bench.Row, threads []int, p bench.Precision) string {
	t := bench.Speedups(rows, threads, p)
	if t == "" {
		return ""
	}
	l := strings.ToUpper(string(p))
	return fmt.Sprintf("\n### Kiln %s ÷ Kiln FP32\n\n"+
		"Kiln's speed on each %s row ÷ its speed on the float32 row doing the same work, in this run "+
		"(FP32 time ÷ %s time; >1: %s faster). \"—\" where the FP32 row was not run (-filter, -quick) or failed.\n\n", l, l, l, l) + t
}

// againstSection sets Kiln rows beside the Kiln rows they name as
// Baseline (the runtime rows), when the run has such rows.
func againstSection(rows []bench.Row, threads []int) string {
	t := bench.Against(rows, threads)
	if t == "" {
		return ""
	}
	return "\n### Kiln ÷ Kiln\n\n" +
		"Kiln's images a second on each row ÷ on its baseline row, in this run (>1: the row is faster). " +
		"\"—\" where either row was not run at that thread count or failed.\n\n" + t
}

// scalingSection is Kiln's speed-up from 1 thread to the run's other
// thread counts on the whole-model ResNet-50 rows, when the run has them.
func scalingSection(rows []bench.Row, threads []int) string {
	t := bench.Scaling(rows, threads)
	if t == "" {
		return ""
	}
	return "\n### Kiln's thread scaling\n\n" +
		"Kiln's time at 1 thread ÷ its time at each other thread count of this run, and that as a share of " +
		"the ideal (the thread count); PyTorch's own scaling is in the table below.\n\n" + t
}

// combine is the median over runs of a row's per-run medians (or peak
// memories); a run that failed is left out, and the row fails only when
// every run did.
func combine(rs []bench.Result) bench.Result {
	var meds, peaks, starts, p50s, p99s []float64
	var errs []string
	for _, r := range rs {
		switch {
		case r.PeakRSS > 0 && r.OK():
			peaks = append(peaks, float64(r.PeakRSS))
			starts = append(starts, float64(r.StartRSS))
		case r.OK():
			meds = append(meds, r.Median)
			if r.P99 > 0 {
				p50s, p99s = append(p50s, r.P50), append(p99s, r.P99)
			}
		case r.Error != "":
			errs = append(errs, r.Error)
		}
	}
	switch {
	case len(peaks) > 0:
		return bench.Result{Name: rs[0].Name, PeakRSS: int64(bench.Median(peaks)), StartRSS: int64(bench.Median(starts))}
	case len(meds) > 0:
		r := bench.Result{Name: rs[0].Name, Median: bench.Median(meds), Samples: meds}
		if len(p99s) > 0 {
			r.P50, r.P99 = bench.Median(p50s), bench.Median(p99s)
		}
		return r
	case len(errs) > 0:
		return bench.Result{Name: rs[0].Name, Error: errs[0]}
	}
	return bench.Result{}
}

// measurePeaks measures the ceilings at each thread count and returns the
// higher of each and the one in prev.
func measurePeaks(threads []int, d time.Duration, prev bench.Peaks) bench.Peaks {
	fmt.Fprintln(os.Stderr, "kilnbench: measuring peaks")
	p := newPeaks()
	for _, t := range threads {
		p.FMA[t] = max(prev.FMA[t], kernels.MeasurePeakFMA(t, d))
		p.BF16[t] = max(prev.BF16[t], kernels.MeasurePeakBF16(t, d))
		p.AMX[t] = max(prev.AMX[t], kernels.MeasurePeakAMX(t, d))
		var i8 float64
		p.Int8Route, i8 = int8Peak(kernels.Features(), d, t)
		p.Int8[t] = max(prev.Int8[t], i8)
		p.Copy[t] = max(prev.Copy[t], kernels.MeasureCopyBandwidth(t, d))
		p.Triad[t] = max(prev.Triad[t], kernels.MeasureTriadBandwidth(t, d))
		fmt.Fprintf(os.Stderr, "  %d thread(s): FMA %.1f GFLOP/s, BF16 %s, AMX %s, INT8 %.1f GOP/s (%s), copy %.1f GB/s, triad %.1f GB/s (best so far)\n",
			t, p.FMA[t], bf16PeakText(p.BF16[t]), bf16PeakText(p.AMX[t]), p.Int8[t], p.Int8Route, p.Copy[t], p.Triad[t])
	}
	return p
}

func newPeaks() bench.Peaks {
	return bench.Peaks{FMA: map[int]float64{}, Copy: map[int]float64{}, Triad: map[int]float64{},
		BF16: map[int]float64{}, Int8: map[int]float64{}, AMX: map[int]float64{}}
}

// int8Peak measures the INT8 ceiling of the route Kiln's INT8 kernels
// take at the level features (kernels.Features) names, and names that
// route: VPDPBUSD where the level is AVX-512 or above with VNNI, the exact
// VPMADDWD route from AVX2 up otherwise, and no ceiling for the Go loops
// of the generic level. The Kiln side inherits this process's KILN_ISA,
// so it runs at this level.
func int8Peak(features string, d time.Duration, threads int) (route string, peak float64) {
	level, _, _ := strings.Cut(features, " on ")
	vpdpbusd, vpmaddwd := kernels.MeasurePeakInt8(threads, d)
	switch {
	case strings.Contains(level, "vnni"):
		return "VPDPBUSD, AVX-512 VNNI: 64 multiply-adds an instruction", vpdpbusd
	case strings.HasPrefix(level, "generic"):
		return "none: Kiln's generic level runs the INT8 GEMM as Go loops", 0
	}
	return "VPMADDWD+VPADDD, AVX2: 16 multiply-adds a pair", vpmaddwd
}

// bf16PeakText prints a BF16 peak, or n/a for a CPU without one.
func bf16PeakText(v float64) string {
	if v > 0 {
		return fmt.Sprintf("%.1f GFLOP/s", v)
	}
	return "n/a (no AVX512_BF16)"
}

func key(side string, threads int, name string) string {
	return side + "\x00" + strconv.Itoa(threads) + "\x00" + name
}

func parseThreads(s string) ([]int, error) {
	var ts []int
	for _, f := range strings.Split(s, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || t < 1 {
			return nil, fmt.Errorf("-threads: %q is not a positive thread count", f)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

const depsHint = "run `make bench-deps` (installs python3-torch and libopenblas0-pthread with apt)"

// checkTorch makes sure python exists and imports torch, and returns the
// reference's versions and BLAS.
func checkTorch(python, script string) (map[string]string, error) {
	if _, err := exec.LookPath(python); err != nil { // a path, or a name on PATH
		return nil, fmt.Errorf("the PyTorch reference needs %s, which is missing: %s", python, depsHint)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(python, script, "--info")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		if strings.Contains(msg, "No module named 'torch'") {
			return nil, fmt.Errorf("%s cannot import torch: %s", python, depsHint)
		}
		return nil, fmt.Errorf("%s %s --info failed (%v: %s): %s", python, script, err, msg, depsHint)
	}
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("reading torch info: %w", err)
	}
	if v := dpkgVersion("python3-torch"); v != "" {
		rep.Info["torch_deb"] = v
	}
	return rep.Info, nil
}

// side is one side's server process.
type side struct {
	name    string
	threads int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	enc     *json.Encoder
	dec     *json.Decoder
	report  bench.Report
	closed  bool
}

// startSide starts cmd with env added to this process's environment,
// passing its stderr through, and reads its report header.
func startSide(name string, threads int, cmd *exec.Cmd, env ...string) (*side, error) {
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s side: %w", name, err)
	}
	s := &side{name: name, threads: threads, cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), dec: json.NewDecoder(stdout)}
	if err := s.dec.Decode(&s.report); err != nil {
		s.close()
		return nil, fmt.Errorf("%s side at %d thread(s): reading its header: %w", name, threads, err)
	}
	if s.report.Threads != threads {
		s.close()
		return nil, fmt.Errorf("%s side runs with %d threads, want %d", name, s.report.Threads, threads)
	}
	return s, nil
}

// run sends w, waits for its result and keeps it in the side's report.
func (s *side) run(w bench.Workload) (bench.Result, error) {
	var r bench.Result
	if err := s.enc.Encode(w); err != nil {
		return r, fmt.Errorf("%s side at %d thread(s): sending %s: %w", s.name, s.threads, w.Name, err)
	}
	if err := s.dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%s side at %d thread(s): reading the result of %s: %w", s.name, s.threads, w.Name, err)
	}
	if r.Name != w.Name {
		return r, fmt.Errorf("%s side answered %q for %q", s.name, r.Name, w.Name)
	}
	s.report.Results = append(s.report.Results, r)
	return r, nil
}

// close ends the server (its stdin closes) and waits for it; closing
// again does nothing.
func (s *side) close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		return fmt.Errorf("%s side at %d thread(s): %w", s.name, s.threads, err)
	}
	return nil
}

func resultText(r bench.Result) string {
	switch {
	case r.Error != "":
		return "error: " + r.Error
	case r.PeakRSS > 0:
		return "peak RSS " + bench.FormatBytes(r.PeakRSS) + " (" + bench.FormatBytes(r.StartRSS) + " at start)"
	case !r.OK():
		return "—" // not run: a Kiln-only row's PyTorch side
	}
	return bench.FormatDuration(r.Median)
}

func cpuDescription() string {
	c := cpuid.CPU
	return fmt.Sprintf("%s (family %d model %d), %d logical CPUs; L1d %d KiB, L2 %d KiB, L3 %d MiB",
		strings.TrimSpace(c.BrandName), c.Family, c.Model, runtime.NumCPU(), c.Cache.L1D>>10, c.Cache.L2>>10, c.Cache.L3>>20)
}

// goEnv returns the runtime settings Kiln's side inherits that change its
// speed (README: GODEBUG=madvdontneed=0 for training), as NAME=value
// pairs, or says that neither is set.
func goEnv() string {
	var set []string
	for _, k := range []string{"GODEBUG", "GOGC"} {
		if v, ok := os.LookupEnv(k); ok {
			set = append(set, k+"="+v)
		}
	}
	if len(set) == 0 {
		return "GODEBUG and GOGC unset"
	}
	return strings.Join(set, " ")
}

func header(raws []raw, peaks bench.Peaks) string {
	r := raws[0]
	var b strings.Builder
	date, _ := time.Parse(time.RFC3339, r.Date)
	fmt.Fprintf(&b, "## Kiln vs PyTorch, %s\n\n", date.Format("2006-01-02"))
	fmt.Fprintf(&b, "- CPU: %s\n", r.CPU)
	fmt.Fprintf(&b, "- Kiln kernels: %s (the pool size of each row is its Threads column)\n", r.Kiln)
	ti := r.Torch
	torch := ti["torch"]
	if d := ti["torch_deb"]; d != "" {
		torch += " (Debian python3-torch " + d + ")"
	}
	if tv := ti["torchvision"]; tv != "" {
		torch += ", torchvision " + tv
	}
	goVersion := strings.Replace(r.Go, "go", "Go ", 1)
	if r.GoEnv != "" { // runs before it was recorded have none
		goVersion += " (" + r.GoEnv + ")"
	}
	fmt.Fprintf(&b, "- %s; PyTorch %s, Python %s\n", goVersion, torch, ti["python"])
	fmt.Fprintf(&b, "- PyTorch BLAS (GEMM rows): %s; convolutions: oneDNN %s\n", ti["blas"], ti["onednn"])
	b.WriteString("- Measured peaks (best of the measurements before and after the rows):")
	for _, t := range r.Threads {
		fmt.Fprintf(&b, " %d thread(s): FMA %.1f GFLOP/s, copy %.1f GB/s, triad %.1f GB/s;", t, peaks.FMA[t], peaks.Copy[t], peaks.Triad[t])
	}
	b.WriteString("\n")
	b.WriteString("- BF16 peak (VDPBF16PS, 32 multiply-adds an instruction):")
	if peaks.BF16Measured(r.Threads) {
		for _, t := range r.Threads {
			fmt.Fprintf(&b, " %d thread(s): %.1f GFLOP/s;", t, peaks.BF16[t])
		}
	} else {
		b.WriteString(" n/a (no AVX512_BF16)")
	}
	level, _, _ := strings.Cut(r.Kiln, " on ")
	fmt.Fprintf(&b, "\n- INT8 peak of Kiln's INT8 kernels at level %s (%s):", level, peaks.Int8Route)
	if peaks.Int8Measured(r.Threads) {
		for _, t := range r.Threads {
			fmt.Fprintf(&b, " %d thread(s): %.1f GOP/s;", t, peaks.Int8[t])
		}
	} else {
		b.WriteString(" n/a")
	}
	b.WriteString("\n- AMX peak (TDPBF16PS, the BF16 GEMM's ceiling where the CPU has AMX):")
	if peaks.AMXMeasured(r.Threads) {
		for _, t := range r.Threads {
			fmt.Fprintf(&b, " %d thread(s): %.1f GFLOP/s;", t, peaks.AMX[t])
		}
	} else {
		b.WriteString(" n/a (no AMX)")
	}
	b.WriteString("\n")
	scope := "all workloads"
	if r.Quick {
		scope = "-quick subset"
	}
	if r.Filter != "" {
		scope += fmt.Sprintf(", -filter %q", r.Filter)
	}
	fmt.Fprintf(&b, "- Method: %s; each row: calls for %v of warm-up, then the median of %d timed samples (a sample is enough calls for ≥%v)", scope, bench.WarmUp, r.Runs, bench.MinSample)
	if len(raws) > 1 {
		fmt.Fprintf(&b, "; times are the median over %d full runs", len(raws))
	}
	bf16Ceil := "BF16 rows too, this CPU having no BF16 peak"
	if peaks.BF16Measured(r.Threads) {
		bf16Ceil = "BF16 rows against the BF16 peak instead"
	}
	fmt.Fprintf(&b, ". Kiln/PyTorch is PyTorch time ÷ Kiln time (>1: Kiln faster). %% peak is against the FMA peak (GFLOP/s rows; %s), "+
		"the INT8 peak (GOP/s rows) "+
		"or the copy bandwidth (GB/s rows; compulsory traffic, so cache-resident rows can pass 100%%)\n", bf16Ceil)
	b.WriteString(resNet50Note(r.Workloads))
	b.WriteString(int8Note(r.Workloads, r.Torch["quantized_engine"]))
	for i, r := range raws {
		run := "Run"
		if len(raws) > 1 {
			run = fmt.Sprintf("Run %d", i+1)
		}
		fmt.Fprintf(&b, "- %s: started %s, took %s; load average at start %s, at end %s\n", run, r.Date,
			(time.Duration(r.ElapsedS) * time.Second).Round(time.Second), r.LoadStart, r.LoadEnd)
	}
	return b.String()
}

// resNet50Note explains the whole-model rows, when the run has any.
func resNet50Note(ws []bench.Workload) string {
	var model, mem, bf16 bool
	for _, w := range ws {
		switch w.Kind {
		case bench.KindResNet50Infer, bench.KindResNet50InferFrozen, bench.KindResNet50Train:
			model = true
		case bench.KindResNet50TrainMem:
			mem = true
		case bench.KindResNet50InferBF16, bench.KindResNet50GraphBF16, bench.KindResNet50TrainBF16:
			bf16 = true
		}
	}
	var b strings.Builder
	if model {
		fwd, train := bench.ResNet50Flops(bench.ResNet50Image)
		fmt.Fprintf(&b, "- ResNet-50 rows: Kiln's models.ResNet50 and torchvision's resnet50, seeded random weights, "+
			"channels-last weights and images; at least %d untimed calls before the timed samples. Kiln runs eager in every row "+
			"(nn.Eval under autograd.NoGrad for inference): \"vs torch eager\" rows compare it with model.eval() under torch.no_grad(), "+
			"\"vs torch jit.freeze\" rows time the same Kiln model again beside torch.jit.freeze(torch.jit.trace(model, x)). "+
			"A train step is zero grad (gradients dropped), train-mode forward, cross-entropy on fixed labels, backward and "+
			"SGD (lr 0.01, momentum 0.9, weight decay 1e-4). img/s is batch ÷ time; GFLOP/s counts the multiply-adds of the "+
			"convolutions and fc: %.2f GFLOP per %d² image forward, %.2f per image for a train step\n",
			bench.ModelWarmUpCalls, fwd/1e9, bench.ResNet50Image, train/1e9)
	}
	if bf16 {
		b.WriteString("- ResNet-50 BF16 rows: Kiln gives the model BF16 weights with kiln.Optimize and runs under amp.Autocast " +
			"(bf16 frozen graph: traced under amp.Autocast, frozen, compiled, run on the float32 images); PyTorch runs " +
			"model.bfloat16() (bf16 infer), torch.jit.freeze(torch.jit.trace(model, x)) traced and run under " +
			"torch.cpu.amp.autocast with the JIT's own autocast pass off, as IPEX sets it (bf16 frozen graph), or " +
			"torch.cpu.amp.autocast (bf16 train step). Without AVX512_BF16, PyTorch's BF16 convolutions are emulated " +
			"(AVX-512) or a slow reference path (AVX2 only), so these rows take few samples\n")
	}
	if mem {
		b.WriteString("- Peak RSS row: each side runs the training steps in a fresh process (kilnbench re-executed, a new python3) " +
			"at the row's thread count and reports its peak resident memory (Kiln: VmHWM; PyTorch: ru_maxrss), beside its " +
			"resident memory at start (after start-up and imports, before building the model); its ratio is Kiln ÷ PyTorch " +
			"memory: below 1 Kiln uses less\n")
	}
	return b.String()
}

// int8Note explains the INT8 rows, when the run has any.
func int8Note(ws []bench.Workload, engine string) string {
	var gemm, model bool
	for _, w := range ws {
		switch w.Kind {
		case bench.KindGemmInt8:
			gemm = true
		case bench.KindResNet50GraphInt8:
			model = true
		}
	}
	if !gemm && !model {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "- INT8 rows: PyTorch's quantized engine %s; GOP/s counts two operations a multiply-add, as GFLOP/s does\n", engine)
	if gemm {
		b.WriteString("- GEMM INT8 rows: Kiln's kernels.GemmU8S8ToU8 (uint8 A with scale 2/255 and zero point 128, int8 weights " +
			"symmetric per output channel packed once by PackInt8, uint8 C with scale 0.1 and zero point 128) against " +
			"torch.ops.quantized.linear on a quint8 input with the same parameters, a weight packed once by " +
			"linear_prepack and the same output parameters\n")
	}
	if model {
		fmt.Fprintf(&b, "- ResNet-50 INT8 rows: both sides calibrate on %d batches of %d random images and run the images of the row's batch. "+
			"Kiln: graph.Trace in eval mode, quant.Prepare (per-tensor affine uint8 activations, min-max ranges, per-channel int8 weights), "+
			"Observe, Finish, quant.Convert, graph.Compile; PyTorch: FX prepare_fx with get_default_qconfig_mapping of the engine "+
			"(histogram observers), calibration, convert_fx, torch.jit.freeze(torch.jit.trace(model, x)); channels-last on both\n",
			bench.ResNet50Int8CalibBatches, bench.ResNet50Int8CalibBatch)
	}
	return b.String()
}

func errorsSection(rows []bench.Row) string {
	var b strings.Builder
	for _, r := range rows {
		for _, s := range []struct {
			name string
			res  bench.Result
		}{{"Kiln", r.Kiln}, {"PyTorch", r.Torch}} {
			if s.res.Error != "" {
				fmt.Fprintf(&b, "- %s, %s, %d thread(s): %s\n", s.name, r.Workload.Name, r.Threads, s.res.Error)
			}
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\n### Errors\n\n" + b.String()
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func dpkgVersion(pkg string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
