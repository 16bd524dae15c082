package graph

import (
	"slices"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/opbind"
	"github.com/kilnml/kiln/kernels"
)

// The compiled forms of the ops: each binds a node to the plan's storage
// and returns the function that computes it there. Most are the kernel
// bindings autograd defines in internal/opbind, the very functions its
// eager ops run on the results they allocate, so a compiled run gives the
// eager run's bits by construction; this file composes fused ops from
// them and holds the forms of the ops that Freeze's fusion makes. A
// form returns nil for operands it does not take (a mix of memory
// formats, a broadcast it does not cover); the node then runs eagerly.
// Scratch a form needs is allocated when it compiles, never when it runs.

// compileCtx is what the plan knows of a node beyond its operands' types.
type compileCtx struct {
	// consts[j] reports whether operand j is a graph constant, which
	// the form may prepare once (pack, reorder) when it compiles.
	consts []bool
}

// compileFunc is a compiled form. It may panic with an *autograd.Error
// for operands the op rejects.
type compileFunc func(c *compileCtx, op nodeOp, ins, outs []*autograd.Tensor) func()

// compileOp returns op's compiled form on ins and outs, or nil.
func compileOp(c *compileCtx, op nodeOp, ins, outs []*autograd.Tensor) func() {
	if op.compile == nil {
		return nil
	}
	return op.compile(c, op, ins, outs)
}

// bindCompiled is the compiled form that is b, an op's kernel binding,
// which its eager op runs too; nil for none.
func bindCompiled(b func(attrs any, ins, outs []*autograd.Tensor, consts []bool) func()) compileFunc {
	if b == nil {
		return nil
	}
	return func(c *compileCtx, op nodeOp, ins, outs []*autograd.Tensor) func() {
		return b(op.attrs, ins, outs, c.consts)
	}
}

// bind returns the function op's binder binds over ins and outs with
// attrs, or nil where op has none or it declines the operands.
func bind(op string, attrs any, ins, outs []*autograd.Tensor, consts []bool) func() {
	d, _ := opbind.Lookup[*autograd.Tensor, autograd.TensorType](op)
	if d.Bind == nil {
		return nil
	}
	return d.Bind(attrs, ins, outs, consts)
}

// scratch returns plan-time storage of the given type.
func scratch(dtype autograd.DType, shape []int, f autograd.MemoryFormat) *autograd.Tensor {
	s := autograd.Empty(dtype, shape...)
	s.SetFormat(f)
	return s
}

// runAll returns a function calling each of fns, or nil when one is nil.
func runAll(fns []func()) func() {
	for _, f := range fns {
		if f == nil {
			return nil
		}
	}
	return func() {
		for _, f := range fns {
			f()
		}
	}
}

// compileFused compiles a fused node as its parts in sequence in the
// node's result: the first part's compiled form writes it, then each
// later part rewrites it in place with its kernel. That needs the first
// part's result to have the node's type, which its eager form (run here
// once) tells.
func compileFused(c *compileCtx, op nodeOp, ins, outs []*autograd.Tensor) func() {
	names, attrs := op.parts, op.attrs.([]any)
	first := opImpls[names[0]]
	if first.compile == nil || len(outs) != 1 {
		return nil
	}
	parts := fusedParts(names, len(ins))
	y := outs[0]
	k := len(parts[0])
	r := first.eager(attrs[0], ins[:k])
	if len(r) != 1 {
		return nil
	}
	// The running result: y itself, or, where a bfloat16 chain widens to
	// float32 (a LayerNorm or Softmax that took autocast's cast in, an Add
	// of a float32 operand), bfloat16 scratch of y's shape and layout
	// until the part that widens.
	run, widenAt := y, len(parts)
	if !sigOf(r[0]).equal(sigOf(y)) {
		widenAt = 1
		for ; widenAt < len(parts); widenAt++ {
			p := names[widenAt]
			if p == "LayerNorm" || p == "Softmax" || (p == "Add" && ins[parts[widenAt][1]].DType() == autograd.Float32) {
				break
			}
		}
		ry := r[0]
		if widenAt == len(parts) || ry.DType() != autograd.BFloat16 || y.DType() != autograd.Float32 ||
			ry.Format() != y.Format() || !slices.Equal(ry.Shape(), y.Shape()) {
			return nil
		}
		run = scratch(autograd.BFloat16, y.Shape(), y.Format())
	}
	if fn := compileConvFused(c, names, attrs, parts, ins, y); fn != nil {
		return fn
	}
	fns := []func(){compileOp(&compileCtx{consts: c.consts[:k]}, nodeOp{first, attrs[0]}, ins[:k], []*autograd.Tensor{run})}
	for i := 1; i < len(parts); i++ {
		if i == widenAt {
			rd, yd := run.BFloat16s(), y.Float32s()
			fns = append(fns, func() { kernels.BF16ToF32(yd, rd) })
			run = y
		}
		extra := make([]*autograd.Tensor, len(parts[i])-1)
		for j, at := range parts[i][1:] {
			extra[j] = ins[at]
		}
		f := compileEpilogue(names[i], attrs[i], run, extra)
		if f == nil {
			return nil
		}
		fns = append(fns, f)
	}
	return runAll(fns)
}

// compileConvFused compiles a Conv2d/Conv3d followed by an Add of a
// tensor like its result and/or one activation as one convolution whose
// kernel adds and activates each output block while it is in cache, where
// the convolution's binder takes them (opbind.Fused), or returns nil.
func compileConvFused(c *compileCtx, names []string, attrs []any, parts [][]int, ins []*autograd.Tensor, y *autograd.Tensor) func() {
	if (names[0] != "Conv2d" && names[0] != "Conv3d") || len(names) > 3 {
		return nil
	}
	k := len(parts[0])
	f := opbind.Fused{Attrs: attrs[0]}
	cins := slices.Clone(ins[:k])
	rest := names[1:]
	if len(rest) > 0 && rest[0] == "Add" {
		f.Residual = true
		cins = append(cins, ins[parts[1][1]])
		rest = rest[1:]
	}
	switch len(rest) {
	case 0:
	case 1:
		f.Act, f.ActAttrs = rest[0], attrs[len(attrs)-1]
	default:
		return nil
	}
	return bind(names[0], f, cins, []*autograd.Tensor{y}, c.consts[:k])
}

// compileEpilogue returns the function applying a later part of a fused
// op, with attributes attrs, to y in place, with the extra operands extra.
func compileEpilogue(name string, attrs any, y *autograd.Tensor, extra []*autograd.Tensor) func() {
	switch name {
	case "AddScalar":
		return nil
	case "SigmoidMul":
		// y·sigmoid(y), as Mul(y, Sigmoid(y)): the sigmoid (rounded to
		// y's dtype) into scratch, then the product.
		s := scratch(y.DType(), y.Shape(), y.Format())
		return runAll([]func(){bind("Sigmoid", nil, []*autograd.Tensor{y}, []*autograd.Tensor{s}, nil),
			bind("Mul", nil, []*autograd.Tensor{y, s}, []*autograd.Tensor{y}, nil)})
	}
	// Any other part in place: its binding with y as its first operand
	// and its result (a binder reads such an operand through scratch
	// where its kernel needs one).
	return bind(name, attrs, append([]*autograd.Tensor{y}, extra...), []*autograd.Tensor{y}, nil)
}

// compileChannelShuffle copies x into y with channel c = i·(C/g) + j of x
// landing at j·g + i, one strided copy over x's [N, g, C/g, …] view: the
// element moves of the eager Reshape/Permute/Reshape chain without its
// intermediate copies. That view has no dense layout for a channels-last
// x, so it is not Permute's binder on reshaped operands.
func compileChannelShuffle(_ *compileCtx, op nodeOp, ins, outs []*autograd.Tensor) func() {
	x, y := ins[0], outs[0]
	g := op.attrs.(channelShuffleAttrs).Groups
	shape := x.Shape()
	if len(shape) < 2 || g <= 0 || shape[1]%g != 0 {
		return nil
	}
	xs, ys := x.Strides(), y.Strides()
	view := append([]int{shape[0], g, shape[1] / g}, shape[2:]...)
	src := append([]int{xs[0], shape[1] / g * xs[1], xs[1]}, xs[2:]...)
	dst := append([]int{ys[0], ys[1], g * ys[1]}, ys[2:]...)
	if x.DType() != y.DType() {
		return nil
	}
	switch yd := y.Data().(type) {
	case []float32:
		xd := x.Float32s()
		return func() { kernels.StridedCopy(yd, xd, view, dst, src) }
	case []uint16:
		xd := x.BFloat16s()
		return func() { kernels.StridedCopyBF16(yd, xd, view, dst, src) }
	}
	return nil
}

// compileLinearConcat runs the one product into plan-time scratch and
// splits it into the outputs, as the eager Linear then SplitSizes do.
func compileLinearConcat(c *compileCtx, _ nodeOp, ins, outs []*autograd.Tensor) func() {
	x, w := ins[0], ins[1]
	if w.NDim() != 2 || len(outs) == 0 {
		return nil
	}
	shape := append(x.Shape()[:x.NDim()-1], w.Dim(0))
	product := autograd.Empty(outs[0].DType(), shape...)
	gemm := bind("Linear", nil, ins, []*autograd.Tensor{product}, c.consts)
	split := bind("Split", splitAttrs(nil, len(shape)-1), []*autograd.Tensor{product}, outs, nil)
	if gemm == nil || split == nil {
		return nil
	}
	return func() {
		gemm()
		split()
	}
}
