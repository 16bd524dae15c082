package cli

import (
	"fmt"
	"io"
	"slices"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/feed"
	"github.com/kilnml/kiln/internal/npy"
)

// runCmd runs a saved graph on .npy inputs and writes its outputs as .npy
// files.
func runCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "FILE -i IN.npy [-i IN2.npy ...] [-o OUT.npy ...]", stderr)
	var ins, outs listFlag
	fs.Var(&ins, "i", "input `file` (.npy), once per graph input in order")
	fs.Var(&outs, "o", "output `file` (.npy), once per graph output in order (default out.npy for a graph with one output)")
	path, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	g, err := graph.Load(path)
	if err != nil {
		return err
	}
	if len(ins) != len(g.Inputs) {
		return usagef("%s takes %d input(s) (%s), got %d -i", path, len(g.Inputs), valueList(g, g.Inputs), len(ins))
	}
	if len(outs) == 0 && len(g.Outputs) == 1 {
		outs = listFlag{"out.npy"}
	}
	if len(outs) != len(g.Outputs) {
		return usagef("%s has %d outputs (%s), got %d -o", path, len(g.Outputs), valueList(g, g.Outputs), len(outs))
	}
	for i, o := range outs {
		if slices.Contains(outs[:i], o) {
			return usagef("output file %s is given twice", o)
		}
	}

	inputs := make([]*autograd.Tensor, len(ins))
	for i, file := range ins {
		x, err := npy.Read(file)
		if err != nil {
			return err
		}
		if x, err = feed.Conform(x, g.Values[g.Inputs[i]]); err != nil {
			return fmt.Errorf("input %d (%s): %w", i, file, err)
		}
		inputs[i] = x
	}
	p, err := graph.Compile(g)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	results, err := p.Run(inputs...)
	if err != nil {
		return fmt.Errorf("running %s: %w", path, err)
	}
	for i, file := range outs {
		if err := npy.Write(file, results[i]); err != nil {
			return err
		}
		note := ""
		if results[i].DType() == autograd.BFloat16 {
			note = " (as float32: .npy has no bfloat16)"
		}
		fmt.Fprintf(stdout, "wrote %s: %v %v%s\n", file, results[i].DType(), results[i].Shape(), note)
	}
	return nil
}

// valueList describes values as "%in: f32[1,3,8,8], ...".
func valueList(g *graph.Graph, ids []int) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		v := g.Values[id]
		s += fmt.Sprintf("%s %v%v", v.Name, v.DType, v.Shape)
	}
	return s
}
