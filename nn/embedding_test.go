package nn_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// TestEmbeddingSparseOption: Sparse gives the weight a row-sparse gradient
// holding the rows read (less the padding row), equal to the dense
// module's gradient once densified.
func TestEmbeddingSparseOption(t *testing.T) {
	pad := int64(-1)
	in := autograd.FromInt64([]int64{5, 2, 2, 0}, 4)
	cases := []struct {
		name    string
		forward func(sparse bool) (w, y *autograd.Tensor)
		rows    []int64
	}{
		{"Embedding", func(sparse bool) (w, y *autograd.Tensor) {
			e := nn.NewEmbedding(autograd.NewGenerator(1), 6, 3, nn.EmbeddingOptions{Sparse: sparse})
			return e.Weight(), e.Forward(in)
		}, []int64{0, 2, 5}},
		{"padding", func(sparse bool) (w, y *autograd.Tensor) {
			e := nn.NewEmbedding(autograd.NewGenerator(1), 6, 3, nn.EmbeddingOptions{Sparse: sparse, PaddingIdx: &pad})
			return e.Weight(), e.Forward(in)
		}, []int64{0, 2}},
		{"EmbeddingBag", func(sparse bool) (w, y *autograd.Tensor) {
			e := nn.NewEmbeddingBag(autograd.NewGenerator(1), 6, 3, nn.EmbeddingBagOptions{Mode: "sum", Sparse: sparse})
			return e.Weight(), e.Forward(in, autograd.FromInt64([]int64{0, 1}, 2), nil)
		}, []int64{0, 2, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wd, yd := c.forward(false)
			ws, ys := c.forward(true)
			dy := autograd.Ones(yd.Shape()...)
			yd.Backward(dy)
			ys.Backward(dy)
			sg := ws.SparseGrad()
			if sg == nil || ws.Grad() != nil {
				t.Fatalf("sparse module: SparseGrad %v, Grad %v", sg, ws.Grad())
			}
			if !slices.Equal(sg.Indices, c.rows) {
				t.Errorf("rows %v, want %v", sg.Indices, c.rows)
			}
			if got, want := sg.Dense().Float32s(), wd.Grad().Float32s(); !slices.Equal(got, want) {
				t.Errorf("densified %v, dense module's gradient %v", got, want)
			}
		})
	}
}

func TestEmbeddingBagSparseMaxFails(t *testing.T) {
	err := autograd.Try(func() {
		nn.NewEmbeddingBag(autograd.NewGenerator(1), 6, 3, nn.EmbeddingBagOptions{Mode: "max", Sparse: true})
	})
	if want := `NewEmbeddingBag: mode "max" does not support sparse gradients`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one containing %q", err, want)
	}
}
