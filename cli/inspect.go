package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kilnml/kiln/graph"
)

// inspect prints a saved graph, a count of its nodes by op and its
// parameter count.
func inspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", "FILE", stderr)
	path, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	g, err := graph.Load(path)
	if err != nil {
		return err
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
	params := fmt.Sprint(g.NumParams())
	if g.NumParams() >= 1000 {
		params += " (" + human(g.NumParams()) + ")"
	}
	fmt.Fprintf(stdout, "parameters: %s in %d constants\n", params, len(g.Consts))
	return nil
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
