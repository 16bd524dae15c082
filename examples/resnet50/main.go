// Command resnet50 trains, evaluates and benchmarks torchvision's ResNets
// (18, 34, 50, 101 and 152 layers) on the CPU: the Kiln counterpart of
// PyTorch's ImageNet example (examples/imagenet/main.py) and of the IPEX
// ResNet-50 training and inference scripts. It has five subcommands.
//
// train fits a ResNet with SGD, momentum and weight decay under a cosine
// learning-rate schedule, showing a progress bar per epoch (loss, accuracy,
// images per second) and the held-out top-1 and top-5 accuracy after each:
//
//	go run ./examples/resnet50 train --data synthetic --steps 20
//	go run ./examples/resnet50 train --data synthetic --arch resnet18 --image-size 32 --batch-size 64 --lr 0.05 --epochs 4 --train-size 2560 --val-size 500
//	go run ./examples/resnet50 train --data ~/imagenet --epochs 90 --checkpoint r50.safetensors
//	go run ./examples/resnet50 train --data ~/imagenet --epochs 90 --checkpoint r50.safetensors --resume r50.safetensors
//	go run ./examples/resnet50 train --data synthetic --steps 20 --dtype bf16
//
// With --dtype bf16 (train and infer) the model runs under amp.Autocast:
// convolutions and the classifier in BF16 with float32 accumulation, batch
// norms computed in float32 on BF16 activations, the loss in float32. train
// goes through kiln.Optimize with split master weights (each weight's BF16
// top half is what the model computes with, its low half kept beside it)
// and the split SGD; checkpoints hold the joined float32 weights.
//
// infer prepares the model with kiln.Optimize: batch norms folded into the
// convolutions and, in float32, the weights packed once for the GEMM, or in
// BF16, cast to bfloat16 once.
//
// evaluate prints the top-1 and top-5 accuracy of weights on held-out
// images; the weights are a train checkpoint or a plain state dict with
// torchvision's parameter names, such as torchvision's pretrained weights
// saved with safetensors.torch.save_file(model.state_dict(), path):
//
//	go run ./examples/resnet50 evaluate --data ~/imagenet --weights resnet50.safetensors
//	go run ./examples/resnet50 evaluate --data synthetic --arch resnet18 --image-size 32 --weights r18.safetensors
//
// infer times eval-mode forward passes over a fixed random batch and prints
// the throughput and the median and 90th-percentile latency per batch:
//
//	go run ./examples/resnet50 infer --batch-size 1 --iters 50
//	go run ./examples/resnet50 infer --arch resnet18 --weights r18.safetensors --batch-size 64
//
// export traces the model (in eval mode, under amp.Autocast with --dtype
// bf16), freezes the trace with package graph (batch norms folded into the
// convolutions, ReLUs and residual sums fused into them) and saves it as
// one file; infer --graph times that file's compiled graph instead of the
// model, and cmd/kiln inspects, runs and benchmarks it:
//
//	go run ./examples/resnet50 export --batch-size 1 --out rn50.kiln
//	go run ./examples/resnet50 infer --graph rn50.kiln --batch-size 16
//
// calibrate prepares INT8 inference as IPEX 1.10 does (package
// graph/quant): it traces the float32 model, runs it on --batches batches
// of the images evaluate reads, records the range of every activation the
// int8 convolutions, linear layers, pools and sums read or write (by
// --algorithm: min_max, moving_averager_min_max or histogram; uint8 with a
// zero point, or int8 around 0 with --symmetric) and writes them to --conf
// as IPEX's JSON. export, infer and evaluate then take --dtype int8 --conf
// FILE and convert the traced model with it; evaluate adds how often the
// int8 top-1 class is the float32 model's. A conf fits the architecture
// and number of classes it was calibrated on, at any image or batch size.
// Calibrating on the held-out images makes evaluate's int8 accuracy
// slightly flattering; --data ~/imagenet/train --val-fraction 0
// calibrates on training images (with the held-out transforms) instead:
//
//	go run ./examples/resnet50 calibrate --data ~/imagenet --weights resnet50.safetensors --batches 16 --conf rn50.json
//	go run ./examples/resnet50 evaluate --data ~/imagenet --weights resnet50.safetensors --dtype int8 --conf rn50.json
//	go run ./examples/resnet50 infer --weights resnet50.safetensors --batch-size 1 --dtype int8 --conf rn50.json
//	go run ./examples/resnet50 export --weights resnet50.safetensors --dtype int8 --conf rn50.json --out rn50-int8.kiln
//
// Run a subcommand with -h for all its flags.
//
// # Data
//
// --data is a folder of images or the word synthetic. A folder either holds
// train/ and val/ sub-folders, each with one sub-folder of JPEG or PNG files
// per class (the ImageNet layout the PyTorch example reads), or is itself a
// folder of class folders, of which train holds out a random --val-fraction
// (10%, the same part every run). evaluate reads DIR/val when there is one,
// else the held-out --val-fraction of DIR, or all of DIR with
// --val-fraction 0. Training images get torchvision's RandomResizedCrop,
// RandomHorizontalFlip and ImageNet normalisation; held-out images are
// resized to --image-size×256/224, centre-cropped to --image-size and
// normalised the same way.
//
// synthetic needs no files: --num-classes classes (10 by default) of
// smooth random patterns of --image-size pixels (datasets.Synthetic), each
// example shifted by up to an eighth of the image side and buried in
// Gaussian noise three times as strong as the pattern, so that a network
// has to learn the classes from many examples, but can. There are
// --train-size training images and --val-size held-out ones; the held-out
// images come first and the data's seed is fixed, so evaluate finds train's
// held-out set again from --image-size, --val-size and the number of
// classes in the weights.
//
// # Defaults
//
// The defaults follow the PyTorch example (90 epochs, momentum 0.9, weight
// decay 1e-4, a learning rate of 0.1 for 256 images per batch) except in
// three ways. The batch size is 32 rather than 256: a ResNet-50 training
// step at 224×224 runs at about 8 images/s on two cores, so a batch of 256
// would take half a minute a step; `train --data synthetic --steps 20`
// takes about a minute and a half. The learning rate follows the batch size
// by the linear scaling rule (0.1 × batch-size/256, 0.0125 at 32) unless
// --lr is given. And --zero-init-residual is on (torchvision's
// zero_init_residual, as in Goyal et al.'s large-batch recipe): every
// residual block starts as the identity, which keeps the first steps of a
// ResNet-50 stable where the plain initialisation's loss jumps about.
//
// The learning rate falls along a cosine over --epochs, once per epoch
// (optim.CosineAnnealingLR with T_max = epochs): smoother than the
// example's ×0.1 every 30 epochs, and meaningful for short runs too.
// --steps caps the total number of optimizer steps, so a run can stop
// inside an epoch; the schedule is still laid out over --epochs. Training
// drops an epoch's last incomplete batch.
//
// # Checkpoints
//
// With --checkpoint FILE, train writes FILE at the end of every epoch, every
// --checkpoint-every steps if that is set, and when it stops. It is a
// safetensors file holding the model's state dict with each name prefixed
// "model." (e.g. model.layer1.0.conv1.weight), the SGD momentum buffers as
// optimizer.state.N.momentum_buffer (N numbering the parameters in order,
// as in PyTorch's optimizer.state_dict()), the run's progress as JSON text
// in a U8 tensor named kiln_checkpoint (architecture, number of classes,
// batch size, seed, image size, the step counter, the epoch and how many
// of its steps are done, the optimizer's hyper-parameters, learning rate
// included, and the scheduler's state) and, in a U8 tensor named
// kiln_checkpoint_sha256, the SHA-256 of all the rest. --resume FILE
// restores all of it and carries on from that very step, in the middle of
// an epoch if need be (an epoch's shuffled order is a function of --seed
// and the epoch, and image folders' random crops and flips of the example
// and the epoch, so the remaining batches are the ones the interrupted run
// would have seen): given the same flags, a resumed run ends with the same
// weights as one that never stopped. --steps and --epochs count from the
// start of training, so resuming with a larger --steps or --epochs trains
// further; another --arch, --batch-size or --seed is refused.
//
// A run can be stopped at any moment and lose no more than the steps since
// the last checkpoint:
//
//   - SIGINT (Ctrl-C) or SIGTERM (a scheduler preempting the job) stops
//     training after the step under way, writes FILE and exits with status
//     0, saying where it stopped; a second signal ends the process at once.
//   - A kill, crash or power cut leaves FILE whole: it is written to a
//     temporary file beside it (.FILE.tmp and digits), synced, renamed over
//     FILE and the rename synced. A temporary file left by a killed write
//     is removed when train next starts with the same --checkpoint.
//   - A file damaged on disk fails its checksum; a progress record out of
//     range (a negative step, a position past the end of the epoch, an
//     unknown version, a missing momentum buffer) is refused. The error
//     names the file and the field at fault.
//   - A step whose loss, or any weight or gradient after it, is NaN or
//     infinite stops training with status 1 and an error naming the step
//     and the parameter: a diverged run never replaces a good checkpoint.
//
// # Metrics
//
// train appends its numbers to a metrics log (package metrics): a JSON
// object a line, which kiln plot draws and scripts read, and with
// --tensorboard DIR the same as TensorBoard scalars in an event file in
// DIR. Every --metrics-every steps (10) and at the end of each epoch a
// train record holds the mean loss and top-1 accuracy of the batches since
// the previous one, the learning rate and the images per second; after
// each held-out evaluation an eval record holds the held-out loss,
// accuracy and top5_accuracy (fractions, not percentages). Records carry
// the step, the 0-based epoch and the run's name, --run or the --arch.
// The log is --metrics FILE or, with --checkpoint, the checkpoint's name
// with .metrics.jsonl for its extension (r50.safetensors: r50.metrics.jsonl),
// so that a run resumed with the same --checkpoint appends to its log, the
// steps going on from the checkpoint's; --metrics="" writes none. A
// resumed run logs again the steps its predecessor took after its last
// checkpoint: a reader keeps the last record of a step. Under mpirun rank 0
// writes the log, the loss and accuracy of its share of each batch and the
// images per second of all ranks.
//
// # Exit status
//
// 0 on success or when stopped by a signal with a checkpoint written, 2
// when the command line is wrong (an unknown subcommand or flag, a bad
// value such as an unknown --arch or a --batch-size below 1, a missing
// --data, --dtype int8 without --conf), and 1 when something fails while running (a data folder or
// weights file that cannot be read, a checkpoint for another architecture
// or a damaged one, a conf that does not fit the model, a model that does not fit its data, a diverged run, a
// run stopped by a signal with no --checkpoint to write).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/graph/quant"
	"github.com/kilnml/kiln/internal/subcmd"
	"github.com/kilnml/kiln/kernels"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand: its name, one line of help, the flags it
// takes, and what it does once they are parsed and checked.
type command struct {
	name, summary string
	flags         []string // names in flagDefs
	run           func(o *options, stdout, stderr io.Writer) error
}

var commands = []command{
	{"train", "train a ResNet and report held-out accuracy after each epoch",
		[]string{"data", "arch", "batch-size", "epochs", "steps", "lr", "momentum", "wd", "channels-last", "dtype",
			"image-size", "workers", "seed", "checkpoint", "checkpoint-every", "resume", "num-classes", "train-size", "val-size",
			"val-fraction", "zero-init-residual", "quiet", "dist-timeout", "bucket-mb", "metrics", "metrics-every", "tensorboard", "run"},
		train},
	{"evaluate", "print the top-1 and top-5 accuracy of weights on held-out images",
		[]string{"data", "arch", "weights", "batch-size", "image-size", "channels-last", "dtype", "conf", "workers", "val-size",
			"val-fraction", "quiet"},
		evaluate},
	{"infer", "time eval-mode forward passes over a random batch",
		[]string{"arch", "weights", "batch-size", "image-size", "warmup", "iters", "channels-last", "dtype", "conf", "seed", "graph"},
		infer},
	{"export", "trace, freeze and save the model as a graph that runs without model code",
		[]string{"arch", "weights", "batch-size", "image-size", "channels-last", "dtype", "conf", "seed", "out"},
		export},
	{"calibrate", "record the ranges of held-out activations as an int8 quantization conf",
		[]string{"data", "arch", "weights", "batch-size", "image-size", "channels-last", "batches", "conf", "symmetric",
			"algorithm", "workers", "val-size", "val-fraction", "seed"},
		calibrate},
}

// usagef reports a mistake on the command line: exit status 2.
var usagef = subcmd.Usagef

// program is the command line: its subcommands, each parsed and run here.
var program = &subcmd.Program{Name: "resnet50", Hint: "run 'resnet50 <subcommand> -h' for its flags", Run: runCommand}

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

// parse reads cmd's flags from args into options and checks their values.
// With -h it prints the flags to stdout and returns flag.ErrHelp.
func parse(cmd command, args []string, stdout io.Writer) (*options, error) {
	fs := flag.NewFlagSet("resnet50 "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by run, in one line
	o := &options{set: map[string]bool{}}
	for _, name := range cmd.flags {
		flagDefs[name](fs, o)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "usage: resnet50 %s [flags]\n\n%s.\n\nflags:\n", cmd.name, cmd.summary)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, &subcmd.UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (flags only; did you mean --data %s?)", fs.Arg(0), fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, o.check(cmd.flags)
}

// options holds every subcommand's flags; each subcommand registers and
// reads only its own.
type options struct {
	Data, Arch, Weights, Checkpoint, Resume string
	BatchSize, Epochs, Steps, ImageSize     int
	Workers, NumClasses, TrainSize, ValSize int
	Warmup, Iters, CheckpointEvery          int
	LR, Momentum, WD, ValFraction           float64
	ChannelsLast, Quiet, ZeroInit           bool
	DType, Graph, Out, Conf, Algorithm      string
	Batches, MetricsEvery                   int
	Metrics, TensorBoard, Run               string
	Symmetric                               bool
	Seed                                    uint64
	DistTimeout                             time.Duration
	BucketMB                                float64
	set                                     map[string]bool // flags given on the command line
}

// archs are the architectures --arch accepts, as models.ResNetByName
// names them.
var archs = []string{"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"}

// flagDefs registers each flag on a FlagSet.
var flagDefs = map[string]func(fs *flag.FlagSet, o *options){
	"data": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Data, "data", "", "image `folder` (train/ and val/ class folders, or class folders) or the word synthetic")
	},
	"arch": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Arch, "arch", "resnet50", "model: "+strings.Join(archs, ", "))
	},
	"weights": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Weights, "weights", "", "safetensors `file`: a train checkpoint or a state dict with torchvision's names")
	},
	"checkpoint": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Checkpoint, "checkpoint", "", "write model, optimizer and progress to this `file` after each epoch, at the end, and when stopped by SIGINT or SIGTERM")
	},
	"checkpoint-every": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.CheckpointEvery, "checkpoint-every", 0, "also write --checkpoint every `N` steps (0: only after each epoch and at the end)")
	},
	"resume": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Resume, "resume", "", "continue training from this checkpoint `file`")
	},
	"batch-size": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.BatchSize, "batch-size", 32, "images per batch")
	},
	"epochs": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.Epochs, "epochs", 90, "passes over the training images; the cosine schedule spans them")
	},
	"steps": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.Steps, "steps", 0, "stop after this many optimizer steps in all (0: no limit)")
	},
	"image-size": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.ImageSize, "image-size", 224, "height and width of the images the model sees, at least 32")
	},
	"workers": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.Workers, "workers", 2, "goroutines loading and decoding images ahead of the model")
	},
	"num-classes": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.NumClasses, "num-classes", 10, "classes of synthetic data (image folders count their class folders)")
	},
	"train-size": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.TrainSize, "train-size", 1280, "training images of synthetic data")
	},
	"val-size": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.ValSize, "val-size", 256, "held-out images of synthetic data")
	},
	"val-fraction": func(fs *flag.FlagSet, o *options) {
		fs.Float64Var(&o.ValFraction, "val-fraction", 0.1, "part of an image folder without val/ held out from training")
	},
	"warmup": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.Warmup, "warmup", 3, "untimed forward passes before timing")
	},
	"iters": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.Iters, "iters", 20, "timed forward passes")
	},
	"lr": func(fs *flag.FlagSet, o *options) {
		fs.Float64Var(&o.LR, "lr", 0, "initial learning rate (default 0.1 × batch-size/256)")
	},
	"momentum": func(fs *flag.FlagSet, o *options) {
		fs.Float64Var(&o.Momentum, "momentum", 0.9, "SGD momentum")
	},
	"wd": func(fs *flag.FlagSet, o *options) {
		fs.Float64Var(&o.WD, "wd", 1e-4, "weight decay (L2 penalty)")
	},
	"channels-last": func(fs *flag.FlagSet, o *options) {
		fs.BoolVar(&o.ChannelsLast, "channels-last", true, "lay images and weights out channels-last (NHWC), Kiln's fastest layout")
	},
	"dtype": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.DType, "dtype", "float32", "float32; bf16: convolutions and linear layers in BF16 under amp.Autocast (float32 master weights, norms and loss); "+
			"or, for evaluate, infer and export, int8: the model quantized as --conf says")
	},
	"conf": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Conf, "conf", "", "int8 quantization conf `file` (IPEX's JSON) that calibrate writes and --dtype int8 reads")
	},
	"batches": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.Batches, "batches", 8, "calibrate on at most this many batches of held-out images")
	},
	"symmetric": func(fs *flag.FlagSet, o *options) {
		fs.BoolVar(&o.Symmetric, "symmetric", false, "quantize activations to int8 with zero point 0 (default: uint8 with a zero point from the range)")
	},
	"algorithm": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Algorithm, "algorithm", "min_max", "range observer: min_max, moving_averager_min_max or histogram")
	},
	"zero-init-residual": func(fs *flag.FlagSet, o *options) {
		fs.BoolVar(&o.ZeroInit, "zero-init-residual", true, "start each residual block's last batch norm at 0, so blocks begin as identities")
	},
	"dist-timeout": func(fs *flag.FlagSet, o *options) {
		fs.DurationVar(&o.DistTimeout, "dist-timeout", dist.DefaultTimeout, "under mpirun: abort the job when a gradient allreduce takes longer than this (a rank died)")
	},
	"bucket-mb": func(fs *flag.FlagSet, o *options) {
		fs.Float64Var(&o.BucketMB, "bucket-mb", float64(dist.DefaultBucketBytes)/(1<<20), "under mpirun: MiB of gradients per allreduce")
	},
	"metrics": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Metrics, "metrics", "", "append train and eval records to this JSON Lines `file` (default with --checkpoint: its name with .metrics.jsonl for the extension; --metrics=\"\" for none)")
	},
	"metrics-every": func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.MetricsEvery, "metrics-every", 10, "log a train record every `N` steps, and at the end of each epoch")
	},
	"tensorboard": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.TensorBoard, "tensorboard", "", "also write the records as TensorBoard scalars to an event file in this `folder`")
	},
	"run": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Run, "run", "", "the run's `name` in the metrics log (default --arch)")
	},
	"quiet": func(fs *flag.FlagSet, o *options) {
		fs.BoolVar(&o.Quiet, "quiet", false, "draw no progress bar")
	},
	"graph": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Graph, "graph", "", "time this frozen graph `file` (from export) instead of the model")
	},
	"out": func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.Out, "out", "", "write the frozen graph to this `file` (required)")
	},
	"seed": func(fs *flag.FlagSet, o *options) {
		fs.Uint64Var(&o.Seed, "seed", 1, "seed for initialisation, shuffling and augmentation")
	},
}

// check validates the values of the flags in names.
func (o *options) check(names []string) error {
	has := func(name string) bool { return slices.Contains(names, name) }
	atLeast := func(name string, v, lo int) error {
		if has(name) && v < lo {
			return usagef("--%s %d: must be at least %d", name, v, lo)
		}
		return nil
	}
	nonNegative := func(name string, v float64) error {
		if has(name) && !(v >= 0 && v <= 1e300) {
			return usagef("--%s %v: must be a finite number, at least 0", name, v)
		}
		return nil
	}
	dtypes := []string{"float32", "bf16"}
	if has("conf") {
		dtypes = append(dtypes, "int8")
	}
	switch {
	case has("dtype") && !slices.Contains(dtypes, o.DType):
		return usagef("--dtype %q: want %s or %s", o.DType, strings.Join(dtypes[:len(dtypes)-1], ", "), dtypes[len(dtypes)-1])
	case o.DType == "int8" && o.Conf == "":
		return usagef("--dtype int8 needs --conf, a conf file written by calibrate")
	case has("dtype") && o.DType != "int8" && o.Conf != "":
		return usagef("--conf %s is for --dtype int8, not %s", o.Conf, o.DType)
	case o.Graph != "" && o.Conf != "":
		return usagef("--graph runs the file as it was exported; --conf quantizes the model, at export or without --graph")
	case has("arch") && !slices.Contains(archs, o.Arch):
		return usagef("--arch %q: unknown architecture (want %s)", o.Arch, strings.Join(archs, ", "))
	case has("data") && o.Data == "":
		return usagef("--data is required: an image folder or the word synthetic")
	case has("val-fraction") && !(o.ValFraction >= 0 && o.ValFraction < 1):
		return usagef("--val-fraction %v: must be at least 0 and below 1", o.ValFraction)
	case has("out") && o.Out == "":
		return usagef("--out is required: the file to write the graph to")
	case o.set["resume"] && o.Resume == "":
		return usagef("--resume needs a checkpoint file")
	case o.CheckpointEvery > 0 && o.Checkpoint == "":
		return usagef("--checkpoint-every %d needs --checkpoint, the file to write", o.CheckpointEvery)
	}
	if has("algorithm") {
		if _, err := quant.NewObserver(o.Algorithm); err != nil {
			return usagef("--algorithm: %v", err)
		}
	}
	for _, err := range []error{
		atLeast("batch-size", o.BatchSize, 1), atLeast("epochs", o.Epochs, 1), atLeast("steps", o.Steps, 0),
		atLeast("image-size", o.ImageSize, 32), atLeast("workers", o.Workers, 0),
		atLeast("num-classes", o.NumClasses, 1), atLeast("train-size", o.TrainSize, 1),
		atLeast("val-size", o.ValSize, 1), atLeast("warmup", o.Warmup, 0), atLeast("iters", o.Iters, 1),
		atLeast("batches", o.Batches, 1), atLeast("metrics-every", o.MetricsEvery, 1),
		atLeast("checkpoint-every", o.CheckpointEvery, 0),
		nonNegative("lr", o.LR), nonNegative("momentum", o.Momentum), nonNegative("wd", o.WD),
	} {
		if err != nil {
			return err
		}
	}
	if has("lr") && !o.set["lr"] {
		o.LR = 0.1 * float64(o.BatchSize) / 256
	}
	return nil
}

// autocast returns x marked for BF16 autocast when --dtype bf16 asks for
// it, else x.
func (o *options) autocast(x *autograd.Tensor) *autograd.Tensor {
	if o.DType == "bf16" {
		return amp.Autocast(x)
	}
	return x
}
