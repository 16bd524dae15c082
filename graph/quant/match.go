package quant

import (
	"fmt"
	"slices"

	"github.com/kilnml/kiln/graph"
)

// match checks conf c against the ops recorded in g (sites): one entry per
// recorded op in order (IPEX's dropout entries aside, which Freeze
// removes), with the op's name, its operand and result counts, flows that
// connect the entries as the graph connects the ops, and one weight scale
// per output channel (one for per_tensor). Errors wrap ErrConf and name
// the entry and the node.
func (c *Conf) match(g *graph.Graph, ss []site) error {
	// A dropout entry's output is its input under another name.
	alias := map[string]string{}
	resolve := func(f string) string {
		for {
			a, ok := alias[f]
			if !ok {
				return f
			}
			f = a
		}
	}
	var entries []*OpConf
	for i := range c.Ops {
		op := &c.Ops[i]
		if op.Name == "dropout" {
			if len(op.InputsFlow) == 1 && len(op.OutputsFlow) == 1 {
				alias[op.OutputsFlow[0]] = op.InputsFlow[0]
			}
			continue
		}
		entries = append(entries, op)
	}
	bad := func(op *OpConf, field, format string, args ...any) error {
		return fmt.Errorf("%w: entry %d (%s): %s: %s", ErrConf, op.ID, op.Name, field, fmt.Sprintf(format, args...))
	}
	if len(entries) != len(ss) {
		return fmt.Errorf("%w: it has %d quantizable op entries, the graph records %d ops (%s)", ErrConf, len(entries), len(ss), siteList(g, ss))
	}
	// made[v] is the site and result position that computes value v.
	type origin struct{ site, out int }
	made := map[int]origin{}
	for k, s := range ss {
		op, n := entries[k], &g.Nodes[s.node]
		where := fmt.Sprintf("node %d (%s%s)", s.node, n.Op, scopeSuffix(n.Scope))
		if op.Name != s.name {
			return bad(op, "name", "the graph's recorded op %d is %s, %s", k, s.name, where)
		}
		if len(op.InputsFlow) != len(s.ins) || len(op.OutputsFlow) != len(s.outs) {
			return bad(op, "inputs_flow", "%d inputs and %d outputs, %s has %d and %d", len(op.InputsFlow), len(op.OutputsFlow), where, len(s.ins), len(s.outs))
		}
		for j, v := range s.ins {
			got := resolve(op.InputsFlow[j])
			if o, ok := made[v]; ok {
				if want := entries[o.site].OutputsFlow[o.out]; got != want {
					return bad(op, fmt.Sprintf("inputs_flow[%d]", j), "%q, but in the graph this input is output %d of entry %d (%s): %q", op.InputsFlow[j], o.out, entries[o.site].ID, entries[o.site].Name, want)
				}
				continue
			}
			for _, e := range entries[:k] {
				if slices.Contains(e.OutputsFlow, got) {
					return bad(op, fmt.Sprintf("inputs_flow[%d]", j), "%q is an output of entry %d (%s), but in the graph no recorded op makes this input", op.InputsFlow[j], e.ID, e.Name)
				}
			}
		}
		for j, v := range s.outs {
			made[v] = origin{k, j}
		}
		if s.weight != graph.None {
			want := 1
			if op.WeightGranularity == "per_channel" {
				want = g.Values[s.weight].Shape[0]
			}
			if len(op.WeightScales) != 1 || len(op.WeightScales[0]) != want {
				return bad(op, "weight_scales", "want one list of %d scales (%s, %d output channels) for %s", want, op.WeightGranularity, g.Values[s.weight].Shape[0], where)
			}
		}
	}
	return nil
}

// siteList names the recorded ops, for an error.
func siteList(g *graph.Graph, ss []site) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.name
	}
	if len(names) > 12 {
		names = append(names[:12], "…")
	}
	return fmt.Sprint(names)
}

func scopeSuffix(scope string) string {
	if scope == "" {
		return ""
	}
	return " in " + scope
}
