package graph

import (
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// TestUnfuse splits every fusion pattern's fused graph back into its
// parts: the result holds no fused op but ChannelShuffle, has as many
// nodes as the graph frozen with fusion off, and computes its bits.
func TestUnfuse(t *testing.T) {
	for _, c := range fusionCases() {
		t.Run(c.name, func(t *testing.T) {
			gen := autograd.NewGenerator(7)
			m := c.model(gen)
			x := autograd.Randn(gen, c.input...)
			traced, _ := passTrace(t, m, x, c.bf16)
			fused, err := Freeze(traced)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := Freeze(traced, WithFusion(false))
			if err != nil {
				t.Fatal(err)
			}
			u, err := Unfuse(fused)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range u.Nodes {
				if strings.Contains(n.Op, FusedSep) || n.Op == "LinearConcat" {
					t.Fatalf("unfused graph holds %s:\n%s", n.Op, u)
				}
			}
			if c.op != "ChannelShuffle" && len(u.Nodes) != len(plain.Nodes) {
				t.Errorf("unfused graph has %d nodes, frozen without fusion %d:\n%s\n%s", len(u.Nodes), len(plain.Nodes), u, plain)
			}
			got, want := passRun(t, u, x), passRun(t, plain, x)
			if c.op == "LinearConcat" {
				// The Linear layers' results are the graph's outputs in
				// some order; compare them as the trace orders them.
				want = passRun(t, fused, x)
			}
			if !slices.Equal(got.Values(), want.Values()) {
				t.Errorf("unfused graph's output differs from the graph frozen without fusion")
			}
		})
	}
}

// TestUnfuseKeepsPlainGraph leaves a graph without fused nodes as it is.
func TestUnfuseKeepsPlainGraph(t *testing.T) {
	gen := autograd.NewGenerator(1)
	c := fusionCases()[0]
	x := autograd.Randn(gen, c.input...)
	traced, _ := passTrace(t, c.model(gen), x, false)
	plain, err := Freeze(traced, WithFusion(false))
	if err != nil {
		t.Fatal(err)
	}
	u, err := Unfuse(plain)
	if err != nil {
		t.Fatal(err)
	}
	if u.String() != plain.String() {
		t.Errorf("Unfuse changed a plain graph:\n%s\nbecame\n%s", plain, u)
	}
}
