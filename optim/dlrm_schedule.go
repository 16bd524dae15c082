package optim

// DLRMLRPolicy is dlrm's LRPolicyScheduler (facebookresearch/dlrm,
// dlrm_s_pytorch.py, the --lr-num-warmup-steps, --lr-decay-start-step and
// --lr-num-decay-steps flags): a linear warm-up, then, from a later step,
// a quadratic decay to a floor of 1e-7. dlrm steps it after every
// optimizer step (every iteration, not every epoch).
//
// With n the scheduler's step count, PyTorch's _step_count (1 for the
// learning rate the constructor sets, then 2, 3, … after each Step), W
// warm-up steps, decay start S and D decay steps, each group's learning
// rate, from its base (initial) learning rate b, is
//
//	n < W:              b · (1 − (W − n)/W)
//	S ≤ n < S + D:      max(b · ((D − (n − S))/D)², 1e-7)
//	otherwise, D > 0:   the rate the previous step set (frozen: after the
//	                    decay, or between the warm-up and the decay, where
//	                    it is the last warm-up rate, or b without a warm-up)
//	otherwise:          b
//
// with the scales computed in float64, as dlrm computes them in Python, so
// the rates match dlrm's exactly. Like dlrm, the frozen rate is the
// scheduler's own last one: a change made to the group's learning rate
// from outside is overwritten.
type DLRMLRPolicy struct {
	schedule
	warmup, decayStart, decaySteps int
}

// dlrmMinLR is dlrm's floor on a decayed learning rate.
const dlrmMinLR = 0.0000001

// NewDLRMLRPolicy attaches dlrm's learning-rate policy to opt and takes
// its initial step: numWarmupSteps warm-up steps, then from decayStartStep
// on, numDecaySteps decay steps. It fails, as dlrm exits, when the decay
// would start before the warm-up ends, and when a count is negative.
func NewDLRMLRPolicy(opt Optimizer, numWarmupSteps, decayStartStep, numDecaySteps int) (*DLRMLRPolicy, error) {
	const name = "DLRMLRPolicy"
	switch {
	case opt == nil:
		return nil, errNilOptimizer
	case numWarmupSteps < 0:
		return nil, errorf(name, "number of warm-up steps must not be negative, got %d", numWarmupSteps)
	case decayStartStep < 0:
		return nil, errorf(name, "decay start step must not be negative, got %d", decayStartStep)
	case numDecaySteps < 0:
		return nil, errorf(name, "number of decay steps must not be negative, got %d", numDecaySteps)
	case decayStartStep < numWarmupSteps:
		return nil, errorf(name, "learning rate warmup must finish before the decay starts: decay start step %d is before the end of %d warm-up steps", decayStartStep, numWarmupSteps)
	case decayStartStep > maxInt-numDecaySteps:
		return nil, errorf(name, "decay start step %d plus %d decay steps overflows", decayStartStep, numDecaySteps)
	}
	s := &DLRMLRPolicy{warmup: numWarmupSteps, decayStart: decayStartStep, decaySteps: numDecaySteps}
	s.schedule.start(opt, s.next)
	return s, nil
}

const maxInt = int(^uint(0) >> 1)

// next is dlrm's get_lr for one group. dlrm's step_count is PyTorch's
// _step_count, which is last_epoch + 1.
func (s *DLRMLRPolicy) next(g int, _ float64) float64 {
	n, base := s.lastEpoch+1, s.baseLRs[g]
	switch {
	case n < s.warmup:
		scale := 1.0 - float64(s.warmup-n)/float64(s.warmup)
		return base * scale
	case s.decayStart <= n && n < s.decayStart+s.decaySteps:
		r := float64(s.decaySteps-(n-s.decayStart)) / float64(s.decaySteps)
		// Python's r ** 2 is the correctly rounded square, as r*r is;
		// the float64 conversion keeps Go from fusing it into the
		// multiplication below.
		scale := float64(r * r)
		return max(dlrmMinLR, base*scale)
	case s.decaySteps > 0:
		if s.lastEpoch == 0 {
			return base // dlrm's last_lr before any rate was computed
		}
		return s.lastLR[g]
	}
	return base
}
