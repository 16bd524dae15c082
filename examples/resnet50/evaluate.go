package main

import (
	"fmt"
	"io"
	"math"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

func evaluate(o *options, stdout, stderr io.Writer) error {
	if o.Weights == "" {
		return usagef("--weights is required: a train checkpoint or a state dict in safetensors")
	}
	// The int8 graph is made before any image is read, so that a conf
	// that does not fit fails at once; its float32 model is the reference.
	t := &traced{}
	var err error
	if o.DType == "int8" {
		t, err = freezeModel(o)
	} else {
		t.model, err = loadModel(o)
	}
	if err != nil {
		return err
	}
	model := t.model
	classes := model.FC.Weight().Dim(0)
	d, err := loadData(o, false, classes)
	if err != nil {
		return err
	}
	if d.classes > classes {
		return fmt.Errorf("--data %s has %d classes, more than the %d of --weights %s", o.Data, d.classes, classes, o.Weights)
	}
	if d.val.Len() == 0 {
		return fmt.Errorf("--data %s: no held-out images to evaluate", o.Data)
	}
	loader, err := evalLoader(o, d.val)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s from %s, %d images of %d×%d, batch %d, %s, %s\n",
		o.Arch, o.Weights, d.val.Len(), o.ImageSize, o.ImageSize, o.BatchSize, layout(o), o.DType)
	bar := kiln.NewProgress(d.val.Len(), kiln.ProgressOptions{Description: "evaluate", Quiet: o.Quiet, Writer: stderr})
	if o.DType == "int8" {
		return evaluateInt8(t, loader, bar, stdout)
	}
	nn.Eval(model)
	acc, err := accuracyWith(func(x *autograd.Tensor) *autograd.Tensor { return model.Forward(o.autocast(x)) }, loader, bar.Update)
	if err != nil {
		return err
	}
	bar.Finish()
	fmt.Fprintln(stdout, acc)
	return nil
}

// evaluateInt8 reports the int8 graph's accuracy and how often its top-1
// class is the float32 model's: agreement says what quantizing cost
// without labels to blame, and is what a conf is judged by when the
// weights are not yet good at the task.
func evaluateInt8(t *traced, loader *datasets.DataLoader, bar *kiln.Progress, stdout io.Writer) error {
	p, err := graph.Compile(t.frozen)
	if err != nil {
		return err
	}
	agree := 0
	acc, err := accuracyWith(func(x *autograd.Tensor) *autograd.Tensor {
		outs, err := p.Run(x)
		if err != nil {
			autograd.Fail("int8 graph", "%v", err)
		}
		agree += topK(outs[0], argmax(t.model.Forward(x)), 1)
		return outs[0]
	}, loader, bar.Update)
	if err != nil {
		return err
	}
	bar.Finish()
	fmt.Fprintln(stdout, acc)
	fmt.Fprintf(stdout, "agreement with float32: %.2f%% (%d of %d images)\n", 100*acc.rate(agree), agree, acc.n)
	return nil
}

// argmax returns each row's largest entry's index of logits [N, classes],
// as labels.
func argmax(logits *autograd.Tensor) *autograd.Tensor {
	classes := logits.Dim(1)
	scores := autograd.Cast(logits, autograd.Float32).ContiguousFloat32s()
	idx := make([]int64, logits.Dim(0))
	for i := range idx {
		row := scores[i*classes : (i+1)*classes]
		for j, v := range row {
			if v > row[idx[i]] {
				idx[i] = int64(j)
			}
		}
	}
	return autograd.FromInt64(idx, len(idx))
}

// loadModel builds --arch with --weights loaded, or freshly initialised
// from --seed with 1000 classes when there are no weights.
func loadModel(o *options) (*models.ResNet, error) {
	classes := 1000
	var w *weights
	if o.Weights != "" {
		var err error
		if w, err = readWeights("weights", o.Weights); err != nil {
			return nil, err
		}
		if err := w.checkArch("weights", o.Arch); err != nil {
			return nil, err
		}
		classes = w.numClasses(classes)
	}
	model, err := newModel(o, classes)
	if err != nil {
		return nil, err
	}
	if w != nil {
		if err := w.loadInto("weights", model); err != nil {
			return nil, err
		}
	}
	return model, nil
}

// evalLoader batches held-out images in order.
func evalLoader(o *options, ds datasets.Dataset) (*datasets.DataLoader, error) {
	return datasets.NewDataLoader(ds, datasets.LoaderOptions{BatchSize: o.BatchSize, Workers: o.Workers, ChannelsLast: o.ChannelsLast})
}

// accuracies are the summed loss and the top-1 and top-5 hits over a
// number of images.
type accuracies struct {
	loss          float64
	top1, top5, n int
}

func (a accuracies) String() string {
	return fmt.Sprintf("loss %.4f top-1 %.2f%% top-5 %.2f%% (%d images)",
		a.loss/float64(max(a.n, 1)), 100*a.rate(a.top1), 100*a.rate(a.top5), a.n)
}

func (a accuracies) rate(hits int) float64 {
	if a.n == 0 {
		return 0
	}
	return float64(hits) / float64(a.n)
}

// accuracy evaluates model in evaluation mode over every batch of loader,
// each marked by mark (for autocast, say).
func accuracy(model nn.Layer, loader *datasets.DataLoader, mark func(*autograd.Tensor) *autograd.Tensor) (accuracies, error) {
	nn.Eval(model)
	return accuracyWith(func(x *autograd.Tensor) *autograd.Tensor { return model.Forward(mark(x)) }, loader, nil)
}

// accuracyWith evaluates the logits forward computes over every batch of
// loader, without recording gradients, calling update (if not nil) after
// each batch with its size, mean loss and top-1 hits.
func accuracyWith(forward func(*autograd.Tensor) *autograd.Tensor, loader *datasets.DataLoader, update func(n int, loss float64, right int)) (accuracies, error) {
	var a accuracies
	arena := autograd.NewArena(0) // each batch's activations, reused by the next
	for batch, err := range loader.Epoch(0) {
		if err != nil {
			return a, err
		}
		var loss float64
		var top1, top5 int
		err := autograd.Try(func() {
			defer arena.Reset()
			logits := forward(arena.In(autograd.NoGrad(batch.Inputs)))
			top1, top5 = topK(logits, batch.Labels, 1), topK(logits, batch.Labels, 5)
			loss = autograd.CrossEntropy(logits, batch.Labels, autograd.CrossEntropyOptions{}).Item()
		})
		if err != nil {
			return a, err
		}
		n := len(batch.Indices)
		a.loss, a.top1, a.top5, a.n = a.loss+loss*float64(n), a.top1+top1, a.top5+top5, a.n+n
		if update != nil {
			update(n, loss, top1)
		}
	}
	return a, nil
}

// topK counts the rows of logits [N, classes] whose label's score is among
// the k largest: fewer than k scores exceed it. A NaN score is never
// right.
func topK(logits, labels *autograd.Tensor, k int) int {
	classes := logits.Dim(1)
	scores := autograd.Cast(logits, autograd.Float32).ContiguousFloat32s()
	n := 0
	for i, label := range labels.Int64s() {
		if label < 0 || label >= int64(classes) {
			autograd.Fail("topK", "label %d of example %d is outside the model's %d classes", label, i, classes)
		}
		row := scores[i*classes : (i+1)*classes]
		s := row[label]
		if math.IsNaN(float64(s)) {
			continue
		}
		above := 0
		for _, v := range row {
			if v > s {
				above++
			}
		}
		if above < k {
			n++
		}
	}
	return n
}
