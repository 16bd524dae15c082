package autograd

// Mode is how ops compute on a tensor: whether they record for Backward,
// whether BF16 autocast applies, which trace, if any, they report to, and
// which Arena, if any, their results take memory from.
//
// A mode belongs to a computation, not to the process or a goroutine: a
// tensor carries it, and every op's results carry the union of its
// operands' modes. A forward pass started from an input marked with NoGrad
// or Autocast therefore runs in that mode from end to end, while a
// training step in another goroutine, on the same parameters, runs as it
// would alone. Parameters and other tensors made by constructors carry the
// default mode: grad recorded, no autocast, no trace.
type Mode struct {
	noGrad   bool
	autocast bool
	trace    *traceSession
	arena    *Arena // where results take their memory; nil: the Go heap
	gen      uint64 // the arena's step the computation belongs to
}

// NoGrad reports whether ops in this mode skip recording, as under
// torch.no_grad.
func (m Mode) NoGrad() bool { return m.noGrad }

// Autocast reports whether ops in this mode follow the BF16 autocast
// policy (see Autocast).
func (m Mode) Autocast() bool { return m.autocast }

// Arena returns the Arena results in this mode take their memory from,
// nil for the Go heap. A model whose forward pass takes inputs besides
// the one a caller put in an arena (DLRM's lookups beside its dense
// features) puts them in the same arena with Arena.In, so that the whole
// computation's memory comes from it.
func (m Mode) Arena() *Arena { return m.arena }

// Tracing reports whether ops in this mode are being traced.
func (m Mode) Tracing() bool { return m.trace.active() }

// union is the mode of an op whose operands are in modes m and o.
func (m Mode) union(o Mode) Mode {
	m.noGrad = m.noGrad || o.noGrad
	m.autocast = m.autocast || o.autocast
	if !m.trace.active() {
		m.trace = nil
	}
	if !o.trace.active() {
		o.trace = nil
	}
	if m.trace == nil {
		m.trace = o.trace
	} else if o.trace != nil && o.trace != m.trace {
		Fail("Trace", "an op mixes tensors of two different traces")
	}
	if o.arena != nil {
		switch {
		case !o.live():
			failReset("Arena")
		case m.arena == nil:
			m.arena, m.gen = o.arena, o.gen
		case m.arena != o.arena:
			Fail("Arena", "an op mixes tensors of two arenas")
		}
	}
	if !m.live() {
		failReset("Arena")
	}
	return m
}

// modeOf is the mode of an op on ts: the union of their modes.
func modeOf(ts ...*Tensor) Mode {
	var m Mode
	for _, t := range ts {
		if t != nil {
			m = m.union(t.mode)
		}
	}
	return m
}

// Mode returns the mode ops on t compute in.
func (t *Tensor) Mode() Mode { return t.mode.union(Mode{}) }

// inMode returns a view of t (the same data, shape and format) carrying
// mode m added to t's own, cut off from the tape: the start of a
// computation in that mode.
func (t *Tensor) inMode(m Mode) *Tensor {
	v := t.detached()
	v.mode = t.mode.union(m)
	traceIdentity(t, v)
	return v
}

// NoGrad returns a view of t that starts a computation without gradient
// recording, like running under torch.no_grad: ops on it, and on every
// result computed from it, record nothing and their results require no
// gradient. The view shares t's data and is cut off from the tape; t
// itself is unchanged, so other computations on t (or on the parameters
// the forward pass meets) record as before.
//
//	out := model.Forward(autograd.NoGrad(x)) // inference
//
// The computation goes on for as long as its results are used: an op with
// any operand from it records nothing. To train on the results of a NoGrad
// forward (a frozen teacher's output in a student's loss, the features of
// a frozen backbone feeding a head), Detach them first: that ends the
// NoGrad computation. Backward on a loss that such a result made
// no-grad says so.
func NoGrad(t *Tensor) *Tensor {
	if t == nil {
		Fail("NoGrad", "tensor is nil")
	}
	return t.inMode(Mode{noGrad: true})
}

// Autocast returns a view of t that starts a computation under BF16
// autocast, like running under torch.autocast("cpu", dtype=torch.bfloat16):
// the ops of the policy (Linear, Matmul, BMM, Conv2d and Conv3d) cast
// float32 operands to bfloat16 (rounding to nearest even, differentiably,
// so gradients reach float32 parameters in float32) and compute in BF16
// with float32 accumulation, giving bfloat16 results; layer norm, softmax
// and losses cast bfloat16 inputs to float32 and compute in float32; batch
// norm computes in float32 with float32 parameters but keeps a bfloat16
// input's dtype for its result, as PyTorch's CPU autocast does; every
// other op runs in its input dtype. Gradients still flow to t's leaves
// unless t is also marked with NoGrad. amp.Autocast is the public front
// door.
func Autocast(t *Tensor) *Tensor {
	if t == nil {
		Fail("Autocast", "tensor is nil")
	}
	v := t.inMode(Mode{autocast: true})
	// Autocast marks the computation, not the tensor's place on the tape:
	// gradients flow through the view to t.
	if t.requiresGrad && !t.mode.noGrad {
		return record("Autocast", v, []*Tensor{t}, func(g *Tensor) []*Tensor { return []*Tensor{g} })
	}
	return v
}

// autocastBF16 returns t cast to bfloat16 when m is an autocast mode and t
// is float32, else t. The cast runs in m, so a trace sees it.
func autocastBF16(m Mode, t *Tensor) *Tensor {
	if t != nil && t.dtype == Float32 && m.autocast {
		return castIn(m, t, BFloat16)
	}
	return t
}

// autocastF32 returns t cast to float32 when m is an autocast mode and t is
// bfloat16, else t: the ops the policy keeps in float32 (layer norm,
// softmax, losses) take BF16 activations this way.
func autocastF32(m Mode, t *Tensor) *Tensor {
	if t != nil && t.dtype == BFloat16 && m.autocast {
		return castIn(m, t, Float32)
	}
	return t
}

// viaFloat32 runs a float32-only op f on a bfloat16 x by widening x
// (exactly), running f and rounding the result back to bfloat16, all
// differentiably: for ops like ReLU and pooling, whose results are some of
// their inputs or exact averages of few, this is what a native BF16 kernel
// would give, at the cost of two conversions. Other dtypes go straight to
// f.
func viaFloat32(x *Tensor, f func(x *Tensor) *Tensor) *Tensor {
	if x == nil || x.dtype != BFloat16 {
		return f(x)
	}
	return Cast(f(Cast(x, Float32)), BFloat16)
}
