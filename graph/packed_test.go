package graph

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn/models"
)

// packedInputs are a batch of batch samples for DLRM.ForwardPacked: the
// dense features, every table's bags of 0 to maxBag indices concatenated
// (table 1's second bag empty), and their [T, batch+1] offsets.
func packedInputs(m *models.DLRM, batch, maxBag int, seed uint64) []*autograd.Tensor {
	r := rand.New(rand.NewPCG(seed, 5))
	rows := m.Config.EmbeddingSizes
	var idx, off []int64
	for t, n := range rows {
		for b := range batch {
			off = append(off, int64(len(idx)))
			size := r.IntN(maxBag + 1)
			if t == 1 && b == 1 {
				size = 0
			}
			for range size {
				idx = append(idx, r.Int64N(int64(n)))
			}
		}
		off = append(off, int64(len(idx)))
	}
	return []*autograd.Tensor{autograd.Randn(autograd.NewGenerator(seed), batch, 13),
		autograd.FromInt64(idx, len(idx)), autograd.FromInt64(off, len(rows), batch+1)}
}

// packedEager is the eager model's output on packedInputs, recording no
// gradient.
func packedEager(m *models.DLRM, in []*autograd.Tensor) *autograd.Tensor {
	return m.ForwardPacked(autograd.NoGrad(in[0]), autograd.NoGrad(in[1]), autograd.NoGrad(in[2]))
}

// compilePacked traces m's ForwardPacked on in, freezes the trace, checks
// that it holds one MergedEmbeddingBagPacked node over constant tables,
// round-trips it through the save format and compiles it.
func compilePacked(t *testing.T, m *models.DLRM, in []*autograd.Tensor) (*Program, *Graph) {
	t.Helper()
	traced, err := TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{m.ForwardPacked(in[0], in[1], in[2])}
	}, in...)
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := Freeze(traced)
	if err != nil {
		t.Fatal(err)
	}
	lookups := 0
	for _, n := range frozen.Nodes {
		if n.Op != "MergedEmbeddingBagPacked" {
			continue
		}
		lookups++
		for j := range dlrmRows {
			if !frozen.IsConst(n.Inputs[j]) {
				t.Errorf("table %d (%s) is not a constant", j, frozen.Values[n.Inputs[j]].Name)
			}
		}
	}
	if lookups != 1 {
		t.Fatalf("%d MergedEmbeddingBagPacked nodes, want 1:\n%s", lookups, frozen)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, frozen); err != nil {
		t.Fatal(err)
	}
	g, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	return p, g
}

// TestPackedDLRMGraph: a DLRM traced from ForwardPacked, frozen, saved and
// loaded, runs compiled bit for bit as the graph run eagerly, every node
// compiled, and within 1e-6 of the eager model, sum and mean; batches
// with other numbers of indices run on one plan, another batch size gets
// a plan of its own, and a run allocates nothing.
func TestPackedDLRMGraph(t *testing.T) {
	for _, c := range []dlrmCase{dlrmCases()[0], dlrmCases()[3]} {
		t.Run(c.name, func(t *testing.T) {
			m := newDLRM(t, c)
			p, g := compilePacked(t, m, packedInputs(m, 4, 3, 1))
			// Bags of up to 3, 1, 6 and 0 indices: N shrinks and grows.
			for k, maxBag := range []int{3, 1, 6, 0, 3} {
				in := packedInputs(m, 4, maxBag, uint64(10+k))
				pl := checkCompiled(t, p, in...)
				golden.AssertClose(t, "compiled graph", pl.outs[0], packedEager(m, in), 1e-6)
				for _, i := range pl.eager {
					t.Errorf("node %d (%s) has no compiled form", i, g.Nodes[i].Op)
				}
				if len(p.plans) != 1 {
					t.Fatalf("batch %d (bags up to %d, %d indices): %d plans, want 1", k, maxBag, in[1].Numel(), len(p.plans))
				}
			}
			in := packedInputs(m, 3, 4, 30)
			pl := checkCompiled(t, p, in...)
			golden.AssertClose(t, "compiled graph, batch 3", pl.outs[0], packedEager(m, in), 1e-6)
			if len(p.plans) != 2 {
				t.Errorf("a batch of 3 after batches of 4: %d plans, want 2", len(p.plans))
			}
			if raceEnabled || strings.HasPrefix(kernels.Features(), "generic") {
				return // the race detector's and the reference kernels' allocations
			}
			if a := testing.AllocsPerRun(10, func() { p.Run(in...) }); a > 0 {
				t.Errorf("a run allocates %v times", a)
			}
		})
	}
}

// TestPackedDLRMRunBadOffsets: an index outside its table or offsets that
// break the layout fail the run with an error naming the lookup in emb_l
// and the table, compiled and eager.
func TestPackedDLRMRunBadOffsets(t *testing.T) {
	m := newDLRM(t, dlrmCases()[0])
	for _, c := range []struct {
		edit func(in []*autograd.Tensor)
		want string
	}{
		{func(in []*autograd.Tensor) { in[1].Int64s()[in[1].Numel()-1] = 300 }, "table 2: index 300"},
		{func(in []*autograd.Tensor) { in[2].Int64s()[5]++ }, "table 1: offsets[1][0]"},
		{func(in []*autograd.Tensor) { in[2].Int64s()[14] = 1 << 40 }, "table 2: offsets[2][4]"},
	} {
		t.Run(c.want, func(t *testing.T) {
			in := packedInputs(m, 4, 3, 1)
			p, _ := compilePacked(t, m, in)
			checkLookupFails(t, p, in, c.edit, "MergedEmbeddingBagPacked", c.want)
		})
	}
}
