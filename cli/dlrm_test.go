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
