package graph

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/autograd"
)

// opImpl is one kind of node: what a node of it must look like, and how
// the graph runs it. Decode and Compile check every node against the first
// four fields (check.go) before anything sized by the graph is allocated,
// so the eager form below only ever sees operands and attributes of the
// counts and kinds it indexes.
type opImpl struct {
	// ins and outs bound the node's operand and result counts; absent
	// operands (None) count.
	ins, outs arity
	// optional lists the operands that may be None, by position, or
	// counting from the end when negative (-1 is the last): a fused op's
	// later parts' operands sit at fixed distances from its end.
	optional []int
	// attrs are the attributes the op reads: each required, of its kind
	// and in its range. A node may carry others; they are not read.
	attrs []attrSpec
	// infer gives the types of the node's results from its operands'
	// (nil for None), failing where the op would: the shapes Decode
	// checks the IR's against, and the sizes a plan's memory is bounded
	// by before it allocates.
	infer func(n *Node, ins []*sig) ([]sig, error)
	// eager computes the node's results with autograd ops, allocating them.
	// It is the reference: every faster path must match it bit for bit,
	// and it runs any node that has no compiled form (ops_compile.go).
	// Bad operands or attributes panic with an *autograd.Error.
	eager func(n *Node, ins []*autograd.Tensor) []*autograd.Tensor
	// compile is a registered op's compiled form, nil for none; built-in
	// ops bind autograd's binders (internal/opbind) or keep theirs in
	// compilers.
	compile compileFunc
	// source is the *autograd.Function a registered op was made from.
	source any
}

var opImpls = map[string]*opImpl{}

func registerOp(name string, impl *opImpl) {
	if _, dup := opImpls[name]; dup {
		panic("graph: op " + name + " registered twice")
	}
	opImpls[name] = impl
}

// FusedSep joins the parts of a fused op's name: "Conv2d+Add+ReLU" is a
// Conv2d whose result goes through Add (with one more operand) and then
// ReLU. A fused node's inputs are the first part's inputs followed by the
// extra operands of the later parts in order; the later parts' attributes
// carry their part's name and a dot ("HardTanh.min_val"). Its decomposed
// form runs the parts one after another, each later part taking the
// running result as its first operand.
const FusedSep = "+"

// fusedExtra is how many operands besides the running result each kind of
// later part of a fused op takes.
var fusedExtra = map[string]int{
	"ReLU": 0, "Sigmoid": 0, "Tanh": 0, "SiLU": 0, "HardTanh": 0, "ELU": 0, "GELU": 0,
	"Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Softmax": 0, "LayerNorm": 2,
	// SigmoidMul is y·sigmoid(y) of the running result y (Conv2d+Sigmoid+Mul).
	"SigmoidMul": 0,
}

// lookupOp finds the implementation of op, building the decomposed form
// of a fused op name from its parts.
func lookupOp(op string) (*opImpl, error) {
	if impl, ok := opImpls[op]; ok {
		return impl, nil
	}
	if impl, ok := customOp(op); ok {
		return impl, nil
	}
	if !strings.Contains(op, FusedSep) {
		return nil, fmt.Errorf("%w %q (an op added with autograd.Function must be registered with graph.Register in the process that loads or runs the graph)", ErrUnknownOp, op)
	}
	parts := strings.Split(op, FusedSep)
	if _, ok := opImpls[parts[0]]; !ok {
		return nil, fmt.Errorf("fused op %q: unknown first part %q", op, parts[0])
	}
	for _, p := range parts[1:] {
		if _, ok := fusedExtra[p]; !ok {
			return nil, fmt.Errorf("fused op %q: %q cannot follow another op", op, p)
		}
		if p != "SigmoidMul" {
			if _, ok := opImpls[p]; !ok {
				return nil, fmt.Errorf("fused op %q: unknown part %q", op, p)
			}
		}
	}
	return fusedImpl(parts), nil
}

// fusedImpl is the definition of the fused op whose parts are parts: the
// first part's operands followed by each later part's extras, each part's
// attributes (a later part's under its name and a dot), the parts' types
// inferred in turn.
func fusedImpl(parts []string) *opImpl {
	first := opImpls[parts[0]]
	impl := &opImpl{ins: first.ins, outs: arity{1, 1}, attrs: first.attrs, eager: fusedEager(parts)}
	for _, j := range first.optional {
		if j >= 0 {
			impl.optional = append(impl.optional, j)
		}
	}
	// The extras of later parts, counted back from the end.
	fromEnd := 0
	for i := len(parts) - 1; i > 0; i-- {
		p := parts[i]
		fromEnd += fusedExtra[p]
		impl.ins.min += fusedExtra[p]
		if impl.ins.max >= 0 {
			impl.ins.max += fusedExtra[p]
		}
		later, ok := opImpls[p]
		if !ok {
			continue
		}
		for _, a := range later.attrs {
			a.name = p + "." + a.name
			impl.attrs = append(impl.attrs, a)
		}
		// Operand j of the part is its extra j-1 (operand 0 is the
		// running result).
		for _, j := range later.optional {
			if j >= 1 {
				impl.optional = append(impl.optional, j-1-fromEnd)
			}
		}
	}
	impl.infer = func(n *Node, ins []*sig) ([]sig, error) {
		var y []sig
		for i, part := range fusedParts(n) {
			args := make([]*sig, len(part.Inputs))
			for j, k := range part.Inputs {
				if k < 0 {
					args[j] = &y[0]
				} else {
					args[j] = ins[k]
				}
			}
			if parts[i] == "SigmoidMul" {
				continue
			}
			r, err := opImpls[parts[i]].infer(&part, args)
			if err != nil {
				return nil, fmt.Errorf("part %d (%s): %w", i, parts[i], err)
			}
			if len(r) != 1 {
				return nil, fmt.Errorf("part %d (%s) gives %d results, a fused op one", i, parts[i], len(r))
			}
			y = r
		}
		return y, nil
	}
	return impl
}

// FusedParts splits a fused node into the nodes it stands for, with
// inputs given as positions in the fused node's inputs (-1 for the running
// result) and each part's own attribute names.
func fusedParts(n *Node) []Node {
	parts := strings.Split(n.Op, FusedSep)
	out := make([]Node, len(parts))
	first := len(n.Inputs)
	for _, p := range parts[1:] {
		first -= fusedExtra[p]
	}
	out[0] = Node{Op: parts[0], Scope: n.Scope}
	for i := 0; i < first; i++ {
		out[0].Inputs = append(out[0].Inputs, i)
	}
	next := first
	for i, p := range parts[1:] {
		part := Node{Op: p, Scope: n.Scope, Inputs: []int{-1}}
		for range fusedExtra[p] {
			part.Inputs = append(part.Inputs, next)
			next++
		}
		out[i+1] = part
	}
	for _, a := range n.Attrs {
		k := 0
		if dot := strings.IndexByte(a.Name, '.'); dot > 0 {
			for j := 1; j < len(parts); j++ {
				if parts[j] == a.Name[:dot] {
					k = j
					a.Name = a.Name[dot+1:]
					break
				}
			}
		}
		out[k].Attrs = append(out[k].Attrs, a)
	}
	return out
}

func fusedEager(parts []string) func(n *Node, ins []*autograd.Tensor) []*autograd.Tensor {
	return func(n *Node, ins []*autograd.Tensor) []*autograd.Tensor {
		var y *autograd.Tensor
		for i, part := range fusedParts(n) {
			args := make([]*autograd.Tensor, len(part.Inputs))
			for j, k := range part.Inputs {
				if k < 0 {
					args[j] = y
				} else {
					args[j] = ins[k]
				}
			}
			if parts[i] == "SigmoidMul" {
				y = autograd.Mul(y, autograd.Sigmoid(y))
				continue
			}
			y = opImpls[parts[i]].eager(&part, args)[0]
		}
		return []*autograd.Tensor{y}
	}
}
