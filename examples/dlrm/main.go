// Command dlrm trains and evaluates facebookresearch/dlrm's DLRM_Net on the
// CPU: the Kiln counterpart of dlrm_s_pytorch.py, taking its flags with
// their names and meanings.
//
// train fits the model, drawing a progress bar (loss, accuracy, samples/s)
// on a terminal and printing dlrm's "Finished training it …" line every
// --print-freq iterations otherwise; every --test-freq iterations and at
// the end of each epoch it reports the held-out AUC, log loss and
// accuracy, and with --save-model writes a checkpoint whenever the
// held-out AUC improves (see Checkpoints). --mlperf-auc-threshold stops
// training once the AUC reaches it. --mlperf-logging adds dlrm's MLPerf log
// lines to stdout, each ":::MLLOG" and a JSON object as mlperf_logging's
// mllog writes them: the run's start and settings, each epoch's start and
// stop, each test's (its AUC as eval_accuracy) and run_stop, with status
// success when the AUC threshold was reached and aborted otherwise:
//
//	go run ./examples/dlrm train --data-generation planted --arch-embedding-size 1000-1000-1000-1000-1000-1000-1000-1000 \
//	    --arch-sparse-feature-size 16 --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --loss-function bce \
//	    --mini-batch-size 128 --learning-rate 0.1 --data-size 50000 --test-size 10000 --nepochs 2
//	go run ./examples/dlrm train --data-generation dataset --raw-data-file train.txt --arch-sparse-feature-size 16 \
//	    --arch-mlp-bot 13-512-256-64-16 --arch-mlp-top 512-256-1 --loss-function bce --round-targets=true \
//	    --mini-batch-size 128 --learning-rate 0.1 --test-freq 10240 --save-model dlrm.safetensors
//
// evaluate loads --load-model (a checkpoint train wrote, or a state dict
// with DLRM_Net's names as dlrm's model.state_dict() saves with
// safetensors.torch.save_file) and prints the held-out AUC, log loss and
// accuracy.
//
// infer times eval-mode forward passes over one random batch of
// --mini-batch-size samples (uniform in-range indices, in bags sized as
// random data's) and prints samples/s and the median and 90th-percentile
// batch latency; with --graph FILE it times an exported graph instead.
// export traces the model (--load-model's weights, or a fresh
// initialisation), freezes it and saves the graph to --out. With
// --num-indices-per-lookup 1 its inputs are dense f32[B, D0] and indices
// i64[B, T], one per table per sample; with more, multi-hot bags: dense,
// indices i64[N], every table's indices concatenated in table order, and
// offsets i64[T, B+1], where offsets[t][b] is the position in indices at
// which bag b of table t starts and offsets[t][B] where table t's last bag
// ends (offsets[0][0] = 0, offsets[t][B] = offsets[t+1][0],
// offsets[T-1][B] = N; empty bags allowed). `kiln run` executes it from
// .npy files:
//
//	go run ./examples/dlrm export --arch-embedding-size 1000-1000-1000 --arch-sparse-feature-size 16 \
//	    --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --test-mini-batch-size 128 --out dlrm.kiln
//	go run ./examples/dlrm infer --arch-embedding-size 1000-1000-1000 --arch-sparse-feature-size 16 \
//	    --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 128 --graph dlrm.kiln
//
// # BF16
//
// --dtype bf16 trains the IPEX way (ipex.optimize(model, optimizer,
// dtype=torch.bfloat16) with split master weights): kiln.Optimize cuts
// every FP32 Linear weight and bias and every table in two, a bfloat16
// top half the model computes with and the low 16 bits kept beside it,
// and rebuilds --optimizer as its split, fused form, which joins the
// halves, updates in FP32 (the tables row by row from their row-sparse
// gradients) and splits again. The dense features run under amp.Autocast:
// the MLPs' Linear layers compute in BF16 with FP32 accumulation, the
// tables' bags meet them in bfloat16, and the loss is FP32. The held-out
// tests score that BF16 model, and --save-model's checkpoint holds the
// joined FP32 weights, as an FP32 run's does. evaluate --dtype bf16 scores a
// file's weights cut to their top halves, the model such a run tested;
// export and infer --dtype bf16 round the weights and tables to bfloat16
// (kiln.Optimize's inference cast) and run under autocast, the graph
// taking the same inputs and returning float32 probabilities.
//
// # Checkpoints
//
// --save-model FILE writes a checkpoint whenever a held-out test improves
// on the best AUC so far (dlrm's rule), atomically and with a checksum
// (internal/checkpoint): one safetensors file holding the model under
// DLRM_Net's state-dict names (the joined FP32 weights under --dtype
// bf16), the optimizer state under "optimizer.state.N.NAME" (Adagrad's
// sums, row-wise Adagrad's per-row sums; SGD has none), and a JSON
// progress record: the configuration the run depends on (tables, arch,
// optimizer, dtype, batch size, seed, data size, learning rate and
// schedule), the position (epoch, iterations done in it and in all), the
// best scores, the optimizer's group hyper-parameters and the schedule's
// state. No generator state is needed: the training order is a function
// of the seed, the epoch and the batch.
//
// train --load-model FILE with such a checkpoint resumes where it was
// written: the weights, optimizer and schedule state, best score and
// position come back, the interrupted epoch's finished batches are
// skipped, and the run ends with the bits of an uninterrupted one (with or
// without --fused-emb). A flag that differs from the checkpoint's
// configuration is an error naming it. With a plain state dict, train
// starts at epoch 0 from its weights. evaluate, infer and export read
// either kind. A PyTorch .pt file is refused with the one-line command
// that converts it.
//
// # Data
//
// --data-generation picks the samples:
//
//   - dataset reads the Kaggle display-advertising train.txt named by
//     --raw-data-file with package datasets/criteo: one streaming pass
//     builds the dictionaries (each table's rows are its feature's distinct
//     values, --max-ind-range folding them first), dlrm's seven-day split
//     gives days 0–5 to training and the first half of day 6 to testing,
//     and --data-sub-sample-rate drops that share of training negatives;
//     with --data-set terabyte it reads the Terabyte click logs instead,
//     the 24 files --raw-data-file_0 … _23 as dlrm names them (or day_0 …
//     day_23 in the directory --raw-data-file), one dictionary over all
//     days, days 0–22 training and the first half of day 23 testing;
//     --data-randomize orders the training lines (total: one permutation,
//     day: within each day, none: file order). The scan's index is kept
//     beside the file (train.txt.kiln-index) and read back by later runs
//     while the file and --max-ind-range are unchanged (one per day file).
//     Bad lines stop the run with FILE:LINE: field …, or are counted with
//     --skip-bad-lines.
//   - random is dlrm's random data: --data-size samples in batches, bags of
//     up to --num-indices-per-lookup sorted distinct indices (exactly that
//     many with --num-indices-per-lookup-fixed), uniform dense inputs and
//     targets; the held-out set (--test-size samples) is drawn the same
//     way from another seed.
//   - synthetic is dlrm's trace-driven data: random's, except that each
//     bag's indices are a short access trace whose LRU stack distances
//     follow table j's distribution in --data-trace-file (j in the name
//     replaced by the table's number: dist_emb_0.log, …; three lines of
//     unique accesses, stack distances and their cumulative
//     distribution). --data-trace-enable-padding stops drawing new rows
//     once as many have been seen as the deepest stack distance.
//   - planted is Kiln's generator with a known signal (criteo.Planted):
//     Zipf-distributed ids for the --arch-embedding-size tables, labels
//     drawn from a logistic model of the dense features, per-row effects
//     and one pairwise term; --data-size training and --test-size held-out
//     samples. train prints the oracle AUC (that of the true
//     probabilities), the best any model can expect.
//
// # Metrics
//
// train appends its numbers to a metrics log (package metrics): a JSON
// object a line, which kiln plot draws and scripts read, and with
// --tensorboard DIR the same as TensorBoard scalars in an event file in
// DIR. With each "Finished training it" line (every --print-freq
// iterations and at the end of each epoch) a train record holds the
// line's loss and accuracy (of the iterations since the previous line),
// the learning rate of the last iteration and the samples per second;
// with each test an eval record holds the held-out accuracy, auc and
// log_loss (fractions, not percentages). Records carry the global
// iteration as the step, the 0-based epoch and the run's name (--run,
// dlrm by default). The log is --metrics FILE or, with --save-model, the
// model file's name with .metrics.jsonl for its extension
// (dlrm.safetensors: dlrm.metrics.jsonl), so that a run resumed with
// --load-model and the same --save-model appends to its log, the steps
// going on from the checkpoint's; --metrics="" writes none. Under mpirun
// rank 0 writes the log.
//
// # Exit status
//
// 0 on success, 2 for a wrong command line (an unknown subcommand, flag or
// value, or a dlrm flag Kiln does not implement, named), 1 when something
// fails while running (a data file that cannot be read or holds a bad
// line, a model file that does not fit the configuration, a diverged run).
package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/kilnml/kiln/internal/subcmd"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/kernels"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand: its name, one line of help and what it does.
type command struct {
	name, summary string
	run           func(o *options, stdout, stderr io.Writer) error
}

var commands = []command{
	{"train", "train DLRM and report held-out AUC, log loss and accuracy", train},
	{"evaluate", "print the held-out AUC, log loss and accuracy of a saved model", evaluate},
	{"infer", "time eval-mode forward passes of the model or an exported graph", infer},
	{"export", "trace, freeze and save the model as a graph that runs without model code", export},
}

// usagef reports a mistake on the command line: exit status 2.
var usagef = subcmd.Usagef

// program is the command line: its subcommands, each parsed and run here.
var program = &subcmd.Program{Name: "dlrm", Hint: "flags are dlrm_s_pytorch.py's; run 'dlrm <subcommand> -h' for them", Run: runCommand}

func init() {
	for _, c := range commands {
		program.Commands = append(program.Commands, subcmd.Command{Name: c.name, Summary: c.summary})
	}
}

// run executes the command line args (without the program name) and
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int { return program.Main(args, stdout, stderr) }

// runCommand parses the flags of commands[i] and runs it.
func runCommand(i int, args []string, stdout, stderr io.Writer) error {
	cmd := commands[i]
	o, err := parse(cmd, args, stdout)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "kernels:", kernels.Features())
	return cmd.run(o, stdout, stderr)
}

// unsupported are dlrm_s_pytorch.py's flags Kiln does not implement, with
// what they are for.
var unsupported = map[string]string{
	"md-flag": "mixed-dimension embeddings", "md-threshold": "mixed-dimension embeddings",
	"md-temperature": "mixed-dimension embeddings", "md-round-dims": "mixed-dimension embeddings",
	"qr-flag": "quotient-remainder embeddings", "qr-threshold": "quotient-remainder embeddings",
	"qr-operation": "quotient-remainder embeddings", "qr-collisions": "quotient-remainder embeddings",
	"weighted-pooling":      "weighted pooling",
	"quantize-mlp-with-bit": "quantized training", "quantize-emb-with-bit": "quantized training",
	"save-onnx": "ONNX export", "use-gpu": "GPUs", "use-ipex": "IPEX (Kiln is the CPU path)",
	"dist-backend": "distributed training", "local_rank": "distributed training", "inference-only": "inference-only runs (use evaluate)",
	"enable-profiling": "the PyTorch profiler", "plot-compute-graph": "torchviz plots",
	"tensor-board-filename": "TensorBoard", "memory-map": "memory-mapped preprocessed data",
	"dataset-multiprocessing": "multiprocess preprocessing", "rand-data-min": "non-uniform random data",
	"rand-data-max": "non-uniform random data", "rand-data-mu": "non-uniform random data",
	"rand-data-sigma": "non-uniform random data", "processed-data-file": "dlrm's preprocessed .npz files",
	"mlperf-bin-loader": "MLPerf binary data", "mlperf-bin-shuffle": "MLPerf binary data",
}

// boolFlags are the flags that take no value, or a boolean after = or as
// the next word (dlrm's type=bool flags are written both ways).
var boolFlags = []string{"arch-interaction-itself", "round-targets", "num-indices-per-lookup-fixed",
	"mlperf-logging", "skip-bad-lines", "print-time", "sync-dense-params", "fused-emb", "quiet", "data-trace-enable-padding"}

// joinBools rewrites "--flag true" as "--flag=true" for the boolean flags,
// so that dlrm's spelling parses, and rejects dlrm's unsupported flags by
// name before the flag package reports them as unknown.
func joinBools(args []string) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") {
			if why, ok := unsupported[name]; ok {
				return nil, usagef("--%s: %s is not supported by Kiln's dlrm", name, why)
			}
		}
		if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && slices.Contains(boolFlags, name) && i+1 < len(args) {
			if _, err := strconv.ParseBool(args[i+1]); err == nil {
				out = append(out, a+"="+args[i+1])
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// parse reads cmd's flags from args into options and checks their values.
// With -h it prints the flags to stdout and returns flag.ErrHelp.
func parse(cmd command, args []string, stdout io.Writer) (*options, error) {
	fs := flag.NewFlagSet("dlrm "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by run, in one line
	o := &options{}
	o.register(fs)
	args, err := joinBools(args)
	if err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "usage: dlrm %s [flags]\n\n%s.\n\nflags:\n", cmd.name, cmd.summary)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, &subcmd.UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (flags only)", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { o.metricsSet = o.metricsSet || f.Name == "metrics" })
	if cmd.name == "evaluate" && o.LoadModel == "" {
		return nil, usagef("evaluate needs --load-model, the model file to evaluate")
	}
	if o.DType == "bf16" && cmd.name == "infer" && o.Graph != "" {
		return nil, usagef("--dtype bf16 with --graph: an exported graph has its dtype already (export --dtype bf16)")
	}
	return o, o.check()
}

// options holds the flags, named and defaulted as dlrm_s_pytorch.py's.
type options struct {
	SparseFeatureSize                         int
	EmbeddingSize, MLPBot, MLPTop             string
	InteractionOp                             string
	InteractionItself                         bool
	LossFunction, LossWeights                 string
	LossThreshold                             float64
	RoundTargets                              bool
	DataGeneration, RawDataFile, DataSet      string
	DataRandomize, RandDataDist               string
	DataTraceFile                             string
	DataTraceEnablePadding                    bool
	DataSize, TestSize, NumBatches            int
	NumIndicesPerLookup                       int
	NumIndicesPerLookupFixed                  bool
	MaxIndRange                               int
	DataSubSampleRate                         float64
	SkipBadLines                              bool
	MiniBatchSize, TestMiniBatchSize, NEpochs int
	LearningRate                              float64
	Optimizer                                 string
	PrintFreq, TestFreq                       int
	PrintTime, PrintPrecision                 bool
	LRNumWarmupSteps, LRDecayStartStep        int
	LRNumDecaySteps                           int
	MLPerfLogging                             bool
	MLPerfAUCThreshold, MLPerfAccThreshold    float64
	SaveModel, LoadModel                      string
	Seed                                      uint64
	DType                                     string
	FusedEmb, SyncDense, Quiet                bool
	NumWorkers, TestNumWorkers                int
	Out, Graph                                string
	Warmup, Iters                             int
	Metrics, TensorBoard, Run                 string
	metricsSet                                bool // --metrics given, perhaps as ''
	embeddingSizes, mlpBot, mlpTop            []int
	lossWeights                               [2]float64
}

func (o *options) register(fs *flag.FlagSet) {
	fs.IntVar(&o.SparseFeatureSize, "arch-sparse-feature-size", 2, "d, every table's row size and the bottom MLP's output")
	fs.StringVar(&o.EmbeddingSize, "arch-embedding-size", "4-3-2", "rows of each table, dash-separated (dataset data takes them from the file)")
	fs.StringVar(&o.MLPBot, "arch-mlp-bot", "4-3-2", "bottom MLP widths, input first, dash-separated")
	fs.StringVar(&o.MLPTop, "arch-mlp-top", "4-2-1", "top MLP output widths, dash-separated (its input is the interaction's width)")
	fs.StringVar(&o.InteractionOp, "arch-interaction-op", "dot", "dot or cat")
	fs.BoolVar(&o.InteractionItself, "arch-interaction-itself", false, "keep each feature's dot with itself")
	fs.StringVar(&o.LossFunction, "loss-function", "mse", "mse, bce or wbce")
	fs.StringVar(&o.LossWeights, "loss-weights", "1.0-1.0", "wbce's weights of negatives and positives")
	fs.Float64Var(&o.LossThreshold, "loss-threshold", 0, "clamp probabilities to [t, 1−t] when above 0")
	fs.BoolVar(&o.RoundTargets, "round-targets", false, "round random targets to 0 or 1")
	fs.StringVar(&o.DataGeneration, "data-generation", "random", "dataset, random, synthetic or planted")
	fs.StringVar(&o.DataSet, "data-set", "kaggle", "kaggle or terabyte: the file layout of --data-generation dataset")
	fs.StringVar(&o.RawDataFile, "raw-data-file", "", "the Kaggle train.txt, or the Terabyte day files' prefix (PREFIX_0 … PREFIX_23) or directory (day_0 … day_23)")
	fs.StringVar(&o.DataTraceFile, "data-trace-file", "./input/dist_emb_j.log", "synthetic data's access traces, one file per table: j in the name stands for the table's number")
	fs.BoolVar(&o.DataTraceEnablePadding, "data-trace-enable-padding", false, "synthetic data draws no new rows once it has seen as many as the trace's deepest stack distance")
	fs.StringVar(&o.DataRandomize, "data-randomize", "total", "training order of dataset data: total, day or none")
	fs.StringVar(&o.RandDataDist, "rand-data-dist", "uniform", "random data's distribution (uniform only)")
	fs.IntVar(&o.DataSize, "data-size", 1, "training samples of random, synthetic and planted data")
	fs.IntVar(&o.TestSize, "test-size", 0, "held-out samples of random, synthetic and planted data (Kiln's; default --data-size/5)")
	fs.IntVar(&o.NumBatches, "num-batches", 0, "training batches per epoch (0: all)")
	fs.IntVar(&o.NumIndicesPerLookup, "num-indices-per-lookup", 10, "random and synthetic data's largest bag")
	fs.BoolVar(&o.NumIndicesPerLookupFixed, "num-indices-per-lookup-fixed", false, "random and synthetic data's bags all hold --num-indices-per-lookup")
	fs.IntVar(&o.MaxIndRange, "max-ind-range", -1, "fold categorical values modulo this when positive")
	fs.Float64Var(&o.DataSubSampleRate, "data-sub-sample-rate", 0, "share of training negatives dropped")
	fs.BoolVar(&o.SkipBadLines, "skip-bad-lines", false, "count bad lines of dataset data instead of stopping at the first (Kiln's)")
	fs.IntVar(&o.MiniBatchSize, "mini-batch-size", 1, "training samples per batch")
	fs.IntVar(&o.TestMiniBatchSize, "test-mini-batch-size", -1, "held-out samples per batch (default --mini-batch-size)")
	fs.IntVar(&o.NEpochs, "nepochs", 1, "passes over the training data")
	fs.Float64Var(&o.LearningRate, "learning-rate", 0.01, "learning rate")
	fs.StringVar(&o.Optimizer, "optimizer", "sgd", "sgd, adagrad or rwsadagrad (row-wise Adagrad for the tables)")
	fs.IntVar(&o.PrintFreq, "print-freq", 1, "print a progress line every N iterations (off a terminal)")
	fs.IntVar(&o.TestFreq, "test-freq", -1, "evaluate every N iterations (-1: at the end of each epoch only)")
	fs.BoolVar(&o.PrintTime, "print-time", false, "add the time per iteration to progress lines")
	fs.BoolVar(&o.PrintPrecision, "print-precision", false, "accepted for dlrm's scripts; Kiln prints 5 digits")
	fs.IntVar(&o.LRNumWarmupSteps, "lr-num-warmup-steps", 0, "linear learning-rate warm-up steps")
	fs.IntVar(&o.LRDecayStartStep, "lr-decay-start-step", 0, "step at which the quadratic decay starts")
	fs.IntVar(&o.LRNumDecaySteps, "lr-num-decay-steps", 0, "steps of the quadratic decay")
	fs.BoolVar(&o.MLPerfLogging, "mlperf-logging", false, "train: write dlrm's MLPerf log lines (:::MLLOG and a JSON object, mlperf_logging's format) to stdout")
	fs.Float64Var(&o.MLPerfAUCThreshold, "mlperf-auc-threshold", 0, "stop once the held-out AUC reaches this")
	fs.Float64Var(&o.MLPerfAccThreshold, "mlperf-acc-threshold", 0, "stop once the held-out accuracy (in %) reaches this")
	fs.StringVar(&o.SaveModel, "save-model", "", "write a checkpoint (safetensors) whenever the held-out AUC improves")
	fs.StringVar(&o.LoadModel, "load-model", "", "a checkpoint to resume (train) or a state dict with DLRM_Net's names to start from")
	fs.Uint64Var(&o.Seed, "numpy-rand-seed", 123, "seed of initialisation and data")
	fs.StringVar(&o.DType, "dtype", "fp32", "fp32 or bf16: train with split BF16 master weights, MLPs under autocast, loss in FP32; evaluate, infer and export in BF16")
	fs.BoolVar(&o.FusedEmb, "fused-emb", false, "apply the tables' updates inside the embedding backward (IPEX's MergedEmbeddingBagWith*): the same results, no gradient held until the step")
	fs.BoolVar(&o.SyncDense, "sync-dense-params", true, "accepted for dlrm's scripts (one process here)")
	fs.IntVar(&o.NumWorkers, "num-workers", 0, "accepted for dlrm's scripts; batches are read on the training goroutine")
	fs.IntVar(&o.TestNumWorkers, "test-num-workers", -1, "accepted for dlrm's scripts")
	fs.BoolVar(&o.Quiet, "quiet", false, "draw no progress bar (Kiln's)")
	fs.StringVar(&o.Out, "out", "", "export: write the frozen graph to this `file`")
	fs.StringVar(&o.Graph, "graph", "", "infer: time this exported graph `file` instead of the model")
	fs.IntVar(&o.Warmup, "warmup", 3, "infer: untimed passes first")
	fs.IntVar(&o.Iters, "iters", 20, "infer: timed passes")
	fs.StringVar(&o.Metrics, "metrics", "", "train: append train and eval records to this JSON Lines `file` (default with --save-model: its name with .metrics.jsonl for the extension; --metrics=\"\" for none)")
	fs.StringVar(&o.TensorBoard, "tensorboard", "", "train: also write the records as TensorBoard scalars to an event file in this `folder`")
	fs.StringVar(&o.Run, "run", "dlrm", "train: the run's `name` in the metrics log")
}

// dashInts parses dlrm's "a-b-c" lists.
func dashInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, "-") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, usagef("--%s %q: want positive integers separated by dashes, as 13-512-256-64", flagName, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// check validates the flags and derives the parsed lists.
func (o *options) check() error {
	var err error
	if o.embeddingSizes, err = dashInts("arch-embedding-size", o.EmbeddingSize); err != nil {
		return err
	}
	if o.mlpBot, err = dashInts("arch-mlp-bot", o.MLPBot); err != nil {
		return err
	}
	if o.mlpTop, err = dashInts("arch-mlp-top", o.MLPTop); err != nil {
		return err
	}
	ws := strings.Split(o.LossWeights, "-")
	if len(ws) != 2 {
		return usagef("--loss-weights %q: want two weights, negatives then positives, as 1.0-1.0", o.LossWeights)
	}
	for i, w := range ws {
		if o.lossWeights[i], err = strconv.ParseFloat(w, 64); err != nil || !(o.lossWeights[i] >= 0) {
			return usagef("--loss-weights %q: weight %q is not a number of at least 0", o.LossWeights, w)
		}
	}
	if o.TestSize == 0 {
		o.TestSize = max(1, o.DataSize/5)
	}
	switch {
	case o.SparseFeatureSize < 1:
		return usagef("--arch-sparse-feature-size %d: must be at least 1", o.SparseFeatureSize)
	case o.InteractionOp != "dot" && o.InteractionOp != "cat":
		return usagef("--arch-interaction-op %q: want dot or cat", o.InteractionOp)
	case !slices.Contains([]string{"mse", "bce", "wbce"}, o.LossFunction):
		return usagef("--loss-function %q: want mse, bce or wbce", o.LossFunction)
	case !(o.LossThreshold >= 0 && o.LossThreshold < 0.5):
		return usagef("--loss-threshold %v: must be in [0, 0.5)", o.LossThreshold)
	case !slices.Contains([]string{"dataset", "random", "synthetic", "planted"}, o.DataGeneration):
		return usagef("--data-generation %q: want dataset, random, synthetic or planted", o.DataGeneration)
	case o.DataSet != "kaggle" && o.DataSet != "terabyte":
		return usagef("--data-set %q: want kaggle or terabyte", o.DataSet)
	case o.DataGeneration == "synthetic" && o.DataTraceFile == "":
		return usagef("--data-generation synthetic needs --data-trace-file, the tables' traces (dist_emb_j.log)")
	case !slices.Contains([]string{"total", "day", "none"}, o.DataRandomize):
		return usagef("--data-randomize %q: want total, day or none", o.DataRandomize)
	case o.RandDataDist != "uniform":
		return usagef("--rand-data-dist %q: only uniform is supported", o.RandDataDist)
	case o.DataSize < 1:
		return usagef("--data-size %d: must be at least 1", o.DataSize)
	case o.TestSize < 1:
		return usagef("--test-size %d: must be at least 1", o.TestSize)
	case o.NumBatches < 0:
		return usagef("--num-batches %d: must be at least 0", o.NumBatches)
	case o.NumIndicesPerLookup < 1:
		return usagef("--num-indices-per-lookup %d: must be at least 1", o.NumIndicesPerLookup)
	case !(o.DataSubSampleRate >= 0 && o.DataSubSampleRate < 1):
		return usagef("--data-sub-sample-rate %v: must be in [0, 1)", o.DataSubSampleRate)
	case o.MiniBatchSize < 1:
		return usagef("--mini-batch-size %d: must be at least 1", o.MiniBatchSize)
	case o.TestMiniBatchSize == 0 || o.TestMiniBatchSize < -1:
		return usagef("--test-mini-batch-size %d: must be at least 1 (or -1: --mini-batch-size)", o.TestMiniBatchSize)
	case o.NEpochs < 1:
		return usagef("--nepochs %d: must be at least 1", o.NEpochs)
	case !(o.LearningRate >= 0 && o.LearningRate < 1e300):
		return usagef("--learning-rate %v: must be a finite number, at least 0", o.LearningRate)
	case !slices.Contains([]string{"sgd", "adagrad", "rwsadagrad"}, o.Optimizer):
		return usagef("--optimizer %q: want sgd, adagrad or rwsadagrad", o.Optimizer)
	case o.PrintFreq < 1:
		return usagef("--print-freq %d: must be at least 1", o.PrintFreq)
	case o.TestFreq == 0 || o.TestFreq < -1:
		return usagef("--test-freq %d: must be at least 1 (or -1: each epoch's end)", o.TestFreq)
	case o.LRNumWarmupSteps < 0 || o.LRDecayStartStep < 0 || o.LRNumDecaySteps < 0:
		return usagef("--lr-num-warmup-steps, --lr-decay-start-step and --lr-num-decay-steps must be at least 0")
	case o.DType != "fp32" && o.DType != "bf16":
		return usagef("--dtype %q: want fp32 or bf16", o.DType)
	case o.Warmup < 0 || o.Iters < 1:
		return usagef("--warmup %d and --iters %d: want at least 0 and 1", o.Warmup, o.Iters)
	}
	if last := o.mlpBot[len(o.mlpBot)-1]; last != o.SparseFeatureSize {
		return usagef("--arch-mlp-bot %s ends in %d but --arch-sparse-feature-size is %d: they must be equal", o.MLPBot, last, o.SparseFeatureSize)
	}
	return nil
}

// testBatchSize is --test-mini-batch-size, defaulting to the training one.
func (o *options) testBatchSize() int {
	if o.TestMiniBatchSize > 0 {
		return o.TestMiniBatchSize
	}
	return o.MiniBatchSize
}
