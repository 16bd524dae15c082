package quant_test

import (
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/graph/quant"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// quickstartCNN is the quickstart example's network: two 3×3
// convolutions with batch norm and ReLU, a max pool and a linear layer.
func quickstartCNN(g *autograd.Generator) nn.Layer {
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

// TestInt8Accuracy trains each network on four fifths of the bundled
// digits, calibrates it on 256 training digits and converts it: the int8
// graph's top-1 class must agree with the float32 graph's on at least 99%
// of all 1797 digits, and its held-out accuracy may fall at most one
// point below float32's.
func TestInt8Accuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two networks")
	}
	models := []struct {
		name   string
		make   func(*autograd.Generator) nn.Layer
		epochs int
	}{
		{"quickstart CNN", quickstartCNN, 3},
		{"residual CNN", func(g *autograd.Generator) nn.Layer { return newResNetWidth(g, 32) }, 8},
	}
	digits := datasets.Digits()
	train, test := datasets.Split(digits, 0.2, 1)
	all, err := batchOf(digits, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		for _, scheme := range []quant.Scheme{quant.PerTensorAffine, quant.PerTensorSymmetric} {
			t.Run(m.name+"/"+scheme.String(), func(t *testing.T) {
				model := m.make(autograd.NewGenerator(1))
				trainDigits(t, model, train, m.epochs)
				nn.Eval(model)
				g, err := graph.Trace(model, all.Inputs)
				if err != nil {
					t.Fatal(err)
				}
				conf := quant.NewConf(scheme)
				cal, err := quant.Prepare(g, conf)
				if err != nil {
					t.Fatal(err)
				}
				idx := make([]int, 256)
				for i := range idx {
					idx[i] = i
				}
				calib, err := batchOf(train, idx)
				if err != nil {
					t.Fatal(err)
				}
				if err := cal.Observe(calib.Inputs); err != nil {
					t.Fatal(err)
				}
				if err := cal.Finish(); err != nil {
					t.Fatal(err)
				}
				q, err := quant.Convert(g, conf)
				if err != nil {
					t.Fatal(err)
				}
				f32 := predict(t, g, all.Inputs)
				i8 := predict(t, q, all.Inputs)
				agree := 0
				for i := range f32 {
					if f32[i] == i8[i] {
						agree++
					}
				}
				if frac := float64(agree) / float64(len(f32)); frac < 0.99 {
					t.Errorf("int8 agrees with float32 on %d of %d digits (%.4f), want ≥ 0.99", agree, len(f32), frac)
				}
				// The held-out digits are the test split's indices.
				labels := all.Labels.Int64s()
				var rightF, rightQ int
				for i := range test.Len() {
					j := test.Indices[i]
					if int64(f32[j]) == labels[j] {
						rightF++
					}
					if int64(i8[j]) == labels[j] {
						rightQ++
					}
				}
				accF, accQ := float64(rightF)/float64(test.Len()), float64(rightQ)/float64(test.Len())
				t.Logf("agreement %d/%d, held-out accuracy float32 %.4f, int8 %.4f", agree, len(f32), accF, accQ)
				if accF < 0.9 {
					t.Errorf("float32 held-out accuracy %.4f: the network did not learn", accF)
				}
				if accQ < accF-0.01 {
					t.Errorf("int8 held-out accuracy %.4f, float32 %.4f: more than a point lower", accQ, accF)
				}
			})
		}
	}
}

// trainDigits runs epochs of SGD with momentum on ds.
func trainDigits(t *testing.T, model nn.Layer, ds datasets.Dataset, epochs int) {
	t.Helper()
	loader, err := datasets.NewDataLoader(ds, datasets.LoaderOptions{BatchSize: 32, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDOptions{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	nn.Train(model, true)
	for epoch := range epochs {
		for batch, err := range loader.Epoch(epoch) {
			if err != nil {
				t.Fatal(err)
			}
			loss := autograd.CrossEntropy(model.Forward(batch.Inputs), batch.Labels, autograd.CrossEntropyOptions{})
			opt.ZeroGrad()
			loss.Backward()
			opt.Step()
		}
	}
}

// batchOf returns the examples idx of ds (all, when idx is nil) as one
// batch.
func batchOf(ds datasets.Dataset, idx []int) (datasets.Batch, error) {
	n := ds.Len()
	if idx != nil {
		n = len(idx)
	}
	loader, err := datasets.NewDataLoader(subset{ds, idx}, datasets.LoaderOptions{BatchSize: n})
	if err != nil {
		return datasets.Batch{}, err
	}
	for b, err := range loader.Epoch(0) {
		return b, err
	}
	return datasets.Batch{}, nil
}

// subset is the examples idx of a dataset (all of them when idx is nil).
type subset struct {
	datasets.Dataset
	idx []int
}

func (s subset) Len() int {
	if s.idx == nil {
		return s.Dataset.Len()
	}
	return len(s.idx)
}

func (s subset) Get(i int) (datasets.Example, error) {
	if s.idx == nil {
		return s.Dataset.Get(i)
	}
	return s.Dataset.Get(s.idx[i])
}

// predict runs g on x and returns each row's top-1 class.
func predict(t *testing.T, g *graph.Graph, x *autograd.Tensor) []int {
	t.Helper()
	logits := runOnce(t, g, x)
	classes := 10 // the digits'

	top := make([]int, len(logits)/classes)
	for i := range top {
		row := logits[i*classes : (i+1)*classes]
		for c, v := range row {
			if v > row[top[i]] {
				top[i] = c
			}
		}
	}
	return top
}
