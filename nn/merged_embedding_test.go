package nn_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
)

// TestMergedEmbeddingBagMatchesPyTorch loads gen_merged_embedding.py's
// tables (one nn.EmbeddingBag each) into the module's children and
// compares its outputs and table gradients with PyTorch's, in both modes,
// both offset layouts and the fixed-size layout, dense and sparse.
func TestMergedEmbeddingBagMatchesPyTorch(t *testing.T) {
	set := golden.Load(t, "merged_embedding.safetensors")
	rows := []int{7, 50, 300, 1000}
	for _, mode := range []string{"sum", "mean"} {
		for _, layout := range []string{"last", "starts", "fixed"} {
			for _, sparse := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/sparse=%v", mode, layout, sparse), func(t *testing.T) {
					m := nn.NewMergedEmbeddingBag(autograd.NewGenerator(1), rows, 8, nn.MergedEmbeddingBagOptions{Mode: mode, Sparse: sparse, IncludeLastOffset: layout == "last"})
					var sd []nn.NamedTensor
					for k := range rows {
						sd = append(sd, nn.NamedTensor{Name: fmt.Sprintf("%d.weight", k), Tensor: set.Get(t, fmt.Sprintf("W.%d", k)).Clone()})
					}
					if err := nn.LoadTensors(m, sd); err != nil {
						t.Fatal(err)
					}
					var outs []*autograd.Tensor
					want := mode
					if layout == "fixed" {
						want = "fixed_" + mode
						outs = m.ForwardFixed(set.Get(t, "fixed.idx"))
					} else {
						var idx, offs []*autograd.Tensor
						for k := range rows {
							idx = append(idx, set.Get(t, fmt.Sprintf("idx.%d", k)))
							o := set.Get(t, fmt.Sprintf("offsets.%d", k))
							if layout == "starts" {
								n := o.Shape()[0] - 1
								o = autograd.FromInt64(o.Int64s()[:n], n)
							}
							offs = append(offs, o)
						}
						outs = m.Forward(idx, offs)
					}
					var loss *autograd.Tensor
					for k, y := range outs {
						golden.AssertClose(t, fmt.Sprintf("output %d", k), y, set.Get(t, fmt.Sprintf("%s.out.%d", want, k)), 1e-5)
						term := autograd.Sum(autograd.Mul(y, set.Get(t, fmt.Sprintf("gout.%d", k))), nil, false)
						if loss == nil {
							loss = term
						} else {
							loss = autograd.Add(loss, term)
						}
					}
					loss.Backward()
					for k, w := range m.Weights() {
						g := w.Grad()
						if sparse {
							if w.SparseGrad() == nil {
								t.Fatalf("table %d: no sparse gradient", k)
							}
							g = w.SparseGrad().Dense()
						}
						golden.AssertClose(t, fmt.Sprintf("gradient of table %d", k), g, set.Get(t, fmt.Sprintf("%s.grad.%d", want, k)), 1e-5)
					}
				})
			}
		}
	}
}

func TestMergedEmbeddingBagNamesAndErrors(t *testing.T) {
	g := autograd.NewGenerator(1)
	m := nn.NewMergedEmbeddingBag(g, []int{3, 5}, 4, nn.MergedEmbeddingBagOptions{})
	var names []string
	for _, p := range nn.NamedParameters(m) {
		names = append(names, fmt.Sprint(p.Name, p.Tensor.Shape()))
	}
	if got := fmt.Sprint(names); got != "[0.weight[3 4] 1.weight[5 4]]" {
		t.Errorf("parameters %s", got)
	}
	if m.Mode != autograd.BagSum || m.Len() != 2 {
		t.Errorf("mode %v, %d tables; want sum (the default) and 2", m.Mode, m.Len())
	}
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"no tables", func() { nn.NewMergedEmbeddingBag(g, nil, 4, nn.MergedEmbeddingBagOptions{}) }, "no tables"},
		{"empty table", func() { nn.NewMergedEmbeddingBag(g, []int{3, 0}, 4, nn.MergedEmbeddingBagOptions{}) }, "table 1"},
		{"zero dim", func() { nn.NewMergedEmbeddingBag(g, []int{3}, 0, nn.MergedEmbeddingBagOptions{}) }, "dimension"},
		{"max mode", func() { nn.NewMergedEmbeddingBag(g, []int{3}, 4, nn.MergedEmbeddingBagOptions{Mode: "max"}) }, "mode"},
		{"nil generator", func() { nn.NewMergedEmbeddingBag(nil, []int{3}, 4, nn.MergedEmbeddingBagOptions{}) }, "generator"},
		{"wrong table count", func() {
			m.Forward([]*autograd.Tensor{autograd.FromInt64([]int64{0}, 1)}, []*autograd.Tensor{autograd.FromInt64([]int64{0}, 1)})
		}, "2 tables"},
		{"index out of range", func() {
			i := []*autograd.Tensor{autograd.FromInt64([]int64{0}, 1), autograd.FromInt64([]int64{5}, 1)}
			o := []*autograd.Tensor{autograd.FromInt64([]int64{0}, 1), autograd.FromInt64([]int64{0}, 1)}
			m.Forward(i, o)
		}, "table 1"},
	} {
		err := autograd.Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// TestMergedEmbeddingBagInit checks that Init fills each table once, in
// order, with the table's shape, in place of the N(0, 1) draw, and that
// the tables then hold what it wrote.
func TestMergedEmbeddingBagInit(t *testing.T) {
	rows := []int{3, 5, 2}
	var calls []string
	m := nn.NewMergedEmbeddingBag(autograd.NewGenerator(1), rows, 4, nn.MergedEmbeddingBagOptions{
		Init: func(g *autograd.Generator, tab int, w *autograd.Tensor) {
			calls = append(calls, fmt.Sprintf("%d:%v", tab, w.Shape()))
			v := w.Float32s()
			for i := range v {
				v[i] = float32(tab)
			}
		}})
	if want := "[0:[3 4] 1:[5 4] 2:[2 4]]"; fmt.Sprint(calls) != want {
		t.Errorf("Init calls %v, want %s", calls, want)
	}
	for tab, w := range m.Weights() {
		for _, v := range w.Float32s() {
			if v != float32(tab) {
				t.Fatalf("table %d holds %v, not what Init wrote", tab, v)
			}
		}
	}
	// Without Init the tables are N(0, 1): not all one value.
	plain := nn.NewMergedEmbeddingBag(autograd.NewGenerator(1), rows, 4, nn.MergedEmbeddingBagOptions{})
	if v := plain.Weights()[1].Float32s(); v[0] == v[1] && v[1] == v[2] {
		t.Errorf("default tables %v look undrawn", v[:3])
	}
}
