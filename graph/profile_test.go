package graph

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// profiledNet freezes and compiles a small residual conv net whose graph
// holds the fused Conv2d+ReLU and Conv2d+Add+ReLU, a pooling, a flatten
// the plan turns into a view, and a Linear; it returns an input for it.
func profiledNet(t *testing.T) (*Program, *Graph, *autograd.Tensor) {
	t.Helper()
	g := autograd.NewGenerator(11)
	m := newPassNet(func(l []nn.Layer, x *autograd.Tensor) *autograd.Tensor {
		y := l[1].Forward(l[0].Forward(x))
		y = autograd.ReLU(autograd.Add(x, l[2].Forward(y)))
		return l[5].Forward(l[4].Forward(l[3].Forward(y)))
	}, passConv2d(g, 4, 4), nn.NewReLU(), passConv2d(g, 4, 4), nn.NewAdaptiveAvgPool2d(1, 1), nn.NewFlatten(1, -1),
		nn.NewLinear(g, 4, 3, nn.LinearOptions{}))
	x := autograd.Randn(g, 2, 4, 6, 6)
	p, frozen := freezeAndCompile(t, m, x)
	return p, frozen, x
}

func TestProfile(t *testing.T) {
	p, gr, x := profiledNet(t)
	const runs = 5
	prof, err := p.Profile(runs, x)
	if err != nil {
		t.Fatal(err)
	}
	if prof.Runs != runs || len(prof.Nodes) != len(gr.Nodes) {
		t.Fatalf("got %d runs and %d nodes, want %d and %d", prof.Runs, len(prof.Nodes), runs, len(gr.Nodes))
	}
	var sum time.Duration
	ops := map[string]bool{}
	for i, n := range prof.Nodes {
		ops[n.Op] = true
		if n.Node != i || n.Op != gr.Nodes[i].Op || n.Scope != gr.Nodes[i].Scope || len(n.Outputs) != len(gr.Nodes[i].Outputs) {
			t.Errorf("entry %d describes node %d %s in %q with %d outputs, want node %d %s in %q", i,
				n.Node, n.Op, n.Scope, len(n.Outputs), i, gr.Nodes[i].Op, gr.Nodes[i].Scope)
		}
		switch n.Mode {
		case NodeCompiled, NodeEager:
			if n.Median <= 0 || n.Total < n.Median {
				t.Errorf("node %d (%s): median %v, total %v", i, n.Op, n.Median, n.Total)
			}
		default:
			if n.Median != 0 || n.Total != 0 {
				t.Errorf("node %d (%s) is a %v but took %v", i, n.Op, n.Mode, n.Total)
			}
		}
		sum += n.Total
	}
	if sum != prof.Total || prof.Total <= 0 {
		t.Errorf("nodes' totals sum to %v, the profile's total is %v", sum, prof.Total)
	}
	for _, op := range []string{"Conv2d+ReLU", "Conv2d+Add+ReLU", "AdaptiveAvgPool2d", "Linear"} {
		if !ops[op] {
			t.Errorf("no %s node in the profile of\n%v", op, gr)
		}
	}

	// FLOPs: 2 × output elements × the dot product each one takes.
	wantFLOPs := map[string]int64{
		"Conv2d+ReLU":       2 * (2 * 4 * 6 * 6) * (4 / 1 * 3 * 3), // N·Cout·H·W × Cin/groups·kh·kw
		"Conv2d+Add+ReLU":   2 * (2 * 4 * 6 * 6) * (4 / 1 * 3 * 3),
		"AdaptiveAvgPool2d": 0,
		"Linear":            2 * 2 * 3 * 4, // 2·M·N·K
	}
	for _, n := range prof.Nodes {
		if want, ok := wantFLOPs[n.Op]; ok && n.FLOPs != want {
			t.Errorf("%s: %d FLOPs, want %d", n.Op, n.FLOPs, want)
		}
		if n.FLOPs > 0 && n.Median > 0 && n.GFLOPS() <= 0 {
			t.Errorf("%s: GFLOPS %g", n.Op, n.GFLOPS())
		}
	}

	// The table: every working node once, the shares summing to 100%.
	table := prof.String()
	lines := strings.Split(table, "\n")
	if !strings.HasPrefix(lines[1], "node") || !strings.Contains(lines[1], "median ms") {
		t.Fatalf("no table header in\n%s", table)
	}
	var share float64
	rows := 0
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			break
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			continue // the note on nodes that do no work
		}
		rows++
		// The share follows the mode and the median; the scope may be
		// empty and the output more than one word, so count from the mode.
		for j, w := range f {
			if (w == "compiled" || w == "eager") && j+2 < len(f) {
				share += atof(t, f[j+2])
				break
			}
		}
	}
	working := 0
	for _, n := range prof.Nodes {
		if n.Mode == NodeCompiled || n.Mode == NodeEager {
			working++
		}
	}
	if rows != working {
		t.Errorf("the table has %d node rows, want %d:\n%s", rows, working, table)
	}
	if share < 99 || share > 101 {
		t.Errorf("the shares sum to %.1f%%:\n%s", share, table)
	}
	if !strings.Contains(table, "\nop ") || !strings.Contains(table, "Conv2d+Add+ReLU") {
		t.Errorf("no op summary in\n%s", table)
	}

	// Run reuses the plan Profile made.
	if _, err := p.Run(x); err != nil || len(p.plans) != 1 {
		t.Errorf("Run after Profile: %v, %d plans", err, len(p.plans))
	}
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestProfileTop checks that top cuts the node table, not the op summary.
func TestProfileTop(t *testing.T) {
	p, _, x := profiledNet(t)
	prof, err := p.Profile(1, x)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := prof.WriteTable(&b, 1); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "3 nodes more") || !strings.Contains(out, "AdaptiveAvgPool2d") {
		t.Errorf("top 1 table:\n%s", out)
	}
}

func TestProfileErrors(t *testing.T) {
	p, _, x := profiledNet(t)
	g := autograd.NewGenerator(1)
	for _, tc := range []struct {
		name   string
		inputs []*autograd.Tensor
	}{
		{"count", nil},
		{"nil", []*autograd.Tensor{nil}},
		{"dtype", []*autograd.Tensor{autograd.Cast(x, autograd.BFloat16)}},
		{"rank", []*autograd.Tensor{autograd.Randn(g, 4, 6, 6)}},
		{"channels", []*autograd.Tensor{autograd.Randn(g, 2, 5, 6, 6)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, runErr := p.Run(tc.inputs...)
			_, err := p.Profile(3, tc.inputs...)
			if err == nil || runErr == nil || err.Error() != runErr.Error() {
				t.Errorf("Profile: %v\nRun:     %v", err, runErr)
			}
		})
	}
	for _, runs := range []int{0, -1} {
		if _, err := p.Profile(runs, x); err == nil || !strings.Contains(err.Error(), "at least one run") {
			t.Errorf("Profile(%d): %v", runs, err)
		}
	}
}
