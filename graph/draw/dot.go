package draw

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/kilnml/kiln/graph"
)

// DOT writes g in Graphviz's DOT language, for `dot -Tsvg` or any other
// Graphviz tool to lay out: one box per node, input and output, filled by
// dtype, and a legend cluster naming the colours. It fails on a graph
// that graph.Validate rejects, or when w does.
func DOT(w io.Writer, g *graph.Graph, opts ...Option) error {
	d, err := newDrawing(g, opts)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.WriteString("digraph kiln {\n")
	bw.WriteString("  graph [rankdir=TB, nodesep=0.3, ranksep=0.35, fontname=\"Helvetica\"")
	if d.title != "" {
		fmt.Fprintf(bw, ", label=%s, labelloc=t", quote(d.title))
	}
	bw.WriteString("];\n")
	bw.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, penwidth=1];\n")
	bw.WriteString("  edge [arrowsize=0.7, color=\"#555555\"];\n")
	for _, b := range d.boxes {
		lines := make([]string, len(b.lines))
		for i, l := range b.lines {
			lines[i] = l.text
		}
		fmt.Fprintf(bw, "  %s [label=%s, fillcolor=%s", b.id, quote(strings.Join(lines, "\n")), quote(fill(b.dtype)))
		switch {
		case b.kind == inputBox:
			bw.WriteString(", shape=invhouse, style=filled, penwidth=1.5")
		case b.kind == outputBox:
			bw.WriteString(", shape=house, style=filled, penwidth=1.5")
		case b.fused:
			bw.WriteString(", penwidth=2.5")
		}
		bw.WriteString("];\n")
	}
	for _, e := range d.edges {
		fmt.Fprintf(bw, "  %s -> %s;\n", d.boxes[e.from].id, d.boxes[e.to].id)
	}
	if len(d.dtypes) > 0 {
		bw.WriteString("  subgraph cluster_legend {\n")
		bw.WriteString("    label=\"fill: result dtype\"; fontsize=10; style=dashed; color=\"#999999\";\n")
		for i, dt := range d.dtypes {
			fmt.Fprintf(bw, "    legend%d [label=%s, fillcolor=%s];\n", i, quote(legendText(dt)), quote(fill(dt)))
		}
		fmt.Fprintf(bw, "    legend_fused [label=\"fused op\", fillcolor=\"#ffffff\", penwidth=2.5];\n")
		// Invisible edges stack the legend's entries.
		for i := 1; i < len(d.dtypes); i++ {
			fmt.Fprintf(bw, "    legend%d -> legend%d [style=invis];\n", i-1, i)
		}
		fmt.Fprintf(bw, "    legend%d -> legend_fused [style=invis];\n", len(d.dtypes)-1)
		bw.WriteString("  }\n")
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// quote writes s as a DOT double-quoted string: quotes and backslashes
// escaped, line breaks as \n (which Graphviz centres).
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\r\n", `\n`, "\n", `\n`, "\r", `\n`)
	return `"` + r.Replace(s) + `"`
}
