package graph

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kilnml/kiln/autograd"
)

// Profile is where the time of a compiled graph's runs went, node by
// node: the frozen-graph counterpart of PyTorch's autograd profiler
// table. Fusion renames and merges the ops a model was written with, so
// the table is by the graph's nodes ("Conv2d+Add+ReLU" in scope
// "layer1.0"), as g.String prints them.
type Profile struct {
	Runs int
	// Nodes holds one entry for every node of the graph, in graph order,
	// including nodes that do no work per run.
	Nodes []NodeProfile
	// Total is the time spent inside nodes, summed over the runs: the
	// whole that each node's share is a part of.
	Total time.Duration
	// Overhead is the rest of the runs' time, summed over the runs:
	// copying the inputs into the plan's storage and constant outputs out
	// of it, and the timers themselves.
	Overhead time.Duration
}

// NodeProfile is one node's part of a Profile.
type NodeProfile struct {
	Node  int // index in Graph.Nodes
	Op    string
	Scope string
	// Outputs are the node's results as the profiled plan holds them:
	// their shapes are those of the profiled inputs, which may differ
	// from the traced ones in Graph.Values.
	Outputs []Value
	Mode    NodeMode
	// FLOPs counts the floating-point operations of one run of the node,
	// two per multiply-add of its matrix product or convolution, for the
	// ops whose cost that is (Conv2d, Conv3d, Linear, LinearConcat,
	// Matmul, BMM and their fused forms, whose epilogues it leaves out);
	// 0 for the others.
	FLOPs int64
	// Median is the median time of one run of the node; Total is the sum
	// over the runs. Both are 0 for nodes that do no work per run.
	Median, Total time.Duration
}

// GFLOPS returns the node's rate at its median time in 10⁹ floating-point
// operations a second, or 0 where its FLOPs or time are not known.
func (n *NodeProfile) GFLOPS() float64 {
	if n.FLOPs == 0 || n.Median <= 0 {
		return 0
	}
	return float64(n.FLOPs) / n.Median.Seconds() / 1e9
}

// NodeMode is how a plan runs a node.
type NodeMode int

const (
	// NodeCompiled nodes run their compiled form on planned storage.
	NodeCompiled NodeMode = iota
	// NodeEager nodes have no compiled form for their operands and run
	// their eager op, which allocates, then copy the result: a slow spot
	// worth knowing about.
	NodeEager
	// NodeView nodes (a reshape, an identity) give their input's storage
	// another shape and do no work per run.
	NodeView
	// NodeFolded nodes read only constants: the plan ran them once, when
	// it was made, and they do no work per run.
	NodeFolded
)

func (m NodeMode) String() string {
	switch m {
	case NodeCompiled:
		return "compiled"
	case NodeEager:
		return "eager"
	case NodeView:
		return "view"
	case NodeFolded:
		return "folded"
	}
	return fmt.Sprintf("NodeMode(%d)", int(m))
}

// Profile runs the graph on inputs runs times, timing every node, and
// reports where the time went. It plans the inputs as Run does, planning
// them first if they are new, and fails as Run does on inputs that do not
// fit the graph. The timers add a little to every node, so the profile's
// times add up to somewhat more than Run's; Run itself is not slowed.
// Like a Run, it overwrites the results an earlier Run with inputs of
// these types returned.
func (p *Program) Profile(runs int, inputs ...*autograd.Tensor) (*Profile, error) {
	if runs < 1 {
		return nil, fmt.Errorf("graph: Profile needs at least one run, got %d", runs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pl, err := p.planFor(inputs)
	if err != nil {
		return nil, err
	}

	// times[r*len(pl.steps)+s] is step s of run r.
	times := make([]time.Duration, runs*len(pl.steps))
	var cur []time.Duration
	timed := func() {
		for i := range pl.steps {
			pl.cur = i
			start := time.Now()
			pl.steps[i].fn()
			cur[i] = time.Since(start)
		}
	}
	var wall time.Duration
	for r := range runs {
		cur = times[r*len(pl.steps) : (r+1)*len(pl.steps)]
		start := time.Now()
		err := pl.runWith(inputs, timed)
		wall += time.Since(start)
		if err != nil {
			return nil, err
		}
	}

	prof := &Profile{Runs: runs, Nodes: make([]NodeProfile, len(pl.g.Nodes))}
	for i := range pl.g.Nodes {
		prof.Nodes[i] = pl.describe(i)
	}
	for _, i := range pl.views {
		prof.Nodes[i].Mode = NodeView
	}
	for _, i := range pl.folded {
		prof.Nodes[i].Mode = NodeFolded
	}
	for _, i := range pl.eager {
		prof.Nodes[i].Mode = NodeEager
	}
	perRun := make([]time.Duration, runs)
	for s, st := range pl.steps {
		if st.node < 0 {
			continue // a constant output's copy: overhead
		}
		for r := range runs {
			perRun[r] = times[r*len(pl.steps)+s]
		}
		n := &prof.Nodes[st.node]
		n.Median = median(perRun)
		for _, d := range perRun {
			n.Total += d
		}
		prof.Total += n.Total
	}
	prof.Overhead = max(wall-prof.Total, 0)
	return prof, nil
}

// describe returns what the profile says of node i in pl, timings aside.
func (pl *plan) describe(i int) NodeProfile {
	n := &pl.g.Nodes[i]
	np := NodeProfile{Node: i, Op: n.Op, Scope: n.Scope, Outputs: make([]Value, len(n.Outputs))}
	outs := make([]*autograd.Tensor, len(n.Outputs))
	for j, o := range n.Outputs {
		t := pl.vals[o]
		outs[j] = t
		np.Outputs[j] = Value{Name: pl.g.Values[o].Name, Shape: t.Shape(), DType: t.DType(), Format: t.Format()}
	}
	ins := make([]*autograd.Tensor, len(n.Inputs))
	for j, v := range n.Inputs {
		if v != None {
			ins[j] = pl.vals[v]
		}
	}
	np.FLOPs = flops(n.Op, ins, outs)
	return np
}

// flops counts the operations of a matrix product or convolution node
// (float or int8), two per multiply-add, from its operands' shapes; 0
// for other ops. Every output element of a convolution is a dot product
// over its group's input channels and the kernel window, the size of one
// filter (the weight's dimensions after the first); of a linear layer or
// a matrix product, over the shared dimension K.
func flops(op string, ins, outs []*autograd.Tensor) int64 {
	base, rest, _ := strings.Cut(op, FusedSep)
	if base == "Dequantize" {
		// An int8 layer: its weight is the layer's, in int8.
		base, _, _ = strings.Cut(rest, FusedSep)
	}
	numel := func(t *autograd.Tensor) int64 {
		n := int64(1)
		for _, d := range t.Shape() {
			n *= int64(d)
		}
		return n
	}
	var dot int64 // the length of each output element's dot product
	switch base {
	case "Conv2d", "Conv3d":
		if len(ins) < 2 || ins[1] == nil {
			return 0
		}
		dot = numel(ins[1]) / int64(ins[1].Dim(0))
	case "Linear", "LinearConcat":
		if len(ins) < 2 || ins[1] == nil || ins[1].NDim() != 2 {
			return 0
		}
		dot = int64(ins[1].Dim(1))
	case "Matmul", "BMM":
		if len(ins) < 1 || ins[0] == nil || ins[0].NDim() == 0 {
			return 0
		}
		dot = int64(ins[0].Dim(ins[0].NDim() - 1))
	default:
		return 0
	}
	var out int64
	for _, t := range outs {
		out += numel(t)
	}
	return 2 * out * dot
}

// median returns the median of ds, which it sorts.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	n := len(ds)
	if n%2 == 1 {
		return ds[n/2]
	}
	return (ds[n/2-1] + ds[n/2]) / 2
}

// nodes returns "1 node" or "n nodes".
func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// share returns d as a percentage of the profile's time in nodes.
func (p *Profile) share(d time.Duration) float64 {
	if p.Total <= 0 {
		return 0
	}
	return 100 * float64(d) / float64(p.Total)
}

// String returns the whole table: every node that works per run, and the
// summary by op.
func (p *Profile) String() string {
	var b strings.Builder
	p.WriteTable(&b, 0)
	return b.String()
}

// WriteTable writes the profile as two tables: the top nodes by total
// time (every node that works per run when top is 0 or less), each with
// its median time, its share of the time in nodes and, where its FLOPs
// are known, its rate; then the nodes' time summed by op. Times are in
// milliseconds, the op summary's per run.
//
//	profile: 20 runs, 0.031 ms a run in 4 nodes, 0.006 ms a run outside them
//	node  op                 scope  output        mode      median ms  %     GFLOP/s
//	1     Conv2d+Add+ReLU    l2     f32[2,4,6,6]  compiled  0.015      47.7  1.4
//	0     Conv2d+ReLU        l0     f32[2,4,6,6]  compiled  0.015      45.9  1.4
//	2     AdaptiveAvgPool2d  l3     f32[2,4,1,1]  compiled  0.001      4.2   -
//	4     Linear             l5     f32[2,3]      compiled  0.001      2.1   0.1
//	… 1 node with no work per run: views of their input, or constants folded when planned
//
//	op                 nodes  ms a run  %
//	Conv2d+Add+ReLU    1      0.015     47.7
//	…
func (p *Profile) WriteTable(w io.Writer, top int) error {
	var working, idle []*NodeProfile
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if n.Mode == NodeView || n.Mode == NodeFolded {
			idle = append(idle, n)
		} else {
			working = append(working, n)
		}
	}
	slices.SortStableFunc(working, func(a, b *NodeProfile) int { return cmp.Compare(b.Total, a.Total) })
	perRun := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(max(p.Runs, 1)) }

	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "profile: %d runs, %.3f ms a run in %s, %.3f ms a run outside them\n",
		p.Runs, perRun(p.Total), nodes(len(working)), perRun(p.Overhead))
	fmt.Fprintln(tw, "node\top\tscope\toutput\tmode\tmedian ms\t%\tGFLOP/s")
	shown := working
	if top > 0 && len(shown) > top {
		shown = shown[:top]
	}
	for _, n := range shown {
		outs := make([]string, len(n.Outputs))
		for j := range n.Outputs {
			outs[j] = n.Outputs[j].typeString()
		}
		rate := "-"
		if g := n.GFLOPS(); g > 0 {
			rate = fmt.Sprintf("%.1f", g)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.3f\t%.1f\t%s\n", n.Node, n.Op, n.Scope,
			strings.Join(outs, " "), n.Mode, n.Median.Seconds()*1e3, p.share(n.Total), rate)
	}
	if len(shown) < len(working) {
		fmt.Fprintf(tw, "… %s more\n", nodes(len(working)-len(shown)))
	}
	if len(idle) > 0 {
		fmt.Fprintf(tw, "… %s with no work per run: views of their input, or constants folded when planned\n", nodes(len(idle)))
	}

	type opSum struct {
		op    string
		nodes int
		total time.Duration
	}
	var ops []*opSum
	byName := map[string]*opSum{}
	for _, n := range working {
		s := byName[n.Op]
		if s == nil {
			s = &opSum{op: n.Op}
			byName[n.Op] = s
			ops = append(ops, s)
		}
		s.nodes++
		s.total += n.Total
	}
	slices.SortStableFunc(ops, func(a, b *opSum) int { return cmp.Compare(b.total, a.total) })
	if err := tw.Flush(); err != nil {
		return err
	}
	// A table of its own, so its columns do not take the widths of the
	// node table's.
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nop\tnodes\tms a run\t%")
	for _, s := range ops {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.1f\n", s.op, s.nodes, perRun(s.total), p.share(s.total))
	}
	return tw.Flush()
}
