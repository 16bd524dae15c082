package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets/criteo"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/checkpoint"
	"github.com/kilnml/kiln/nn"
)

// plantedArgs is the learning check's setup: eight tables of 50 rows, d =
// 16, 50k training and 10k held-out planted samples.
var plantedArgs = []string{"--data-generation", "planted", "--arch-embedding-size", "50-50-50-50-50-50-50-50",
	"--arch-sparse-feature-size", "16", "--arch-mlp-bot", "13-64-16", "--arch-mlp-top", "64-1",
	"--loss-function", "bce", "--mini-batch-size", "128", "--data-size", "50000", "--test-size", "10000",
	"--print-freq", "1000", "--quiet"}

// runOK runs the command line and fails the test unless it exits 0.
func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out, errw bytes.Buffer
	if status := run(args, &out, &errw); status != 0 {
		t.Fatalf("dlrm %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), status, out.String(), errw.String())
	}
	return out.String()
}

// lastFloat returns the number after the last match of label in out.
func lastFloat(t *testing.T, out, label string) float64 {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(label)+` ([0-9.]+)`).FindAllStringSubmatch(out, -1)
	if m == nil {
		t.Fatalf("no %q in output:\n%s", label, out)
	}
	v, err := strconv.ParseFloat(m[len(m)-1][1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTrainLearnsPlanted is issue 19's learning check: on planted data
// with a known signal, SGD and row-wise Adagrad reach a held-out AUC
// within 0.03 of the oracle's (the true probabilities') and at least 0.75,
// in FP32 and in split BF16 (--dtype bf16), whose best AUC must also be
// within 0.005 of the FP32 run's with the same optimizer and flags.
func TestTrainLearnsPlanted(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few seconds")
	}
	for _, c := range []struct{ optimizer, lr, epochs, batch string }{
		{"sgd", "1.0", "10", "256"},
		{"rwsadagrad", "0.01", "8", "128"},
	} {
		t.Run(c.optimizer, func(t *testing.T) {
			args := append([]string{"train"}, plantedArgs...)
			args = append(args, "--optimizer", c.optimizer, "--learning-rate", c.lr, "--nepochs", c.epochs, "--mini-batch-size", c.batch)
			fp32 := math.NaN()
			for _, dtype := range []string{"fp32", "bf16"} {
				start := time.Now()
				out := runOK(t, append(args, "--dtype", dtype)...)
				oracle := lastFloat(t, out, "(their true probabilities):")
				best := lastFloat(t, out, "best held-out auc")
				t.Logf("%s %s: best held-out AUC %.5f, oracle %.5f, %.1f s", c.optimizer, dtype, best, oracle, time.Since(start).Seconds())
				if best < oracle-0.03 || best < 0.75 {
					t.Errorf("%s: best held-out AUC %.4f, want at least max(oracle %.4f − 0.03, 0.75)", dtype, best, oracle)
				}
				if dtype == "bf16" && math.Abs(best-fp32) > 0.005 {
					t.Errorf("bf16: best held-out AUC %.5f, want within 0.005 of fp32's %.5f", best, fp32)
				}
				fp32 = best
			}
		})
	}
}

// TestSaveAndEvaluate saves the best model while training and checks that
// evaluate scores it as training's best test did, in FP32 and in split
// BF16, whose file holds the joined FP32 weights under DLRM_Net's names.
func TestSaveAndEvaluate(t *testing.T) {
	args := []string{"--data-generation", "planted", "--arch-embedding-size", "20-30-40", "--arch-sparse-feature-size", "4",
		"--arch-mlp-bot", "13-8-4", "--arch-mlp-top", "8-1", "--loss-function", "bce", "--mini-batch-size", "64",
		"--data-size", "3000", "--test-size", "1000", "--quiet"}
	for _, dtype := range []string{"fp32", "bf16"} {
		t.Run(dtype, func(t *testing.T) {
			model := filepath.Join(t.TempDir(), "dlrm.safetensors")
			args := append([]string{"--dtype", dtype}, args...)
			out := runOK(t, append([]string{"train", "--nepochs", "3", "--learning-rate", "0.1", "--test-freq", "20", "--save-model", model}, args...)...)
			best := lastFloat(t, out, "best held-out auc")
			ev := runOK(t, append([]string{"evaluate", "--load-model", model}, args...)...)
			if got := lastFloat(t, ev, "held-out auc"); got != best {
				t.Errorf("evaluate of the saved model: auc %v, training's best %v\n%s", got, best, ev)
			}
			ts, err := nn.ReadTensors(model)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, nt := range ts {
				names[nt.Name] = true
				if nt.Name == checkpoint.RecordKey || nt.Name == checkpoint.ChecksumKey {
					continue // the checkpoint's record and checksum, as text
				}
				if nt.Tensor.DType() != autograd.Float32 {
					t.Errorf("%s is %v in the saved file, want float32", nt.Name, nt.Tensor.DType())
				}
			}
			for _, name := range []string{"emb_l.2.weight", "bot_l.0.weight", "bot_l.2.bias", "top_l.2.weight"} {
				if !names[name] {
					t.Errorf("saved file lacks %s; it has %v", name, names)
				}
			}
		})
	}
}

// TestTrainKaggleFile trains on a Kaggle-format file and reports a bad
// line by file and line, or skips it with --skip-bad-lines.
func TestTrainKaggleFile(t *testing.T) {
	// A copy, as the scan leaves its index beside the file.
	src, err := os.ReadFile(filepath.Join("..", "..", "datasets", "criteo", "testdata", "planted.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sample := filepath.Join(t.TempDir(), "train.txt")
	if err := os.WriteFile(sample, src, 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--arch-sparse-feature-size", "4", "--arch-mlp-bot", "13-8-4", "--arch-mlp-top", "8-1",
		"--loss-function", "bce", "--mini-batch-size", "16", "--quiet"}
	out := runOK(t, append([]string{"train", "--data-generation", "dataset", "--raw-data-file", sample}, common...)...)
	if !strings.Contains(out, "training and") || !strings.Contains(out, "best held-out auc") {
		t.Errorf("output lacks the data line or the result:\n%s", out)
	}
	if _, err := os.Stat(sample + criteo.SidecarSuffix); err != nil {
		t.Errorf("the scan left no index beside the data: %v", err)
	}
	// The second run reads the index back; the order of the training
	// lines is the only change --data-randomize makes.
	for _, order := range []string{"total", "day", "none"} {
		again := runOK(t, append([]string{"train", "--data-generation", "dataset", "--raw-data-file", sample, "--data-randomize", order}, common...)...)
		if !strings.Contains(again, "best held-out auc") {
			t.Errorf("--data-randomize %s:\n%s", order, again)
		}
	}

	data, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines[6] = "2" + lines[6][1:] // line 7's label
	bad := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	status := run(append([]string{"train", "--data-generation", "dataset", "--raw-data-file", bad}, common...), &o, &e)
	if status != 1 || !strings.Contains(e.String(), bad+":7") {
		t.Errorf("bad label on line 7: exit %d, stderr %q; want 1 and an error naming %s:7", status, e.String(), bad)
	}
	out = runOK(t, append([]string{"train", "--data-generation", "dataset", "--raw-data-file", bad, "--skip-bad-lines"}, common...)...)
	if !strings.Contains(out, "1 bad lines skipped (first at lines [7])") {
		t.Errorf("--skip-bad-lines output does not report line 7:\n%s", out)
	}
}

// TestCommandLine checks dlrm's spellings and the errors of a wrong
// command line: exit 2 and a message naming the flag.
func TestCommandLine(t *testing.T) {
	small := []string{"--arch-embedding-size", "5-6", "--arch-sparse-feature-size", "2", "--arch-mlp-bot", "3-2",
		"--arch-mlp-top", "3-1", "--data-size", "64", "--mini-batch-size", "16", "--quiet"}
	// dlrm's type=bool flags take their value as the next word too.
	out := runOK(t, append([]string{"train", "--round-targets", "True", "--arch-interaction-itself", "--num-indices-per-lookup-fixed=true"}, small...)...)
	if !strings.Contains(out, "random data") {
		t.Errorf("default data is not dlrm's random data:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--qr-flag"}, "--qr-flag: quotient-remainder embeddings is not supported"},
		{[]string{"train", "--use-gpu", "True"}, "--use-gpu: GPUs is not supported"},
		{[]string{"train", "--arch-mlp-bot", "13-8-4", "--arch-sparse-feature-size", "16"}, "ends in 4 but --arch-sparse-feature-size is 16"},
		{[]string{"train", "--arch-embedding-size", "4-x"}, "--arch-embedding-size \"4-x\""},
		{[]string{"train", "--loss-function", "hinge"}, "--loss-function \"hinge\""},
		{[]string{"train", "--data-generation", "synthetic", "--data-trace-file", ""}, "synthetic needs --data-trace-file"},
		{[]string{"train", "--data-generation", "dataset"}, "needs --raw-data-file"},
		{[]string{"train", "--optimizer", "adam"}, "--optimizer \"adam\""},
		{[]string{"train", "--lr-num-warmup-steps", "10", "--lr-decay-start-step", "5"}, "decay start step 5 is before the end of 10 warm-up steps"},
		{[]string{"evaluate"}, "evaluate needs --load-model"},
		{[]string{"train", "--dtype", "fp16"}, `--dtype "fp16": want fp32 or bf16`},
		{[]string{"infer", "--dtype", "bf16", "--graph", "m.kiln"}, "--dtype bf16 with --graph: an exported graph has its dtype already"},
		{[]string{"train", "--nosuch"}, "flag provided but not defined: -nosuch"},
	} {
		var o, e bytes.Buffer
		args := c.args
		if c.args[0] == "train" && len(c.args) > 1 && c.args[1] == "--lr-num-warmup-steps" {
			args = append(append([]string{}, c.args...), small...)
		}
		if status := run(args, &o, &e); status != 2 || !strings.Contains(e.String(), c.want) {
			t.Errorf("dlrm %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), status, e.String(), c.want)
		}
	}
	if status := run([]string{"train", "--data-generation", "dataset", "--raw-data-file", "/nonexistent/train.txt"}, io.Discard, io.Discard); status != 1 {
		t.Errorf("missing data file: exit %d, want 1", status)
	}
}

// TestExportRunsLikeEager exports a model trained for a few steps and
// checks that the saved graph, compiled, gives the eager model's
// probabilities on another batch size: within 1e-6 in FP32, and in BF16
// (bfloat16 tables and weights, computed under autocast) within 1e-2,
// about one bfloat16 rounding step of a probability near 1, room for a
// fused kernel on another ISA to round where the eager layers do not (on
// AVX-512 without BF16 they agree exactly); and that infer times both.
func TestExportRunsLikeEager(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.safetensors")
	shape := []string{"--arch-embedding-size", "20-30-40", "--arch-sparse-feature-size", "4",
		"--arch-mlp-bot", "13-8-4", "--arch-mlp-top", "8-1", "--quiet"}
	runOK(t, append([]string{"train", "--data-generation", "planted", "--data-size", "2000", "--mini-batch-size", "64",
		"--loss-function", "bce", "--learning-rate", "0.1", "--save-model", model}, shape...)...)
	for _, c := range []struct {
		dtype string
		tol   float64
	}{{"fp32", 1e-6}, {"bf16", 1e-2}} {
		t.Run(c.dtype, func(t *testing.T) {
			out := filepath.Join(dir, c.dtype+".kiln")
			shape := append([]string{"--dtype", c.dtype}, shape...)
			runOK(t, append([]string{"export", "--load-model", model, "--test-mini-batch-size", "8", "--out", out}, shape...)...)

			o, err := parse(commands[0], append([]string{"--load-model", model}, shape...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			m, err := modelForServing(o)
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			dtypes := map[autograd.DType]int{}
			for _, v := range g.Consts {
				dtypes[v.DType()] += v.Numel()
			}
			if c.dtype == "bf16" && (dtypes[autograd.BFloat16] < 90*4 || dtypes[autograd.Float32] != 0) {
				t.Errorf("bf16 graph's constants: %v elements by dtype, want all bfloat16 (tables and Linear layers)", dtypes)
			}
			p, err := graph.Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for _, b := range []int{8, 5} {
				in, err := servingInputs(o, b, 7)
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.Run(in...)
				if err != nil {
					t.Fatal(err)
				}
				want := servingForward(m, o.autocast(autograd.NoGrad(in[0])), noGrad(in[1:])...).Float32s()
				for i, v := range got[0].Float32s() {
					d := math.Abs(float64(v - want[i]))
					worst = max(worst, d)
					if d > c.tol {
						t.Fatalf("batch %d, sample %d: graph %v, eager %v", b, i, v, want[i])
					}
				}
			}
			t.Logf("%s: largest difference between graph and eager probabilities %.3g", c.dtype, worst)
			for _, extra := range [][]string{{"--graph", out}, {"--load-model", model, "--dtype", c.dtype}} {
				res := runOK(t, append(append([]string{"infer", "--mini-batch-size", "16", "--iters", "3"}, extra...), shape[2:]...)...)
				if !strings.Contains(res, "samples/s") {
					t.Errorf("infer %v prints no throughput:\n%s", extra, res)
				}
			}
		})
	}
}

// TestFusedEmbMatchesUnfused trains with the tables' updates fused into
// the embedding backward and without, under dlrm's warm-up and decay, and
// checks that the saved models are the same bytes, in FP32 and split
// BF16, for every optimizer.
func TestFusedEmbMatchesUnfused(t *testing.T) {
	dir := t.TempDir()
	base := []string{"train", "--data-generation", "random", "--arch-embedding-size", "30-200-7",
		"--arch-sparse-feature-size", "8", "--arch-mlp-bot", "13-16-8", "--arch-mlp-top", "16-1",
		"--num-indices-per-lookup", "4", "--data-size", "1024", "--mini-batch-size", "128", "--test-size", "128",
		"--loss-function", "bce", "--round-targets=true", "--nepochs", "2", "--learning-rate", "0.1",
		"--lr-num-warmup-steps", "4", "--lr-decay-start-step", "6", "--lr-num-decay-steps", "6", "--quiet"}
	for _, opt := range []string{"sgd", "adagrad", "rwsadagrad"} {
		for _, dtype := range []string{"fp32", "bf16"} {
			var models [][]byte
			for _, fused := range []bool{false, true} {
				out := filepath.Join(dir, fmt.Sprintf("%s-%s-%v.safetensors", opt, dtype, fused))
				args := append(slices.Clone(base), "--optimizer", opt, "--dtype", dtype, "--save-model", out, "--test-freq", "1000")
				if fused {
					args = append(args, "--fused-emb")
				}
				runOK(t, args...)
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				models = append(models, b)
			}
			if !bytes.Equal(models[0], models[1]) {
				t.Errorf("%s %s: the fused run's model differs from the unfused one's in %v", opt, dtype, differing(t, models[0], models[1]))
			}
		}
	}
}
