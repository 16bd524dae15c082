package graph

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kilnml/kiln/internal/shape"
	"github.com/kilnml/kiln/internal/tracing"
)

// NodeError reports a node that cannot run as it stands: an operand or
// result count, an attribute, or a shape that does not fit its op. Field
// names what is wrong ("inputs", "outputs[0].shape", "attrs.padding"); it
// is empty for a failure of the node as a whole.
type NodeError struct {
	Node  int
	Op    string
	Scope string
	Field string
	Err   error
}

func (e *NodeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph: node %d %q", e.Node, e.Op)
	if e.Scope != "" {
		fmt.Fprintf(&b, " (scope %s)", e.Scope)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Err.Error())
	return b.String()
}

func (e *NodeError) Unwrap() error { return e.Err }

// nodeError returns a NodeError for node i of g.
func (g *Graph) nodeError(i int, field string, err error) *NodeError {
	n := &g.Nodes[i]
	return &NodeError{Node: i, Op: n.Op, Scope: n.Scope, Field: field, Err: err}
}

// fieldError is an inference error that knows which field of the node is
// at fault; checkNodes moves the field into the NodeError.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func badField(field, format string, args ...any) error {
	return &fieldError{field, fmt.Errorf(format, args...)}
}

// opError is what graph's own op code panics with when a node's operands or
// attributes do not fit it, as autograd's ops panic with *autograd.Error:
// Run and Compile report it inside the node's *NodeError, and its Kind
// (autograd.ErrShape, ErrArgument, …) is reachable with errors.Is.
type opError struct {
	op, msg string
	kind    error
}

func (e *opError) Error() string { return e.op + ": " + e.msg }
func (e *opError) Unwrap() error { return e.kind }
func (e *opError) Misuse()       {}

// fail panics with an *opError of kind for op.
func fail(kind error, op, format string, args ...any) {
	panic(&opError{op: op, msg: fmt.Sprintf(format, args...), kind: kind})
}

// ErrMemoryBudget is wrapped by the error of a Compile or Run whose values
// would need more memory than its budget.
var ErrMemoryBudget = errors.New("memory budget exceeded")

// arity bounds a count: max < 0 is no upper bound.
type arity struct{ min, max int }

func exactly(n int) arity { return arity{n, n} }

func (a arity) allows(n int) bool { return n >= a.min && (a.max < 0 || n <= a.max) }

func (a arity) String() string {
	switch {
	case a.max < 0:
		return fmt.Sprintf("at least %d", a.min)
	case a.min == a.max:
		return strconv.Itoa(a.min)
	case a.max == a.min+1:
		return fmt.Sprintf("%d or %d", a.min, a.max)
	}
	return fmt.Sprintf("%d to %d", a.min, a.max)
}

// maxDim bounds every size, stride, padding or dilation an attribute may
// hold: no tensor has a dimension larger, and sums and products of a few
// such numbers stay far from overflowing an int.
const maxDim = shape.MaxElements

// decodeAttrs returns n's attributes as op's attribute struct (a []any
// of the parts' for a fused op), or the field at fault and what is wrong
// with it: an attribute the struct has that n lacks or holds as another
// kind, or an int beyond maxDim either way. The op's own checks of the
// values run with its type inference.
func decodeAttrs(op *opImpl, n *Node) (any, string, error) {
	if op.decode != nil {
		return op.decode(n)
	}
	if op.parts == nil {
		return decodeStruct(op.attrs, n.Attrs, "attrs.")
	}
	all := make([]any, len(op.parts))
	for k, p := range op.parts {
		prefix := "attrs."
		if k > 0 {
			prefix += p + "."
		}
		if impl, ok := opImpls[p]; ok {
			a, field, err := decodeStruct(impl.attrs, partAttrs(n, op.parts, k), prefix)
			if err != nil {
				return nil, field, err
			}
			all[k] = a
		}
	}
	return all, "", nil
}

func decodeStruct(t reflect.Type, attrs []Attr, prefix string) (any, string, error) {
	if t == nil {
		return nil, "", nil
	}
	fields, err := tracing.Fields(t)
	if err != nil {
		return nil, "attrs", err
	}
	v := reflect.New(t)
	for _, f := range fields {
		i := slices.IndexFunc(attrs, func(a Attr) bool { return a.Name == f.Name })
		kind := attrKindOf(f.Type)
		if i < 0 {
			return nil, prefix + f.Name, fmt.Errorf("missing (want %s)", attrKindNames[kind])
		}
		a := attrs[i]
		if _, ok := attrKindNames[a.Kind]; !ok {
			return nil, prefix + f.Name, fmt.Errorf("has unknown kind %d", int(a.Kind))
		}
		if a.Kind != kind {
			return nil, prefix + f.Name, fmt.Errorf("is %s, want %s", attrKindNames[a.Kind], attrKindNames[kind])
		}
		for _, x := range append([]int{a.Int}, a.Ints...) {
			if x < -maxDim || x > maxDim {
				return nil, prefix + f.Name, fmt.Errorf("%d is out of range [%d, %d]", x, -maxDim, maxDim)
			}
		}
		f.Set(v.Interface(), a.value())
	}
	return v.Elem().Interface(), "", nil
}

// checkNodes checks every node of g, which Validate has passed, against
// its op's definition: operand and result counts, absent operands,
// attributes, and the types of its results inferred from the types of the
// graph's inputs and constants. With declared set, each inferred shape
// must be the one g's values declare (a decoded file's IR, whose every
// value was written with its shape). It returns the nodes' definitions
// and every value's inferred type; the first node at fault fails it with a
// *NodeError. It allocates nothing sized by the graph's shapes.
func (g *Graph) checkNodes(declared bool) ([]nodeOp, []sig, error) {
	impls := make([]nodeOp, len(g.Nodes))
	for i := range g.Nodes {
		impl, err := g.checkNode(i)
		if err != nil {
			return nil, nil, err
		}
		impls[i] = impl
	}
	inputs := make([]sig, len(g.Inputs))
	for i, v := range g.Inputs {
		inputs[i] = g.Values[v].sig()
	}
	types, err := g.inferTypes(impls, inputs, func(i, j int, s sig) error {
		o := g.Values[g.Nodes[i].Outputs[j]]
		if declared && !slices.Equal(s.shape, o.Shape) {
			return g.nodeError(i, fmt.Sprintf("outputs[%d].shape", j),
				fmt.Errorf("%s is declared %v, the op gives %v", o.Name, o.Shape, s.shape))
		}
		// A dtype the op does not give is a file whose quantization
		// disagrees with itself (a Quantize to int8 declared uint8), or
		// one edited by hand.
		if declared && s.dtype != o.DType {
			return g.nodeError(i, fmt.Sprintf("outputs[%d].dtype", j),
				fmt.Errorf("%s is declared %v, the op gives %v", o.Name, o.DType, s.dtype))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return impls, types, nil
}

// checkNode checks node i's counts and attributes and returns its op.
func (g *Graph) checkNode(i int) (nodeOp, error) {
	n := &g.Nodes[i]
	impl, err := lookupOp(n.Op)
	if err != nil {
		return nodeOp{}, g.nodeError(i, "op", err)
	}
	if !impl.ins.allows(len(n.Inputs)) {
		return nodeOp{}, g.nodeError(i, "inputs", fmt.Errorf("got %d, want %v", len(n.Inputs), impl.ins))
	}
	if !impl.outs.allows(len(n.Outputs)) {
		return nodeOp{}, g.nodeError(i, "outputs", fmt.Errorf("got %d, want %v", len(n.Outputs), impl.outs))
	}
	for j, v := range n.Inputs {
		if v == None && !slices.Contains(impl.optional, j) && !slices.Contains(impl.optional, j-len(n.Inputs)) {
			return nodeOp{}, g.nodeError(i, fmt.Sprintf("inputs[%d]", j), errors.New("is none, the op needs it"))
		}
	}
	attrs, field, err := decodeAttrs(impl, n)
	if err != nil {
		return nodeOp{}, g.nodeError(i, field, err)
	}
	return nodeOp{impl, attrs}, nil
}

// inferTypes returns the type of every value of g when its inputs have the
// types inputs, calling each (if not nil) with every node result's type as
// it is inferred.
func (g *Graph) inferTypes(impls []nodeOp, inputs []sig, each func(i, j int, s sig) error) ([]sig, error) {
	types := make([]sig, len(g.Values))
	for i, v := range g.Inputs {
		types[v] = inputs[i]
	}
	for v := range g.Consts {
		types[v] = g.Values[v].sig()
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		ins := make([]*sig, len(n.Inputs))
		for j, v := range n.Inputs {
			if v != None {
				ins[j] = &types[v]
			}
		}
		outs, err := impls[i].infer(impls[i].attrs, ins)
		if err == nil && len(outs) != len(n.Outputs) {
			err = badField("outputs", "got %d, the op gives %d", len(n.Outputs), len(outs))
		}
		if err == nil {
			for j := range outs {
				if _, err = shape.Numel(outs[j].shape); err != nil {
					err = badField(fmt.Sprintf("outputs[%d].shape", j), "%w", err)
					break
				}
			}
		}
		if err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return nil, g.nodeError(i, fe.field, fe.err)
			}
			// An op's own check may fault its attributes or its
			// operands; its message says which.
			field := "inputs"
			if impls[i].attrs != nil || impls[i].parts != nil {
				field = ""
			}
			return nil, g.nodeError(i, field, err)
		}
		for j, o := range n.Outputs {
			types[o] = outs[j]
			if each != nil {
				if err := each(i, j, outs[j]); err != nil {
					return nil, err
				}
			}
		}
	}
	return types, nil
}

func (v *Value) sig() sig { return sig{dtype: v.DType, format: v.Format, shape: v.Shape} }

// valueBytes is the memory the values of types other than constants take
// at once: all of them, as the eager run that plans a graph holds every
// value until it ends; the plan's buffers, shared by lifetime, need no
// more than that again.
func (g *Graph) valueBytes(types []sig) (int, error) {
	total := 0
	for v, t := range types {
		if g.IsConst(v) {
			continue
		}
		b, err := shape.Bytes(t.shape, t.dtype.Size())
		if err != nil {
			return 0, fmt.Errorf("graph: value %s: %w", g.Values[v].Name, err)
		}
		if total > math.MaxInt-b {
			return 0, fmt.Errorf("graph: the values need more bytes than an int counts: %w", ErrMemoryBudget)
		}
		total += b
	}
	return total, nil
}

// checkBudget fails when twice the values' memory (the eager run's and
// the plan's) exceeds budget bytes.
func (g *Graph) checkBudget(types []sig, budget int) error {
	b, err := g.valueBytes(types)
	if err != nil {
		return err
	}
	if b > budget/2 {
		return fmt.Errorf("graph: planning needs about %d bytes (twice the values' %d), more than the budget of %d: %w", 2*b, b, budget, ErrMemoryBudget)
	}
	return nil
}

// fallbackMemory is the default budget where the machine's memory cannot
// be read.
const fallbackMemory = 64 << 30

// machineMemory is the default memory budget: the machine's memory
// (MemTotal of /proc/meminfo on Linux), else fallbackMemory.
var machineMemory = sync.OnceValue(func() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallbackMemory
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// MemTotal:       24516092 kB
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			if kb, err := strconv.Atoi(fields[1]); err == nil && kb > 0 && kb < math.MaxInt/1024 {
				return kb * 1024
			}
		}
	}
	return fallbackMemory
})
