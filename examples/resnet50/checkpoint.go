package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/checkpoint"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// formatVersion is the version of the progress record train writes and
// the only one it reads. Version 1 had no checksum.
const formatVersion = 2

const (
	statePrefix = checkpoint.StatePrefix
	momentumKey = "momentum_buffer"
)

// progress is a train checkpoint's progress record.
type progress struct {
	Version    int    `json:"version"`
	Arch       string `json:"arch"`
	NumClasses int    `json:"num_classes"`
	BatchSize  int    `json:"batch_size"`
	Seed       uint64 `json:"seed"`
	ImageSize  int    `json:"image_size"`
	// Step counts the optimizer steps taken; Epoch is the epoch under way
	// (or next, when EpochStep is 0) and EpochStep how many of its
	// batches are done.
	Step      int `json:"step"`
	Epoch     int `json:"epoch"`
	EpochStep int `json:"epoch_step"`
	// The optimizer's hyper-parameters and the schedule; the momentum
	// buffers are tensors.
	checkpoint.OptimizerState
}

// saveCheckpoint writes model, opt's state and p to path.
func saveCheckpoint(path string, model []nn.NamedTensor, opt optim.Optimizer, sched optim.Scheduler, p progress) error {
	p.Version = formatVersion
	if err := checkpoint.WriteTraining(path, checkpoint.ModelPrefix, model, opt, sched, &p); err != nil {
		return fmt.Errorf("writing --checkpoint: %w", err)
	}
	return nil
}

// weights is a safetensors file read for a model: its model tensors under
// their state-dict names and, for a train checkpoint, its progress.
type weights struct {
	path    string
	tensors []nn.NamedTensor
	state   map[int]map[string]*autograd.Tensor // optimizer state of a checkpoint
	ckpt    *progress                           // nil for a plain state dict
	read    *checkpoint.Weights                 // the file as read
}

// readWeights reads path, a train checkpoint or a state dict; flag names
// the flag that gave the file, for messages. A checkpoint's checksum and
// progress record are checked (see progress.check).
func readWeights(flag, path string) (*weights, error) {
	var p progress
	cw, err := checkpoint.ReadWeights(path, checkpoint.ModelPrefix, &p)
	if err != nil {
		return nil, fmt.Errorf("reading --%s: %w", flag, err)
	}
	w := &weights{path: path, tensors: cw.Model, state: cw.State, read: cw}
	if cw.Checkpoint {
		w.ckpt = &p
		if err := w.check(); err != nil {
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
	}
	return w, nil
}

// check validates a checkpoint's progress record on its own and against
// its optimizer state, which must hold a momentum buffer for every
// parameter once SGD with momentum has taken a step. What depends on the
// data (the epoch's length) is checked by train. Errors are
// *checkpoint.Error values naming the field.
func (w *weights) check() error {
	p := w.ckpt
	bad := func(field, format string, args ...any) error {
		return &checkpoint.Error{File: w.path, Field: field, Err: fmt.Errorf(format, args...)}
	}
	switch {
	case p.Version != formatVersion:
		return bad("version", "%d, but this program reads version %d", p.Version, formatVersion)
	case !slices.Contains(archs, p.Arch):
		return bad("arch", "%q is not one of %s", p.Arch, strings.Join(archs, ", "))
	case p.NumClasses < 1:
		return bad("num_classes", "%d, want at least 1", p.NumClasses)
	case p.BatchSize < 1:
		return bad("batch_size", "%d, want at least 1", p.BatchSize)
	case p.ImageSize < 32:
		return bad("image_size", "%d, want at least 32", p.ImageSize)
	}
	if err := checkpoint.CheckPosition(w.path, p.Step, p.Epoch, p.EpochStep); err != nil {
		return err
	}
	if p.Scheduler.LastEpoch != p.Epoch {
		// The schedule steps once per epoch.
		return bad("scheduler.LastEpoch", "%d, but the epoch is %d", p.Scheduler.LastEpoch, p.Epoch)
	}
	for g, gs := range p.Optimizer {
		if p.Step == 0 || !(gs.Hyper["momentum"] > 0) {
			continue
		}
		missing := checkpoint.MissingState(&optim.StateDict{State: w.state, Groups: []optim.GroupState{gs}}, momentumKey)
		if len(missing) > 0 {
			return bad(fmt.Sprintf("%s%d.%s", statePrefix, missing[0], momentumKey),
				"missing: SGD with momentum %g has taken %d steps, so each of the %d parameters of group %d has a buffer, but %d have none",
				gs.Hyper["momentum"], p.Step, len(gs.Params), g, len(missing))
		}
	}
	return nil
}

// numClasses returns the size of the classifier in the weights (the rows
// of fc.weight), or def when there is none.
func (w *weights) numClasses(def int) int {
	for _, nt := range w.tensors {
		if nt.Name == "fc.weight" && nt.Tensor.NDim() == 2 {
			return nt.Tensor.Dim(0)
		}
	}
	return def
}

// checkArch fails when the weights are a checkpoint of another
// architecture than arch.
func (w *weights) checkArch(flag, arch string) error {
	if w.ckpt != nil && w.ckpt.Arch != arch {
		return fmt.Errorf("--%s %s is a checkpoint of %s, not of --arch %s", flag, w.path, w.ckpt.Arch, arch)
	}
	return nil
}

// loadInto copies the model tensors into model, summarising a long list
// of mismatches (a file for another architecture has hundreds).
func (w *weights) loadInto(flag string, model nn.Module) error {
	var err error
	if e := autograd.Try(func() { err = nn.LoadTensors(model, w.tensors) }); e != nil {
		err = e
	}
	if sde, ok := errors.AsType[*nn.StateDictError](err); ok {
		return fmt.Errorf("--%s %s does not fit the model (another --arch, or not a ResNet state dict?): %s",
			flag, w.path, summarize(sde))
	}
	if err != nil {
		return fmt.Errorf("--%s %s: %w", flag, w.path, err)
	}
	return nil
}

// summarize describes a StateDictError in a few lines.
func summarize(e *nn.StateDictError) string {
	var parts []string
	list := func(what string, keys []string) {
		if len(keys) == 0 {
			return
		}
		const show = 3
		s := fmt.Sprintf("%d %s (%s", len(keys), what, strings.Join(keys[:min(show, len(keys))], ", "))
		if len(keys) > show {
			s += ", …"
		}
		parts = append(parts, s+")")
	}
	list("missing keys", e.Missing)
	list("unexpected keys", e.Unexpected)
	if len(e.Mismatches) > 0 {
		s := e.Mismatches[0]
		if len(e.Mismatches) > 1 {
			s += fmt.Sprintf(" and %d more mismatches", len(e.Mismatches)-1)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// restore puts a checkpoint's optimizer and scheduler state back; the
// model's tensors go in with loadInto.
func (w *weights) restore(opt optim.Optimizer, sched optim.Scheduler) error {
	if err := w.read.Restore(opt, sched, w.ckpt.OptimizerState); err != nil {
		return fmt.Errorf("--resume: %w", err)
	}
	return nil
}
