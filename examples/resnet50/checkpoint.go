package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// checkpointKey names the tensor that marks a train checkpoint: the
// progress as JSON text, in a U8 tensor.
const checkpointKey = "kiln_checkpoint"

const (
	modelPrefix = "model."
	statePrefix = "optimizer.state."
)

// progress is the JSON under checkpointKey.
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
	// Optimizer holds each parameter group's hyper-parameters; the
	// momentum buffers are tensors.
	Optimizer []optim.GroupState  `json:"optimizer"`
	Scheduler optim.ScheduleState `json:"scheduler"`
}

// saveCheckpoint writes model, opt's state and p to path atomically.
func saveCheckpoint(path string, model []nn.NamedTensor, opt optim.Optimizer, sched optim.Scheduler, p progress) error {
	sd := opt.StateDict()
	p.Version, p.Optimizer, p.Scheduler = 1, sd.Groups, sched.State()
	info, err := json.Marshal(p)
	if err != nil {
		return err
	}
	ts := []nn.NamedTensor{{Name: checkpointKey, Tensor: autograd.FromUint8(info, len(info))}}
	for _, nt := range model {
		ts = append(ts, nn.NamedTensor{Name: modelPrefix + nt.Name, Tensor: nt.Tensor})
	}
	for id, st := range sd.State {
		for name, t := range st {
			ts = append(ts, nn.NamedTensor{Name: fmt.Sprintf("%s%d.%s", statePrefix, id, name), Tensor: t})
		}
	}
	// SaveTensors writes a temporary file beside path, syncs it and
	// renames it over path.
	if err := nn.SaveTensors(path, ts); err != nil {
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
}

// readWeights reads path, a train checkpoint or a state dict; flag names
// the flag that gave the file, for messages.
func readWeights(flag, path string) (*weights, error) {
	all, err := nn.ReadTensors(path)
	if err != nil {
		return nil, fmt.Errorf("reading --%s: %w", flag, err)
	}
	w := &weights{path: path, state: map[int]map[string]*autograd.Tensor{}}
	if i := slices.IndexFunc(all, func(nt nn.NamedTensor) bool { return nt.Name == checkpointKey }); i >= 0 {
		w.ckpt = &progress{}
		t := all[i].Tensor
		err := fmt.Errorf("stored as %v, want uint8", t.DType())
		if t.DType() == autograd.Uint8 {
			err = json.Unmarshal(t.Uint8s(), w.ckpt)
		}
		if err != nil {
			return nil, fmt.Errorf("--%s %s: bad %s tensor: %w", flag, path, checkpointKey, err)
		}
	}
	// PyTorch's DataParallel saves every name under "module.".
	prefix := modelPrefix
	if w.ckpt == nil {
		prefix = ""
		if len(all) > 0 && !slices.ContainsFunc(all, func(nt nn.NamedTensor) bool { return !strings.HasPrefix(nt.Name, "module.") }) {
			prefix = "module."
		}
	}
	for _, nt := range all {
		if nt.Name == checkpointKey {
			continue
		}
		name, isModel := strings.CutPrefix(nt.Name, prefix)
		if w.ckpt != nil && !isModel {
			if err := w.addState(nt.Name, nt.Tensor); err != nil {
				return nil, fmt.Errorf("--%s %s: %w", flag, path, err)
			}
			continue
		}
		w.tensors = append(w.tensors, nn.NamedTensor{Name: name, Tensor: nt.Tensor})
	}
	return w, nil
}

// addState files a checkpoint's optimizer.state.N.NAME tensor.
func (w *weights) addState(full string, t *autograd.Tensor) error {
	rest, ok := strings.CutPrefix(full, statePrefix)
	id, name, ok2 := strings.Cut(rest, ".")
	n, err := strconv.Atoi(id)
	if !ok || !ok2 || err != nil || n < 0 {
		return fmt.Errorf("unexpected tensor %s in a checkpoint (want model.* or %sN.NAME)", full, statePrefix)
	}
	if w.state[n] == nil {
		w.state[n] = map[string]*autograd.Tensor{}
	}
	w.state[n][name] = t
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
	if err := opt.LoadStateDict(&optim.StateDict{State: w.state, Groups: w.ckpt.Optimizer}); err != nil {
		return fmt.Errorf("--resume %s: optimizer state: %w", w.path, err)
	}
	if err := sched.LoadState(w.ckpt.Scheduler); err != nil {
		return fmt.Errorf("--resume %s: scheduler state: %w", w.path, err)
	}
	return nil
}
