// Command quickstart trains a small convolutional network on the UCI
// handwritten digits that ship with Kiln and reports its accuracy on a
// held-out fifth of them. It is what `make demo` runs: channels-last
// tensors, SGD with momentum and a cosine learning-rate schedule, and the
// training progress bar, end to end in well under a minute on two cores.
//
// With --dtype bf16 it trains in BF16 the way IPEX users do: kiln.Optimize
// splits the convolution and linear weights into BF16 halves and FP32
// remainders and swaps in the fused split SGD, and every forward pass runs
// under amp.Autocast.
//
// The last line it prints is accuracy=0.NNN, the held-out accuracy.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// config holds the run's knobs; the flags set them.
type config struct {
	Epochs    int
	BatchSize int
	LR        float64
	Seed      uint64
	Quiet     bool
	// DType is "float32" or "bf16".
	DType string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.Epochs, "epochs", 12, "passes over the training digits")
	flag.IntVar(&cfg.BatchSize, "batch", 32, "examples per batch")
	flag.Float64Var(&cfg.LR, "lr", 0.05, "peak learning rate")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed for initialisation, shuffling and the train/test split")
	flag.BoolVar(&cfg.Quiet, "quiet", false, "draw no progress bar")
	flag.StringVar(&cfg.DType, "dtype", "float32", "dtype to train in: float32 or bf16")
	flag.Parse()
	fmt.Println("kernels:", kernels.Features())
	acc, err := run(os.Stdout, cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("accuracy=%.3f\n", acc)
}

// newModel returns the network: two 3×3 convolutions with batch norm and
// ReLU, a 2×2 max pool, and a linear classifier over the 4×4×32 features.
func newModel(g *autograd.Generator) *nn.Sequential {
	return nn.NewSequential(
		nn.NewConv2d(g, 1, 16, 3, nn.ConvOptions{Padding: 1}),
		nn.NewBatchNorm2d(16, nn.BatchNormOptions{}),
		nn.NewReLU(),
		nn.NewConv2d(g, 16, 32, 3, nn.ConvOptions{Padding: 1}),
		nn.NewBatchNorm2d(32, nn.BatchNormOptions{}),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, nn.MaxPoolOptions{}),
		nn.NewFlatten(1, -1),
		nn.NewLinear(g, 32*4*4, 10, nn.LinearOptions{}),
	)
}

// run trains on four fifths of the digits, logging each epoch's loss and
// accuracy to w, and returns the accuracy on the remaining fifth.
func run(w io.Writer, cfg config) (float64, error) {
	var dtype autograd.DType
	switch cfg.DType {
	case "float32", "":
		dtype = autograd.Float32
	case "bf16":
		dtype = autograd.BFloat16
	default:
		return 0, fmt.Errorf("quickstart: unknown dtype %q; want float32 or bf16", cfg.DType)
	}
	train, test := datasets.Split(datasets.Digits(), 0.2, cfg.Seed)
	trainLoader, err := datasets.NewDataLoader(train, datasets.LoaderOptions{
		BatchSize: cfg.BatchSize, Shuffle: true, Seed: cfg.Seed, Workers: 1, ChannelsLast: true,
	})
	if err != nil {
		return 0, err
	}
	testLoader, err := datasets.NewDataLoader(test, datasets.LoaderOptions{BatchSize: 256, ChannelsLast: true})
	if err != nil {
		return 0, err
	}

	model := newModel(autograd.NewGenerator(cfg.Seed))
	sgd, err := optim.NewSGD(nn.Parameters(model), optim.SGDOptions{LR: cfg.LR, Momentum: 0.9, WeightDecay: 1e-4})
	if err != nil {
		return 0, err
	}
	// Channels-last weights, and in BF16 the split weights and the split
	// SGD, which replaces sgd from here on.
	res, err := kiln.Optimize(model, kiln.DType(dtype), kiln.WithOptimizer(sgd))
	if err != nil {
		return 0, err
	}
	opt := res.Optimizer
	forward := func(x *autograd.Tensor) *autograd.Tensor { return model.Forward(x) }
	if dtype == autograd.BFloat16 {
		// The logits come out of the last linear layer in BF16; the loss
		// and the accuracy read them as float32, as autocast's policy has
		// losses do.
		forward = func(x *autograd.Tensor) *autograd.Tensor {
			return autograd.Cast(model.Forward(amp.Autocast(x)), autograd.Float32)
		}
	}
	sched, err := optim.NewCosineAnnealingLR(opt, cfg.Epochs, 0)
	if err != nil {
		return 0, err
	}
	// Each step's activations and gradients come from the arena and go
	// back to it at the step's end, for the next step to reuse.
	arena := autograd.NewArena(0)
	for epoch := range cfg.Epochs {
		nn.Train(model, true)
		bar := kiln.NewProgress(train.Len(), kiln.ProgressOptions{Description: fmt.Sprintf("epoch %d", epoch+1), Quiet: cfg.Quiet})
		for batch, err := range trainLoader.Epoch(epoch) {
			if err != nil {
				return 0, err
			}
			logits := forward(arena.In(batch.Inputs))
			loss := autograd.CrossEntropy(logits, batch.Labels, autograd.CrossEntropyOptions{})
			opt.ZeroGrad()
			loss.Backward()
			opt.Step()
			bar.Update(len(batch.Indices), loss.Item(), correct(logits, batch.Labels))
			arena.Reset()
		}
		bar.Finish()
		sched.Step()
		fmt.Fprintln(w, bar)
	}
	return evaluate(model, forward, testLoader)
}

// evaluate returns model's accuracy over every batch of loader, computed
// by forward in evaluation mode and without recording gradients.
func evaluate(model nn.Module, forward func(*autograd.Tensor) *autograd.Tensor, loader *datasets.DataLoader) (float64, error) {
	nn.Eval(model)
	right, total := 0, 0
	for batch, err := range loader.Epoch(0) {
		if err != nil {
			return 0, err
		}
		right += correct(forward(autograd.NoGrad(batch.Inputs)), batch.Labels)
		total += len(batch.Indices)
	}
	if total == 0 {
		return 0, fmt.Errorf("quickstart: the test split is empty")
	}
	return float64(right) / float64(total), nil
}

// correct counts the rows of logits [N, classes] whose largest entry is
// at the label's index.
func correct(logits, labels *autograd.Tensor) int {
	classes := logits.Dim(1)
	scores := logits.ContiguousFloat32s()
	n := 0
	for i, label := range labels.Int64s() {
		row := scores[i*classes : (i+1)*classes]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if int64(best) == label {
			n++
		}
	}
	return n
}
