package graph

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// Freeze returns g made ready for inference: parameters are constants the
// frozen graph owns (copies, so training the model afterwards does not
// change it), and the passes PyTorch's torch.jit.freeze and IPEX's graph
// rewrites run are applied in this order:
//
//   - Dropout, Identity and Clone nodes are removed; their readers (and
//     the graph's outputs) read the node's input instead.
//   - Nodes that compute the same op on the same operands are merged, so
//     the casts autocast repeats for each reader become one.
//   - A BatchNorm whose input is the output of a Conv2d or Conv3d (or of a
//     Linear, for a BatchNorm over [N, C]) read by nothing else is folded
//     into the layer's weight and bias with the arithmetic of PyTorch's
//     fuse_conv_bn_eval and fuse_linear_bn_eval, bit for bit with
//     nn.FoldBatchNorm. A layer without a bias gains one.
//   - Nodes whose operands are all constants are evaluated once and become
//     constants; under autocast this turns the weight casts into BF16
//     constants.
//   - An Add, Sub, Mul or Div (or AddScalar, MulScalar) of a float32
//     convolution or linear output by a constant that is a scalar or holds
//     one value per output channel is folded into the weight and bias.
//   - With fusion on, in an int8 graph, a MaxPool2d, AdaptiveAvgPool2d or
//     Flatten between a Dequantize and a Quantize with the same
//     parameters runs on the quantized values instead
//     (quantizedShapeOps), and each Dequantize → Conv2d/Conv3d/Linear →
//     [Add] → [ReLU|GELU|Sigmoid] → [Quantize] chain becomes one int8
//     layer node, each product of two Dequantize results (Matmul, BMM)
//     → [Div] → [Quantize] one int8 product node (fuseInt8Layers).
//   - Nodes no output needs, and constants no node reads, are dropped.
//   - With fusion on (see WithFusion), the fusion passes merge the
//     patterns FusionPatterns lists, channel shuffles and sibling Linear
//     layers into single fused nodes.
//
// The folding passes repeat until none applies (a BatchNorm may follow a
// folded multiply). Values no node uses any more are dropped and op
// results renamed "%N" after their new index; constants keep their
// parameter names, and new ones are named after what they came from
// ("conv.weight.bfloat16" for a cast weight, "conv.bias" for a bias a
// layer gains). g itself is not changed; a g that fails Validate or has a
// node that does not fit its op (see Compile), or a constant node whose op
// fails, is an error.
func Freeze(g *Graph, opts ...FreezeOption) (*Graph, error) {
	var conf freezeConfig
	for _, o := range opts {
		o(&conf)
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("graph.Freeze: %w", err)
	}
	if _, _, err := g.checkNodes(false); err != nil {
		return nil, fmt.Errorf("graph.Freeze: %w", validateErr{err})
	}
	f := g.Clone()
	// Constants may be the model's parameters, which require gradients:
	// detached, the passes' ops on them record nothing.
	for id, t := range f.Consts {
		f.Consts[id] = t.Detach()
	}
	var passErr error
	err := autograd.Try(func() {
		removeIdentities(f)
		mergeCommon(f)
		// BatchNorms fold before constant propagation, into the
		// float32 weights behind autocast's casts, so BF16 weights are
		// rounded once, after folding.
		for foldBatchNorm(f) {
		}
		if passErr = propagateConstants(f); passErr != nil {
			return
		}
		for foldConstArith(f) || foldBatchNorm(f) {
		}
		if !conf.noFusion && int8Rewrites(f) {
			// Equal Quantize nodes the rewrites left reading one
			// value merge.
			mergeCommon(f)
		}
		eliminateDead(f)
		if !conf.noFusion {
			fuseAll(f)
			eliminateDead(f)
		}
		compactValues(f)
		// Constants may still share memory with the model (parameters
		// traced as they are, reshapes of them that alias) or with each
		// other; one copy each makes the frozen graph independent.
		for id, t := range f.Consts {
			f.Consts[id] = t.Clone()
		}
	})
	if err == nil {
		err = passErr
	}
	if err == nil {
		err = f.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("graph.Freeze: %w", err)
	}
	return f, nil
}

// The passes mark a node they remove by clearing its op, and sweepRemoved
// drops the marked nodes, so node indices stay valid while a pass runs.
const removedOp = ""

func sweepRemoved(g *Graph) {
	g.Nodes = slices.DeleteFunc(g.Nodes, func(n Node) bool { return n.Op == removedOp })
}

// redirect makes every reader of value from, and the graph's outputs, use
// value to instead. to must be defined before from's first reader, as the
// input of a node is before that node's output.
func redirect(g *Graph, from, to int) {
	for i := range g.Nodes {
		for j, in := range g.Nodes[i].Inputs {
			if in == from {
				g.Nodes[i].Inputs[j] = to
			}
		}
	}
	for i, o := range g.Outputs {
		if o == from {
			g.Outputs[i] = to
		}
	}
}

// isOutput reports whether v is one of g's outputs.
func isOutput(g *Graph, v int) bool { return slices.Contains(g.Outputs, v) }

// onlyReader reports whether node is the one reader of v, reading it once,
// and v is not a graph output: the condition for rewriting v freely.
func onlyReader(g *Graph, uses [][]int, v, node int) bool {
	return len(uses[v]) == 1 && uses[v][0] == node && !isOutput(g, v)
}

// uniqueName returns base, or base with a numeric suffix, whichever is the
// first name no value of g has.
func uniqueName(g *Graph, base string) string {
	taken := make(map[string]bool, len(g.Values))
	for _, v := range g.Values {
		taken[v.Name] = true
	}
	name := base
	for k := 1; taken[name]; k++ {
		name = fmt.Sprintf("%s.%d", base, k)
	}
	return name
}

// removeIdentities drops Dropout, Identity and Clone nodes, which are
// identities in an evaluation graph.
func removeIdentities(g *Graph) {
	for i := range g.Nodes {
		n := &g.Nodes[i]
		switch n.Op {
		case "Dropout", "Identity", "Clone":
		default:
			continue
		}
		if len(n.Inputs) != 1 || len(n.Outputs) != 1 || n.Inputs[0] == None {
			continue
		}
		redirect(g, n.Outputs[0], n.Inputs[0])
		n.Op = removedOp
	}
	sweepRemoved(g)
}

// nodeKey identifies what a node computes: its op, operands and
// attributes. Every op a graph holds is a pure function of those.
func nodeKey(n *Node) string {
	var b strings.Builder
	b.WriteString(n.Op)
	for _, in := range n.Inputs {
		fmt.Fprintf(&b, " %d", in)
	}
	for _, a := range n.Attrs {
		b.WriteString(" " + a.String())
	}
	return b.String()
}

// mergeCommon replaces each node that repeats an earlier node's
// computation by that node's results (common subexpression elimination).
func mergeCommon(g *Graph) {
	seen := map[string]int{}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		key := nodeKey(n)
		j, dup := seen[key]
		if !dup {
			seen[key] = i
			continue
		}
		for k, o := range n.Outputs {
			redirect(g, o, g.Nodes[j].Outputs[k])
		}
		n.Op = removedOp
	}
	sweepRemoved(g)
}

// layerParam is a weight or bias operand of a convolution or linear node
// as the folding passes see it: a float32 constant read directly or
// through one Cast (autocast's cast to bfloat16), or absent.
type layerParam struct {
	src   int            // the float32 constant, or None
	dtype autograd.DType // the dtype the layer reads
	// private is true when only this layer reads the constant (and the
	// cast), so the constant's data may be replaced in place.
	private bool
}

// layerParamOf describes operand slot of node li; ok is false when the
// operand is not a foldable constant.
func layerParamOf(g *Graph, uses [][]int, prod []int, li, slot int) (p layerParam, ok bool) {
	v := g.Nodes[li].Inputs[slot]
	if v == None {
		return layerParam{src: None}, true
	}
	if g.IsConst(v) {
		if g.Values[v].DType != autograd.Float32 {
			return p, false
		}
		return layerParam{src: v, dtype: autograd.Float32, private: onlyReader(g, uses, v, li)}, true
	}
	c := prod[v]
	if c < 0 || g.Nodes[c].Op != "Cast" || len(g.Nodes[c].Inputs) != 1 {
		return p, false
	}
	src := g.Nodes[c].Inputs[0]
	if src == None || !g.IsConst(src) || g.Values[src].DType != autograd.Float32 {
		return p, false
	}
	private := onlyReader(g, uses, v, li) && onlyReader(g, uses, src, c)
	return layerParam{src: src, dtype: g.Values[v].DType, private: private}, true
}

// setLayerParam makes operand slot of node li hold the float32 data t (of
// the operand's shape): the constant's data is replaced when the layer owns
// it, and otherwise a new constant named name, in the dtype the layer
// reads, takes the operand's place.
func setLayerParam(g *Graph, li, slot int, p layerParam, t *autograd.Tensor, name string) {
	if p.src != None && p.private {
		g.Consts[p.src] = t
		return
	}
	if p.dtype != autograd.Float32 {
		t = autograd.Cast(t, p.dtype)
	}
	g.Nodes[li].Inputs[slot] = g.AddConst(uniqueName(g, name), t)
}

// biasName names the bias a layer gains, after its weight: "conv.weight"
// gives "conv.bias".
func biasName(weight string) string {
	if prefix, ok := strings.CutSuffix(weight, "weight"); ok {
		return prefix + "bias"
	}
	return weight + ".bias"
}

// foldableLayer reports whether node li is a convolution or linear layer
// whose output y only node reads, and returns y's channel dimension.
func foldableLayer(g *Graph, uses [][]int, li, node int) (chanDim int, ok bool) {
	l := &g.Nodes[li]
	if len(l.Inputs) != 3 || len(l.Outputs) != 1 || !onlyReader(g, uses, l.Outputs[0], node) {
		return 0, false
	}
	switch l.Op {
	case "Conv2d", "Conv3d":
		return 1, true
	case "Linear":
		return len(g.Values[l.Outputs[0]].Shape) - 1, true
	}
	return 0, false
}

// foldTargets returns the weight and bias of layer li as fresh float32
// tensors to fold into, with c output channels.
func foldTargets(g *Graph, w, b layerParam, c int) (wt *autograd.Tensor, bias []float32, ok bool) {
	if w.src == None {
		return nil, nil, false
	}
	src := g.Consts[w.src]
	if src.NDim() < 2 || src.Dim(0) != c {
		return nil, nil, false
	}
	bias = make([]float32, c)
	if b.src != None {
		bt := g.Consts[b.src]
		if bt.NDim() != 1 || bt.Dim(0) != c {
			return nil, nil, false
		}
		copy(bias, bt.Float32s())
	}
	return src.Detach().Clone(), bias, true
}

// foldBatchNorm folds one BatchNorm into the layer before it and reports
// whether it found one.
func foldBatchNorm(g *Graph) bool {
	uses, prod := g.Uses(), g.Producers()
	for i := range g.Nodes {
		bn := &g.Nodes[i]
		if bn.Op != "BatchNorm" || len(bn.Inputs) != 5 || len(bn.Outputs) != 1 || bn.Inputs[0] == None {
			continue
		}
		y := bn.Inputs[0]
		li := prod[y]
		if li < 0 {
			continue
		}
		if _, ok := foldableLayer(g, uses, li, i); !ok {
			continue
		}
		shape := g.Values[y].Shape
		if g.Nodes[li].Op == "Linear" && len(shape) != 2 {
			continue // BatchNorm1d over [N, C, L]: C is not the features
		}
		c := shape[1]
		stats := make([][]float32, 4) // mean, var, gamma, beta
		usable := true
		for k, v := range bn.Inputs[1:] {
			switch {
			case v == None && k == 2:
				stats[k] = slices.Repeat([]float32{1}, c) // no affine weight: gamma 1
			case v == None && k == 3:
				stats[k] = make([]float32, c) // and beta 0
			case v == None || !g.IsConst(v) || g.Values[v].DType != autograd.Float32 || !slices.Equal(g.Values[v].Shape, []int{c}):
				usable = false
			default:
				stats[k] = g.Consts[v].Float32s()
			}
		}
		w, okw := layerParamOf(g, uses, prod, li, 1)
		b, okb := layerParamOf(g, uses, prod, li, 2)
		if !usable || !okw || !okb {
			continue
		}
		wt, bias, ok := foldTargets(g, w, b, c)
		if !ok {
			continue
		}
		nn.FoldBatchNormWeights(wt.Float32s(), bias, stats[0], stats[1], stats[2], stats[3], float32(bn.Float("eps")), g.Nodes[li].Op == "Linear")
		if b.src == None {
			b.dtype = w.dtype
		}
		wname := g.Values[w.src].Name
		setLayerParam(g, li, 1, w, wt, wname)
		setLayerParam(g, li, 2, b, autograd.FromFloat32(bias, c), biasName(wname))
		redirect(g, bn.Outputs[0], y)
		bn.Op = removedOp
		sweepRemoved(g)
		return true
	}
	return false
}

// propagateConstants evaluates, in order, every node whose operands are
// all constants, making its results constants. A Dequantize of a constant
// stays: the int8 weight is what the int8 layers read, and the float32
// one would take four times the memory.
func propagateConstants(g *Graph) error {
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.Op == "Dequantize" || n.Op == "DequantizePerChannel" {
			continue
		}
		if !slices.ContainsFunc(n.Inputs, g.IsConst) ||
			slices.ContainsFunc(n.Inputs, func(v int) bool { return v != None && !g.IsConst(v) }) {
			continue
		}
		op, err := g.checkNode(i)
		if err != nil {
			return err
		}
		args := make([]*autograd.Tensor, len(n.Inputs))
		base := "const"
		for j, v := range n.Inputs {
			if v != None {
				args[j] = g.Consts[v]
				if base == "const" {
					base = g.Values[v].Name
				}
			}
		}
		var res []*autograd.Tensor
		if err := autograd.Try(func() { res = op.eager(op.attrs, args) }); err != nil {
			return fmt.Errorf("evaluating constant node %d (%s): %w", i, n.Op, err)
		}
		if len(res) != len(n.Outputs) {
			return fmt.Errorf("evaluating constant node %d (%s): %d results for %d outputs", i, n.Op, len(res), len(n.Outputs))
		}
		suffix := strings.ToLower(n.Op)
		if n.Op == "Cast" {
			suffix = n.Str("dtype")
		}
		for j, o := range n.Outputs {
			v := &g.Values[o]
			if !slices.Equal(res[j].Shape(), v.Shape) || res[j].DType() != v.DType {
				return fmt.Errorf("evaluating constant node %d (%s): result %d is %v %v, the graph says %v %v",
					i, n.Op, j, res[j].DType(), res[j].Shape(), v.DType, v.Shape)
			}
			name := base + "." + suffix
			if len(n.Outputs) > 1 {
				name += fmt.Sprintf(".%d", j)
			}
			v.Name = uniqueName(g, name)
			v.Format = res[j].Format()
			g.Consts[o] = res[j]
		}
		n.Op = removedOp
	}
	sweepRemoved(g)
	return nil
}

// channelValues returns the per-channel values of constant k applied
// elementwise to a layer output of shape out with channels at chanDim: k
// must broadcast to out without changing it and vary at most along
// chanDim. A k of one element gives c copies of it.
func channelValues(k *autograd.Tensor, out []int, chanDim int) ([]float32, bool) {
	ks := k.Shape()
	if len(ks) > len(out) || k.DType() != autograd.Float32 {
		return nil, false
	}
	c := out[chanDim]
	perChannel := false
	for j, d := range ks {
		at := len(out) - len(ks) + j
		switch {
		case d == 1:
		case at == chanDim && d == c:
			perChannel = true
		default:
			return nil, false
		}
	}
	// Every other dimension has size 1, so the values lie in channel
	// order whatever k's memory format.
	vals := k.Float32s()
	if !perChannel {
		return slices.Repeat([]float32{vals[0]}, c), true
	}
	return slices.Clone(vals), true
}

// foldConstArith folds one elementwise op by a constant into the
// convolution or linear layer before it and reports whether it found one.
func foldConstArith(g *Graph) bool {
	uses, prod := g.Uses(), g.Producers()
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if len(n.Outputs) != 1 {
			continue
		}
		var y int
		var k []float32 // the constant per channel, filled once the layer is known
		var konst = None
		switch n.Op {
		case "Add", "Mul", "Sub", "Div":
			if len(n.Inputs) != 2 {
				continue
			}
			y, konst = n.Inputs[0], n.Inputs[1]
			if (n.Op == "Add" || n.Op == "Mul") && y != None && g.IsConst(y) {
				y, konst = konst, y
			}
			if konst == None || !g.IsConst(konst) {
				continue
			}
		case "AddScalar", "MulScalar":
			if len(n.Inputs) != 1 {
				continue
			}
			y = n.Inputs[0]
		default:
			continue
		}
		if y == None || prod[y] < 0 {
			continue
		}
		li := prod[y]
		chanDim, ok := foldableLayer(g, uses, li, i)
		yv, ov := g.Values[y], g.Values[n.Outputs[0]]
		if !ok || yv.DType != autograd.Float32 || ov.DType != yv.DType || !slices.Equal(ov.Shape, yv.Shape) || len(yv.Shape) < 2 {
			continue
		}
		c := yv.Shape[chanDim]
		if konst != None {
			if k, ok = channelValues(g.Consts[konst], yv.Shape, chanDim); !ok {
				continue
			}
		} else {
			k = slices.Repeat([]float32{float32(n.Float("value"))}, c)
		}
		if slices.ContainsFunc(k, func(v float32) bool {
			return math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) || (v == 0 && n.Op == "Div")
		}) {
			continue
		}
		w, okw := layerParamOf(g, uses, prod, li, 1)
		b, okb := layerParamOf(g, uses, prod, li, 2)
		if !okw || !okb || w.dtype != autograd.Float32 || (b.src != None && b.dtype != autograd.Float32) {
			continue
		}
		wt, bias, ok := foldTargets(g, w, b, c)
		if !ok {
			continue
		}
		scalesWeight := arithFold(n.Op, wt.Float32s(), bias, k)
		wname := g.Values[w.src].Name
		if scalesWeight {
			setLayerParam(g, li, 1, w, wt, wname)
		}
		b.dtype = autograd.Float32
		setLayerParam(g, li, 2, b, autograd.FromFloat32(bias, c), biasName(wname))
		redirect(g, n.Outputs[0], y)
		n.Op = removedOp
		sweepRemoved(g)
		return true
	}
	return false
}

// arithFold applies op with per-channel operand k to a layer's weight w
// (output channel outermost) and bias b, and reports whether w changed.
// Each result is rounded to float32 once, as the op would round it.
func arithFold(op string, w, b, k []float32) bool {
	per := len(w) / len(b)
	for o, v := range k {
		switch op {
		case "Add", "AddScalar":
			b[o] = float32(b[o] + v)
		case "Sub":
			b[o] = float32(b[o] - v)
		case "Mul", "MulScalar":
			b[o] = float32(b[o] * v)
			for i := o * per; i < (o+1)*per; i++ {
				w[i] = float32(w[i] * v)
			}
		case "Div":
			b[o] = float32(b[o] / v)
			for i := o * per; i < (o+1)*per; i++ {
				w[i] = float32(w[i] / v)
			}
		}
	}
	return op != "Add" && op != "AddScalar" && op != "Sub"
}

// eliminateDead drops the nodes whose results no output needs and the
// constants no remaining node reads.
func eliminateDead(g *Graph) {
	live := make([]bool, len(g.Values))
	for _, o := range g.Outputs {
		live[o] = true
	}
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := &g.Nodes[i]
		if !slices.ContainsFunc(n.Outputs, func(o int) bool { return live[o] }) {
			n.Op = removedOp
			continue
		}
		for _, in := range n.Inputs {
			if in != None {
				live[in] = true
			}
		}
	}
	for id := range g.Consts {
		if !live[id] {
			delete(g.Consts, id)
		}
	}
	sweepRemoved(g)
}

// compactValues drops the values nothing defines or reads any more and
// numbers the rest in order, renaming op results "%N" after their new
// index.
func compactValues(g *Graph) {
	used := make([]bool, len(g.Values))
	for _, v := range g.Inputs {
		used[v] = true
	}
	for _, v := range g.Outputs {
		used[v] = true
	}
	for _, n := range g.Nodes {
		for _, v := range slices.Concat(n.Inputs, n.Outputs) {
			if v != None {
				used[v] = true
			}
		}
	}
	remap := make([]int, len(g.Values))
	var vals []Value
	for i, v := range g.Values {
		remap[i] = None
		if !used[i] {
			continue
		}
		remap[i] = len(vals)
		if strings.HasPrefix(v.Name, "%") {
			v.Name = fmt.Sprintf("%%%d", len(vals))
		}
		vals = append(vals, v)
	}
	re := func(ids []int) {
		for j, v := range ids {
			if v != None {
				ids[j] = remap[v]
			}
		}
	}
	re(g.Inputs)
	re(g.Outputs)
	for i := range g.Nodes {
		re(g.Nodes[i].Inputs)
		re(g.Nodes[i].Outputs)
	}
	consts := make(map[int]*autograd.Tensor, len(g.Consts))
	for id, t := range g.Consts {
		if used[id] {
			consts[remap[id]] = t
		}
	}
	g.Values, g.Consts = vals, consts
}
