package graph

import (
	"slices"
	"strings"

	"github.com/kilnml/kiln/autograd"
)

// A FreezeOption sets a knob of one Freeze.
type FreezeOption func(*freezeConfig)

type freezeConfig struct{ noFusion bool }

// WithFusion switches Freeze's fusion passes on (the default, as IPEX's
// ipex.enable_onednn_fusion) or off. Graphs frozen with fusion off hold
// only the ops the trace recorded, which run with the same numerics as
// the fused ones' decomposed forms; it is meant for comparing the two and
// for finding a fusion at fault.
func WithFusion(on bool) FreezeOption { return func(c *freezeConfig) { c.noFusion = !on } }

// The fused ops the chain fusion pass makes, by their fused names (see
// FusedSep), in two rounds. The attention and transformer patterns go
// first, so an Add that both a Linear and a LayerNorm could take goes to
// the LayerNorm, as the Linear's epilogue saves less.
var (
	normChains  = []string{"Div+Add+Softmax", "Add+LayerNorm"}
	layerChains = []string{
		"Conv2d+ReLU", "Conv2d+Add", "Conv2d+Add+ReLU", "Conv2d+Sigmoid", "Conv2d+SigmoidMul",
		"Conv2d+HardTanh", "Conv2d+SiLU", "Conv2d+ELU",
		"Conv3d+ReLU", "Conv3d+Add", "Conv3d+Add+ReLU", "Conv3d+SiLU",
		"Linear+ReLU", "Linear+GELU", "Linear+Sigmoid", "Linear+Add",
	}
)

// FusionPatterns returns the fused op names Freeze's chain fusion makes
// ("Conv2d+Add+ReLU", …). Besides these, Freeze makes ChannelShuffle nodes
// of a Reshape, Permute, (To,) Reshape channel shuffle, and LinearConcat
// nodes of three or more Linear layers reading one input.
func FusionPatterns() []string { return slices.Concat(normChains, layerChains) }

// fuseAll runs the fusion passes. LinearConcat goes before the chains,
// which would otherwise take a sibling Linear into a Linear+Add.
func fuseAll(g *Graph) {
	fuseChannelShuffle(g)
	fuseLinearConcat(g)
	fuseChains(g, normChains)
	fuseChains(g, layerChains)
}

// canExtend reports whether some pattern is name or continues it.
func canExtend(patterns []string, name string) bool {
	for _, p := range patterns {
		if p == name || strings.HasPrefix(p, name+FusedSep) {
			return true
		}
	}
	return false
}

// chainPart is one later part of a fused chain: the nodes it replaces, the
// operands it adds to the fused node, its attributes and its result.
type chainPart struct {
	name   string
	nodes  []int
	extras []int
	attrs  []Attr
	out    int
}

// fuseChains fuses, anchored at each node in order, the longest chain of
// nodes that spells one of patterns.
func fuseChains(g *Graph, patterns []string) {
	uses := g.Uses()
	for i := 0; i < len(g.Nodes); i++ {
		if fuseChainAt(g, uses, i, patterns) {
			sweepRemoved(g)
			uses = g.Uses()
			i-- // the anchor's index now holds the next node
		}
	}
}

// fuseChainAt fuses the chain starting at node i, if one matches, putting
// the fused node where the chain's last node was: every operand of the
// chain is defined before that.
func fuseChainAt(g *Graph, uses [][]int, i int, patterns []string) bool {
	a := &g.Nodes[i]
	if len(a.Outputs) != 1 || !canExtend(patterns, a.Op) || !anchorOK(g, a) {
		return false
	}
	name, y := a.Op, a.Outputs[0]
	var chain []chainPart
	for {
		p, ok := nextChainPart(g, uses, y)
		if !ok || !canExtend(patterns, name+FusedSep+p.name) {
			break
		}
		chain = append(chain, p)
		name, y = name+FusedSep+p.name, p.out
	}
	for len(chain) > 0 && !slices.Contains(patterns, name) {
		chain = chain[:len(chain)-1]
		name = name[:strings.LastIndex(name, FusedSep)]
	}
	if len(chain) == 0 {
		return false
	}
	fused := Node{Op: name, Inputs: slices.Clone(a.Inputs), Attrs: slices.Clone(a.Attrs), Scope: a.Scope}
	last := i
	for _, p := range chain {
		fused.Inputs = append(fused.Inputs, p.extras...)
		for _, at := range p.attrs {
			at.Name = p.name + "." + at.Name
			fused.Attrs = append(fused.Attrs, at)
		}
		for _, n := range p.nodes {
			last = max(last, n)
			g.Nodes[n].Op = removedOp
		}
	}
	fused.Outputs = []int{chain[len(chain)-1].out}
	a.Op = removedOp
	g.Nodes[last] = fused
	return true
}

// anchorOK checks what a chain's first node needs beyond its op: the two
// operands of an Add that heads Add+LayerNorm have the same type, as a
// residual connection's do.
func anchorOK(g *Graph, a *Node) bool {
	if a.Op != "Add" {
		return true
	}
	return len(a.Inputs) == 2 && a.Inputs[0] != None && a.Inputs[1] != None && sameType(g, a.Inputs[0], a.Inputs[1])
}

// sameType reports whether values u and v have the same shape and dtype.
func sameType(g *Graph, u, v int) bool {
	return slices.Equal(g.Values[u].Shape, g.Values[v].Shape) && g.Values[u].DType == g.Values[v].DType
}

// broadcastsInto reports whether value u has v's dtype and a shape that
// broadcasts to v's without growing it.
func broadcastsInto(g *Graph, u, v int) bool {
	us, vs := g.Values[u].Shape, g.Values[v].Shape
	if g.Values[u].DType != g.Values[v].DType || len(us) > len(vs) {
		return false
	}
	for i, d := range us {
		if w := vs[len(vs)-len(us)+i]; d != w && d != 1 {
			return false
		}
	}
	return true
}

// nextChainPart returns the part that continues a chain whose running result
// is y: y's one reader, or for SigmoidMul its two.
func nextChainPart(g *Graph, uses [][]int, y int) (chainPart, bool) {
	if isOutput(g, y) {
		return chainPart{}, false
	}
	rs := uses[y]
	if len(rs) == 2 {
		return sigmoidMul(g, uses, y)
	}
	if len(rs) != 1 {
		return chainPart{}, false
	}
	r := &g.Nodes[rs[0]]
	if len(r.Outputs) != 1 || len(r.Inputs) == 0 {
		return chainPart{}, false
	}
	if w, ok := autocastWidening(g, uses, y, rs[0]); ok {
		// Autocast's cast to float32 before a LayerNorm or Softmax, or
		// type promotion's before a float32 tensor is added (a mask to
		// attention scores, a residual to a layer's output): the fused
		// part widens its input itself.
		p, ok := nextChainPart(g, uses, g.Nodes[rs[0]].Outputs[0])
		if !ok || (p.name != "LayerNorm" && p.name != "Softmax" && p.name != "Add") {
			return chainPart{}, false
		}
		p.nodes = append([]int{w}, p.nodes...)
		return p, true
	}
	p := chainPart{name: r.Op, nodes: []int{rs[0]}, attrs: r.Attrs, out: r.Outputs[0]}
	switch r.Op {
	case "ReLU", "Sigmoid", "SiLU", "HardTanh", "ELU", "GELU", "Softmax":
		if len(r.Inputs) != 1 {
			return chainPart{}, false
		}
	case "LayerNorm":
		if len(r.Inputs) != 3 || r.Inputs[0] != y || slices.Contains(r.Inputs[1:], y) {
			return chainPart{}, false
		}
		p.extras = slices.Clone(r.Inputs[1:])
	case "Add":
		// Either operand may be the running result; the other has its
		// dtype and its shape or one that broadcasts to it (a mask of
		// shape [B, 1, 1, S] on attention scores), so the sum has the
		// running result's type.
		if len(r.Inputs) != 2 {
			return chainPart{}, false
		}
		other := r.Inputs[0]
		if other == y {
			other = r.Inputs[1]
		}
		if other == None || other == y || !broadcastsInto(g, other, y) || !sameType(g, y, p.out) {
			return chainPart{}, false
		}
		p.extras = []int{other}
	default:
		return chainPart{}, false
	}
	return p, true
}

// autocastWidening reports whether node c, y's one reader, is a Cast of
// bfloat16 y to float32 whose result only a LayerNorm, Softmax or Add
// reads: what autocast puts before a norm or softmax of BF16 activations,
// and type promotion before a sum with a float32 tensor.
func autocastWidening(g *Graph, uses [][]int, y, c int) (int, bool) {
	n := &g.Nodes[c]
	if n.Op != "Cast" || len(n.Outputs) != 1 || g.Values[y].DType != autograd.BFloat16 {
		return 0, false
	}
	if a, ok := n.Attr("dtype"); !ok || a.Kind != AttrString || a.Str != autograd.Float32.String() {
		return 0, false
	}
	out := n.Outputs[0]
	if isOutput(g, out) || len(uses[out]) != 1 {
		return 0, false
	}
	r := g.Nodes[uses[out][0]].Op
	return c, r == "LayerNorm" || r == "Softmax" || r == "Add"
}

// sigmoidMul matches y·sigmoid(y) (Swish written out): y read by a Sigmoid
// and by the Mul of y and that Sigmoid's result, the result read only
// there.
func sigmoidMul(g *Graph, uses [][]int, y int) (chainPart, bool) {
	rs := uses[y]
	si, mi := rs[0], rs[1]
	if g.Nodes[si].Op != "Sigmoid" {
		si, mi = mi, si
	}
	s, m := &g.Nodes[si], &g.Nodes[mi]
	if s.Op != "Sigmoid" || m.Op != "Mul" || len(s.Outputs) != 1 || len(m.Outputs) != 1 || len(m.Inputs) != 2 {
		return chainPart{}, false
	}
	sy := s.Outputs[0]
	if !onlyReader(g, uses, sy, mi) || !slices.Contains(m.Inputs, y) || !slices.Contains(m.Inputs, sy) || !sameType(g, y, m.Outputs[0]) {
		return chainPart{}, false
	}
	return chainPart{name: "SigmoidMul", nodes: []int{si, mi}, out: m.Outputs[0]}, true
}

// fuseChannelShuffle replaces each Reshape [N, C, …] → [N, g, C/g, …],
// Permute swapping dimensions 1 and 2, optional To contiguous, Reshape
// (or Flatten) back to [N, C, …] by one ChannelShuffle node.
func fuseChannelShuffle(g *Graph) {
	uses := g.Uses()
	for i := range g.Nodes {
		r1 := &g.Nodes[i]
		if r1.Op != "Reshape" || len(r1.Inputs) != 1 || len(r1.Outputs) != 1 || r1.Inputs[0] == None {
			continue
		}
		x := r1.Inputs[0]
		xs, split := g.Values[x].Shape, g.Values[r1.Outputs[0]].Shape
		if len(xs) < 2 || len(split) != len(xs)+1 || split[0] != xs[0] || split[1]*split[2] != xs[1] ||
			!slices.Equal(split[3:], xs[2:]) {
			continue
		}
		perm := []int{0, 2, 1}
		for d := 3; d < len(split); d++ {
			perm = append(perm, d)
		}
		// Follow the chain through single readers: Permute, maybe To, Reshape.
		nodes := []int{i}
		y := r1.Outputs[0]
		next := func() *Node {
			if len(uses[y]) != 1 || isOutput(g, y) {
				return nil
			}
			return &g.Nodes[uses[y][0]]
		}
		step := func(op string, ok func(n *Node) bool) bool {
			n := next()
			if n == nil || n.Op != op || len(n.Outputs) != 1 || !ok(n) {
				return false
			}
			nodes, y = append(nodes, uses[y][0]), n.Outputs[0]
			return true
		}
		if !step("Permute", func(n *Node) bool { return slices.Equal(n.Ints("dims"), perm) }) {
			continue
		}
		if n := next(); n != nil && n.Op == "To" {
			if !step("To", func(n *Node) bool { return n.Str("format") == autograd.Contiguous.String() }) {
				continue
			}
		}
		// Back to [N, C, …]: a Reshape, or a Flatten of the two split dims.
		merged := func(n *Node) bool { return slices.Equal(g.Values[n.Outputs[0]].Shape, xs) }
		if !step("Reshape", merged) && !step("Flatten", merged) {
			continue
		}
		last := nodes[len(nodes)-1]
		fused := Node{Op: "ChannelShuffle", Inputs: []int{x}, Outputs: []int{y}, Attrs: []Attr{IntAttr("groups", split[1])}, Scope: r1.Scope}
		for _, n := range nodes {
			g.Nodes[n].Op = removedOp
		}
		g.Nodes[last] = fused
		uses = g.Uses()
	}
	sweepRemoved(g)
}

// fuseLinearConcat replaces three or more Linear nodes that read the same
// input, with constant weights of one dtype and in-features and all with
// or all without a bias, by one LinearConcat node: one GEMM with the
// weights concatenated along the out-features, its result split into the
// Linear nodes' results. The node goes where the first Linear was.
func fuseLinearConcat(g *Graph) {
	type key struct {
		x       int
		dtype   autograd.DType
		in      int
		hasBias bool
	}
	groups := map[key][]int{}
	var order []key
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.Op != "Linear" || len(n.Inputs) != 3 || len(n.Outputs) != 1 || n.Inputs[0] == None {
			continue
		}
		w, b := n.Inputs[1], n.Inputs[2]
		if !g.IsConst(w) || !g.Values[w].DType.IsFloat() || len(g.Values[w].Shape) != 2 || g.Consts[w].Format() != autograd.Contiguous ||
			(b != None && (!g.IsConst(b) || g.Values[b].DType != g.Values[w].DType)) {
			continue
		}
		k := key{n.Inputs[0], g.Values[w].DType, g.Values[w].Shape[1], b != None}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range order {
		nodes := groups[k]
		if len(nodes) < 3 {
			continue
		}
		var ws, bs []*autograd.Tensor
		var names, bnames, scopes []string
		var sizes, outs []int
		for _, i := range nodes {
			n := &g.Nodes[i]
			ws = append(ws, g.Consts[n.Inputs[1]])
			names = append(names, g.Values[n.Inputs[1]].Name)
			sizes = append(sizes, g.Values[n.Inputs[1]].Shape[0])
			if k.hasBias {
				bs = append(bs, g.Consts[n.Inputs[2]])
				bnames = append(bnames, g.Values[n.Inputs[2]].Name)
			}
			outs = append(outs, n.Outputs[0])
			scopes = append(scopes, n.Scope)
		}
		w := g.AddConst(uniqueName(g, "concat("+strings.Join(names, ",")+")"), concatRows(ws))
		b := None
		if k.hasBias {
			b = g.AddConst(uniqueName(g, "concat("+strings.Join(bnames, ",")+")"), concatRows(bs))
		}
		fused := Node{Op: "LinearConcat", Inputs: []int{k.x, w, b}, Outputs: outs,
			Attrs: []Attr{IntsAttr("sizes", sizes)}, Scope: commonScope(scopes)}
		for _, i := range nodes {
			g.Nodes[i].Op = removedOp
		}
		g.Nodes[nodes[0]] = fused
	}
	sweepRemoved(g)
}

// concatRows concatenates contiguous float32 or bfloat16 tensors along
// dimension 0, which for row-major data is appending their storage.
func concatRows(ts []*autograd.Tensor) *autograd.Tensor {
	shape := ts[0].Shape()
	shape[0] = 0
	for _, t := range ts {
		shape[0] += t.Dim(0)
	}
	if ts[0].DType() == autograd.BFloat16 {
		var d []uint16
		for _, t := range ts {
			d = append(d, t.BFloat16s()...)
		}
		return autograd.FromBFloat16(d, shape...)
	}
	var d []float32
	for _, t := range ts {
		d = append(d, t.Float32s()...)
	}
	return autograd.FromFloat32(d, shape...)
}

// commonScope returns the deepest module path that contains every scope:
// the attention block of its q, k and v projections.
func commonScope(scopes []string) string {
	common := strings.Split(scopes[0], ".")
	for _, s := range scopes[1:] {
		parts := strings.Split(s, ".")
		n := 0
		for n < len(common) && n < len(parts) && common[n] == parts[n] {
			n++
		}
		common = common[:n]
	}
	return strings.Join(common, ".")
}
