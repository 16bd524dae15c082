package checkpoint

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// The tensors of a training checkpoint (TrainingTensors) are named
//
//   - a model prefix chosen by the program (ModelPrefix, or "" for the
//     bare state-dict names) and the model's state-dict name
//     ("model.fc.weight", or "emb_l.0.weight"),
//   - StatePrefix, the parameter's number in the optimizer's state dict
//     and the state's name ("optimizer.state.3.momentum_buffer").
const (
	ModelPrefix = "model."
	StatePrefix = "optimizer.state."
)

// TrainingTensors lays out a training checkpoint's tensors: model's under
// modelPrefix in model's order, then the optimizer state by parameter
// number and name, so that equal states write equal files.
func TrainingTensors(modelPrefix string, model []nn.NamedTensor, state map[int]map[string]*autograd.Tensor) []nn.NamedTensor {
	ts := make([]nn.NamedTensor, 0, len(model)+2*len(state))
	for _, nt := range model {
		ts = append(ts, nn.NamedTensor{Name: modelPrefix + nt.Name, Tensor: nt.Tensor})
	}
	for _, id := range slices.Sorted(maps.Keys(state)) {
		st := state[id]
		for _, name := range slices.Sorted(maps.Keys(st)) {
			ts = append(ts, nn.NamedTensor{Name: StatePrefix + strconv.Itoa(id) + "." + name, Tensor: st[name]})
		}
	}
	return ts
}

// Weights is a safetensors file read to build a model from: a training
// checkpoint or a plain state dict.
type Weights struct {
	Path string
	// Model holds the model's tensors under their state-dict names.
	Model []nn.NamedTensor
	// State is a checkpoint's optimizer state, by parameter number and
	// name; empty for a state dict.
	State map[int]map[string]*autograd.Tensor
	// Checkpoint is true for a training checkpoint, false for a state
	// dict.
	Checkpoint bool
}

// ReadWeights reads path, a training checkpoint written with
// TrainingTensors(modelPrefix, …) or a plain state dict (such as PyTorch's
// model.state_dict() saved with safetensors.torch.save_file; the "module."
// prefix of DataParallel's names is dropped when every name has it). A
// checkpoint's checksum is checked and its progress record decoded into
// record, as Read does; a tensor outside the layout is an *Error naming
// it.
func ReadWeights(path, modelPrefix string, record any) (*Weights, error) {
	all, isCkpt, err := Read(path, record)
	if err != nil {
		return nil, err
	}
	w := &Weights{Path: path, State: map[int]map[string]*autograd.Tensor{}, Checkpoint: isCkpt}
	prefix := modelPrefix
	if !isCkpt {
		prefix = ""
		if len(all) > 0 && !slices.ContainsFunc(all, func(nt nn.NamedTensor) bool { return !strings.HasPrefix(nt.Name, "module.") }) {
			prefix = "module."
		}
	}
	for _, nt := range all {
		name, isModel := strings.CutPrefix(nt.Name, prefix)
		if isCkpt && (!isModel || strings.HasPrefix(nt.Name, StatePrefix)) {
			if err := w.addState(nt.Name, nt.Tensor); err != nil {
				return nil, err
			}
			continue
		}
		w.Model = append(w.Model, nn.NamedTensor{Name: name, Tensor: nt.Tensor})
	}
	return w, nil
}

// addState files a checkpoint's optimizer.state.N.NAME tensor.
func (w *Weights) addState(full string, t *autograd.Tensor) error {
	rest, ok := strings.CutPrefix(full, StatePrefix)
	id, name, ok2 := strings.Cut(rest, ".")
	n, err := strconv.Atoi(id)
	if !ok || !ok2 || err != nil || n < 0 {
		return &Error{File: w.Path, Field: full, Err: fmt.Errorf("unexpected tensor (want model tensors or %sN.NAME)", StatePrefix)}
	}
	if w.State[n] == nil {
		w.State[n] = map[string]*autograd.Tensor{}
	}
	w.State[n][name] = t
	return nil
}

// OptimizerState is the part of a training checkpoint's progress record
// that holds the optimizer's group hyper-parameters (its state is in
// tensors) and the scheduler's state. Programs embed it in their record
// (its fields then stand in the record's JSON object) and pass the record
// to WriteTraining.
type OptimizerState struct {
	Optimizer []optim.GroupState  `json:"optimizer"`
	Scheduler optim.ScheduleState `json:"scheduler"`
}

func (s *OptimizerState) optimizerState() *OptimizerState { return s }

// A Record is a progress record that embeds OptimizerState.
type Record interface{ optimizerState() *OptimizerState }

// WriteTraining writes a training checkpoint to path, as Write does:
// model's tensors under modelPrefix and opt's state (TrainingTensors), and
// record, its OptimizerState set to opt's groups and sched's state first.
func WriteTraining(path, modelPrefix string, model []nn.NamedTensor, opt optim.Optimizer, sched optim.Scheduler, record Record) error {
	sd := opt.StateDict()
	st := record.optimizerState()
	st.Optimizer, st.Scheduler = sd.Groups, sched.State()
	return Write(path, record, TrainingTensors(modelPrefix, model, sd.State))
}

// CheckPosition checks the position in a progress record that names it
// "step" (optimizer steps taken), "epoch" (the epoch under way, the next
// one when epoch_step is 0) and "epoch_step" (steps done in it). Errors
// are *Error values naming the field.
func CheckPosition(path string, step, epoch, epochStep int) error {
	bad := func(field, format string, args ...any) error {
		return &Error{File: path, Field: field, Err: fmt.Errorf(format, args...)}
	}
	switch {
	case step < 0:
		return bad("step", "%d, want at least 0", step)
	case epoch < 0:
		return bad("epoch", "%d, want at least 0", epoch)
	case epochStep < 0 || epochStep > step:
		return bad("epoch_step", "%d, want 0 to step (%d)", epochStep, step)
	case epoch > step:
		return bad("epoch", "%d epochs done in %d steps", epoch, step)
	}
	return nil
}

// Restore loads a checkpoint's optimizer state (w.State and st's group
// hyper-parameters) into opt and st's scheduler state into sched. Build
// opt and sched first: building a scheduler steps it, which changes
// learning rates that the optimizer's state puts back. Errors are *Error
// values naming "optimizer" or "scheduler".
func (w *Weights) Restore(opt optim.Optimizer, sched optim.Scheduler, st OptimizerState) error {
	if err := opt.LoadStateDict(&optim.StateDict{State: w.State, Groups: st.Optimizer}); err != nil {
		return &Error{File: w.Path, Field: "optimizer", Err: err}
	}
	if err := sched.LoadState(st.Scheduler); err != nil {
		return &Error{File: w.Path, Field: "scheduler", Err: err}
	}
	return nil
}
