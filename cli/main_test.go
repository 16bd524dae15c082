package cli

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/npy"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
)

// pair is a two-input, two-output model: a small conv net on x and a
// linear map of u.
type pair struct {
	nn.Base
	net *nn.Sequential
	fc  *nn.Linear
}

// saved holds a saved test graph and inputs to run it on.
type saved struct {
	path   string
	g      *graph.Graph
	inputs []*autograd.Tensor
}

// saveGraphs saves the single-input conv net and the two-input pair in
// dir.
func saveGraphs(t *testing.T, dir string) (one, two saved) {
	t.Helper()
	gen := autograd.NewGenerator(5)
	m := &pair{
		net: nn.NewSequential(
			nn.NewConv2d(gen, 3, 4, 3, nn.ConvOptions{Padding: 1}),
			nn.NewReLU(),
			// No Flatten: on this branch it traces as a Reshape to the
			// traced batch, and bench runs other batch sizes.
			nn.NewAdaptiveAvgPool2d(1, 1),
		),
		fc: nn.NewLinear(gen, 6, 2, nn.LinearOptions{}),
	}
	m.RegisterModule("net", m.net)
	m.RegisterModule("fc", m.fc)
	x := autograd.Randn(gen, 1, 3, 6, 6)
	u := autograd.Randn(gen, 1, 6)
	g1, err := graph.Trace(m.net, x)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := graph.TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{m.net.Forward(in[0]), m.fc.Forward(in[1])}
	}, x, u)
	if err != nil {
		t.Fatal(err)
	}
	one = saved{filepath.Join(dir, "one.kiln"), g1, []*autograd.Tensor{x}}
	two = saved{filepath.Join(dir, "two.kiln"), g2, []*autograd.Tensor{x, u}}
	for _, s := range []saved{one, two} {
		if err := graph.Save(s.path, s.g); err != nil {
			t.Fatal(err)
		}
	}
	return one, two
}

// call runs the kiln command line in-process.
func call(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return code, o.String(), e.String()
}

func TestInspect(t *testing.T) {
	one, two := saveGraphs(t, t.TempDir())
	for _, s := range []saved{one, two} {
		code, out, errs := call("inspect", s.path)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, want := range []string{"Conv2d(", "ReLU(", "AdaptiveAvgPool2d(",
			fmt.Sprintf("parameters: %d in ", s.g.NumParams())} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", filepath.Base(s.path), want, out)
			}
		}
		if !strings.HasPrefix(out, s.g.String()) {
			t.Errorf("output does not start with the graph:\n%s", out)
		}
		if strings.Contains(out, "quantization:") {
			t.Errorf("a float32 graph gets a quantization summary:\n%s", out)
		}
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	one, two := saveGraphs(t, dir)
	for _, s := range []saved{one, two} {
		t.Run(filepath.Base(s.path), func(t *testing.T) {
			p, err := graph.Compile(s.g)
			if err != nil {
				t.Fatal(err)
			}
			want, err := p.Run(s.inputs...)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"run", s.path}
			for i, x := range s.inputs {
				in := filepath.Join(dir, fmt.Sprintf("in%d.npy", i))
				if err := npy.Write(in, x); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-i", in)
			}
			var outs []string
			for i := range want {
				out := filepath.Join(dir, fmt.Sprintf("%s.out%d.npy", filepath.Base(s.path), i))
				outs = append(outs, out)
				args = append(args, "-o", out)
			}
			code, stdout, stderr := call(args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for i, out := range outs {
				got, err := npy.Read(out)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.Shape(), want[i].Shape()) || !sameBits(got.Float32s(), want[i].Float32s()) {
					t.Errorf("%s differs from Compile/Run's output %d", out, i)
				}
				if !strings.Contains(stdout, "wrote "+out) {
					t.Errorf("stdout does not report %s:\n%s", out, stdout)
				}
			}
		})
	}
}

// TestRunDefaultOutput checks that a one-output graph writes out.npy in
// the working directory when no -o is given.
func TestRunDefaultOutput(t *testing.T) {
	dir := t.TempDir()
	one, _ := saveGraphs(t, dir)
	in := filepath.Join(dir, "x.npy")
	if err := npy.Write(in, one.inputs[0]); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if code, _, stderr := call("run", "-i", in, one.path); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := npy.Read(filepath.Join(dir, "out.npy")); err != nil {
		t.Fatal(err)
	}
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func TestBench(t *testing.T) {
	t.Setenv("KILN_NUM_THREADS", os.Getenv("KILN_NUM_THREADS"))
	one, two := saveGraphs(t, t.TempDir())
	// The worker pool is shared by the whole test process, so ask for the
	// count it runs; a fresh kiln process can choose any.
	threads := fmt.Sprint(kernels.Threads())
	for _, c := range []struct {
		s     saved
		batch string
	}{{one, "3"}, {two, "2"}} {
		code, out, errs := call("bench", c.s.path, "--batch", c.batch, "--threads", threads, "--iters", "5", "--warmup", "1")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, re := range []string{
			`batch ` + c.batch + `, threads ` + threads + `, 5 timed runs after 1 warm-up`,
			`latency: p50 \S+s  p90 \S+s  p99 \S+s`,
			`throughput: [0-9.]+ items/s`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("output does not match %q:\n%s", re, out)
			}
		}
	}
}

// TestBenchProfile profiles a frozen graph, whose fused node the table
// must name.
func TestBenchProfile(t *testing.T) {
	t.Setenv("KILN_NUM_THREADS", os.Getenv("KILN_NUM_THREADS"))
	dir := t.TempDir()
	one, _ := saveGraphs(t, dir)
	frozen, err := graph.Freeze(one.g)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "frozen.kiln")
	if err := graph.Save(path, frozen); err != nil {
		t.Fatal(err)
	}
	code, out, errs := call("bench", path, "--batch", "2", "--iters", "3", "--warmup", "0", "--profile")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, re := range []string{
		`latency: p50 `,
		`profile: 3 runs, [0-9.]+ ms a run in \d+ nodes?`,
		`(?m)^node +op +scope +output +mode +median ms +% +GFLOP/s$`,
		`(?m)^\d+ +Conv2d\+ReLU +0 +f32\[2,4,6,6\] +compiled +[0-9.]+ +[0-9.]+ +[0-9.]+$`,
		`(?m)^op +nodes +ms a run +%$`,
		`(?m)^Conv2d\+ReLU +1 +[0-9.]+ +[0-9.]+$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output does not match %q:\n%s", re, out)
		}
	}
}

func TestPercentile(t *testing.T) {
	var ts []int
	for i := 1; i <= 10; i++ {
		ts = append(ts, i)
	}
	cases := []struct {
		p    float64
		want int
	}{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {0, 1}, {10, 1}, {11, 2}}
	for _, c := range cases {
		d := make([]time.Duration, len(ts))
		for i, v := range ts {
			d[i] = time.Duration(v)
		}
		if got := percentile(d, c.p); int(got) != c.want {
			t.Errorf("percentile(1..10, %g) = %d, want %d", c.p, got, c.want)
		}
	}
}

// TestErrors checks exit codes and that each message names the problem.
func TestErrors(t *testing.T) {
	// bench --threads sets KILN_NUM_THREADS; put it back afterwards.
	t.Setenv("KILN_NUM_THREADS", os.Getenv("KILN_NUM_THREADS"))
	dir := t.TempDir()
	one, two := saveGraphs(t, dir)
	in := filepath.Join(dir, "x.npy")
	if err := npy.Write(in, one.inputs[0]); err != nil {
		t.Fatal(err)
	}
	ints := filepath.Join(dir, "ints.npy")
	if err := npy.Write(ints, autograd.FromInt64([]int64{1, 2}, 2)); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt.kiln")
	data, err := os.ReadFile(one.path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(corrupt, data, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.kiln")
	cases := []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"no command", nil, 2, []string{"Usage: kiln"}},
		{"unknown command", []string{"frob"}, 2, []string{`unknown command "frob"`}},
		{"missing file argument", []string{"inspect"}, 2, []string{"missing FILE"}},
		{"two files", []string{"inspect", one.path, two.path}, 2, []string{"want one FILE"}},
		{"unknown flag", []string{"bench", one.path, "--fast"}, 2, []string{"-fast", "Usage: kiln bench"}},
		{"bad flag value", []string{"bench", one.path, "--batch", "many"}, 2, []string{"many"}},
		{"bad iters", []string{"bench", one.path, "--iters", "0"}, 2, []string{"--iters 0"}},
		{"too few inputs", []string{"run", two.path, "-i", in}, 2, []string{"takes 2 input(s)", "got 1 -i"}},
		{"outputs not named", []string{"run", two.path, "-i", in, "-i", in}, 2, []string{"has 2 outputs", "got 0 -o"}},
		{"missing graph", []string{"inspect", missing}, 1, []string{missing}},
		{"corrupt graph", []string{"run", corrupt, "-i", in}, 1, []string{corrupt, "checksum mismatch"}},
		{"corrupt graph bench", []string{"bench", corrupt}, 1, []string{corrupt, "checksum mismatch"}},
		{"missing input", []string{"run", one.path, "-i", missing + ".npy"}, 1, []string{missing + ".npy"}},
		{"input of wrong dtype", []string{"run", one.path, "-i", ints}, 1, []string{ints, "int64", "float32"}},
		{"input not npy", []string{"run", one.path, "-i", one.path}, 1, []string{one.path, "not a .npy file"}},
		{"threads fixed", []string{"bench", one.path, "--threads", fmt.Sprint(kernels.Threads() + 1)}, 1, []string{"already runs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := call(c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"run", "-h"}, {"quantize", "-h"}} {
		code, stdout, stderr := call(args...)
		if code != 0 || !strings.Contains(stdout+stderr, "Usage: kiln") {
			t.Errorf("kiln %v: exit %d, output %q", args, code, stdout+stderr)
		}
	}
}
