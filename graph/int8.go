package graph

import (
	"slices"

	"github.com/kilnml/kiln/autograd"
)

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

// fuseInt8Layers replaces each chain Dequantize(x_q) → Conv2d, Conv3d or
// Linear (of DequantizePerChannel(w_q, scales) along axis 0, with
// constant int8 w_q and scales, and a constant or no bias) → [Add of a
// residual of the result's type, itself possibly a Dequantize] →
// [ReLU | GELU | Sigmoid] → [Quantize] by one int8 layer node (see
// int8LayerImpl), each intermediate read only by the next part. The
// Dequantize nodes stay for their other readers, if any. It reports
// whether it changed g.
func fuseInt8Layers(g *Graph) bool {
	changed := false
	for {
		uses, prod := g.Uses(), g.Producers()
		done := true
		for i := range g.Nodes {
			if fuseInt8LayerAt(g, uses, prod, i) {
				sweepRemoved(g)
				changed, done = true, false
				break
			}
		}
		if done {
			return changed
		}
	}
}

// fuseInt8LayerAt fuses the int8 chain whose layer is node i, if it is
// one, putting the fused node where the chain's last node was.
func fuseInt8LayerAt(g *Graph, uses [][]int, prod []int, i int) bool {
	l := &g.Nodes[i]
	if l.Op == "Matmul" || l.Op == "BMM" {
		return fuseInt8MatmulAt(g, uses, prod, i)
	}
	if _, ok := int8Layers[l.Op]; !ok || len(l.Inputs) != 3 || len(l.Outputs) != 1 {
		return false
	}
	x, w, b := l.Inputs[0], l.Inputs[1], l.Inputs[2]
	d := producerOp(g, prod, x, "Dequantize")
	wd := producerOp(g, prod, w, "DequantizePerChannel")
	if d == nil || wd == nil || len(wd.Inputs) != 2 || !g.IsConst(wd.Inputs[0]) || !g.IsConst(wd.Inputs[1]) ||
		g.Values[wd.Inputs[0]].DType != autograd.Int8 || (b != None && !g.IsConst(b)) {
		return false
	}
	if a, ok := wd.Attr("axis"); !ok || a.Kind != AttrInt || a.Int != 0 {
		return false
	}
	fused := Node{Op: "Dequantize" + FusedSep + l.Op, Inputs: []int{d.Inputs[0], wd.Inputs[0], wd.Inputs[1], b},
		Attrs: slices.Clone(d.Attrs), Scope: l.Scope}
	for _, a := range l.Attrs {
		a.Name = l.Op + "." + a.Name
		fused.Attrs = append(fused.Attrs, a)
	}
	chain := []int{i}
	y := l.Outputs[0]
	next := func(op ...string) *Node {
		if isOutput(g, y) || len(uses[y]) != 1 || !slices.Contains(op, g.Nodes[uses[y][0]].Op) {
			return nil
		}
		return &g.Nodes[uses[y][0]]
	}
	add := func(n *Node, name string, attrs []Attr) {
		fused.Op += FusedSep + name
		for _, a := range attrs {
			a.Name = name + "." + a.Name
			fused.Attrs = append(fused.Attrs, a)
		}
		chain = append(chain, uses[y][0])
		y = n.Outputs[0]
	}
	if n := next("Add"); n != nil && len(n.Inputs) == 2 && len(n.Outputs) == 1 {
		r := n.Inputs[0]
		if r == y {
			r = n.Inputs[1]
		}
		if r != y && r != None && sameType(g, r, y) && g.Values[r].Format == g.Values[y].Format {
			var attrs []Attr
			if rd := producerOp(g, prod, r, "Dequantize"); rd != nil && g.Values[rd.Inputs[0]].Format == g.Values[y].Format {
				r, attrs = rd.Inputs[0], rd.Attrs
			}
			fused.Inputs = append(fused.Inputs, r)
			add(n, "Add", attrs)
		}
	}
	if n := next(int8Acts...); n != nil {
		add(n, n.Op, n.Attrs)
	}
	if n := next("Quantize"); n != nil {
		add(n, "Quantize", n.Attrs)
	}
	fused.Outputs = []int{y}
	last := slices.Max(chain)
	for _, k := range chain {
		g.Nodes[k].Op = removedOp
	}
	g.Nodes[last] = fused
	return true
}

// producerOp returns the node of op that computes value v, or nil.
func producerOp(g *Graph, prod []int, v int, op string) *Node {
	if v == None || prod[v] < 0 || g.Nodes[prod[v]].Op != op || len(g.Nodes[prod[v]].Inputs) == 0 {
		return nil
	}
	return &g.Nodes[prod[v]]
}

// int8Rewrites runs the int8 passes on g and reports whether one changed
// it.
func int8Rewrites(g *Graph) bool {
	shapes := quantizedShapeOps(g)
	layers := fuseInt8Layers(g)
	return shapes || layers
}

// fuseInt8MatmulAt fuses Dequantize(a_q), Dequantize(b_q) → Matmul or BMM
// (node i) → [Div by a one-element float32 constant] → [Quantize] into
// one int8 product node, where QuantizedMatmul takes the operands' shapes.
func fuseInt8MatmulAt(g *Graph, uses [][]int, prod []int, i int) bool {
	l := &g.Nodes[i]
	if len(l.Inputs) != 2 || len(l.Outputs) != 1 {
		return false
	}
	da, db := producerOp(g, prod, l.Inputs[0], "Dequantize"), producerOp(g, prod, l.Inputs[1], "Dequantize")
	if da == nil || db == nil {
		return false
	}
	as, bs := g.Values[da.Inputs[0]].Shape, g.Values[db.Inputs[0]].Shape
	if len(as) < 2 || len(bs) < 2 || (len(bs) > 2 && !slices.Equal(as[:len(as)-2], bs[:len(bs)-2])) {
		return false
	}
	fused := Node{Op: "Dequantize" + FusedSep + l.Op, Inputs: []int{da.Inputs[0], db.Inputs[0]},
		Attrs: slices.Clone(da.Attrs), Scope: l.Scope}
	for _, a := range db.Attrs {
		a.Name = l.Op + "." + a.Name
		fused.Attrs = append(fused.Attrs, a)
	}
	chain, y := []int{i}, l.Outputs[0]
	next := func(op string) *Node {
		if isOutput(g, y) || len(uses[y]) != 1 || g.Nodes[uses[y][0]].Op != op {
			return nil
		}
		return &g.Nodes[uses[y][0]]
	}
	if n := next("Div"); n != nil && len(n.Inputs) == 2 && n.Inputs[0] == y && g.IsConst(n.Inputs[1]) {
		c := g.Consts[n.Inputs[1]]
		if c.DType() == autograd.Float32 && c.Numel() == 1 && c.Float32s()[0] != 0 {
			fused.Op += FusedSep + "Div"
			fused.Attrs = append(fused.Attrs, FloatAttr("Div.divisor", float64(c.Float32s()[0])))
			chain, y = append(chain, uses[y][0]), n.Outputs[0]
		}
	}
	if n := next("Quantize"); n != nil {
		fused.Op += FusedSep + "Quantize"
		for _, a := range n.Attrs {
			a.Name = "Quantize." + a.Name
			fused.Attrs = append(fused.Attrs, a)
		}
		chain, y = append(chain, uses[y][0]), n.Outputs[0]
	}
	fused.Outputs = []int{y}
	last := slices.Max(chain)
	for _, k := range chain {
		g.Nodes[k].Op = removedOp
	}
	g.Nodes[last] = fused
	return true
}
