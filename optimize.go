package kiln

import (
	"errors"
	"fmt"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// OptLevel is an optimization level for Optimize, IPEX's level argument.
type OptLevel int

const (
	// O0 changes nothing unless an option asks for it.
	O0 OptLevel = iota
	// O1 turns on every rewrite that applies to the model's mode: for an
	// evaluation model batch-norm folding, dropout removal and
	// channels-last weights; for a training model channels-last weights,
	// and split master weights when the dtype is bfloat16. It is the
	// default.
	O1
)

// String returns "O0" or "O1".
func (l OptLevel) String() string {
	switch l {
	case O0, O1:
		return fmt.Sprintf("O%d", int(l))
	}
	return fmt.Sprintf("OptLevel(%d)", int(l))
}

// An Option sets one knob of Optimize. Options are applied in order; a knob
// set explicitly overrides what the level implies, whatever the order.
type Option func(*config)

// config holds the knobs; a nil pointer is a knob left to the level.
type config struct {
	level                                     OptLevel
	dtype                                     autograd.DType
	fold, dropout, channelsLast, splitMasters *bool
	prepack                                   *bool
	opt                                       optim.Optimizer
	optSet                                    bool
}

// Level sets the optimization level (O1 by default).
func Level(l OptLevel) Option { return func(c *config) { c.level = l } }

// DType sets the dtype the model computes in: autograd.Float32 (the
// default) or autograd.BFloat16. For an evaluation model BFloat16 casts the
// convolution and linear weights and biases and the embedding tables to
// bfloat16 (amp.CastModule); for a training model it keeps an FP32 master
// of each (split, or a separate copy: see SplitMasterWeights) and needs
// WithOptimizer. Either way, run the model on amp.Autocast inputs, which feeds
// those layers bfloat16 activations; lookups of bfloat16 tables return
// bfloat16 rows and bags. BatchNorm parameters and statistics stay
// float32, as in IPEX: the batch-norm op takes float32 parameters
// (amp.AutocastParams).
func DType(d autograd.DType) Option { return func(c *config) { c.dtype = d } }

// FoldBatchNorm folds each BatchNorm into the convolution or linear layer
// before it (nn.FoldBatchNorm), IPEX's conv_bn_folding. Evaluation models
// only.
func FoldBatchNorm(on bool) Option { return func(c *config) { c.fold = &on } }

// RemoveDropout replaces the Dropout layers of Sequentials with identities
// (nn.RemoveDropout), IPEX's replace_dropout_with_identity. Evaluation
// models only.
func RemoveDropout(on bool) Option { return func(c *config) { c.dropout = &on } }

// ChannelsLast reorders 4-D parameters and buffers (Conv2d weights) to
// NHWC and 5-D ones (Conv3d weights) to NDHWC, in place, the layout Kiln's
// convolutions run fastest on. A convolution with a channels-last weight
// computes channels-last and returns a channels-last result whatever its
// input's format; feeding channels-last inputs saves the reorder.
func ChannelsLast(on bool) Option { return func(c *config) { c.channelsLast = &on } }

// Prepack has the convolutions of an evaluation model pack their weights
// once, at the first forward without gradient recording, into the panels
// the GEMM reads, instead of packing them in every call (IPEX's
// weights_prepack; nn.Conv2d.Prepack). Float32 channels-last weights of
// ungrouped convolutions have a packed form, and bfloat16 ones (after
// DType) on CPUs without AVX512_BF16, where the BF16 convolution runs on
// the float32 kernels and the packed form is widened once; the packed
// copies follow changes made through nn (LoadStateDict, training), not
// direct writes into the weights. Evaluation models only.
func Prepack(on bool) Option { return func(c *config) { c.prepack = &on } }

// SplitMasterWeights chooses how a training model keeps its FP32 master
// weights under DType(autograd.BFloat16), IPEX's
// split_master_weight_for_bf16. On (the default at O1) each weight is split
// into a bfloat16 top half the model computes with and the low 16 bits
// beside it (amp.SplitModuleFunc), costing no extra memory, and the
// optimizer is rebuilt as its split form. Off (the default at O0, as in
// IPEX), the FP32 parameters stay as masters and the model computes with
// bfloat16 copies rounded to nearest even (amp.MasterCopyModule), 2 more
// bytes per weight; the returned optimizer moves each copy's gradient to
// its master, steps the given optimizer, whatever its kind, and refreshes
// the copies. Sparse embedding tables get no copy there and stay FP32:
// their row-sparse gradients go to the optimizer directly. It needs a
// training model and the bfloat16 dtype.
func SplitMasterWeights(on bool) Option { return func(c *config) { c.splitMasters = &on } }

// WithOptimizer hands Optimize the optimizer of a training model, made over
// the model's float32 parameters. For BF16 training Optimize returns the
// optimizer to use from then on (Optimized.Optimizer), of the same kind,
// with the same groups, hyper-parameters and state. With split master
// weights the one given is spent (optim.Splittable's SplitWith: it lets go
// of the FP32 parameters so that each is freed as soon as it is split, and
// its methods panic afterwards); learning-rate schedulers should be
// attached to the returned one. For FP32 training the optimizer is returned as it is:
// channels-last reorders the parameters in place, and the optimizers'
// state follows. Training models only.
func WithOptimizer(opt optim.Optimizer) Option {
	return func(c *config) { c.opt, c.optSet = opt, true }
}

// Optimized is what Optimize did to a model.
type Optimized struct {
	// Model is the module given to Optimize, rewritten in place.
	Model nn.Module
	// Optimizer is the optimizer to step: the one given to WithOptimizer,
	// or its BF16 replacement; nil without one.
	Optimizer optim.Optimizer
	// Split holds the low halves of the split master weights of a model
	// trained in BF16 with SplitMasterWeights on, else nil. Its
	// StateDict has the FP32 values.
	Split *amp.SplitModel
	// MasterCopies lists the FP32 masters and their bfloat16 copies of a
	// model trained in BF16 with SplitMasterWeights off, else nil.
	MasterCopies []amp.NamedMasterCopy
	// Applied describes each rewrite made, in order, e.g.
	// "FoldBatchNorm: 20 pairs folded"; each entry starts with the name of
	// the option that asks for it.
	Applied []string
}

// StateDict returns the model's state dict with FP32 values for weights
// trained in BF16 (the joined splits or the masters), the file the FP32
// model would save; for an evaluation model cast to BF16 it holds the
// bfloat16 weights, the FP32 ones being gone.
func (o *Optimized) StateDict() []nn.NamedTensor {
	if o.Split != nil {
		return o.Split.StateDict()
	}
	sd := nn.StateDict(o.Model)
	masters := map[*autograd.Tensor]*autograd.Tensor{}
	for _, mc := range o.MasterCopies {
		masters[mc.Param.Copy] = mc.Param.Master
	}
	for i, nt := range sd {
		if m, ok := masters[nt.Tensor]; ok {
			sd[i].Tensor = m
		}
	}
	return sd
}

// Optimize prepares model for fast CPU inference or training in one call,
// like IPEX's ipex.optimize. The model's training flag chooses the mode: an
// evaluation model (nn.Eval) gets the inference rewrites, BatchNorm
// folding, dropout removal, channels-last weights, the BF16 cast and
// weight prepacking, in that order; a training model gets channels-last weights and,
// with DType(autograd.BFloat16), BF16 weights with FP32 masters and the
// matching fused optimizer. The level (O1 by default) turns on every
// rewrite that applies to the mode; options set knobs one by one.
//
// The model is changed in place, keeping the identity of every tensor it
// does not replace. An option that does not apply to the model's mode or to
// the other options is an error rather than a silent no-op: FoldBatchNorm,
// RemoveDropout, Prepack and DType-cast need an evaluation model, WithOptimizer and
// SplitMasterWeights a training one, SplitMasterWeights the bfloat16 dtype,
// and BF16 training the optimizer. These checks, and the optimizer's kind,
// are checked before anything changes; a rewrite that fails itself (a
// BatchNorm pair nn.FoldBatchNorm cannot fold) returns its error with the
// rewrites before it left in place.
func Optimize(model nn.Module, opts ...Option) (*Optimized, error) {
	c := config{level: O1, dtype: autograd.Float32}
	for _, o := range opts {
		o(&c)
	}
	res, err := optimize(model, &c)
	if err != nil {
		return nil, fmt.Errorf("kiln: Optimize: %w", err)
	}
	return res, nil
}

func optimize(model nn.Module, c *config) (*Optimized, error) {
	if model == nil {
		return nil, errors.New("model is nil")
	}
	training := model.(interface{ Training() bool }).Training()
	if err := c.check(training); err != nil {
		return nil, err
	}
	if err := checkFloat32(model, c.dtype); err != nil {
		return nil, err
	}
	bf16 := c.dtype == autograd.BFloat16
	if training && bf16 && c.on(c.splitMasters) {
		if err := checkSplittable(c.opt); err != nil {
			return nil, err
		}
	}

	res := &Optimized{Model: model, Optimizer: c.opt}
	add := func(format string, args ...any) { res.Applied = append(res.Applied, fmt.Sprintf(format, args...)) }
	if !training {
		if c.on(c.fold) {
			n, err := nn.FoldBatchNorm(model)
			if err != nil {
				return nil, err
			}
			add("FoldBatchNorm: %s folded", count(n, "pair"))
		}
		if c.on(c.dropout) {
			add("RemoveDropout: %s removed", count(nn.RemoveDropout(model), "dropout layer"))
		}
	}
	if c.on(c.channelsLast) {
		add("ChannelsLast: %s reordered", count(toChannelsLast(model), "tensor"))
	}
	if !training {
		if bf16 {
			n, err := amp.CastModule(model, amp.AutocastParams)
			if err != nil {
				return nil, err
			}
			add("DType: %s cast to bfloat16", count(n, "convolution, linear or embedding tensor"))
		}
		if c.on(c.prepack) {
			add("Prepack: %s prepacked", count(prepackConvs(model), "convolution"))
		}
		return res, nil
	}
	if !bf16 {
		return res, nil
	}
	if !c.on(c.splitMasters) {
		mcs, err := amp.MasterCopyModule(model, amp.AutocastParams)
		if err != nil {
			return nil, err
		}
		res.MasterCopies = mcs
		res.Optimizer = &masterCopyOptimizer{Optimizer: c.opt, copies: mcs}
		add("SplitMasterWeights(false): %s given bfloat16 copies", count(len(mcs), "FP32 master"))
		return res, nil
	}
	// The optimizer lets go of the FP32 parameters while the model is
	// split, so each one is freed as soon as it is replaced.
	var sm *amp.SplitModel
	opt, err := c.opt.(optim.Splittable).SplitWith(model, func(m nn.Module) (*amp.SplitModel, error) {
		var err error
		sm, err = amp.SplitModuleFunc(m, amp.AutocastParams)
		return sm, err
	})
	if sm != nil {
		res.Split = sm
		add("SplitMasterWeights: %s split", count(len(sm.Params()), "parameter"))
	}
	if err != nil {
		return nil, err
	}
	res.Optimizer = opt
	add("WithOptimizer: %T rebuilt over the split parameters, state carried over", c.opt)
	return res, nil
}

// prepackConvs turns weight prepacking on for every convolution of model
// and returns how many there are.
func prepackConvs(model nn.Module) int {
	n := 0
	for _, nm := range nn.NamedModules(model) {
		if p, ok := nm.Module.(interface{ Prepack() }); ok {
			p.Prepack()
			n++
		}
	}
	return n
}

// on reports whether a knob is on: its explicit setting, else the level's.
func (c *config) on(knob *bool) bool {
	if knob != nil {
		return *knob
	}
	return c.level == O1
}

// check rejects options that do not apply to the model's mode or to each
// other.
func (c *config) check(training bool) error {
	bf16 := c.dtype == autograd.BFloat16
	switch {
	case c.level != O0 && c.level != O1:
		return fmt.Errorf("unknown level %v; want O0 or O1", c.level)
	case c.dtype != autograd.Float32 && !bf16:
		return fmt.Errorf("DType(%v) is not supported; want float32 or bfloat16", c.dtype)
	case training && c.fold != nil && *c.fold:
		return errors.New("FoldBatchNorm needs an evaluation model (nn.Eval): training would go on changing the statistics folded in")
	case training && c.dropout != nil && *c.dropout:
		return errors.New("RemoveDropout needs an evaluation model (nn.Eval): in training, dropout is not the identity")
	case !training && c.optSet:
		return errors.New("WithOptimizer needs a training model (nn.Train); the model is in evaluation mode, which Optimize prepares for inference")
	case c.optSet && c.opt == nil:
		return errors.New("WithOptimizer: optimizer is nil")
	case !training && c.splitMasters != nil:
		return errors.New("SplitMasterWeights needs a training model (nn.Train); for inference DType(autograd.BFloat16) casts the weights")
	case c.splitMasters != nil && !bf16:
		return fmt.Errorf("SplitMasterWeights needs DType(autograd.BFloat16); the dtype is %v, whose weights are their own masters", c.dtype)
	case training && c.prepack != nil && *c.prepack:
		return errors.New("Prepack needs an evaluation model (nn.Eval): packed weights do not follow optimizer steps")
	case c.prepack != nil && *c.prepack && c.channelsLast != nil && !*c.channelsLast:
		return errors.New("Prepack needs channels-last weights (ChannelsLast), the layout the packed panels are read from")
	case training && bf16 && !c.optSet:
		return errors.New("BF16 training needs the optimizer (WithOptimizer): it is rebuilt to update the FP32 master weights behind the bfloat16 ones")
	}
	return nil
}

// checkFloat32 returns an error naming the first parameter that
// amp.AutocastParams selects (convolution, linear, embedding) and that is
// not float32 when dtype is bfloat16: such a model was
// converted already, and converting it again would fail half-way.
func checkFloat32(model nn.Module, dtype autograd.DType) error {
	if dtype != autograd.BFloat16 {
		return nil
	}
	for _, nm := range nn.NamedModules(model) {
		for _, p := range nn.NamedParameters(nm.Module) {
			if amp.AutocastParams(nm, p.Name) && p.Tensor.DType() != autograd.Float32 {
				return fmt.Errorf("parameter %q is %v; DType(bfloat16) converts a float32 model (is it optimized already?)", join(nm.Name, p.Name), p.Tensor.DType())
			}
		}
	}
	return nil
}

// count returns "1 thing" or "n things".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// toChannelsLast reorders model's 4-D and 5-D tensors to channels-last and
// returns how many were not already.
func toChannelsLast(model nn.Module) int {
	n := 0
	for _, nt := range nn.StateDict(model) {
		switch t := nt.Tensor; {
		case t.NDim() == 4 && t.Format() != autograd.ChannelsLast,
			t.NDim() == 5 && t.Format() != autograd.ChannelsLast3d:
			n++
		}
	}
	nn.To(model, autograd.ChannelsLast)
	nn.To(model, autograd.ChannelsLast3d)
	return n
}

// checkSplittable returns an error naming opt's type unless it can make
// its split form (optim.Splittable).
func checkSplittable(opt optim.Optimizer) error {
	if _, ok := opt.(optim.Splittable); ok {
		return nil
	}
	return fmt.Errorf("WithOptimizer: cannot rebuild a %T over split BF16 master weights: it is not an optim.Splittable, as all of Kiln's optimizers are (or use SplitMasterWeights(false), which steps any optimizer)", opt)
}

// masterCopyOptimizer steps an FP32 optimizer over the masters of master
// copies: the model's backward pass fills the bfloat16 copies' gradients,
// which Step widens onto the masters before the update, refreshing the
// copies after it. Everything else (groups, learning rates, state dicts,
// all FP32) is the wrapped optimizer's.
type masterCopyOptimizer struct {
	optim.Optimizer
	copies []amp.NamedMasterCopy
}

// Step moves the copies' gradients to the masters, steps, and refreshes
// the copies.
func (o *masterCopyOptimizer) Step() {
	for _, nc := range o.copies {
		mc := nc.Param
		var g *autograd.Tensor
		if cg := mc.Copy.Grad(); cg != nil {
			g = autograd.Cast(cg.Detach(), autograd.Float32)
		}
		// A copy without a gradient leaves its master without one too, so
		// the optimizer skips it rather than reapplying an old gradient.
		mc.Master.SetGrad(g)
	}
	o.Optimizer.Step()
	for _, nc := range o.copies {
		nc.Param.Refresh()
	}
}

// ZeroGrad drops the gradients of the copies and of the optimizer's
// parameters.
func (o *masterCopyOptimizer) ZeroGrad() {
	o.Optimizer.ZeroGrad()
	for _, nc := range o.copies {
		nc.Param.Copy.ZeroGrad()
	}
}
