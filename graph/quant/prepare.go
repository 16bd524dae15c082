package quant

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
)

// ipexNames are the ops calibration records, by Kiln op, under the names
// IPEX 1.10 gives them in a QuantConf.
var ipexNames = map[string]string{
	"Conv2d": "conv2d", "Conv3d": "conv3d", "Linear": "linear", "Matmul": "matmul", "BMM": "bmm",
	"ReLU": "relu", "Sigmoid": "sigmoid", "GELU": "gelu", "Add": "add",
	"MaxPool2d": "max_pool2d", "AdaptiveAvgPool2d": "adaptive_avg_pool2d", "Flatten": "flatten",
}

// site is one recorded op of a prepared graph.
type site struct {
	node int
	name string // IPEX's
	// ins and outs are the values the op reads and writes that get
	// quantization parameters: a layer's activation (not its weight or
	// bias), every operand of the others.
	ins, outs []int
	// weight is a convolution's or linear layer's constant weight, None
	// for the other ops.
	weight int
	// inFlow and outFlow name the op's tensors as IPEX does: an input
	// made by an earlier recorded op carries that op's output name.
	inFlow, outFlow []string
}

// sites lists g's recorded ops in execution order, with their flows. A
// layer whose weight is not a constant, or an op on tensors other than
// float32, stays float32 and is not recorded.
func sites(g *graph.Graph) []site {
	var out []site
	flowOf := map[int]string{}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		name, ok := ipexNames[n.Op]
		if !ok || len(n.Outputs) != 1 || !allFloat32(g, n) {
			continue
		}
		s := site{node: i, name: name, ins: n.Inputs, outs: n.Outputs, weight: graph.None}
		switch n.Op {
		case "Conv2d", "Conv3d", "Linear":
			if len(n.Inputs) < 2 || !g.IsConst(n.Inputs[1]) || g.IsConst(n.Inputs[0]) {
				continue
			}
			s.ins, s.weight = n.Inputs[:1], n.Inputs[1]
		case "Add":
			// An Add of a constant (a bias Freeze could not fold) is not
			// a sum of two activations, which is what IPEX records.
			if len(n.Inputs) != 2 || g.IsConst(n.Inputs[0]) || g.IsConst(n.Inputs[1]) {
				continue
			}
		}
		if slices.Contains(s.ins, graph.None) {
			continue
		}
		id := len(out)
		for j, v := range s.ins {
			f, ok := flowOf[v]
			if !ok {
				f = fmt.Sprintf("%s%d.input%d", name, id, j)
			}
			s.inFlow = append(s.inFlow, f)
		}
		for j, v := range s.outs {
			f := fmt.Sprintf("%s%d.output%d", name, id, j)
			s.outFlow = append(s.outFlow, f)
			flowOf[v] = f
		}
		out = append(out, s)
	}
	return out
}

// allFloat32 reports whether every operand and result of n is float32.
func allFloat32(g *graph.Graph, n *graph.Node) bool {
	for _, v := range slices.Concat(n.Inputs, n.Outputs) {
		if v != graph.None && g.Values[v].DType != autograd.Float32 {
			return false
		}
	}
	return true
}

// Calibrator gathers the ranges of the values a float32 graph's recorded
// ops read and write, batch by batch, and turns them into a Conf. Make one
// with Prepare; it is not safe for concurrent use.
type Calibrator struct {
	conf  *Conf
	g     *graph.Graph // unfused and frozen, observed values among its outputs
	prog  *graph.Program
	sites []site
	// watch lists the observed values; the graph's outputs from
	// position first on are these, in order, and obs[k] watches
	// watch[k].
	watch []int
	first int
	obs   []Observer
	runs  int
}

// ErrPrecision is the error of a graph that is not float32: calibration
// and conversion start from a float32 graph.
var ErrPrecision = errors.New("not a float32 graph")

// Prepare readies g, a float32 graph (traced, frozen or loaded), for
// calibration with conf's scheme, observer algorithm and weight
// granularity: it folds g as graph.Freeze does, with fused nodes split
// and no fusion, so every op IPEX records is a node of its own, and
// records those ops in execution order. g is not changed.
func Prepare(g *graph.Graph, conf *Conf) (*Calibrator, error) {
	if conf == nil {
		return nil, errors.New("quant.Prepare: nil conf")
	}
	if _, err := NewObserver(conf.algorithm()); err != nil {
		return nil, fmt.Errorf("quant.Prepare: %w", err)
	}
	p, err := prepareGraph(g)
	if err != nil {
		return nil, fmt.Errorf("quant.Prepare: %w", err)
	}
	c := &Calibrator{conf: conf, g: p, sites: sites(p), first: len(p.Outputs)}
	seen := map[int]bool{}
	for _, s := range c.sites {
		for _, v := range slices.Concat(s.ins, s.outs) {
			if !seen[v] {
				seen[v] = true
				c.watch = append(c.watch, v)
				o, _ := NewObserver(conf.algorithm())
				c.obs = append(c.obs, o)
			}
		}
	}
	p.Outputs = append(p.Outputs, c.watch...)
	if c.prog, err = graph.Compile(p); err != nil {
		return nil, fmt.Errorf("quant.Prepare: %w", err)
	}
	return c, nil
}

// prepareGraph checks that g is a float32 graph and returns it unfused
// and frozen without fusion.
func prepareGraph(g *graph.Graph) (*graph.Graph, error) {
	if g == nil {
		return nil, errors.New("nil graph")
	}
	for _, n := range g.Nodes {
		if n.Op == "Quantize" || n.Op == "Dequantize" || n.Op == "QuantizePerChannel" || n.Op == "DequantizePerChannel" {
			return nil, fmt.Errorf("%w: it is already quantized (it holds a %s node)", ErrPrecision, n.Op)
		}
	}
	for _, v := range g.Values {
		switch v.DType {
		case autograd.BFloat16:
			return nil, fmt.Errorf("%w: value %s is bfloat16 (calibrate the float32 graph, traced without autocast)", ErrPrecision, v.Name)
		case autograd.Int8, autograd.Uint8:
			return nil, fmt.Errorf("%w: value %s is %v, an int8 graph", ErrPrecision, v.Name, v.DType)
		}
	}
	u, err := graph.Unfuse(g)
	if err != nil {
		return nil, err
	}
	return graph.Freeze(u, graph.WithFusion(false))
}

// Graph returns the graph being calibrated: g unfused and frozen without
// fusion, with the observed values added to its outputs.
func (c *Calibrator) Graph() *graph.Graph { return c.g }

// Observe runs the graph on one batch of inputs and adds the values its
// recorded ops see to their ranges. A NaN or infinity is an error naming
// the node that made it; the batch is then not counted.
func (c *Calibrator) Observe(inputs ...*autograd.Tensor) error {
	outs, err := c.prog.Run(inputs...)
	if err != nil {
		return fmt.Errorf("quant: calibration run: %w", err)
	}
	vals := make([][]float32, len(c.watch))
	for k := range c.watch {
		// The observers take no account of the elements' order, so a
		// channels-last value is read as it lies in memory.
		vals[k] = outs[c.first+k].Float32s()
		if bad := nonFinite(vals[k]); bad >= 0 {
			return fmt.Errorf("quant: calibration batch %d: %s holds %v", c.runs+1, c.describe(c.watch[k]), vals[k][bad])
		}
	}
	for k, v := range vals {
		if err := c.obs[k].Observe(v); err != nil {
			return fmt.Errorf("quant: calibration batch %d: %s: %w", c.runs+1, c.describe(c.watch[k]), err)
		}
	}
	c.runs++
	return nil
}

// nonFinite returns the index of the first NaN or infinity in x, or -1;
// like aminmax it tests nothing per element unless one is there.
func nonFinite(x []float32) int {
	var bad float32
	for _, v := range x {
		bad += v - v
	}
	if bad == 0 {
		return -1
	}
	for i, v := range x {
		if v-v != 0 || v != v {
			return i
		}
	}
	return -1
}

// describe names value v for an error: the node that computes it, with
// its scope, or the graph input it is.
func (c *Calibrator) describe(v int) string {
	for i, n := range c.g.Nodes {
		if slices.Contains(n.Outputs, v) {
			s := fmt.Sprintf("the result of node %d (%s)", i, n.Op)
			if n.Scope != "" {
				s += " in " + n.Scope
			}
			return s
		}
	}
	return "graph input " + c.g.Values[v].Name
}

// Finish turns the observed ranges into the conf's entries, one per
// recorded op, and applies IPEX 1.10's default recipe (see defaultRecipe)
// to decide where values are quantized. It fails before any Observe.
func (c *Calibrator) Finish() error {
	if c.runs == 0 {
		return errors.New("quant: Finish before any Observe: calibration needs at least one batch")
	}
	params := make(map[int]Params, len(c.watch))
	for k, v := range c.watch {
		lo, hi, ok := c.obs[k].Range()
		if !ok {
			return fmt.Errorf("quant: %s was never observed", c.describe(v))
		}
		params[v] = ChooseParams(lo, hi, c.conf.Scheme)
	}
	// A pool's result takes its input's parameters, for every reader:
	// the uint8 pool keeps scale and zero point, so the Quantize a
	// reader puts after it can vanish into it.
	for _, s := range c.sites {
		if slices.Contains(poolOps, s.name) {
			params[s.outs[0]] = params[s.ins[0]]
		}
	}
	ops := make([]OpConf, len(c.sites))
	for id, s := range c.sites {
		op := OpConf{ID: id, Name: s.name, Algorithm: c.conf.algorithm(), WeightGranularity: c.conf.granularity(),
			InputsFlow: slices.Clone(s.inFlow), OutputsFlow: slices.Clone(s.outFlow), WeightScales: [][]float64{}}
		for _, v := range s.ins {
			p := params[v]
			op.InputScales = append(op.InputScales, p.Scale)
			op.InputZeroPoints = append(op.InputZeroPoints, p.ZeroPoint)
			op.InputQuantizedDtypes = append(op.InputQuantizedDtypes, p.DType)
			op.InputsQuantized = append(op.InputsQuantized, true)
		}
		for _, v := range s.outs {
			p := params[v]
			op.OutputScales = append(op.OutputScales, p.Scale)
			op.OutputZeroPoints = append(op.OutputZeroPoints, p.ZeroPoint)
			op.OutputQuantizedDtypes = append(op.OutputQuantizedDtypes, p.DType)
			op.OutputsQuantized = append(op.OutputsQuantized, true)
		}
		if s.weight != graph.None {
			w := c.g.Consts[s.weight]
			op.WeightScales = [][]float64{WeightScales(w.ContiguousFloat32s(), w.Dim(0), c.conf.granularity() == "per_channel")}
		}
		ops[id] = op
	}
	defaultRecipe(ops)
	c.conf.Ops = ops
	return nil
}

// algorithm and granularity are the conf's settings with their defaults.
func (c *Conf) algorithm() string {
	if c.Algorithm == "" {
		return "min_max"
	}
	return c.Algorithm
}

func (c *Conf) granularity() string {
	if c.WeightGranularity == "" {
		return "per_channel"
	}
	return c.WeightGranularity
}
