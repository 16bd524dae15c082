package main

import (
	"fmt"
	"io"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/graph/quant"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// calibrate records the ranges the model's int8-capable ops see on
// --batches batches of the images evaluate reads, and saves them as an
// IPEX conf that export, infer and evaluate --dtype int8 convert with.
func calibrate(o *options, stdout, _ io.Writer) error {
	if o.Conf == "" {
		return usagef("--conf is required: the file to write the calibration to")
	}
	start := time.Now()
	t, err := traceModel(o)
	if err != nil {
		return err
	}
	scheme := quant.PerTensorAffine
	if o.Symmetric {
		scheme = quant.PerTensorSymmetric
	}
	conf := quant.NewConf(scheme)
	conf.Algorithm = o.Algorithm
	cal, err := quant.Prepare(t.trace, conf)
	if err != nil {
		return err
	}
	d, err := loadData(o, false, t.model.FC.Weight().Dim(0))
	if err != nil {
		return err
	}
	loader, err := evalLoader(o, d.val)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s from %s, up to %d batches of %d images of %d×%d from %s (%d images), %s, %s\n",
		o.Arch, weightsSource(o), o.Batches, o.BatchSize, o.ImageSize, o.ImageSize, o.Data, d.val.Len(), scheme, o.Algorithm)
	batches, images := 0, 0
	for batch, err := range loader.Epoch(0) {
		if err != nil {
			return err
		}
		if err := cal.Observe(batch.Inputs); err != nil {
			return err
		}
		batches, images = batches+1, images+len(batch.Indices)
		if batches == o.Batches {
			break
		}
	}
	if batches == 0 {
		return fmt.Errorf("--data %s: no images to calibrate on", o.Data)
	}
	if err := cal.Finish(); err != nil {
		return err
	}
	if err := conf.Save(o.Conf); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d ops recorded, %d batches (%d images) observed in %.2fs → %s\n",
		len(conf.Ops), batches, images, time.Since(start).Seconds(), o.Conf)
	return nil
}

// traced is the model in evaluation mode, its trace and the batch it was
// traced on, and, once frozen, the graph that runs.
type traced struct {
	model         *models.ResNet
	trace, frozen *graph.Graph
	x             *autograd.Tensor
}

// traceModel builds the model and traces it on the random batch infer
// uses (under autocast for --dtype bf16).
func traceModel(o *options) (*traced, error) {
	model, err := loadModel(o)
	if err != nil {
		return nil, err
	}
	nn.Eval(model)
	if o.ChannelsLast {
		nn.To(model, autograd.ChannelsLast)
	}
	t := &traced{model: model, x: exampleInput(o)}
	if t.trace, err = graph.Trace(model, o.autocast(t.x)); err != nil {
		return nil, err
	}
	return t, nil
}

// freezeModel traces the model and freezes the trace into the graph that
// runs: as it is for float32 and bf16, converted with --conf for int8.
func freezeModel(o *options) (*traced, error) {
	t, err := traceModel(o)
	if err != nil {
		return nil, err
	}
	if o.DType != "int8" {
		t.frozen, err = graph.Freeze(t.trace)
		return t, err
	}
	conf, err := quant.LoadConf(o.Conf)
	if err != nil {
		return nil, err
	}
	t.frozen, err = quant.Convert(t.trace, conf)
	if err != nil {
		// Convert names the entry at fault but not the file or the model.
		return nil, fmt.Errorf("--conf %s does not fit %s from %s: %w", o.Conf, o.Arch, weightsSource(o), err)
	}
	return t, nil
}

// weightsSource names where the model's weights come from.
func weightsSource(o *options) string {
	if o.Weights == "" {
		return "random weights"
	}
	return o.Weights
}
