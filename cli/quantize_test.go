package cli

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/npy"
	"github.com/kilnml/kiln/nn"
)

// cnnFiles are a saved float32 CNN and .npy files to calibrate and run it.
type cnnFiles struct {
	f32   saved
	calib [2]string // two calibration batches
	x     string    // an input to compare outputs on
	bf16  string    // the CNN traced under autocast
	dir   string
}

// saveCNN saves conv → ReLU → max pool → flatten → linear, traced at
// batch 4, and its calibration and evaluation inputs in dir.
func saveCNN(t *testing.T, dir string) cnnFiles {
	t.Helper()
	gen := autograd.NewGenerator(3)
	m := nn.NewSequential(
		nn.NewConv2d(gen, 3, 8, 3, nn.ConvOptions{Padding: 1}),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, nn.MaxPoolOptions{}),
		nn.NewFlatten(1, -1),
		nn.NewLinear(gen, 8*4*4, 5, nn.LinearOptions{}),
	)
	x := autograd.Randn(gen, 4, 3, 8, 8)
	g, err := graph.Trace(m, x)
	if err != nil {
		t.Fatal(err)
	}
	bf, err := graph.Trace(m, autograd.Autocast(x))
	if err != nil {
		t.Fatal(err)
	}
	f := cnnFiles{f32: saved{filepath.Join(dir, "cnn.kiln"), g, []*autograd.Tensor{x}},
		x: filepath.Join(dir, "x.npy"), bf16: filepath.Join(dir, "bf16.kiln"), dir: dir}
	if err := graph.Save(f.f32.path, g); err != nil {
		t.Fatal(err)
	}
	if err := graph.Save(f.bf16, bf); err != nil {
		t.Fatal(err)
	}
	if err := npy.Write(f.x, x); err != nil {
		t.Fatal(err)
	}
	for i := range f.calib {
		f.calib[i] = filepath.Join(dir, []string{"a.npy", "b.npy"}[i])
		if err := npy.Write(f.calib[i], autograd.Randn(gen, 4, 3, 8, 8)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// TestQuantize converts the CNN by calibration and then with the conf the
// first calibration wrote, and checks each int8 graph through the other
// commands: inspect summarizes it, run matches the float32 graph within
// 5% relative RMS, and bench profiles it.
func TestQuantize(t *testing.T) {
	t.Setenv("KILN_NUM_THREADS", os.Getenv("KILN_NUM_THREADS"))
	f := saveCNN(t, t.TempDir())
	want, err := runGraph(f.f32.g, f.f32.inputs)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(f.dir, "conf.json")
	affine := filepath.Join(f.dir, "affine.kiln")
	cases := []struct {
		name string
		args []string
		out  string
		acts string // the 8-bit activation dtype
		note string // in the summary line's parentheses
	}{
		{"calibrated", []string{"--calib", f.calib[0], "--calib", f.calib[1], "--conf-out", conf}, affine, "uint8",
			"calibrated on 2 batch(es), conf written to " + conf},
		{"from conf", []string{"--conf", conf}, filepath.Join(f.dir, "fromconf.kiln"), "uint8", "conf " + conf},
		{"symmetric histogram", []string{"--calib", f.calib[0], "--calib", f.calib[1], "--symmetric", "--algorithm", "histogram"},
			filepath.Join(f.dir, "sym.kiln"), "int8", "calibrated on 2 batch(es)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"quantize", f.f32.path, "-o", c.out}, c.args...)
			code, stdout, stderr := call(args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			// Recorded: Conv2d, ReLU, MaxPool2d, Flatten, Linear.
			line := "wrote " + c.out + ": 5 ops recorded, 2 int8 layer nodes, 2 int8 weights (" + c.note + ")\n"
			if stdout != line {
				t.Errorf("stdout %q, want %q", stdout, line)
			}
			q, err := graph.Load(c.out)
			if err != nil {
				t.Fatal(err)
			}

			code, stdout, stderr = call("inspect", c.out)
			if code != 0 {
				t.Fatalf("inspect: exit %d: %s", code, stderr)
			}
			summary := "quantization:\n" +
				"  int8 layer nodes: 2 (Conv2d 1, Linear 1)\n" +
				"  int8 weights: 2 constants, 856 bytes\n" + // 8·3·3·3 + 5·128
				"  Quantize nodes: 1\n" +
				"  8-bit activations: " + c.acts + "\n"
			if !strings.HasSuffix(stdout, summary) || !strings.HasPrefix(stdout, q.String()) {
				t.Errorf("inspect prints:\n%s\nwant the graph, then ending with:\n%s", stdout, summary)
			}

			out := filepath.Join(f.dir, c.name+".out.npy")
			if code, _, stderr := call("run", c.out, "-i", f.x, "-o", out); code != 0 {
				t.Fatalf("run: exit %d: %s", code, stderr)
			}
			got, err := npy.Read(out)
			if err != nil {
				t.Fatal(err)
			}
			if rel := relRMS(got.Float32s(), want[0].Float32s()); rel > 0.05 || math.IsNaN(rel) {
				t.Errorf("int8 output differs from float32's by %.3g relative RMS, want < 0.05", rel)
			}

			code, stdout, stderr = call("bench", c.out, "--iters", "2", "--warmup", "0", "--profile")
			if code != 0 {
				t.Fatalf("bench: exit %d: %s", code, stderr)
			}
			for _, re := range []string{
				`latency: p50 `,
				`(?m)^\d+ +Dequantize\+Conv2d\+ReLU\+Quantize +\S* +[ui]8\[4,8,8,8\] +compiled +[0-9.]+`,
				`(?m)^\d+ +MaxPool2d +\S* +[ui]8\[4,8,4,4\] `,
				`(?m)^Dequantize\+Linear +1 +[0-9.]+ +[0-9.]+$`,
				`(?m)^Quantize +1 +[0-9.]+ +[0-9.]+$`,
			} {
				if !regexp.MustCompile(re).MatchString(stdout) {
					t.Errorf("bench --profile output does not match %q:\n%s", re, stdout)
				}
			}
		})
	}
	// The conf holds all the calibration decided, so converting with it
	// gives the calibrated graph again.
	a, err := graph.Load(affine)
	if err != nil {
		t.Fatal(err)
	}
	b, err := graph.Load(filepath.Join(f.dir, "fromconf.kiln"))
	if err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("converting with the saved conf gives\n%s\nthe calibration gave\n%s", b, a)
	}
}

// TestQuantizeTwoInputs calibrates a two-input graph on comma-separated
// files and runs the result.
func TestQuantizeTwoInputs(t *testing.T) {
	dir := t.TempDir()
	_, two := saveGraphs(t, dir)
	var files []string
	for i, x := range two.inputs {
		files = append(files, filepath.Join(dir, []string{"x.npy", "u.npy"}[i]))
		if err := npy.Write(files[i], x); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "two8.kiln")
	code, stdout, stderr := call("quantize", two.path, "--calib", strings.Join(files, ","), "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`^wrote \S+: \d+ ops recorded, 2 int8 layer nodes, 2 int8 weights`).MatchString(stdout) {
		t.Errorf("stdout: %q", stdout)
	}
	o1, o2 := filepath.Join(dir, "o1.npy"), filepath.Join(dir, "o2.npy")
	if code, _, stderr := call("run", out, "-i", files[0], "-i", files[1], "-o", o1, "-o", o2); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
}

// TestQuantizeErrors checks exit codes and that each message names the
// flag or file at fault.
func TestQuantizeErrors(t *testing.T) {
	dir := t.TempDir()
	f := saveCNN(t, dir)
	_, two := saveGraphs(t, dir)
	out := filepath.Join(dir, "out.kiln")
	conf := filepath.Join(dir, "conf.json")
	i8 := filepath.Join(dir, "i8.kiln")
	if code, _, stderr := call("quantize", f.f32.path, "--calib", f.calib[0], "--conf-out", conf, "-o", i8); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	write := func(name string, x *autograd.Tensor) string {
		p := filepath.Join(dir, name)
		if err := npy.Write(p, x); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gen := autograd.NewGenerator(9)
	ints := write("ints.npy", autograd.FromInt64([]int64{1, 2}, 2))
	flat := write("flat.npy", autograd.Randn(gen, 4, 192))
	channels := write("channels.npy", autograd.Randn(gen, 4, 5, 8, 8))
	nans := make([]float32, 192)
	nans[7] = float32(math.NaN())
	nan := write("nan.npy", autograd.FromFloat32(nans, 1, 3, 8, 8))
	missing := filepath.Join(dir, "missing.npy")
	badConf := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(badConf, []byte(`[{"id": 0}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cnn, a := f.f32.path, f.calib[0]
	cases := []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"missing -o", []string{cnn, "--calib", a}, 2, []string{"missing -o"}},
		{"neither calib nor conf", []string{cnn, "-o", out}, 2, []string{"--calib", "--conf"}},
		{"both calib and conf", []string{cnn, "--calib", a, "--conf", conf, "-o", out}, 2, []string{"exclude each other"}},
		{"conf with calibration flags", []string{cnn, "--conf", conf, "--symmetric", "-o", out}, 2, []string{"--symmetric", conf}},
		{"output over input", []string{cnn, "--calib", a, "-o", cnn}, 2, []string{"-o " + cnn, "overwrite"}},
		{"unknown algorithm", []string{cnn, "--calib", a, "--algorithm", "median", "-o", out}, 2, []string{"--algorithm median", "min_max"}},
		{"missing file", []string{"--calib", a, "-o", out}, 2, []string{"missing FILE"}},
		{"files per batch", []string{two.path, "--calib", a, "-o", out}, 2, []string{"--calib " + a, "takes 2 input(s)", "got 1"}},
		{"empty file name", []string{two.path, "--calib", a + ",", "-o", out}, 2, []string{"--calib " + a + ",", "empty file name"}},
		{"unreadable npy", []string{cnn, "--calib", a, "--calib", missing, "-o", out}, 1, []string{"--calib batch 2", missing}},
		{"not npy", []string{cnn, "--calib", cnn, "-o", out}, 1, []string{cnn, "not a .npy file"}},
		{"wrong dtype", []string{cnn, "--calib", ints, "-o", out}, 1, []string{ints, "int64", "float32"}},
		{"wrong rank", []string{cnn, "--calib", flat, "-o", out}, 1, []string{flat, "has 4 dimensions"}},
		{"wrong channels", []string{cnn, "--calib", channels, "-o", out}, 1, []string{"--calib batch 1", channels}},
		{"not finite", []string{cnn, "--calib", nan, "-o", out}, 1, []string{nan, "NaN"}},
		{"bf16 graph", []string{f.bf16, "--calib", a, "-o", out}, 1, []string{f.bf16, "bfloat16"}},
		{"bf16 graph with conf", []string{f.bf16, "--conf", conf, "-o", out}, 1, []string{f.bf16, "bfloat16"}},
		{"int8 graph", []string{i8, "--calib", a, "-o", out}, 1, []string{i8, "already quantized"}},
		{"int8 graph with conf", []string{i8, "--conf", conf, "-o", out}, 1, []string{i8, "already quantized"}},
		{"missing conf", []string{cnn, "--conf", missing, "-o", out}, 1, []string{missing}},
		{"malformed conf", []string{cnn, "--conf", badConf, "-o", out}, 1, []string{badConf}},
		{"conf of another graph", []string{two.path, "--conf", conf, "-o", out}, 1, []string{two.path, conf}},
		{"missing graph", []string{filepath.Join(dir, "none.kiln"), "--calib", a, "-o", out}, 1, []string{"none.kiln"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := call(append([]string{"quantize"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written", out)
			}
		})
	}
}

// runGraph compiles and runs g.
func runGraph(g *graph.Graph, inputs []*autograd.Tensor) ([]*autograd.Tensor, error) {
	p, err := graph.Compile(g)
	if err != nil {
		return nil, err
	}
	return p.Run(inputs...)
}

// relRMS is the root mean square of got − want over that of want.
func relRMS(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}
