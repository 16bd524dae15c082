package main

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/checkpoint"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// formatVersion is the version of the progress record train writes and
// the only one it reads.
const formatVersion = 1

// progress is a train checkpoint's progress record (see
// internal/checkpoint for the file around it).
type progress struct {
	Version int       `json:"version"`
	Config  runConfig `json:"config"`
	// Step counts the iterations (optimizer steps) done; Epoch is the
	// epoch under way (the next one when EpochStep is 0) and EpochStep
	// how many of its batches are done.
	Step      int `json:"step"`
	Epoch     int `json:"epoch"`
	EpochStep int `json:"epoch_step"`
	// Best is the best held-out result so far: the model's.
	Best savedScores `json:"best"`
	// The optimizer's hyper-parameters and the schedule; the state
	// (Adagrad's sums) is in tensors.
	checkpoint.OptimizerState
}

// savedScores are scores in a progress record.
type savedScores struct {
	AUC      float64 `json:"auc"`
	LogLoss  float64 `json:"log_loss"`
	Accuracy float64 `json:"accuracy"`
	Samples  int     `json:"samples"`
}

// runConfig is what a checkpoint's tensors, optimizer state and position
// depend on; resuming takes the same. The JSON names are the flags'. The
// training order needs no generator state: planted data reshuffles epoch
// e from (seed, e), random data draws batch j from (seed, j), and dataset
// data's order is fixed by the seed, so the seed and the position say
// where the order stands.
type runConfig struct {
	// Tables is each table's rows (--arch-embedding-size, or the data
	// file's counts).
	Tables            []int   `json:"arch-embedding-size"`
	SparseFeatureSize int     `json:"arch-sparse-feature-size"`
	MLPBot            []int   `json:"arch-mlp-bot"`
	MLPTop            []int   `json:"arch-mlp-top"`
	InteractionOp     string  `json:"arch-interaction-op"`
	InteractionItself bool    `json:"arch-interaction-itself"`
	Optimizer         string  `json:"optimizer"`
	DType             string  `json:"dtype"`
	MiniBatchSize     int     `json:"mini-batch-size"`
	Seed              uint64  `json:"numpy-rand-seed"`
	DataGeneration    string  `json:"data-generation"`
	DataSize          int     `json:"data-size"`
	NumBatches        int     `json:"num-batches"`
	LearningRate      float64 `json:"learning-rate"`
	LRNumWarmupSteps  int     `json:"lr-num-warmup-steps"`
	LRDecayStartStep  int     `json:"lr-decay-start-step"`
	LRNumDecaySteps   int     `json:"lr-num-decay-steps"`
}

func configOf(o *options, src shapes) runConfig {
	return runConfig{Tables: src.tableRows(), SparseFeatureSize: o.SparseFeatureSize, MLPBot: o.mlpBot, MLPTop: o.mlpTop,
		InteractionOp: o.InteractionOp, InteractionItself: o.InteractionItself, Optimizer: o.Optimizer, DType: o.DType,
		MiniBatchSize: o.MiniBatchSize, Seed: o.Seed, DataGeneration: o.DataGeneration, DataSize: o.DataSize,
		NumBatches: o.NumBatches, LearningRate: o.LearningRate, LRNumWarmupSteps: o.LRNumWarmupSteps,
		LRDecayStartStep: o.LRDecayStartStep, LRNumDecaySteps: o.LRNumDecaySteps}
}

// mismatch returns a *checkpoint.Error naming the first flag in which the
// checkpoint's configuration c differs from the run's, or nil.
func (c runConfig) mismatch(path string, run runConfig) error {
	cv, rv := reflect.ValueOf(c), reflect.ValueOf(run)
	for i := range cv.NumField() {
		a, b := cv.Field(i).Interface(), rv.Field(i).Interface()
		if reflect.DeepEqual(a, b) {
			continue
		}
		name := reflect.TypeFor[runConfig]().Field(i).Tag.Get("json")
		return &checkpoint.Error{File: path, Field: "config." + name,
			Err: fmt.Errorf("the checkpoint was trained with --%s %s, this run has --%s %s (resuming needs the same)", name, flagValue(a), name, flagValue(b))}
	}
	return nil
}

// flagValue writes v as it is given on the command line.
func flagValue(v any) string {
	if ns, ok := v.([]int); ok {
		s := make([]string, len(ns))
		for i, n := range ns {
			s[i] = fmt.Sprint(n)
		}
		return strings.Join(s, "-")
	}
	return fmt.Sprint(v)
}

// modelFile is --load-model read: a train checkpoint or a state dict.
type modelFile struct {
	*checkpoint.Weights
	ckpt *progress // nil for a state dict
}

// readModelFile reads --load-model: a checkpoint train wrote (its
// checksum and record checked) or a state dict with DLRM_Net's names,
// such as dlrm's model.state_dict() saved with
// safetensors.torch.save_file. A PyTorch pickle gets the command that
// converts it.
func readModelFile(o *options) (*modelFile, error) {
	path := o.LoadModel
	if strings.HasSuffix(path, ".pt") || strings.HasSuffix(path, ".pth") {
		return nil, fmt.Errorf("%s: a PyTorch pickle; convert it with: python3 -c \"import torch, safetensors.torch as s; "+
			"s.save_file(torch.load('%s')['state_dict'], '%s.safetensors')\"", path, path, strings.TrimSuffix(path, ".pt"))
	}
	var p progress
	w, err := checkpoint.ReadWeights(path, "", &p)
	if err != nil {
		return nil, fmt.Errorf("reading --load-model: %w", err)
	}
	f := &modelFile{Weights: w}
	if w.Checkpoint {
		if err := p.check(path); err != nil {
			return nil, fmt.Errorf("--load-model: %w", err)
		}
		f.ckpt = &p
	}
	return f, nil
}

// check validates a progress record on its own; what depends on the run
// (its configuration, the epoch's length) is checked by resume.
func (p *progress) check(path string) error {
	bad := func(field, format string, args ...any) error {
		return &checkpoint.Error{File: path, Field: field, Err: fmt.Errorf(format, args...)}
	}
	if p.Version != formatVersion {
		return bad("version", "%d, but this program reads version %d", p.Version, formatVersion)
	}
	if err := checkpoint.CheckPosition(path, p.Step, p.Epoch, p.EpochStep); err != nil {
		return err
	}
	switch {
	case p.Scheduler.LastEpoch != p.Step:
		// dlrm's schedule steps once per iteration.
		return bad("scheduler.LastEpoch", "%d, but %d iterations are done", p.Scheduler.LastEpoch, p.Step)
	case math.IsNaN(p.Best.AUC):
		return bad("best.auc", "NaN")
	}
	return nil
}

// loadInto copies the file's model tensors into m.
func (f *modelFile) loadInto(m nn.Module) error {
	var err error
	if e := autograd.Try(func() { err = nn.LoadTensors(m, f.Model) }); e != nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("--load-model %s: %w", f.Path, err)
	}
	return nil
}

// resume puts a checkpoint's optimizer and scheduler state into opt and
// sched, after checking that its position fits epochs of perEpoch
// batches. Its configuration is checked against the flags' before the
// model is built (progress.Config.mismatch).
func (f *modelFile) resume(perEpoch int, opt optim.Optimizer, sched optim.Scheduler) error {
	p := f.ckpt
	var err error
	if p.EpochStep >= perEpoch {
		err = &checkpoint.Error{File: f.Path, Field: "epoch_step",
			Err: fmt.Errorf("%d batches into an epoch, but an epoch of this data has %d", p.EpochStep, perEpoch)}
	}
	if err == nil {
		err = f.Restore(opt, sched, p.OptimizerState)
	}
	if err != nil {
		return fmt.Errorf("--load-model: %w", err)
	}
	return nil
}

// saveCheckpoint writes model (the state dict, joined FP32 for split
// weights), opt's state, sched's and p to path.
func saveCheckpoint(path string, model []nn.NamedTensor, opt optim.Optimizer, sched optim.Scheduler, p progress) error {
	p.Version = formatVersion
	if err := checkpoint.WriteTraining(path, "", model, opt, sched, &p); err != nil {
		return fmt.Errorf("writing --save-model: %w", err)
	}
	return nil
}

func (s scores) saved() savedScores {
	return savedScores{AUC: s.auc, LogLoss: s.logLoss, Accuracy: s.accuracy, Samples: s.samples}
}

func (s savedScores) scores() scores {
	return scores{auc: s.AUC, logLoss: s.LogLoss, accuracy: s.Accuracy, samples: s.Samples}
}
