package graph

import "github.com/kilnml/kiln/autograd"

// int8ShapeOps are the ops that run on quantized values in place of
// Dequantize → op → Quantize with the dequantization's parameters: the
// maximum and a reshape commute with a monotone dequantization exactly,
// and the mean is rounded once, as PyTorch's quantized pool rounds it.
var int8ShapeOps = map[string]bool{"MaxPool2d": true, "AdaptiveAvgPool2d": true, "Flatten": true}

// quantizedShapeOps rewrites each Dequantize(q) → P → Quantize, where P is
// a pool or Flatten read only by that Quantize, whose scale, zero point
// and dtype are the Dequantize's and q's, into P(q): the op reads the
// 8-bit value and its result replaces the Quantize's. It reports whether
// it changed g.
func quantizedShapeOps(g *Graph) bool {
	changed := false
	uses, prod := g.Uses(), g.Producers()
	for i := range g.Nodes {
		p := &g.Nodes[i]
		if !int8ShapeOps[p.Op] || len(p.Inputs) != 1 || len(p.Outputs) != 1 || p.Inputs[0] == None || isOutput(g, p.Outputs[0]) {
			continue
		}
		di := prod[p.Inputs[0]]
		if di < 0 || g.Nodes[di].Op != "Dequantize" || len(uses[p.Outputs[0]]) != 1 {
			continue
		}
		d, q := &g.Nodes[di], &g.Nodes[uses[p.Outputs[0]][0]]
		x := d.Inputs[0]
		dt := g.Values[x].DType
		if q.Op != "Quantize" || !sameQuant(d, q, dt) {
			continue
		}
		p.Inputs[0] = x
		y := p.Outputs[0]
		g.Values[y].DType = dt
		redirect(g, q.Outputs[0], y)
		q.Op = removedOp
		changed = true
		uses, prod = g.Uses(), g.Producers()
	}
	sweepRemoved(g)
	return changed
}

// sameQuant reports whether Dequantize d and Quantize q use one scale and
// zero point, and q makes dtype dt.
func sameQuant(d, q *Node, dt autograd.DType) bool {
	ds, ok1 := d.Attr("scale")
	dz, ok2 := d.Attr("zero_point")
	qs, ok3 := q.Attr("scale")
	qz, ok4 := q.Attr("zero_point")
	qd, ok5 := q.Attr("dtype")
	return ok1 && ok2 && ok3 && ok4 && ok5 && ds.Kind == AttrFloat && qs.Kind == AttrFloat && ds.Float == qs.Float &&
		dz.Kind == AttrInt && qz.Kind == AttrInt && dz.Int == qz.Int && qd.Kind == AttrString && qd.Str == dt.String()
}
