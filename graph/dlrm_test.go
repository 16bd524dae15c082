package graph

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn/models"
)

// dlrmCase is a small DLRM, traced from Forward (per-table indices and
// offsets) or from ForwardFixed ([B, T, L] indices).
type dlrmCase struct {
	name  string
	cfg   func(c *models.DLRMConfig)
	fixed bool
}

func dlrmCases() []dlrmCase {
	return []dlrmCase{
		{"dot", func(*models.DLRMConfig) {}, false},
		{"dot+self", func(c *models.DLRMConfig) { c.InteractionItself = true }, false},
		{"cat", func(c *models.DLRMConfig) { c.InteractionOp = "cat" }, false},
		{"mean", func(c *models.DLRMConfig) { c.EmbeddingMode = "mean" }, false},
		{"include last offset", func(c *models.DLRMConfig) { c.IncludeLastOffset = true }, false},
		// Sparse tables change only the gradients: the trace is the same.
		{"sparse tables", func(c *models.DLRMConfig) { c.SparseTables = true }, false},
		{"loss threshold", func(c *models.DLRMConfig) { c.LossThreshold = 0.01 }, false},
		{"fixed dot", func(*models.DLRMConfig) {}, true},
		{"fixed dot+self mean", func(c *models.DLRMConfig) { c.InteractionItself, c.EmbeddingMode = true, "mean" }, true},
	}
}

// dlrmRows are the tables' row counts.
var dlrmRows = []int{7, 50, 300}

func newDLRM(t testing.TB, c dlrmCase) *models.DLRM {
	t.Helper()
	cfg := models.DLRMConfig{SparseFeatureSize: 8, EmbeddingSizes: dlrmRows, BottomMLP: []int{13, 16, 8}, TopMLP: []int{16, 1}}
	c.cfg(&cfg)
	m, err := models.NewDLRM(autograd.NewGenerator(11), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// dlrmInputs are a batch of batch samples: the dense features, then each
// table's indices, then each table's offsets (multi-hot bags, table 1's
// second bag empty), or with fixed the dense features and [B, T, L]
// indices.
func dlrmInputs(m *models.DLRM, batch int, fixed bool, seed uint64) []*autograd.Tensor {
	r := rand.New(rand.NewPCG(seed, 3))
	dense := autograd.Randn(autograd.NewGenerator(seed), batch, 13)
	rows := m.Config.EmbeddingSizes
	if fixed {
		const L = 3
		idx := make([]int64, batch*len(rows)*L)
		for i := range idx {
			idx[i] = r.Int64N(int64(rows[i/L%len(rows)]))
		}
		return []*autograd.Tensor{dense, autograd.FromInt64(idx, batch, len(rows), L)}
	}
	var indices, offsets []*autograd.Tensor
	for t, n := range rows {
		var idx, off []int64
		for b := range batch {
			off = append(off, int64(len(idx)))
			size := 1 + r.IntN(4)
			if t == 1 && b == 1 {
				size = 0
			}
			for range size {
				idx = append(idx, r.Int64N(int64(n)))
			}
		}
		if m.Config.IncludeLastOffset {
			off = append(off, int64(len(idx)))
		}
		indices = append(indices, autograd.FromInt64(idx, len(idx)))
		offsets = append(offsets, autograd.FromInt64(off, len(off)))
	}
	return append(append([]*autograd.Tensor{dense}, indices...), offsets...)
}

// dlrmForward runs m on inputs as dlrmInputs lays them out.
func dlrmForward(m *models.DLRM, fixed bool, in []*autograd.Tensor) []*autograd.Tensor {
	if fixed {
		return []*autograd.Tensor{m.ForwardFixed(in[0], in[1])}
	}
	T := m.Emb.Len()
	return []*autograd.Tensor{m.Forward(in[0], in[1:1+T], in[1+T:])}
}

// dlrmEager is the eager model's output, recording no gradient.
func dlrmEager(m *models.DLRM, fixed bool, in []*autograd.Tensor) *autograd.Tensor {
	views := make([]*autograd.Tensor, len(in))
	for i, x := range in {
		views[i] = autograd.NoGrad(x)
	}
	return dlrmForward(m, fixed, views)[0]
}

func traceDLRM(t testing.TB, m *models.DLRM, fixed bool, in []*autograd.Tensor) *Graph {
	t.Helper()
	g, err := TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor { return dlrmForward(m, fixed, in) }, in...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestDLRMGraph traces small DLRMs, freezes and compiles them: the graph
// run eagerly and compiled, and saved and loaded, gives the eager model's
// output, the compiled run bit for bit the graph's eager one with every
// node compiled, for the traced batch and for another batch size.
func TestDLRMGraph(t *testing.T) {
	for _, c := range dlrmCases() {
		t.Run(c.name, func(t *testing.T) {
			m := newDLRM(t, c)
			in := dlrmInputs(m, 4, c.fixed, 1)
			traced := traceDLRM(t, m, c.fixed, in)
			frozen, err := Freeze(traced)
			if err != nil {
				t.Fatal(err)
			}
			s := frozen.String()
			lookup := "MergedEmbeddingBag"
			if c.fixed {
				lookup += "Fixed"
			}
			want := []string{" = " + lookup + "(", " = Linear+ReLU(", " = Linear+Sigmoid("}
			if m.Config.InteractionOp != "cat" {
				want = append(want, " = Interaction(")
			}
			for _, w := range want {
				if !strings.Contains(s, w) {
					t.Errorf("the frozen graph has no %q:\n%s", strings.TrimPrefix(w, " = "), s)
				}
			}
			for _, n := range frozen.Nodes {
				if n.Op != lookup {
					continue
				}
				for j := range dlrmRows {
					if !frozen.IsConst(n.Inputs[j]) {
						t.Errorf("table %d (%s) is not a constant", j, frozen.Values[n.Inputs[j]].Name)
					}
				}
			}
			var buf bytes.Buffer
			if err := Encode(&buf, frozen); err != nil {
				t.Fatal(err)
			}
			loaded, err := Decode(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			graphs := map[string]*Graph{"frozen": frozen, "loaded": loaded}
			for name, g := range graphs {
				p, err := Compile(g)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for _, batch := range []int{4, 3} {
					in := dlrmInputs(m, batch, c.fixed, uint64(batch))
					want := dlrmEager(m, c.fixed, in)
					eager, err := p.runEager(in)
					if err != nil {
						t.Fatalf("%s, batch %d, graph run eagerly: %v", name, batch, err)
					}
					golden.AssertClose(t, name+" graph run eagerly", eager[0], want, 1e-6)
					pl := checkCompiled(t, p, in...)
					golden.AssertClose(t, name+" compiled graph", pl.outs[0], want, 1e-6)
					for _, i := range pl.eager {
						t.Errorf("%s: node %d (%s) has no compiled form", name, i, g.Nodes[i].Op)
					}
				}
			}
		})
	}
}

// TestDLRMRunAllocatesNothing: a compiled DLRM's lookups and interaction
// check their indices and run into the plan's storage with no allocation
// per run.
func TestDLRMRunAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	if strings.HasPrefix(kernels.Features(), "generic") {
		t.Skip("the generic reference kernels (noasm builds, CPUs without AVX2) allocate per call")
	}
	for _, c := range []dlrmCase{dlrmCases()[1], dlrmCases()[len(dlrmCases())-1]} {
		t.Run(c.name, func(t *testing.T) {
			m := newDLRM(t, c)
			in := dlrmInputs(m, 4, c.fixed, 1)
			g, err := Freeze(traceDLRM(t, m, c.fixed, in))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Run(in...); err != nil {
				t.Fatal(err)
			}
			if a := testing.AllocsPerRun(20, func() { p.Run(in...) }); a > 0 {
				t.Errorf("a run allocates %v times", a)
			}
		})
	}
}

// TestDLRMRunBadIndex: an index outside its table, or offsets that do not
// fit the indices, fails the run with an error naming the node and the
// table, in the compiled run and the eager one.
func TestDLRMRunBadIndex(t *testing.T) {
	for _, c := range []struct {
		dlrmCase
		edit func(in []*autograd.Tensor)
		want string
	}{
		{dlrmCases()[0], func(in []*autograd.Tensor) { in[3].Int64s()[2] = 300 }, "table 2: index 300"},
		{dlrmCases()[0], func(in []*autograd.Tensor) { in[1].Int64s()[0] = -1 }, "table 0: index -1"},
		{dlrmCases()[0], func(in []*autograd.Tensor) { in[5].Int64s()[1] = 1 << 40 }, "table 1: offsets[1]"},
		{dlrmCases()[len(dlrmCases())-1], func(in []*autograd.Tensor) { in[1].Int64s()[4] = 50 }, "table 1: index 50"},
	} {
		t.Run(c.want, func(t *testing.T) {
			m := newDLRM(t, c.dlrmCase)
			in := dlrmInputs(m, 4, c.fixed, 1)
			g, err := Freeze(traceDLRM(t, m, c.fixed, in))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			checkLookupFails(t, p, in, c.edit, "MergedEmbeddingBag", c.want)
		})
	}
}

// checkLookupFails runs p on in, then on in changed by edit, compiled and
// eagerly, and fails unless both runs of the changed inputs fail with a
// *NodeError of an index or shape error of a lookup in emb_l whose op
// starts with op and whose message contains want.
func checkLookupFails(t *testing.T, p *Program, in []*autograd.Tensor, edit func([]*autograd.Tensor), op, want string) {
	t.Helper()
	if _, err := p.Run(in...); err != nil {
		t.Fatal(err)
	}
	edit(in)
	for name, run := range map[string]func() error{
		"compiled": func() error { _, err := p.Run(in...); return err },
		"eager":    func() error { _, err := p.runEager(in); return err },
	} {
		err := run()
		var ne *NodeError
		if !errors.As(err, &ne) || !strings.HasPrefix(ne.Op, op) || ne.Scope != "emb_l" ||
			!strings.Contains(err.Error(), want) || !errors.Is(err, autograd.ErrIndex) && !errors.Is(err, autograd.ErrShape) {
			t.Errorf("%s run = %v, want a *NodeError of the lookup in emb_l naming %q", name, err, want)
		}
	}
}

// TestDLRMCheckNodes: Compile and Decode reject lookups and interactions
// whose operands do not fit, with a *NodeError, before anything runs.
func TestDLRMCheckNodes(t *testing.T) {
	m := newDLRM(t, dlrmCases()[0])
	in := dlrmInputs(m, 4, false, 1)
	good, err := Freeze(traceDLRM(t, m, false, in))
	if err != nil {
		t.Fatal(err)
	}
	find := func(g *Graph, op string) *Node {
		for i := range g.Nodes {
			if g.Nodes[i].Op == op {
				return &g.Nodes[i]
			}
		}
		t.Fatalf("no %s node", op)
		return nil
	}
	for _, c := range []struct {
		name  string
		edit  func(g *Graph)
		field string
		want  string
	}{
		{"lookup missing an offsets operand", func(g *Graph) {
			n := find(g, "MergedEmbeddingBag")
			n.Inputs = n.Inputs[:len(n.Inputs)-1]
		}, "", "got 8 operands; want T tables, then T indices, then T offsets"},
		{"lookup with one result too many", func(g *Graph) {
			n := find(g, "MergedEmbeddingBag")
			n.Outputs = append(n.Outputs, g.AddValue(Value{Name: "extra", Shape: []int{4, 8}}))
		}, "outputs", "got 4, the op gives 3"},
		{"lookup with a bag too many", func(g *Graph) {
			n := find(g, "MergedEmbeddingBag")
			n.Inputs[7] = g.AddConst("five", autograd.FromInt64(make([]int64, 5), 5))
		}, "", "table 1 has 5 bags (offsets [5]) but table 0 has 4"},
		{"lookup of float indices", func(g *Graph) {
			n := find(g, "MergedEmbeddingBag")
			n.Inputs[3] = g.Inputs[0]
		}, "", "table 0: indices have dtype float32"},
		{"lookup mode max", func(g *Graph) { setNodeAttr(find(g, "MergedEmbeddingBag"), StringAttr("mode", "max")) },
			"", `mode "max" is not one of sum, mean`},
		{"lookup mode unknown", func(g *Graph) { setNodeAttr(find(g, "MergedEmbeddingBag"), StringAttr("mode", "median")) },
			"", `mode "median" is not one of sum, mean`},
		{"lookup without include_last_offset", func(g *Graph) {
			n := find(g, "MergedEmbeddingBag")
			n.Attrs = n.Attrs[:1]
		}, "attrs.include_last_offset", "missing"},
		{"interaction of mismatched dimensions", func(g *Graph) {
			n := find(g, "Interaction")
			n.Inputs[1] = g.Inputs[0] // the [4, 13] dense features
		}, "", "ly[0] has dimension 13"},
		{"interaction of one operand", func(g *Graph) {
			n := find(g, "Interaction")
			n.Inputs = n.Inputs[:1]
		}, "inputs", "got 1, want at least 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := good.Clone()
			c.edit(g)
			_, err := Compile(g)
			var ne *NodeError
			if !errors.As(err, &ne) || ne.Field != c.field || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Compile = %v, want a *NodeError at field %q containing %q", err, c.field, c.want)
			}
			// The same edit in a saved file fails Decode alike.
			_, err = Decode(encodeUnchecked(t, g))
			if !errors.As(err, &ne) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Decode = %v, want a *NodeError containing %q", err, c.want)
			}
		})
	}
}

// encodeUnchecked is the saved file of g, which Encode would refuse.
func encodeUnchecked(t testing.TB, g *Graph) []byte {
	t.Helper()
	f, err := fileOf(g)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := safetensors.Encode(&b, f); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// setNodeAttr replaces n's attribute of a's name with a.
func setNodeAttr(n *Node, a Attr) {
	for i := range n.Attrs {
		if n.Attrs[i].Name == a.Name {
			n.Attrs[i] = a
		}
	}
}

// TestDLRMOpsBFloat16: lookups of bfloat16 tables (split parameters'
// tops) and an interaction of bfloat16 operands compile (no node runs
// through its eager form), and the compiled run is the eager one bit for
// bit.
func TestDLRMOpsBFloat16(t *testing.T) {
	g := autograd.NewGenerator(4)
	bf := func(x *autograd.Tensor) *autograd.Tensor { return autograd.Cast(x, autograd.BFloat16) }
	tables := []*autograd.Tensor{autograd.Randn(g, 7, 8), autograd.Randn(g, 50, 8)}
	x := autograd.Randn(g, 3, 8)
	idx := autograd.FromInt64([]int64{0, 6, 6, 1, 2}, 5)
	off := autograd.FromInt64([]int64{0, 2, 2}, 3)
	fixed := autograd.FromInt64([]int64{1, 40, 2, 49, 3, 0}, 3, 2, 1)
	gr, err := TraceFunc(&bare{}, func(in []*autograd.Tensor) []*autograd.Tensor {
		w := []*autograd.Tensor{bf(in[0]), bf(in[1])}
		ly := autograd.MergedEmbeddingBag(w, []*autograd.Tensor{in[3], in[3]}, []*autograd.Tensor{in[4], in[4]}, autograd.BagMean, false, false)
		lf := autograd.MergedEmbeddingBagFixed(w, in[5], autograd.BagSum, false)
		z := autograd.Interaction(in[2], append(ly, lf...), false)
		zb := autograd.Interaction(bf(in[2]), []*autograd.Tensor{bf(ly[0]), bf(lf[1])}, true)
		return []*autograd.Tensor{z, zb}
	}, tables[0], tables[1], x, idx, off, fixed)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(gr)
	if err != nil {
		t.Fatal(err)
	}
	pl := checkCompiled(t, p, tables[0], tables[1], x, idx, off, fixed)
	for _, i := range pl.eager {
		t.Errorf("node %d (%s) runs eagerly", i, gr.Nodes[i].Op)
	}
}

// TestDLRMPlanReuse: batches that differ only in how many indices each
// table reads (or, fixed, in the bag size) run on one plan, which grows
// its storage for them; another batch size gets a plan of its own.
func TestDLRMPlanReuse(t *testing.T) {
	for _, c := range []dlrmCase{dlrmCases()[0], dlrmCases()[len(dlrmCases())-1]} {
		t.Run(c.name, func(t *testing.T) {
			m := newDLRM(t, c)
			in := dlrmInputs(m, 4, c.fixed, 1)
			g, err := Freeze(traceDLRM(t, m, c.fixed, in))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			batches := [][]*autograd.Tensor{in}
			for seed := uint64(2); seed < 8; seed++ {
				batches = append(batches, dlrmInputs(m, 4, c.fixed, seed))
			}
			if c.fixed {
				// Bags of 1, then of 6: the storage for the indices grows.
				batches = append(batches, []*autograd.Tensor{in[0], autograd.Cast(autograd.Zeros(4, 3, 1), autograd.Int64)},
					[]*autograd.Tensor{in[0], autograd.Cast(autograd.Ones(4, 3, 6), autograd.Int64)})
			}
			for k, b := range batches {
				pl := checkCompiled(t, p, b...)
				golden.AssertClose(t, "compiled graph", pl.outs[0], dlrmEager(m, c.fixed, b), 1e-6)
				if len(p.plans) != 1 || len(pl.eager) > 0 {
					t.Fatalf("batch %d: %d plans, %d nodes run eagerly; want one plan, all compiled", k, len(p.plans), len(pl.eager))
				}
			}
			checkCompiled(t, p, dlrmInputs(m, 3, c.fixed, 9)...)
			if len(p.plans) != 2 {
				t.Errorf("a batch of 3 after batches of 4: %d plans, want 2", len(p.plans))
			}
			checkCompiled(t, p, batches[2]...)
			if len(p.plans) != 2 {
				t.Errorf("batches of 4 again: %d plans, want 2", len(p.plans))
			}
		})
	}
}

// TestDLRMPlanReuseBudget: growing a plan's index storage past the memory
// budget fails the run with ErrMemoryBudget and leaves the plan as it was.
func TestDLRMPlanReuseBudget(t *testing.T) {
	m := newDLRM(t, dlrmCases()[0])
	in := dlrmInputs(m, 4, false, 1)
	g, err := Freeze(traceDLRM(t, m, false, in))
	if err != nil {
		t.Fatal(err)
	}
	_, types, err := g.checkNodes(false)
	if err != nil {
		t.Fatal(err)
	}
	need, err := g.valueBytes(types)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(g, WithMemoryBudget(2*need+1024))
	if err != nil {
		t.Fatal(err)
	}
	checkCompiled(t, p, in...)
	big := append([]*autograd.Tensor(nil), in...)
	big[1] = autograd.Cast(autograd.Zeros(1000), autograd.Int64)
	big[4] = autograd.FromInt64([]int64{0, 1, 2, 3}, 4)
	if _, err := p.Run(big...); !errors.Is(err, ErrMemoryBudget) {
		t.Errorf("Run of 1000 indices = %v, want ErrMemoryBudget", err)
	}
	checkCompiled(t, p, dlrmInputs(m, 4, false, 2)...)
	if len(p.plans) != 1 {
		t.Errorf("%d plans, want 1", len(p.plans))
	}
}
