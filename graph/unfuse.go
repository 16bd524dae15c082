package graph

import (
	"fmt"
	"slices"

	"github.com/kilnml/kiln/autograd"
)

// Unfuse returns g with every fused node split back into the nodes it was
// made of: a chain ("Conv2d+Add+ReLU") into one node per part, each later
// part reading the one before (SigmoidMul into a Sigmoid and a Mul), and
// a LinearConcat into one Linear per result, with its rows of the
// concatenated weight and bias as constants of their own. ChannelShuffle
// nodes stay: no pass looks inside them. The result computes what g
// computes, with the numerics of the fused ops' decomposed forms; it is
// what quantization calibrates, since it must see every op the trace
// recorded. g itself is not changed.
func Unfuse(g *Graph) (*Graph, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("graph.Unfuse: %w", err)
	}
	impls, _, err := g.checkNodes(false)
	if err != nil {
		return nil, fmt.Errorf("graph.Unfuse: %w", err)
	}
	u := g.Clone()
	u.Nodes = u.Nodes[:0]
	for i, n := range g.Nodes {
		switch {
		case impls[i].parts != nil:
			if err := splitChain(u, n, impls[i]); err != nil {
				return nil, fmt.Errorf("graph.Unfuse: %w", g.nodeError(i, "", err))
			}
		case n.Op == "LinearConcat":
			splitLinearConcat(u, n)
		default:
			u.Nodes = append(u.Nodes, n)
		}
	}
	compactValues(u)
	if err := u.Validate(); err != nil {
		return nil, fmt.Errorf("graph.Unfuse: %w", err)
	}
	return u, nil
}

// splitChain appends to u the parts of fused node n, whose op is op;
// each part but the last gets a new result value, of the type its op
// gives. Where the fused op widened a bfloat16 running result itself
// (autocast's cast before a LayerNorm or Softmax, type promotion's before
// an Add of a float32 tensor), a Cast to float32 comes back before the
// part.
func splitChain(u *Graph, n Node, op nodeOp) error {
	parts, attrs := op.parts, op.attrs.([]any)
	y := None
	for k, ops := range fusedParts(parts, len(n.Inputs)) {
		args := make([]int, len(ops))
		for j, o := range ops {
			if o < 0 {
				args[j] = y
			} else {
				args[j] = n.Inputs[o]
			}
		}
		if k > 0 && u.Values[y].DType == autograd.BFloat16 && widens(u, parts[k], args) {
			f := u.addResult(sig{dtype: autograd.Float32, shape: u.Values[y].Shape, format: u.Values[y].Format})
			u.Nodes = append(u.Nodes, Node{Op: "Cast", Inputs: []int{y}, Outputs: []int{f},
				Attrs: []Attr{StringAttr("dtype", autograd.Float32.String())}, Scope: n.Scope})
			y, args[0] = f, f
		}
		if parts[k] == "SigmoidMul" {
			s := u.addResult(u.Values[y].sig())
			out := n.Outputs[0]
			if k < len(parts)-1 {
				out = u.addResult(u.Values[y].sig())
			}
			u.Nodes = append(u.Nodes,
				Node{Op: "Sigmoid", Inputs: []int{y}, Outputs: []int{s}, Scope: n.Scope},
				Node{Op: "Mul", Inputs: []int{y, s}, Outputs: []int{out}, Scope: n.Scope})
			y = out
			continue
		}
		out := n.Outputs[0]
		if k < len(parts)-1 {
			ins := make([]*sig, len(args))
			for j, a := range args {
				if a != None {
					s := u.Values[a].sig()
					ins[j] = &s
				}
			}
			r, err := opImpls[parts[k]].infer(attrs[k], ins)
			if err != nil {
				return fmt.Errorf("part %d (%s): %w", k, parts[k], err)
			}
			out = u.addResult(r[0])
		}
		u.Nodes = append(u.Nodes, Node{Op: parts[k], Inputs: args, Outputs: []int{out}, Attrs: partAttrs(&n, parts, k), Scope: n.Scope})
		y = out
	}
	return nil
}

// widens reports whether a fused op's part op, on a bfloat16 running
// result, took it as float32: a LayerNorm or Softmax (autocast runs them
// in float32), or an Add of a float32 tensor.
func widens(u *Graph, op string, args []int) bool {
	switch op {
	case "LayerNorm", "Softmax":
		return true
	case "Add":
		return u.Values[args[1]].DType == autograd.Float32
	}
	return false
}

// addResult adds a value of type s for a node's result.
func (g *Graph) addResult(s sig) int {
	return g.AddValue(Value{Name: uniqueName(g, "%unfused"), Shape: slices.Clone(s.shape), DType: s.dtype, Format: s.format})
}

// splitLinearConcat appends to u one Linear per result of LinearConcat
// node n, each with its rows of n's weight and bias.
func splitLinearConcat(u *Graph, n Node) {
	x, w, b := n.Inputs[0], n.Inputs[1], n.Inputs[2]
	sizes := n.Ints("sizes")
	row := 0
	for j, size := range sizes {
		wj := u.AddConst(uniqueName(u, fmt.Sprintf("%s.%d", u.Values[w].Name, j)), sliceRows(u.Consts[w], row, row+size))
		bj := None
		if b != None {
			bj = u.AddConst(uniqueName(u, fmt.Sprintf("%s.%d", u.Values[b].Name, j)), sliceRows(u.Consts[b], row, row+size))
		}
		u.Nodes = append(u.Nodes, Node{Op: "Linear", Inputs: []int{x, wj, bj}, Outputs: []int{n.Outputs[j]}, Scope: n.Scope})
		row += size
	}
}

// sliceRows copies rows [from, to) of a contiguous float32 or bfloat16
// tensor: concatRows undone.
func sliceRows(t *autograd.Tensor, from, to int) *autograd.Tensor {
	shape := t.Shape()
	per := 1
	for _, d := range shape[1:] {
		per *= d
	}
	shape[0] = to - from
	if t.DType() == autograd.BFloat16 {
		return autograd.FromBFloat16(slices.Clone(t.BFloat16s()[from*per:to*per]), shape...)
	}
	return autograd.FromFloat32(slices.Clone(t.ContiguousFloat32s()[from*per:to*per]), shape...)
}
