package optim

import (
	"fmt"
	"sync/atomic"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// Every optimizer embeds a base over three types of its own: G, its
// exported parameter group (SGDGroup, …), O, a group's hyper-parameters
// (SGDOptions, …), and S, one parameter's state (its buffers and the kernel
// structs it steps with). The base owns what they all share: validating
// options and parameters, the groups and their learning rates, Group,
// ZeroGrad, Step's loop, the state dict and its loading, and the split-BF16
// form. The optimizer's file gives the maths: O's check and fields
// methods, S's saved-state methods (or a part shared by a family:
// momentum for SGD and LARS, moments for Adam and Lamb), the step of one
// parameter, its kind (newKind), and its constructors.

// options is what the base needs of an optimizer's options type O.
type options[O any] interface {
	*O
	// check returns what is wrong with the options, or "".
	check() string
	// fields lists the hyper-parameters under their state-dict names, in
	// the order they are read back; the first is the learning rate, "lr".
	fields() []field
}

// state is what the base needs of an optimizer's per-parameter state S.
// S may also have a method fresh(p *autograd.Tensor, o O) that sets up
// the state of a parameter with none saved (otherwise it is S's zero
// value), and O a method requires(saved map[string]*autograd.Tensor)
// string naming a state tensor that O's group needs and saved lacks.
type state[S any] interface {
	*S
	// names says whether the saved state includes "step", a one-element
	// step count, and names the other state tensors.
	names() (counted bool, names []string)
	// save returns the state tensors (the optimizer's own), or nil for a
	// parameter without state.
	save() map[string]*autograd.Tensor
	// load sets the state of parameter p from its saved tensors (checked
	// for names, dtypes and shapes; step is the checked step count when
	// counted), or returns the name of a tensor it needs and saved lacks.
	load(p *autograd.Tensor, saved map[string]*autograd.Tensor, step float32) (missing string)
}

// kind is one optimizer as the base sees it: its name, its step and its
// exported type, and the methods of O and S in the forms the base calls.
type kind[G, O, S any] struct {
	name string // "SGD", "AdamW", …: errors and method names start with it
	// step updates one parameter that has a dense or sparse gradient.
	step func(o *O, st *S, q param)
	// wrap returns b as the optimizer's exported type (*SGD, …).
	wrap func(b base[G, O, S]) Optimizer
	// at returns the parameters and options of a group of the exported
	// group type G (SGDGroup, …).
	at func(g *G) (*[]*autograd.Tensor, *O)

	check      func(o O) string
	fields     func(o *O) []field
	counted    bool
	stateNames []string
	fresh      func(p *autograd.Tensor, o O) S // nil: S's zero value
	save       func(st *S) map[string]*autograd.Tensor
	load       func(p *autograd.Tensor, saved map[string]*autograd.Tensor, step float32, o O) (S, string)
}

type freshener[O any] interface{ fresh(p *autograd.Tensor, o O) }

type requirer interface {
	requires(saved map[string]*autograd.Tensor) string
}

// newKind returns the kind of the optimizer called name.
func newKind[G, O, S any, PO options[O], PS state[S]](name string, step func(o *O, st *S, q param), wrap func(b base[G, O, S]) Optimizer, at func(g *G) (*[]*autograd.Tensor, *O)) *kind[G, O, S] {
	var zero S
	k := &kind[G, O, S]{
		name:   name,
		step:   step,
		wrap:   wrap,
		at:     at,
		check:  func(o O) string { return PO(&o).check() },
		fields: func(o *O) []field { return PO(o).fields() },
		save:   func(st *S) map[string]*autograd.Tensor { return PS(st).save() },
		load: func(p *autograd.Tensor, saved map[string]*autograd.Tensor, step float32, o O) (S, string) {
			var st S
			missing := PS(&st).load(p, saved, step)
			if r, ok := any(o).(requirer); ok && missing == "" {
				missing = r.requires(saved)
			}
			return st, missing
		},
	}
	k.counted, k.stateNames = PS(&zero).names()
	if _, ok := any(PS(&zero)).(freshener[O]); ok {
		k.fresh = func(p *autograd.Tensor, o O) S {
			var st S
			any(PS(&st)).(freshener[O]).fresh(p, o)
			return st
		}
	}
	return k
}

// field is one hyper-parameter of an options struct: a number, or a
// boolean that state dicts hold as 0 or 1.
type field struct {
	name string
	f    *float64
	b    *bool
}

// num and flag return the fields of a number and of a boolean.
func num(name string, f *float64) field { return field{name: name, f: f} }
func flag(name string, b *bool) field   { return field{name: name, b: b} }

// hyper returns o's hyper-parameters under their state-dict names.
func (k *kind[G, O, S]) hyper(o O) map[string]float64 {
	m := map[string]float64{}
	for _, h := range k.fields(&o) {
		if h.b != nil {
			m[h.name] = boolHyper(*h.b)
		} else {
			m[h.name] = *h.f
		}
	}
	return m
}

// read reads the options hyper writes.
func (k *kind[G, O, S]) read(r *hyperReader) O {
	var o O
	for _, h := range k.fields(&o) {
		if h.b != nil {
			*h.b = r.bool(h.name)
		} else {
			*h.f = r.float(h.name)
		}
	}
	return o
}

// param is one parameter as a kind's step sees it.
type param struct {
	*autograd.Tensor
	split        *amp.SplitParam // nil unless p is a split parameter's Top
	name         *string         // the optimizer's name, for errors
	group, index int32
}

// grad returns q's dense gradient for the kernels: in q's memory format
// for a float32 parameter (a gradient set by hand may differ from the
// format the tape gives a leaf), as it is for a split one (splitGrad
// converts it).
func (q param) grad() *autograd.Tensor { return q.formatted(q.Grad()) }

// formatted returns gradient g as grad describes.
func (q param) formatted(g *autograd.Tensor) *autograd.Tensor {
	if g != nil && q.split == nil && g.Format() != q.Format() {
		g = copyState(g, q.Tensor)
	}
	return g
}

// follow gives the state tensor *t q's memory format, making it (zeros)
// when it is nil, and reports whether it made it.
func (q param) follow(t **autograd.Tensor) bool {
	switch {
	case *t == nil:
		*t = zerosState(q.Tensor)
		return true
	case (*t).Format() != q.Format():
		(*t).SetFormat(q.Format())
	}
	return false
}

// base is an optimizer's groups and state; every optimizer embeds one.
type base[G, O, S any] struct {
	kind   *kind[G, O, S]
	groups []group[O, S]
	// stepped flags the fused tables (FuseSparse) updated since the last
	// Step or ZeroGrad; a backward pass updates tables concurrently, each
	// setting its own flag.
	stepped map[*autograd.Tensor]*atomic.Bool
	// spent says why the optimizer can no longer be used, once SplitWith
	// has handed its parameters over.
	spent string
}

type group[O, S any] struct {
	params  []*autograd.Tensor
	opts    O
	lr      *float64          // opts' learning rate
	splits  []*amp.SplitParam // per parameter, nil unless split
	state   []S               // per parameter
	initial initialLR
}

// initialLR is a group's param_group["initial_lr"], once a scheduler set it.
type initialLR struct {
	lr float64
	ok bool
}

// groupSpec is one parameter group as a constructor gets it.
type groupSpec[O any] struct {
	params []*autograd.Tensor
	opts   O
}

// newBase validates groups and returns their base. With sm (amp.SplitModule),
// the groups' bfloat16 parameters must be Tops of sm's split parameters.
func newBase[G, O, S any](k *kind[G, O, S], sm *amp.SplitModel, specs []groupSpec[O]) (base[G, O, S], error) {
	lists := make([][]*autograd.Tensor, len(specs))
	for g, gs := range specs {
		if msg := k.check(gs.opts); msg != "" {
			return base[G, O, S]{}, errorf(k.name, "group %d: %s", g, msg)
		}
		lists[g] = gs.params
	}
	splits, err := checkSplitParams(k.name, lists, sm)
	if err != nil {
		return base[G, O, S]{}, err
	}
	b := base[G, O, S]{kind: k, groups: make([]group[O, S], len(specs))}
	for g, gs := range specs {
		gr := &b.groups[g]
		gr.params = append([]*autograd.Tensor(nil), gs.params...)
		gr.opts, gr.splits, gr.state = gs.opts, splits[g], make([]S, len(gs.params))
		gr.lr = k.fields(&gr.opts)[0].f
		if k.fresh != nil {
			for i, p := range gr.params {
				gr.state[i] = k.fresh(p, gs.opts)
			}
		}
	}
	return b, nil
}

// build returns the optimizer of kind k over groups; sm is the split model
// of the Split constructors, which must not be nil when split is set.
func build[G, O, S any](k *kind[G, O, S], split bool, sm *amp.SplitModel, groups []G) (Optimizer, error) {
	if split && sm == nil {
		return nil, errorf(k.name, "split model is nil")
	}
	specs := make([]groupSpec[O], len(groups))
	for i := range groups {
		ps, o := k.at(&groups[i])
		specs[i].params, specs[i].opts = *ps, *o
	}
	b, err := newBase(k, sm, specs)
	if err != nil {
		return nil, err
	}
	return k.wrap(b), nil
}

// as returns o as the exported type T of its optimizer.
func as[T Optimizer](o Optimizer, err error) (T, error) {
	if err != nil {
		var none T
		return none, err
	}
	return o.(T), nil
}

// Step updates every parameter that has a gradient; parameters whose Grad
// and SparseGrad are nil are skipped, as in PyTorch.
func (b *base[G, O, S]) Step() {
	b.checkSpent("Step")
	b.clearStepped()
	for gi := range b.groups {
		g := &b.groups[gi]
		for i, p := range g.params {
			if p.Grad() == nil && p.SparseGrad() == nil {
				continue
			}
			b.kind.step(&g.opts, &g.state[i], param{Tensor: p, split: g.splits[i], name: &b.kind.name, group: int32(gi), index: int32(i)})
		}
	}
}

// clearStepped lowers the fused tables' flags.
func (b *base[G, O, S]) clearStepped() {
	for _, f := range b.stepped {
		f.Store(false)
	}
}

// ZeroGrad drops every parameter's gradient.
func (b *base[G, O, S]) ZeroGrad() {
	b.checkSpent("ZeroGrad")
	b.clearStepped()
	for _, g := range b.groups {
		for _, p := range g.params {
			p.ZeroGrad()
		}
	}
}

// NumGroups returns the number of parameter groups.
func (b *base[G, O, S]) NumGroups() int { return len(b.groups) }

// checkGroup panics with an *Error unless group indexes one of b's groups.
func (b *base[G, O, S]) checkGroup(method string, group int) {
	b.checkSpent(method)
	if group < 0 || group >= len(b.groups) {
		fail(b.kind.name+"."+method, "parameter group %d out of range [0, %d)", group, len(b.groups))
	}
}

// Group returns a copy of group's parameters and hyper-parameters.
func (b *base[G, O, S]) Group(group int) G {
	b.checkGroup("Group", group)
	var out G
	ps, o := b.kind.at(&out)
	*ps, *o = append([]*autograd.Tensor(nil), b.groups[group].params...), b.groups[group].opts
	return out
}

// LR returns group's learning rate.
func (b *base[G, O, S]) LR(group int) float64 {
	b.checkGroup("LR", group)
	return *b.groups[group].lr
}

// SetLR sets group's learning rate. Like PyTorch it does not validate lr;
// schedulers call it on every step.
func (b *base[G, O, S]) SetLR(group int, lr float64) {
	b.checkGroup("SetLR", group)
	*b.groups[group].lr = lr
}

// InitialLR returns group's initial learning rate, if a scheduler set one.
func (b *base[G, O, S]) InitialLR(group int) (float64, bool) {
	b.checkGroup("InitialLR", group)
	return b.groups[group].initial.lr, b.groups[group].initial.ok
}

// SetInitialLR records group's initial learning rate.
func (b *base[G, O, S]) SetInitialLR(group int, lr float64) {
	b.checkGroup("SetInitialLR", group)
	b.groups[group].initial = initialLR{lr, true}
}

// StateDict returns the optimizer's state: each parameter's state tensors
// (the optimizer's own) under the names its type documents, and each
// group's hyper-parameters with, once a scheduler set it, initial_lr.
func (b *base[G, O, S]) StateDict() *StateDict {
	b.checkSpent("StateDict")
	sd := &StateDict{State: map[int]map[string]*autograd.Tensor{}}
	id := 0
	for _, g := range b.groups {
		gs := GroupState{Hyper: b.kind.hyper(g.opts)}
		if g.initial.ok {
			gs.Hyper["initial_lr"] = g.initial.lr
		}
		for i := range g.params {
			if m := b.kind.save(&g.state[i]); m != nil {
				sd.State[id] = m
			}
			gs.Params = append(gs.Params, id)
			id++
		}
		sd.Groups = append(sd.Groups, gs)
	}
	return sd
}

// LoadStateDict replaces the hyper-parameters and state with copies of
// sd's, as PyTorch's load_state_dict does: groups and parameters
// correspond by position, and parameters without saved state start afresh.
// Loaded tensors take their parameter's memory format. Errors name the
// offending key (e.g. "state.3.exp_avg" or "param_groups.0.lr"), and
// nothing changes when there is one.
func (b *base[G, O, S]) LoadStateDict(sd *StateDict) error {
	b.checkSpent("LoadStateDict")
	k := b.kind
	lists := make([][]*autograd.Tensor, len(b.groups))
	groupOf := map[*autograd.Tensor]int{}
	for g := range b.groups {
		lists[g] = b.groups[g].params
		for _, p := range lists[g] {
			groupOf[p] = g
		}
	}
	var byID map[int]*autograd.Tensor
	var steps map[int]float32
	var err error
	if k.counted {
		byID, steps, err = checkLoadSteps(k.name, sd, lists, k.stateNames...)
	} else {
		byID, err = checkLoad(k.name, sd, lists, k.stateNames...)
	}
	if err != nil {
		return err
	}
	opts := make([]O, len(sd.Groups))
	initial := make([]initialLR, len(sd.Groups))
	for g, gs := range sd.Groups {
		r := newHyperReader(k.name, g, gs.Hyper)
		opts[g] = k.read(r)
		initial[g].lr, initial[g].ok = r.optional("initial_lr")
		if err := r.done(); err != nil {
			return err
		}
		if msg := k.check(opts[g]); msg != "" {
			return errorf(k.name, "group %d: %s (in param_groups.%d)", g, msg, g)
		}
	}
	states := map[*autograd.Tensor]S{}
	for _, id := range sortedKeys(sd.State) {
		saved := sd.State[id]
		if len(saved) == 0 {
			continue // a parameter not yet stepped
		}
		p := byID[id]
		st, missing := k.load(p, saved, steps[id], opts[groupOf[p]])
		if missing != "" {
			return errorf(k.name, "state.%d.%s: missing state", id, missing)
		}
		states[p] = st
	}
	for g := range b.groups {
		gr := &b.groups[g]
		gr.opts, gr.initial = opts[g], initial[g]
		for i, p := range gr.params {
			st, ok := states[p]
			if !ok && k.fresh != nil {
				st = k.fresh(p, gr.opts)
			}
			gr.state[i] = st
		}
	}
	return nil
}

// SplitForm returns an optimizer of the same kind over the split model sm
// (amp.SplitModule), with the same groups, hyper-parameters and state:
// each parameter p becomes swap(p), the bfloat16 Top of p's split
// parameter or p itself. Parameters keep their places and numbers.
func (b *base[G, O, S]) SplitForm(sm *amp.SplitModel, swap func(*autograd.Tensor) *autograd.Tensor) (Optimizer, error) {
	b.checkSpent("SplitForm")
	if sm == nil {
		return nil, errorf(b.kind.name, "split model is nil")
	}
	specs := make([]groupSpec[O], len(b.groups))
	for g, gr := range b.groups {
		specs[g].opts = gr.opts
		specs[g].params = make([]*autograd.Tensor, len(gr.params))
		for i, p := range gr.params {
			specs[g].params[i] = swap(p)
		}
	}
	return b.splitOver(sm, specs, b.StateDict())
}

// SplitWith splits m with split and returns the optimizer's split form
// over it, as SplitForm does. It lets go of its parameters before split
// runs, so that each FP32 original can be freed as soon as the split has
// replaced it, and finds them again in m by name afterwards. When split
// fails, the optimizer is as it was; otherwise it is spent.
func (b *base[G, O, S]) SplitWith(m nn.Module, split func(nn.Module) (*amp.SplitModel, error)) (Optimizer, error) {
	b.checkSpent("SplitWith")
	if m == nil || split == nil {
		return nil, errorf(b.kind.name, "SplitWith: the model or the split function is nil")
	}
	names := map[*autograd.Tensor]string{}
	for _, p := range nn.NamedParameters(m) {
		if _, ok := names[p.Tensor]; !ok {
			names[p.Tensor] = p.Name
		}
	}
	sd := b.StateDict()
	specs := make([]groupSpec[O], len(b.groups))
	named := make([][]string, len(b.groups))
	for g := range b.groups {
		gr := &b.groups[g]
		specs[g].opts = gr.opts
		specs[g].params = make([]*autograd.Tensor, len(gr.params))
		named[g] = make([]string, len(gr.params))
		for i, p := range gr.params {
			if n, ok := names[p]; ok {
				named[g][i] = n
				gr.params[i] = nil
			} else {
				specs[g].params[i] = p // not m's: kept FP32
			}
		}
	}
	clear(names)
	b.spent = "it is being split"
	sm, err := split(m)
	byName := map[string]*autograd.Tensor{}
	for _, p := range nn.NamedParameters(m) {
		byName[p.Name] = p.Tensor
	}
	fill := func(dst [][]*autograd.Tensor) {
		for g, ns := range named {
			for i, n := range ns {
				if n != "" {
					dst[g][i] = byName[n]
				}
			}
		}
	}
	if err != nil {
		// split changed nothing: the originals are where they were.
		lists := make([][]*autograd.Tensor, len(b.groups))
		for g := range b.groups {
			lists[g] = b.groups[g].params
		}
		fill(lists)
		b.spent = ""
		return nil, err
	}
	lists := make([][]*autograd.Tensor, len(specs))
	for g := range specs {
		lists[g] = specs[g].params
	}
	fill(lists)
	out, err := b.splitOver(sm, specs, sd)
	b.groups, b.spent = nil, "it was split (SplitWith): use the optimizer SplitWith returned"
	return out, err
}

// splitOver returns the optimizer of b's kind over specs, whose bfloat16
// parameters are sm's Tops, with the state sd.
func (b *base[G, O, S]) splitOver(sm *amp.SplitModel, specs []groupSpec[O], sd *StateDict) (Optimizer, error) {
	nb, err := newBase(b.kind, sm, specs)
	if err != nil {
		return nil, err
	}
	split := b.kind.wrap(nb)
	if err := split.LoadStateDict(sd); err != nil {
		return nil, fmt.Errorf("optim: %s: carrying the state over to the split form: %w", b.kind.name, err)
	}
	return split, nil
}

// checkSpent panics with an *Error when b was split by SplitWith.
func (b *base[G, O, S]) checkSpent(method string) {
	if b.spent != "" {
		fail(b.kind.name+"."+method, "this optimizer cannot be used: %s", b.spent)
	}
}
