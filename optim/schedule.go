package optim

import (
	"errors"
	"fmt"
	"math"
)

// Scheduler adjusts an optimizer's learning rates as training proceeds.
// Call Step after the optimizer's Step, once per epoch (or iteration, for
// schedules counted in iterations).
type Scheduler interface {
	// Step advances the schedule by one and sets each group's learning
	// rate.
	Step()
	// LastLR returns the learning rates the last Step set, one per group.
	LastLR() []float64
	// State returns what the scheduler needs to resume.
	State() ScheduleState
	// LoadState restores a State. To resume training, build the optimizer
	// and its schedulers, then load the optimizer's state dict and each
	// scheduler's state: building a scheduler takes a step that changes the
	// learning rates, which loading the optimizer's state puts back.
	LoadState(st ScheduleState) error
}

// ScheduleState is a scheduler's progress, as in PyTorch's
// scheduler.state_dict(); the learning rates themselves are saved in the
// optimizer's state dict. The slices hold one value per parameter group.
type ScheduleState struct {
	LastEpoch       int
	BaseLRs, LastLR []float64
}

// schedule is what every scheduler shares, mirroring PyTorch's
// _LRScheduler: a counter of steps taken (the epoch) and the base learning
// rates the formulas start from.
type schedule struct {
	opt       Optimizer
	baseLRs   []float64
	lastEpoch int
	lastLR    []float64
	// next returns group's new learning rate given its current one; it
	// reads lastEpoch, already advanced.
	next func(group int, lr float64) float64
}

var errNilOptimizer = errors.New("optim: scheduler needs an optimizer, got nil")

// checkFinite rejects a NaN or infinite factor, which would turn every
// learning rate the schedule sets into NaN or infinity.
func checkFinite(sched, name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return errorf(sched, "%s must be a finite number, got %v", name, v)
	}
	return nil
}

// start attaches the schedule to opt as PyTorch's constructor with
// last_epoch=-1 does: each group's initial_lr is recorded unless an earlier
// scheduler did, it becomes the base learning rate, and one Step is taken,
// so the epoch-0 learning rate applies at once.
func (s *schedule) start(opt Optimizer, next func(group int, lr float64) float64) {
	s.opt, s.next, s.lastEpoch = opt, next, -1
	n := opt.NumGroups()
	s.baseLRs = make([]float64, n)
	s.lastLR = make([]float64, n)
	for g := range n {
		if _, ok := opt.InitialLR(g); !ok {
			opt.SetInitialLR(g, opt.LR(g))
		}
		s.baseLRs[g], _ = opt.InitialLR(g)
	}
	s.Step()
}

// Step advances the epoch and sets each group's learning rate.
func (s *schedule) Step() {
	s.lastEpoch++
	for g := range s.baseLRs {
		lr := s.next(g, s.opt.LR(g))
		s.opt.SetLR(g, lr)
		s.lastLR[g] = lr
	}
}

// LastLR returns the learning rates the last Step set, one per group.
func (s *schedule) LastLR() []float64 { return append([]float64(nil), s.lastLR...) }

// State returns the scheduler's progress.
func (s *schedule) State() ScheduleState {
	return ScheduleState{LastEpoch: s.lastEpoch, BaseLRs: s.BaseLRs(), LastLR: s.LastLR()}
}

// LoadState restores progress saved by State.
func (s *schedule) LoadState(st ScheduleState) error {
	n := len(s.baseLRs)
	if len(st.BaseLRs) != n || len(st.LastLR) != n {
		return fmt.Errorf("optim: scheduler state has %d base and %d last learning rates, the optimizer has %d groups", len(st.BaseLRs), len(st.LastLR), n)
	}
	if st.LastEpoch < 0 {
		return fmt.Errorf("optim: scheduler state has last epoch %d, want at least 0", st.LastEpoch)
	}
	for g := range n {
		if err := checkFinite("scheduler state", fmt.Sprintf("base learning rate of group %d", g), st.BaseLRs[g]); err != nil {
			return err
		}
		if err := checkFinite("scheduler state", fmt.Sprintf("last learning rate of group %d", g), st.LastLR[g]); err != nil {
			return err
		}
	}
	s.lastEpoch = st.LastEpoch
	copy(s.baseLRs, st.BaseLRs)
	copy(s.lastLR, st.LastLR)
	return nil
}

// LastEpoch returns how many Steps have been taken since the constructor's
// initial one (PyTorch's last_epoch).
func (s *schedule) LastEpoch() int { return s.lastEpoch }

// BaseLRs returns the learning rates the schedule starts from, one per group
// (the optimizer's initial learning rates).
func (s *schedule) BaseLRs() []float64 { return append([]float64(nil), s.baseLRs...) }

// StepLR multiplies each group's learning rate by Gamma every StepSize
// epochs, like torch.optim.lr_scheduler.StepLR.
type StepLR struct {
	schedule
	stepSize int
	gamma    float64
}

// NewStepLR attaches a StepLR to opt and takes its initial step.
func NewStepLR(opt Optimizer, stepSize int, gamma float64) (*StepLR, error) {
	if opt == nil {
		return nil, errNilOptimizer
	}
	if stepSize <= 0 {
		return nil, errorf("StepLR", "step size must be positive, got %d", stepSize)
	}
	if err := checkFinite("StepLR", "gamma", gamma); err != nil {
		return nil, err
	}
	s := &StepLR{stepSize: stepSize, gamma: gamma}
	s.schedule.start(opt, func(_ int, lr float64) float64 {
		if s.lastEpoch == 0 || s.lastEpoch%s.stepSize != 0 {
			return lr
		}
		return lr * s.gamma
	})
	return s, nil
}

// MultiStepLR multiplies each group's learning rate by Gamma when the epoch
// reaches each milestone (by Gamma^k for a milestone listed k times), like
// torch.optim.lr_scheduler.MultiStepLR.
type MultiStepLR struct {
	schedule
	counts map[int]int // milestone → how often it is listed
	gamma  float64
}

// NewMultiStepLR attaches a MultiStepLR to opt and takes its initial step.
// As in PyTorch, milestones need not be sorted; a milestone of 0 applies at
// once.
func NewMultiStepLR(opt Optimizer, milestones []int, gamma float64) (*MultiStepLR, error) {
	if opt == nil {
		return nil, errNilOptimizer
	}
	if err := checkFinite("MultiStepLR", "gamma", gamma); err != nil {
		return nil, err
	}
	s := &MultiStepLR{counts: map[int]int{}, gamma: gamma}
	for _, m := range milestones {
		s.counts[m]++
	}
	s.schedule.start(opt, func(_ int, lr float64) float64 {
		k, ok := s.counts[s.lastEpoch]
		if !ok {
			return lr
		}
		return lr * math.Pow(s.gamma, float64(k))
	})
	return s, nil
}

// CosineAnnealingLR anneals each group's learning rate from its base value
// to EtaMin over TMax epochs along half a cosine, then back up over the
// next TMax, and so on, like torch.optim.lr_scheduler.CosineAnnealingLR.
// It uses PyTorch's recursive form, in which each step scales the current
// learning rate, so changes made to it from outside carry on.
type CosineAnnealingLR struct {
	schedule
	tMax   int
	etaMin float64
}

// NewCosineAnnealingLR attaches a CosineAnnealingLR to opt and takes its
// initial step.
func NewCosineAnnealingLR(opt Optimizer, tMax int, etaMin float64) (*CosineAnnealingLR, error) {
	if opt == nil {
		return nil, errNilOptimizer
	}
	if tMax <= 0 {
		return nil, errorf("CosineAnnealingLR", "T_max must be positive, got %d", tMax)
	}
	if err := checkFinite("CosineAnnealingLR", "eta_min", etaMin); err != nil {
		return nil, err
	}
	s := &CosineAnnealingLR{tMax: tMax, etaMin: etaMin}
	s.schedule.start(opt, s.next)
	return s, nil
}

// next evaluates PyTorch's expressions in the same order, with float64
// conversions to keep Go from fusing multiply-adds Python rounds twice.
func (s *CosineAnnealingLR) next(g int, lr float64) float64 {
	e, t := s.lastEpoch, float64(s.tMax)
	switch {
	case e == 0:
		return lr
	case pyMod(e-1-s.tMax, 2*s.tMax) == 0:
		// The restart of an upward half period, where the recursive
		// ratio below would divide by zero.
		return lr + float64((s.baseLRs[g]-s.etaMin)*(1-math.Cos(math.Pi/t)))/2
	}
	ratio := (1 + math.Cos(float64(math.Pi*float64(e))/t)) / (1 + math.Cos(float64(math.Pi*float64(e-1))/t))
	return float64(ratio*(lr-s.etaMin)) + s.etaMin
}

// pyMod is Python's a % b for b > 0: never negative.
func pyMod(a, b int) int { return ((a % b) + b) % b }

// LinearLR scales each group's learning rate linearly from StartFactor
// times its base value to EndFactor times it over TotalIters steps, then
// leaves it, like torch.optim.lr_scheduler.LinearLR. With EndFactor 1 it is
// the usual linear warm-up.
type LinearLR struct {
	schedule
	start, end float64
	totalIters int
}

// NewLinearLR attaches a LinearLR to opt and takes its initial step, which
// multiplies each learning rate by startFactor.
func NewLinearLR(opt Optimizer, startFactor, endFactor float64, totalIters int) (*LinearLR, error) {
	if opt == nil {
		return nil, errNilOptimizer
	}
	// PyTorch accepts a start factor of 0 here but then divides by zero on
	// the second step.
	if !(startFactor > 0 && startFactor <= 1) {
		return nil, errorf("LinearLR", "start factor must be in (0, 1], got %v", startFactor)
	}
	if !(endFactor >= 0 && endFactor <= 1) {
		return nil, errorf("LinearLR", "end factor must be in [0, 1], got %v", endFactor)
	}
	if totalIters < 0 {
		return nil, errorf("LinearLR", "total iterations must not be negative, got %d", totalIters)
	}
	s := &LinearLR{start: startFactor, end: endFactor, totalIters: totalIters}
	s.schedule.start(opt, func(_ int, lr float64) float64 {
		switch {
		case s.lastEpoch == 0:
			return lr * s.start
		case s.lastEpoch > s.totalIters:
			return lr
		}
		d := s.end - s.start
		den := float64(float64(s.totalIters)*s.start) + float64(float64(s.lastEpoch-1)*d)
		return lr * (1 + d/den)
	})
	return s, nil
}
