package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/cli"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/npy"
)

// TestExportKilnRun exports fresh models with one-hot bags
// (--num-indices-per-lookup 1) and multi-hot ones (bags of 1 to 4
// indices, and of exactly 3), runs each graph with `kiln run` on .npy
// files of servingInputs at two batch sizes (the traced one and another),
// and checks the probabilities against the eager model within 1e-6; the
// graph's inputs are dense and indices, plus offsets for multi-hot bags;
// and `kiln bench` runs it on random bags.
func TestExportKilnRun(t *testing.T) {
	dir := t.TempDir()
	shape := []string{"--arch-embedding-size", "20-30-40", "--arch-sparse-feature-size", "4",
		"--arch-mlp-bot", "13-8-4", "--arch-mlp-top", "8-1", "--quiet"}
	for _, c := range []struct {
		name  string
		flags []string
		ops   []string // the graph's lookup and its inputs
	}{
		{"one-hot", []string{"--num-indices-per-lookup", "1"}, []string{"MergedEmbeddingBagFixed", "dense", "indices"}},
		{"multi-hot", []string{"--num-indices-per-lookup", "4"}, []string{"MergedEmbeddingBagPacked", "dense", "indices", "offsets"}},
		{"multi-hot fixed", []string{"--num-indices-per-lookup", "3", "--num-indices-per-lookup-fixed=true"}, []string{"MergedEmbeddingBagPacked", "dense", "indices", "offsets"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".kiln")
			flags := append(append([]string(nil), shape...), c.flags...)
			res := runOK(t, append([]string{"export", "--test-mini-batch-size", "8", "--out", out}, flags...)...)
			if !strings.Contains(res, "inputs "+c.ops[1]) || !strings.Contains(res, c.ops[len(c.ops)-1]+" int64") {
				t.Errorf("export prints no inputs %v:\n%s", c.ops[1:], res)
			}
			g, err := graph.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(g.String(), " = "+c.ops[0]+"(") || len(g.Inputs) != len(c.ops)-1 {
				t.Fatalf("graph with %d inputs and no %s, want inputs %v:\n%s", len(g.Inputs), c.ops[0], c.ops[1:], g)
			}
			for i, id := range g.Inputs {
				if name := g.Values[id].Name; !strings.Contains(name, c.ops[1+i]) {
					t.Errorf("input %d is named %q, want %q", i, name, c.ops[1+i])
				}
			}
			var bout, berr bytes.Buffer
			if status := cli.Main([]string{"bench", out, "--batch", "6", "--bag-size", "3", "--iters", "2", "--warmup", "0"}, &bout, &berr); status != 0 ||
				!strings.Contains(bout.String(), "batch 6") {
				t.Errorf("kiln bench: exit %d\n%s%s", status, bout.String(), berr.String())
			}
			o, err := parse(commands[0], flags, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			m, err := modelForServing(o)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []int{8, 5} {
				in, err := servingInputs(o, b, uint64(b))
				if err != nil {
					t.Fatal(err)
				}
				args := []string{"run", out, "-o", filepath.Join(dir, "p.npy")}
				for i, x := range in {
					file := filepath.Join(dir, fmt.Sprintf("in%d.npy", i))
					if err := npy.Write(file, x); err != nil {
						t.Fatal(err)
					}
					args = append(args, "-i", file)
				}
				var stdout, stderr bytes.Buffer
				if status := cli.Main(args, &stdout, &stderr); status != 0 {
					t.Fatalf("kiln %s: exit %d\n%s%s", strings.Join(args, " "), status, stdout.String(), stderr.String())
				}
				got, err := npy.Read(filepath.Join(dir, "p.npy"))
				if err != nil {
					t.Fatal(err)
				}
				want := servingForward(m, o.autocast(autograd.NoGrad(in[0])), noGrad(in[1:])...)
				if fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
					t.Fatalf("batch %d: kiln run gives %v, eager %v", b, got.Shape(), want.Shape())
				}
				for i, v := range got.Float32s() {
					if d := math.Abs(float64(v - want.Float32s()[i])); d > 1e-6 {
						t.Fatalf("batch %d, sample %d: kiln run %v, eager %v", b, i, v, want.Float32s()[i])
					}
				}
			}
		})
	}
}

// TestServingInputsMultiHot: multi-hot serving inputs hold bags of 1 to
// --num-indices-per-lookup sorted distinct in-range indices (that many
// drawn with --num-indices-per-lookup-fixed, repeats merged) in the
// packed layout; one index per table per sample otherwise; and infer
// --graph rejects a graph exported with the other layout.
func TestServingInputsMultiHot(t *testing.T) {
	shape := []string{"--arch-embedding-size", "3-50", "--arch-sparse-feature-size", "4", "--arch-mlp-bot", "13-8-4", "--arch-mlp-top", "8-1"}
	for _, c := range []struct {
		flags    []string
		min, max int
	}{
		{[]string{"--num-indices-per-lookup", "1"}, 1, 1},
		{[]string{"--num-indices-per-lookup", "1", "--num-indices-per-lookup-fixed=true"}, 1, 1},
		{[]string{"--num-indices-per-lookup", "6"}, 1, 6},
		{[]string{"--num-indices-per-lookup", "6", "--num-indices-per-lookup-fixed=true"}, 1, 6},
	} {
		o, err := parse(commands[0], append(append([]string(nil), shape...), c.flags...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		const b = 64
		in, err := servingInputs(o, b, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !o.multiHot() {
			if len(in) != 2 || fmt.Sprint(in[1].Shape()) != "[64 2]" {
				t.Errorf("%v: inputs %v, want dense and indices [64 2]", c.flags, inputNames(in))
			}
			continue
		}
		idx, off := in[1].Int64s(), in[2].Int64s()
		if len(in) != 3 || fmt.Sprint(in[2].Shape()) != "[2 65]" || off[0] != 0 || off[len(off)-1] != int64(len(idx)) {
			t.Fatalf("%v: inputs %v, offsets from %d to %d", c.flags, inputNames(in), off[0], off[len(off)-1])
		}
		sizes := map[int]bool{}
		for tab, rows := range o.embeddingSizes {
			row := off[tab*(b+1) : (tab+1)*(b+1)]
			if tab > 0 && row[0] != off[tab*(b+1)-1] {
				t.Errorf("%v: table %d starts at %d, table %d ends at %d", c.flags, tab, row[0], tab-1, off[tab*(b+1)-1])
			}
			for k := range b {
				bag := idx[row[k]:row[k+1]]
				n := len(bag)
				if n < c.min || n > min(c.max, rows) {
					t.Errorf("%v: table %d, bag %d holds %d indices, want %d to %d", c.flags, tab, k, n, c.min, min(c.max, rows))
				}
				if tab == 1 {
					sizes[n] = true
				}
				for i, r := range bag {
					if r < 0 || r >= int64(rows) || i > 0 && r <= bag[i-1] {
						t.Fatalf("%v: table %d, bag %d: %v, want sorted distinct indices below %d", c.flags, tab, k, bag, rows)
					}
				}
			}
		}
		// Fixed bags draw 6 indices each; a repeat is merged.
		if o.NumIndicesPerLookupFixed && !sizes[6] || !o.NumIndicesPerLookupFixed && len(sizes) < 3 {
			t.Errorf("%v: table 1's bag sizes %v", c.flags, sizes)
		}
	}

	dir := t.TempDir()
	out := filepath.Join(dir, "one.kiln")
	runOK(t, append([]string{"export", "--quiet", "--num-indices-per-lookup", "1", "--out", out}, shape...)...)
	var stdout, stderr bytes.Buffer
	if status := run(append([]string{"infer", "--graph", out, "--iters", "1", "--num-indices-per-lookup", "5"}, shape...), &stdout, &stderr); status == 0 ||
		!strings.Contains(stderr.String(), "takes 2 inputs, but these flags make 3") {
		t.Errorf("infer --graph of a one-hot graph with multi-hot flags: exit %d\n%s", status, stderr.String())
	}
}
