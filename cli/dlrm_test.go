package cli

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/npy"
	"github.com/kilnml/kiln/nn/models"
)

// TestRunDLRM runs a saved DLRM graph on .npy files: float32 dense
// features, int64 indices (one table's as int32, widened) and int64
// offsets, and gets the compiled graph's output.
func TestRunDLRM(t *testing.T) {
	dir := t.TempDir()
	m, err := models.NewDLRM(autograd.NewGenerator(3), models.DLRMConfig{SparseFeatureSize: 4,
		EmbeddingSizes: []int{5, 20}, BottomMLP: []int{3, 4}, TopMLP: []int{2, 1}})
	if err != nil {
		t.Fatal(err)
	}
	dense := autograd.Randn(autograd.NewGenerator(4), 3, 3)
	in := []*autograd.Tensor{dense,
		autograd.FromInt64([]int64{4, 0, 1, 2}, 4), autograd.FromInt64([]int64{19, 7}, 2),
		autograd.FromInt64([]int64{0, 1, 1}, 3), autograd.FromInt64([]int64{0, 0, 1}, 3)}
	traced, err := graph.TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{m.Forward(in[0], in[1:3], in[3:])}
	}, in...)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Freeze(traced)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dlrm.kiln")
	if err := graph.Save(path, g); err != nil {
		t.Fatal(err)
	}
	p, err := graph.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Run(in...)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"run", path}
	for i, x := range in {
		if i == 2 {
			x = autograd.FromInt32([]int32{19, 7}, 2)
		}
		file := filepath.Join(dir, fmt.Sprintf("in%d.npy", i))
		if err := npy.Write(file, x); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-i", file)
	}
	out := filepath.Join(dir, "p.npy")
	if code, _, stderr := call(append(args, "-o", out)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, err := npy.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Shape(), want[0].Shape()) || !sameBits(got.Float32s(), want[0].Float32s()) {
		t.Errorf("kiln run gave %v, Compile/Run %v", got.Values(), want[0].Values())
	}
}

// TestBenchDLRMInputs checks that bench feeds a DLRM graph indices that
// are valid for each table and bags of --bag-size, in both input layouts:
// per-table indices with offsets, and one index per table per sample
// reshaped into MergedEmbeddingBagFixed's bags.
func TestBenchDLRMInputs(t *testing.T) {
	rows := []int{5, 20, 300}
	m, err := models.NewDLRM(autograd.NewGenerator(3), models.DLRMConfig{SparseFeatureSize: 4,
		EmbeddingSizes: rows, BottomMLP: []int{3, 4}, TopMLP: []int{2, 1}, IncludeLastOffset: true})
	if err != nil {
		t.Fatal(err)
	}
	dense := autograd.Randn(autograd.NewGenerator(4), 2, 3)
	one := func(n int) *autograd.Tensor { return autograd.FromInt64(make([]int64, n), n) }
	bagged, err := graph.TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{m.Forward(in[0], in[1:4], in[4:])}
	}, dense, one(2), one(2), one(2), autograd.FromInt64([]int64{0, 1, 2}, 3), autograd.FromInt64([]int64{0, 1, 2}, 3), autograd.FromInt64([]int64{0, 1, 2}, 3))
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := graph.TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{m.ForwardFixed(in[0], autograd.Reshape(in[1], -1, len(rows), 1))}
	}, dense, autograd.FromInt64(make([]int64, 2*len(rows)), 2, len(rows)))
	if err != nil {
		t.Fatal(err)
	}
	packed, err := graph.TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{m.ForwardPacked(in[0], in[1], in[2])}
	}, dense, one(6), autograd.FromInt64([]int64{0, 1, 2, 2, 3, 4, 4, 5, 6}, 3, 3))
	if err != nil {
		t.Fatal(err)
	}
	const batch, bag = 7, 3
	for _, c := range []struct {
		name string
		g    *graph.Graph
	}{{"bagged", bagged}, {"fixed", fixed}, {"packed", packed}} {
		t.Run(c.name, func(t *testing.T) {
			g, err := graph.Freeze(c.g)
			if err != nil {
				t.Fatal(err)
			}
			in, err := randomInputs(g, batch, bag)
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "bagged" {
				for k := range rows {
					idx, off := in[1+k].Int64s(), in[4+k].Int64s()
					if len(idx) != batch*bag || !slices.Equal(off, []int64{0, 3, 6, 9, 12, 15, 18, 21}) {
						t.Fatalf("table %d: %d indices, offsets %v; want %d and bag starts every %d with the end", k, len(idx), off, batch*bag, bag)
					}
					checkRange(t, idx, func(int) int { return rows[k] })
				}
			} else if c.name == "packed" {
				idx, off := in[1].Int64s(), in[2].Int64s()
				var want []int64
				for k := range rows {
					for b := range batch + 1 {
						want = append(want, int64((k*batch+b)*bag))
					}
				}
				if len(idx) != len(rows)*batch*bag || !slices.Equal(off, want) || fmt.Sprint(in[2].Shape()) != "[3 8]" {
					t.Fatalf("%d indices, offsets %v %v; want %d and bag starts every %d, [3 8]", len(idx), in[2].Shape(), off, len(rows)*batch*bag, bag)
				}
				checkRange(t, idx, func(i int) int { return rows[i/(batch*bag)] })
				checkRange(t, idx[batch*bag:2*batch*bag], func(int) int { return rows[1] })
			} else {
				checkRange(t, in[1].Int64s(), func(i int) int { return rows[i%len(rows)] })
			}
			p, err := graph.Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Run(in...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkRange fails unless every idx[i] is in [0, rows(i)) and the larger
// tables see more than one distinct index.
func checkRange(t *testing.T, idx []int64, rows func(i int) int) {
	t.Helper()
	seen := map[int64]bool{}
	for i, v := range idx {
		if v < 0 || v >= int64(rows(i)) {
			t.Fatalf("index %d is %d, outside [0, %d)", i, v, rows(i))
		}
		seen[v] = true
	}
	if len(seen) < 2 {
		t.Errorf("indices %v: all the same, as zeros would be", idx)
	}
}
