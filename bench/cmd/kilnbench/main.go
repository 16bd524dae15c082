// Command kilnbench measures Kiln and PyTorch on the same workloads at 1
// and 2 threads and prints one Markdown table: time and throughput of
// each, their speed ratio, and each as a share of this machine's measured
// peak. `make bench` runs it; `make bench-deps` installs the PyTorch
// reference (Debian's python3-torch with OpenBLAS).
//
//	go run ./bench/cmd/kilnbench [-quick] [-out FILE] [-json FILE] [-filter REGEXP]
//
// Kiln runs in child processes of this program, one per thread count,
// started with KILN_NUM_THREADS and GOMAXPROCS set to the count (Kiln's
// worker pool is sized once at start). PyTorch runs in /usr/bin/python3
// with OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS set and
// torch.set_num_threads called, since torch.set_num_threads alone does not
// limit OpenBLAS.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kilnml/kiln/bench"
	"github.com/kilnml/kiln/kernels"
	"github.com/klauspost/cpuid/v2"
)

func main() {
	var (
		quick    = flag.Bool("quick", false, "run a representative subset instead of every workload")
		out      = flag.String("out", "", "also write the report (Markdown) to this file")
		jsonOut  = flag.String("json", "", "write the raw measurements (peaks, every sample) as JSON to this file")
		filter   = flag.String("filter", "", "run only workloads whose name matches this regular expression")
		threadsF = flag.String("threads", "1,2", "comma-separated thread counts")
		runs     = flag.Int("runs", bench.DefaultRuns, "timed samples per workload (the median is reported)")
		python   = flag.String("python", "/usr/bin/python3", "Python interpreter with Debian's python3-torch")
		peakTime = flag.Duration("peak-time", time.Second, "time spent on each peak measurement")
		child    = flag.Bool("child", false, "internal: run the Kiln side on the workloads read from stdin")
	)
	flag.Parse()
	if *child {
		if err := childMain(*runs); err != nil {
			fmt.Fprintln(os.Stderr, "kilnbench -child:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*quick, *out, *jsonOut, *filter, *threadsF, *runs, *python, *peakTime); err != nil {
		fmt.Fprintln(os.Stderr, "kilnbench:", err)
		os.Exit(1)
	}
}

// childMain is the Kiln side at one thread count: the parent has set
// KILN_NUM_THREADS and GOMAXPROCS.
func childMain(runs int) error {
	var ws []bench.Workload
	if err := json.NewDecoder(os.Stdin).Decode(&ws); err != nil {
		return fmt.Errorf("reading workloads: %w", err)
	}
	rep := bench.Report{
		Side: "kiln", Threads: kernels.Threads(),
		Info:    map[string]string{"features": kernels.Features(), "gomaxprocs": strconv.Itoa(runtime.GOMAXPROCS(0))},
		Results: bench.RunKiln(ws, runs, os.Stderr),
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// raw is what -json writes.
type raw struct {
	Date      string           `json:"date"`
	Peaks     bench.Peaks      `json:"peaks"`
	Workloads []bench.Workload `json:"workloads"`
	Reports   []bench.Report   `json:"reports"`
}

func run(quick bool, out, jsonOut, filter, threadsF string, runs int, python string, peakTime time.Duration) error {
	start := time.Now()
	if runs < 1 {
		return fmt.Errorf("-runs must be at least 1, got %d", runs)
	}
	threads, err := parseThreads(threadsF)
	if err != nil {
		return err
	}
	ws, err := bench.Filter(bench.Workloads(quick), filter)
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
	torchInfo, err := checkTorch(python, script)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(torchInfo["blas"], "OpenBLAS") && torchInfo["blas"] != "MKL" {
		fmt.Fprintf(os.Stderr, "kilnbench: WARNING: torch uses %s; its GEMM rows are not a fair reference\n", torchInfo["blas"])
	}
	spec := filepath.Join(tmp, "workloads.json")
	specJSON, err := json.Marshal(ws)
	if err != nil {
		return err
	}
	if err := os.WriteFile(spec, specJSON, 0o644); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	loadStart := loadAvg()

	fmt.Fprintf(os.Stderr, "kilnbench: %d workloads × %d thread counts; measuring peaks\n", len(ws), len(threads))
	peaks := bench.Peaks{FMA: map[int]float64{}, Copy: map[int]float64{}, Triad: map[int]float64{}}
	for _, t := range threads {
		peaks.FMA[t] = kernels.MeasurePeakFMA(t, peakTime)
		peaks.Copy[t] = kernels.MeasureCopyBandwidth(t, peakTime)
		peaks.Triad[t] = kernels.MeasureTriadBandwidth(t, peakTime)
		fmt.Fprintf(os.Stderr, "  %d thread(s): FMA %.1f GFLOP/s, copy %.1f GB/s, triad %.1f GB/s\n", t, peaks.FMA[t], peaks.Copy[t], peaks.Triad[t])
	}

	var reports []bench.Report
	byKey := map[string]bench.Result{}
	for _, t := range threads {
		fmt.Fprintf(os.Stderr, "== Kiln, %d thread(s)\n", t)
		kr, err := runKiln(self, specJSON, t, runs)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "== PyTorch, %d thread(s)\n", t)
		tr, err := runTorch(python, script, spec, t, runs)
		if err != nil {
			return err
		}
		if tr.Info["blas_threads"] != "" && tr.Info["blas_threads"] != strconv.Itoa(t) {
			fmt.Fprintf(os.Stderr, "kilnbench: WARNING: OpenBLAS reports %s threads, want %d\n", tr.Info["blas_threads"], t)
		}
		for _, rep := range []bench.Report{kr, tr} {
			reports = append(reports, rep)
			for _, r := range rep.Results {
				byKey[key(rep.Side, t, r.Name)] = r
			}
		}
	}

	var rows []bench.Row
	for _, w := range ws {
		for _, t := range threads {
			k, kok := byKey[key("kiln", t, w.Name)]
			p, pok := byKey[key("pytorch", t, w.Name)]
			rows = append(rows, bench.Row{Workload: w, Threads: t, Kiln: k, Torch: p,
				KilnOK: kok && k.Error == "" && k.Median > 0, TorchOK: pok && p.Error == "" && p.Median > 0})
		}
	}
	elapsed := time.Since(start)
	report := header(torchInfo, peaks, threads, runs, quick, filter, loadStart, elapsed) +
		"\n### Summary: geometric mean of Kiln/PyTorch speed per group\n\n" + bench.Summary(rows, threads) +
		"\n### All rows\n\n" + bench.Table(rows, peaks) + errorsSection(rows)
	fmt.Print(report)
	if out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			return err
		}
	}
	if jsonOut != "" {
		b, err := json.MarshalIndent(raw{Date: start.Format(time.RFC3339), Peaks: peaks, Workloads: ws, Reports: reports}, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "kilnbench: done in %s\n", elapsed.Round(time.Second))
	return nil
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
	if _, err := os.Stat(python); err != nil {
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

func runKiln(self string, spec []byte, threads, runs int) (bench.Report, error) {
	cmd := exec.Command(self, "-child", "-runs", strconv.Itoa(runs))
	cmd.Env = append(os.Environ(), "KILN_NUM_THREADS="+strconv.Itoa(threads), "GOMAXPROCS="+strconv.Itoa(threads))
	cmd.Stdin = bytes.NewReader(spec)
	return runSide(cmd, "Kiln", threads)
}

func runTorch(python, script, spec string, threads, runs int) (bench.Report, error) {
	t := strconv.Itoa(threads)
	cmd := exec.Command(python, script, "--spec", spec, "--threads", t, "--runs", strconv.Itoa(runs))
	cmd.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS="+t, "OMP_NUM_THREADS="+t, "MKL_NUM_THREADS="+t)
	return runSide(cmd, "PyTorch", threads)
}

// runSide runs one side's process, passing its progress (stderr) through,
// and decodes the report it prints.
func runSide(cmd *exec.Cmd, name string, threads int) (bench.Report, error) {
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return bench.Report{}, fmt.Errorf("%s side at %d thread(s): %w", name, threads, err)
	}
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return bench.Report{}, fmt.Errorf("%s side at %d thread(s): reading its report: %w", name, threads, err)
	}
	if rep.Threads != threads {
		return bench.Report{}, fmt.Errorf("%s side ran with %d threads, want %d", name, rep.Threads, threads)
	}
	return rep, nil
}

func header(ti map[string]string, peaks bench.Peaks, threads []int, runs int, quick bool, filter, loadStart string, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Kiln vs PyTorch, %s\n\n", time.Now().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- CPU: %s (family %d model %d), %d logical CPUs; L1d %d KiB, L2 %d KiB, L3 %d MiB\n",
		strings.TrimSpace(cpuid.CPU.BrandName), cpuid.CPU.Family, cpuid.CPU.Model, runtime.NumCPU(),
		cpuid.CPU.Cache.L1D>>10, cpuid.CPU.Cache.L2>>10, cpuid.CPU.Cache.L3>>20)
	fmt.Fprintf(&b, "- Kiln kernels: %s (pool size per row: the Threads column)\n", kernels.Features())
	torch := ti["torch"]
	if d := ti["torch_deb"]; d != "" {
		torch += " (Debian python3-torch " + d + ")"
	}
	fmt.Fprintf(&b, "- Go %s; PyTorch %s, Python %s\n", strings.TrimPrefix(runtime.Version(), "go"), torch, ti["python"])
	fmt.Fprintf(&b, "- PyTorch BLAS (GEMM rows): %s; convolutions: oneDNN %s\n", ti["blas"], ti["onednn"])
	fmt.Fprintf(&b, "- Measured peaks:")
	for _, t := range threads {
		fmt.Fprintf(&b, " %d thread(s): FMA %.1f GFLOP/s, copy %.1f GB/s, triad %.1f GB/s;", t, peaks.FMA[t], peaks.Copy[t], peaks.Triad[t])
	}
	b.WriteString("\n")
	scope := "all workloads"
	if quick {
		scope = "-quick subset"
	}
	if filter != "" {
		scope += fmt.Sprintf(", -filter %q", filter)
	}
	fmt.Fprintf(&b, "- Method: %s; per row one warm-up call, then the median of %d timed samples (a sample is enough calls for ≥%v); ", scope, runs, bench.MinSample)
	b.WriteString("Kiln/PyTorch is PyTorch time ÷ Kiln time (>1: Kiln faster); % peak is against the FMA peak (GFLOP/s rows) or the copy bandwidth (GB/s rows, compulsory traffic, so cache-resident rows can pass 100%)\n")
	fmt.Fprintf(&b, "- Load average at start: %s, at end: %s; the whole run took %s\n", loadStart, loadAvg(), elapsed.Round(time.Second))
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
