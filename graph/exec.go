package graph

import (
	"fmt"

	"github.com/kilnml/kiln/autograd"
)

// Program is a graph ready to run.
type Program struct {
	g     *Graph
	impls []*opImpl
}

// Compile checks g and prepares it to run. Every node's op must be known.
func Compile(g *Graph) (*Program, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	p := &Program{g: g, impls: make([]*opImpl, len(g.Nodes))}
	for i := range g.Nodes {
		impl, err := lookupOp(g.Nodes[i].Op)
		if err != nil {
			return nil, fmt.Errorf("graph: node %d: %w", i, err)
		}
		p.impls[i] = impl
	}
	return p, nil
}

// Run computes the graph's outputs for inputs, which must match the
// graph's inputs in number and dtype.
func (p *Program) Run(inputs ...*autograd.Tensor) ([]*autograd.Tensor, error) {
	return p.runEager(inputs)
}

// runEager runs every node through its eager (autograd) form: the
// reference the planned executor is tested against.
func (p *Program) runEager(inputs []*autograd.Tensor) (outs []*autograd.Tensor, err error) {
	g := p.g
	if len(inputs) != len(g.Inputs) {
		return nil, fmt.Errorf("graph: got %d inputs, the graph takes %d", len(inputs), len(g.Inputs))
	}
	vals := make([]*autograd.Tensor, len(g.Values))
	for i, id := range g.Inputs {
		in := inputs[i]
		if in == nil {
			return nil, fmt.Errorf("graph: input %d (%s) is nil", i, g.Values[id].Name)
		}
		if in.DType() != g.Values[id].DType {
			return nil, fmt.Errorf("graph: input %d (%s) has dtype %v, the graph takes %v", i, g.Values[id].Name, in.DType(), g.Values[id].DType)
		}
		vals[id] = in
	}
	for id, t := range g.Consts {
		vals[id] = t
	}
	err = autograd.Try(func() {
		autograd.NoGrad(func() {
			for i := range g.Nodes {
				n := &g.Nodes[i]
				args := make([]*autograd.Tensor, len(n.Inputs))
				for j, v := range n.Inputs {
					if v != None {
						args[j] = vals[v]
					}
				}
				res := p.impls[i].eager(n, args)
				if len(res) != len(n.Outputs) {
					autograd.Fail(n.Op, "node %d gave %d results for %d outputs", i, len(res), len(n.Outputs))
				}
				for j, o := range n.Outputs {
					vals[o] = res[j]
				}
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	outs = make([]*autograd.Tensor, len(g.Outputs))
	for i, o := range g.Outputs {
		outs[i] = vals[o]
	}
	return outs, nil
}
