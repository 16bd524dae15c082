package graph

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/kilnml/kiln/autograd"
)

// opImpl is one kind of node: what a node of it must look like, and how
// the graph runs it. Decode and Compile check every node against ins,
// outs, optional and attrs (check.go) before anything sized by the graph is
// allocated, so the functions below only ever see operands and attributes
// of the counts and types they index.
type opImpl struct {
	name string
	// ins and outs bound the node's operand and result counts; absent
	// operands (None) count.
	ins, outs arity
	// optional lists the operands that may be None, by position, or
	// counting from the end when negative (-1 is the last): a fused op's
	// later parts' operands sit at fixed distances from its end.
	optional []int
	// attrs is the type of the op's attribute struct, nil for none: a
	// node's attributes are decoded into it (decodeAttrs), and the
	// functions below take that value. A fused op, made of the ops parts
	// names, takes a []any of its parts' attributes.
	attrs reflect.Type
	parts []string
	// decode, when set, decodes a node's attributes in place of attrs
	// and parts, returning the field at fault on failure: the int8
	// layers' parts carry attributes their float ops lack.
	decode func(n *Node) (any, string, error)
	// infer gives the types of the node's results from its operands'
	// (nil for None), failing where the op would: the shapes Decode
	// checks the IR's against, and the sizes a plan's memory is bounded
	// by before it allocates.
	infer func(attrs any, ins []*sig) ([]sig, error)
	// eager computes the node's results with autograd ops, allocating them.
	// It is the reference: every faster path must match it bit for bit,
	// and it runs any node that has no compiled form (ops_compile.go).
	// Bad operands or attributes panic with an *autograd.Error.
	eager func(attrs any, ins []*autograd.Tensor) []*autograd.Tensor
	// compile is the op's compiled form (ops_compile.go), nil for none.
	compile compileFunc
	// source is the *autograd.Function a registered op was made from.
	source any
}

// nodeOp is a node's op with the node's attributes decoded.
type nodeOp struct {
	*opImpl
	attrs any
}

var opImpls = map[string]*opImpl{}

func registerOp(impl *opImpl) {
	if _, dup := opImpls[impl.name]; dup {
		panic("graph: op " + impl.name + " registered twice")
	}
	opImpls[impl.name] = impl
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
	if strings.HasPrefix(op, "Dequantize"+FusedSep) {
		return int8LayerImpl(op)
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
	impl := &opImpl{name: strings.Join(parts, FusedSep), ins: first.ins, outs: arity{1, 1}, parts: parts,
		eager: fusedEager(parts), compile: compileFused}
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
		// Operand j of the part is its extra j-1 (operand 0 is the
		// running result).
		if later, ok := opImpls[p]; ok {
			for _, j := range later.optional {
				if j >= 1 {
					impl.optional = append(impl.optional, j-1-fromEnd)
				}
			}
		}
	}
	impl.infer = func(attrs any, ins []*sig) ([]sig, error) {
		var y []sig
		for i, part := range fusedParts(parts, len(ins)) {
			if parts[i] == "SigmoidMul" {
				continue
			}
			args := make([]*sig, len(part))
			for j, k := range part {
				if k < 0 {
					args[j] = &y[0]
				} else {
					args[j] = ins[k]
				}
			}
			r, err := opImpls[parts[i]].infer(attrs.([]any)[i], args)
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

// fusedParts gives the operands of each part of a fused op with n
// operands, as positions in its operands (-1 for the running result).
func fusedParts(parts []string, n int) [][]int {
	out := make([][]int, len(parts))
	first := n
	for _, p := range parts[1:] {
		first -= fusedExtra[p]
	}
	for i := range first {
		out[0] = append(out[0], i)
	}
	next := first
	for i, p := range parts[1:] {
		out[i+1] = []int{-1}
		for range fusedExtra[p] {
			out[i+1] = append(out[i+1], next)
			next++
		}
	}
	return out
}

// partAttrs are the attributes of part k of fused node n under their own
// names: a later part's carry its name and a dot.
func partAttrs(n *Node, parts []string, k int) []Attr {
	var out []Attr
	for _, a := range n.Attrs {
		at := 0
		if dot := strings.IndexByte(a.Name, '.'); dot > 0 {
			if j := slices.Index(parts[1:], a.Name[:dot]); j >= 0 {
				at = j + 1
				a.Name = a.Name[dot+1:]
			}
		}
		if at == k {
			out = append(out, a)
		}
	}
	return out
}

func fusedEager(parts []string) func(attrs any, ins []*autograd.Tensor) []*autograd.Tensor {
	return func(attrs any, ins []*autograd.Tensor) []*autograd.Tensor {
		var y *autograd.Tensor
		for i, part := range fusedParts(parts, len(ins)) {
			args := make([]*autograd.Tensor, len(part))
			for j, k := range part {
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
			y = opImpls[parts[i]].eager(attrs.([]any)[i], args)[0]
		}
		return []*autograd.Tensor{y}
	}
}
