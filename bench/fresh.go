package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/internal/gcheadroom"
)

// FreshArg is the hidden first argument that turns a binary calling
// ServeFresh into a fresh process measuring one Footprint workload: the
// workload follows as JSON, and the process prints its Result as JSON on
// stdout and exits. kilnbench's main and this package's tests call
// ServeFresh first thing; RunFresh re-executes the running binary with
// it.
const FreshArg = "-kilnbench-fresh-process"

// ServeFresh returns at once unless this process was started by RunFresh;
// then it measures the workload, prints the Result and exits.
func ServeFresh() {
	if len(os.Args) < 2 || os.Args[1] != FreshArg {
		return
	}
	var r Result
	var w Workload
	if len(os.Args) != 3 {
		r.Error = fmt.Sprintf("bench: %s wants one workload as JSON, got %d arguments", FreshArg, len(os.Args)-2)
	} else if err := json.Unmarshal([]byte(os.Args[2]), &w); err != nil {
		r.Error = fmt.Sprintf("bench: %s: reading the workload: %v", FreshArg, err)
	} else {
		r = footprint(w)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// RunFresh measures the Footprint workload w in a fresh process: this
// binary, re-executed with FreshArg, with this process's environment (so
// KILN_NUM_THREADS and GOMAXPROCS, and with them the thread count, carry
// over). Peak memory is read from /proc/self/status, so off Linux the
// result is "n/a".
func RunFresh(w Workload) Result {
	r := Result{Name: w.Name}
	if runtime.GOOS != "linux" {
		r.Error = naPrefix + "peak RSS is read from /proc/self/status (VmHWM), which only Linux has"
		return r
	}
	self, err := os.Executable()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	arg, err := json.Marshal(w)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	cmd := exec.Command(self, FreshArg, string(arg))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		r.Error = fmt.Sprintf("fresh process: %v", err)
		return r
	}
	var got Result
	if err := json.Unmarshal(out, &got); err != nil {
		r.Error = fmt.Sprintf("fresh process: reading its result: %v (output %.200q)", err, out)
		return r
	}
	if got.Name != w.Name {
		r.Error = fmt.Sprintf("fresh process answered %q for %q (does the binary call bench.ServeFresh?)", got.Name, w.Name)
		return r
	}
	return got
}

// footprint runs the Footprint workload w in this process and reports its
// resident memory before building anything and its peak.
func footprint(w Workload) (r Result) {
	r.Name = w.Name
	defer func() {
		if e := recover(); e != nil {
			r = Result{Name: w.Name, Error: fmt.Sprint(e)}
		}
	}()
	k, ok := footprintKinds[w.Kind]
	if !ok {
		r.Error = fmt.Sprintf("bench: %s: %q is not a footprint kind", w.Name, w.Kind)
		return r
	}
	if err := checkDims(w, k.dims); err != nil {
		r.Error = err.Error()
		return r
	}
	start, err := procStatus("VmRSS")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	d := w.Dims
	step, err := k.step(d[:len(d)-1])
	if err != nil {
		r.Error = err.Error()
		return r
	}
	for range d[len(d)-1] {
		step()
	}
	peak, err := procStatus("VmHWM")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.StartRSS, r.PeakRSS = start, peak
	return r
}

// footprintKinds are the Footprint kinds: their dims count, the last
// dim being the number of steps, and the step they measure, made from
// the other dims.
var footprintKinds = map[string]struct {
	dims int
	step func(d []int) (func(), error)
}{
	KindResNet50TrainMem: {3, func(d []int) (func(), error) { return resNet50TrainStep(d[0], d[1]) }},
	KindDLRMTrainMem: {5, func(d []int) (func(), error) {
		step, err := dlrmTrainStep(d, true, true)
		// As examples/dlrm sizes the collector's headroom once the
		// model is built.
		gcheadroom.Set(gcheadroom.DLRM)
		return step, err
	}},
}

// procStatus returns a size field of /proc/self/status ("VmRSS",
// "VmHWM") in bytes.
func procStatus(field string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("bench: no %s size in /proc/self/status", field)
}
