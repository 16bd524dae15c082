package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWorkloads(t *testing.T) {
	all, quick := Workloads(false), Workloads(true)
	names := map[string]bool{}
	kinds := map[string]int{}
	for _, w := range all {
		if names[w.Name] {
			t.Errorf("duplicate workload name %q", w.Name)
		}
		names[w.Name] = true
		kinds[w.Kind]++
		switch w.Bound {
		case Compute:
			if !(w.Flops > 0) {
				t.Errorf("%s: compute-bound with flops %v", w.Name, w.Flops)
			}
		case Memory:
			if !(w.Bytes > 0) {
				t.Errorf("%s: memory-bound with bytes %v", w.Name, w.Bytes)
			}
		default:
			t.Errorf("%s: bound %q", w.Name, w.Bound)
		}
	}
	for _, k := range []string{KindConvFwd, KindConvBwdData, KindConvBwdWeight} {
		if kinds[k] != len(ResNet50Convs()) {
			t.Errorf("%d %s rows, want one per ResNet-50 shape (%d)", kinds[k], k, len(ResNet50Convs()))
		}
	}
	if len(quick) == 0 || len(quick) >= len(all) {
		t.Fatalf("quick subset has %d of %d workloads", len(quick), len(all))
	}
	quickKinds := map[string]bool{}
	for _, w := range quick {
		if !names[w.Name] {
			t.Errorf("quick workload %q is not in the full list", w.Name)
		}
		quickKinds[w.Kind] = true
	}
	for k := range kinds {
		if !quickKinds[k] {
			t.Errorf("quick subset has no %s workload", k)
		}
	}
	if f, _ := Filter(all, "^gemm 1024×"); len(f) != 1 {
		t.Errorf("filter ^gemm 1024× matched %d workloads", len(f))
	}
}

func TestResNet50Convs(t *testing.T) {
	convs := ResNet50Convs()
	if len(convs) != 23 {
		t.Fatalf("%d distinct convolutions, want 23", len(convs))
	}
	uses := 0
	for _, c := range convs {
		uses += c.Uses
	}
	if uses != 53 { // resnet50 has 53 convolutions (49 in blocks, 4 downsamples)
		t.Errorf("%d uses in all, want 53", uses)
	}
	// The stem halves 224 to 112 (then the max-pool halves it to 56).
	if oh, _ := convs[0].Dims(1).OutHW(); oh != 112 {
		t.Errorf("conv1 output %d, want 112", oh)
	}
}

// tinyWorkloads returns one small workload of every kind, for tests that
// run them.
func tinyWorkloads() []Workload {
	conv := ConvDims{N: 2, C: 3, H: 9, W: 7, O: 5, K: 3, Stride: 2, Pad: 1}
	return []Workload{
		{Name: "gemm", Kind: KindGemm, Dims: []int{5, 7, 3}},
		{Name: "conv fwd", Kind: KindConvFwd, Dims: conv.dims()},
		{Name: "conv bwd data", Kind: KindConvBwdData, Dims: conv.dims()},
		{Name: "conv bwd weight", Kind: KindConvBwdWeight, Dims: conv.dims()},
		{Name: "conv 1x1", Kind: KindConvFwd, Dims: ConvDims{N: 2, C: 4, H: 3, W: 3, O: 2, K: 1, Stride: 1}.dims()},
		{Name: "relu", Kind: KindReLU, Dims: []int{37}},
		{Name: "gelu", Kind: KindGELU, Dims: []int{37}},
		{Name: "add", Kind: KindAdd, Dims: []int{37}},
		{Name: "softmax", Kind: KindSoftmax, Dims: []int{3, 11}},
		{Name: "batchnorm", Kind: KindBatchNorm, Dims: []int{2, 3, 4, 5}},
		{Name: "layernorm", Kind: KindLayerNorm, Dims: []int{3, 8}},
		{Name: "sgd", Kind: KindSGD, Dims: []int{37}},
	}
}

func TestPrepareRunsEveryKind(t *testing.T) {
	for _, w := range tinyWorkloads() {
		run, err := Prepare(w)
		if err != nil {
			t.Errorf("%s: %v", w.Name, err)
			continue
		}
		run()
		run() // twice: steps after the first (SGD momentum, cleared grads) take other paths
	}
	for _, w := range []Workload{
		{Name: "bad kind", Kind: "nope", Dims: []int{1}},
		{Name: "bad dims", Kind: KindGemm, Dims: []int{1, 2}},
		{Name: "zero dim", Kind: KindReLU, Dims: []int{0}},
	} {
		if _, err := Prepare(w); err == nil {
			t.Errorf("%s: Prepare succeeded", w.Name)
		}
	}
}

func TestMeasure(t *testing.T) {
	calls := 0
	med, samples, inner := Measure(func() { calls++ }, 5)
	if len(samples) != 5 || !(med >= 0) || inner < 2 {
		t.Fatalf("fast call: median %v, %d samples, inner %d", med, len(samples), inner)
	}
	// Warm-up calls for WarmUp, then five samples of inner calls.
	if warm := calls - 5*inner; warm < 1 {
		t.Errorf("%d calls for 5 samples of %d: no warm-up", calls, inner)
	}
	calls = 0
	_, samples, inner = Measure(func() { calls++; time.Sleep(3 * time.Millisecond) }, 5)
	// Each call sleeps at least 3 ms, so warming up for 50 ms takes at
	// most 17 calls.
	if warm := calls - 5; inner != 1 || len(samples) != 5 || warm < 1 || warm > 17 {
		t.Errorf("slow call: inner %d, %d calls, %d samples; want 1, 6 to 22, 5", inner, calls, len(samples))
	}
	if m := Median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("Median = %v, want 2.5", m)
	}
}

func TestTable(t *testing.T) {
	w := Workload{Name: "gemm 2×2×2", Group: "G", Kind: KindGemm, Flops: 2e9, Bound: Compute}
	m := Workload{Name: "relu 1M", Group: "E", Kind: KindReLU, Bytes: 1e9, Bound: Memory}
	peaks := Peaks{FMA: map[int]float64{1: 100}, Copy: map[int]float64{1: 20}}
	rows := []Row{
		{Workload: w, Threads: 1, Kiln: Result{Median: 0.1}, Torch: Result{Median: 0.05}, KilnOK: true, TorchOK: true},
		{Workload: m, Threads: 1, Kiln: Result{Median: 0.1}, Torch: Result{Median: 0.2}, KilnOK: true, TorchOK: true},
		{Workload: m, Threads: 2, Kiln: Result{Error: "boom"}, Torch: Result{Median: 0.2}, TorchOK: true},
	}
	if r := rows[0].Ratio(); r != 0.5 {
		t.Errorf("ratio %v, want 0.5 (Kiln twice as slow)", r)
	}
	if !math.IsNaN(rows[2].Ratio()) {
		t.Errorf("ratio with a failed side = %v, want NaN", rows[2].Ratio())
	}
	tab := Table(rows, peaks)
	for _, want := range []string{
		"| gemm 2×2×2 | 1 | 100 ms | 20 GFLOP/s | 50 ms | 40 GFLOP/s | 0.50× | 20.0% | 40.0% |",
		"| relu 1M | 1 | 100 ms | 10 GB/s | 200 ms | 5 GB/s | 2.00× | 50.0% | 25.0% |",
		"| relu 1M | 2 | error | — | 200 ms | 5 GB/s | — | — | — |",
		"| **G** |", "| **E** |",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	sum := Summary(rows, []int{1, 2})
	for _, want := range []string{"| G | 0.50× (1 rows) | — |", "| E | 2.00× (1 rows) | — |"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

const python = "/usr/bin/python3"

// runPython runs a Python command for a test that compares with PyTorch
// and returns its stdout. It skips the test when the reference is not
// installed (`make bench-deps`) or with -short: importing torch takes a
// few seconds, so these tests run in parallel.
func runPython(t *testing.T, stdin []byte, env []string, args ...string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PyTorch; skipped with -short")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	t.Parallel()
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if strings.Contains(stderr.String(), "ModuleNotFoundError") {
			t.Skipf("%s lacks a module (make bench-deps): %s", python, lastLine(stderr.String()))
		}
		t.Fatalf("%s: %v\n%s", python, err, stderr.String())
	}
	return out
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// TestTorchScriptRunsEveryKind serves the tiny workloads with the embedded
// torch_bench.py, so the two sides agree on every kind and on the protocol.
func TestTorchScriptRunsEveryKind(t *testing.T) {
	script := filepath.Join(t.TempDir(), "torch_bench.py")
	if err := os.WriteFile(script, TorchScript, 0o644); err != nil {
		t.Fatal(err)
	}
	ws := tinyWorkloads()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, w := range ws {
		enc.Encode(w)
	}
	out := runPython(t, in.Bytes(), []string{"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1"}, script, "--threads", "1", "--runs", "1")
	dec := json.NewDecoder(bytes.NewReader(out))
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("header: %v\n%s", err, out)
	}
	if rep.Side != "pytorch" || rep.Threads != 1 {
		t.Fatalf("header side %q threads %d, want pytorch, 1", rep.Side, rep.Threads)
	}
	for range ws {
		var r Result
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("result %d: %v\n%s", len(rep.Results), err, out)
		}
		rep.Results = append(rep.Results, r)
	}
	for i, r := range rep.Results {
		if r.Name != ws[i].Name || r.Error != "" || !(r.Median > 0) || len(r.Samples) != 1 {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if rep.Info["torch"] == "" || rep.Info["blas"] == "" {
		t.Errorf("info lacks torch or blas: %v", rep.Info)
	}
}

// TestResNet50ConvsMatchTorchvision collects the convolutions of
// torchvision's resnet50 with forward hooks and compares the distinct
// shapes and their use counts with ResNet50Convs.
func TestResNet50ConvsMatchTorchvision(t *testing.T) {
	const prog = `
import json, torch, torchvision
m = torchvision.models.resnet50().eval()
seen = []
def hook(mod, inp, out):
    seen.append([mod.in_channels, mod.out_channels, mod.kernel_size[0], mod.stride[0], mod.padding[0], inp[0].shape[2], inp[0].shape[3]])
for mod in m.modules():
    if isinstance(mod, torch.nn.Conv2d):
        assert mod.groups == 1 and mod.dilation == (1, 1) and mod.bias is None
        mod.register_forward_hook(hook)
with torch.no_grad():
    m(torch.zeros(1, 3, 224, 224))
print(json.dumps(seen))
`
	out := runPython(t, nil, nil, "-c", prog)
	var seen [][7]int
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatal(err)
	}
	got := map[[7]int]int{}
	for _, s := range seen {
		got[s]++
	}
	want := map[[7]int]int{}
	for _, c := range ResNet50Convs() {
		want[[7]int{c.C, c.O, c.K, c.Stride, c.Pad, c.H, c.W}] = c.Uses
	}
	if len(got) != len(want) {
		t.Errorf("torchvision has %d distinct shapes, the table %d", len(got), len(want))
	}
	for s, n := range want {
		if got[s] != n {
			t.Errorf("shape C,O,K,stride,pad,H,W = %v: torchvision uses it %d times, the table says %d", s, got[s], n)
		}
	}
}

// BenchmarkKiln runs the -quick workloads as Go benchmarks, reporting
// GFLOP/s or GB/s. `make bench` gives the full comparison with PyTorch.
func BenchmarkKiln(b *testing.B) {
	for _, w := range Workloads(true) {
		b.Run(strings.ReplaceAll(w.Name, " ", "_"), func(b *testing.B) {
			run, err := Prepare(w)
			if err != nil {
				b.Fatal(err)
			}
			run()
			for b.Loop() {
				run()
			}
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(Rate(w, per), rateUnit(w))
		})
	}
}
