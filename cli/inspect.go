package cli

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/graph/draw"
	"github.com/kilnml/kiln/internal/atomicfile"
)

// inspect prints a saved graph, a count of its nodes by op and its
// parameter count; with --dot or --svg it draws the graph instead.
func inspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", "FILE [--dot | --svg] [-o OUT]", stderr)
	dot := fs.Bool("dot", false, "write the graph in Graphviz DOT (dot -Tsvg draws it) instead of printing it")
	svg := fs.Bool("svg", false, "draw the graph as an SVG image, laid out without Graphviz, instead of printing it")
	out := fs.String("o", "", "write the --dot or --svg drawing to this `file` instead of stdout")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: kiln inspect FILE [--dot | --svg] [-o OUT]

Print the graph, a count of its nodes by op and its parameter count, and
for an int8 graph what runs in int8. --dot and --svg draw it instead: one
box per node labelled with its op (a fused op by its fused name, with a
thick border), its scope, the constants it reads (shape and dtype, not
their values) and its results' shapes and dtypes; the graph's inputs and
outputs as boxes of their own. A box's fill is its result's dtype:
float32 blue, bfloat16 amber, int8 green, uint8 lilac, other dtypes grey.

`)
		fs.PrintDefaults()
	}
	path, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	if *dot && *svg {
		return usagef("--dot and --svg draw the graph in two ways: give one")
	}
	if *out != "" && !*dot && !*svg {
		return usagef("-o %s writes a drawing: give --dot or --svg too", *out)
	}
	g, err := graph.Load(path)
	if err != nil {
		return err
	}
	if *dot || *svg {
		drawTo := draw.SVG
		if *dot {
			drawTo = draw.DOT
		}
		write := func(w io.Writer) error { return drawTo(w, g, draw.WithTitle(filepath.Base(path))) }
		if *out == "" {
			return write(stdout)
		}
		return atomicfile.Write(*out, write)
	}
	fmt.Fprint(stdout, g.String())

	counts := map[string]int{}
	for _, n := range g.Nodes {
		counts[n.Op]++
	}
	ops := make([]string, 0, len(counts))
	for op := range counts {
		ops = append(ops, op)
	}
	// Most frequent first, so the ops that dominate the graph lead.
	slices.SortFunc(ops, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s %d", op, counts[op])
	}
	fmt.Fprintf(stdout, "nodes: %d (%s)\n", len(g.Nodes), strings.Join(parts, ", "))
	fmt.Fprintf(stdout, "parameters: %s in %d constants\n", count(g.NumParams()), len(g.Consts))
	if s := int8Summary(g); s.layers+s.weights+s.quantizes+len(s.activations) > 0 {
		writeInt8Summary(stdout, s)
	}
	return nil
}

// writeInt8Summary prints what a converted graph runs in int8, so that a
// conversion that left layers in float32 shows.
func writeInt8Summary(w io.Writer, s int8Stats) {
	kinds := make([]string, 0, len(s.byLayer))
	for k := range s.byLayer {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, s.byLayer[k])
	}
	layers := fmt.Sprint(s.layers)
	if len(parts) > 0 {
		layers += " (" + strings.Join(parts, ", ") + ")"
	}
	acts := "none"
	if len(s.activations) > 0 {
		names := make([]string, len(s.activations))
		for i, d := range s.activations {
			names[i] = d.String()
		}
		acts = strings.Join(names, ", ")
	}
	fmt.Fprintf(w, "quantization:\n")
	fmt.Fprintf(w, "  int8 layer nodes: %s\n", layers)
	fmt.Fprintf(w, "  int8 weights: %d constants, %s bytes\n", s.weights, count(s.weightBytes))
	fmt.Fprintf(w, "  Quantize nodes: %d\n", s.quantizes)
	fmt.Fprintf(w, "  8-bit activations: %s\n", acts)
}

// count writes n, with an SI form after it when that reads easier: 11689512
// (11.7M).
func count(n int) string {
	s := fmt.Sprint(n)
	if n >= 1000 {
		s += " (" + human(n) + ")"
	}
	return s
}

// human writes a count with an SI suffix: 11.7M.
func human(n int) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fG", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
