package graph

import "github.com/kilnml/kiln/internal/tracing"

// AttrsOf returns the node attributes of v, an op's attribute struct (as
// autograd.PoolOptions or autograd.QuantizeAttrs), named as a trace names
// them: what a pass that adds nodes by hand gives the node.
func AttrsOf(v any) ([]Attr, error) {
	as, err := tracing.StructAttrs(v)
	if err != nil {
		return nil, err
	}
	out := make([]Attr, len(as))
	for i, a := range as {
		out[i] = convertAttr(a)
	}
	return out, nil
}
