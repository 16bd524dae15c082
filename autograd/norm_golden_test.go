package autograd_test

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

// The cases of testdata/golden/gen_norm.py's BATCH_NORM table, with the
// same options; the presence of weights and running statistics is read
// from the file.
var batchNormGoldenCases = []struct {
	name          string
	format        autograd.MemoryFormat
	training      bool
	momentum, eps float64
}{
	{name: "bn2d.cl", format: autograd.ChannelsLast, training: true, momentum: 0.1, eps: 1e-5},
	{name: "bn2d.basic", training: true, momentum: 0.3, eps: 1e-3},
	{name: "bn1d.2d", training: true, momentum: 0.1, eps: 1e-5},
	{name: "bn1d.3d", training: true, momentum: 0.1, eps: 1e-5},
	{name: "bn3d", training: true, momentum: 0.1, eps: 1e-5},
	{name: "bn3d.cl", format: autograd.ChannelsLast3d, training: true, momentum: 0.2, eps: 1e-5},
	{name: "bn2d.eval", momentum: 0.1, eps: 1e-5},
	{name: "bn2d.eval_cl", format: autograd.ChannelsLast, momentum: 0.1, eps: 1e-5},
	{name: "bn1d.eval", momentum: 0.1, eps: 1e-5},
	{name: "bn2d.noaffine", training: true, momentum: 0.1, eps: 1e-5},
	{name: "bn2d.noaffine_cl", format: autograd.ChannelsLast, training: true, momentum: 0.1, eps: 1e-5},
}

// normOptional returns the golden tensor name, or nil when the case has
// none; with grad it requires a gradient.
func normOptional(set golden.Set, name string, grad bool) *autograd.Tensor {
	t, ok := set[name]
	if !ok {
		return nil
	}
	return t.SetRequiresGrad(grad)
}

func TestBatchNormGolden(t *testing.T) {
	set := golden.Load(t, "norm.safetensors")
	for _, c := range batchNormGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			x := set.Get(t, c.name+".x")
			if c.format != autograd.Contiguous {
				x = x.To(c.format)
			}
			x.SetRequiresGrad(true)
			w := normOptional(set, c.name+".w", true)
			b := normOptional(set, c.name+".b", true)
			rm := normOptional(set, c.name+".rm", false)
			rv := normOptional(set, c.name+".rv", false)
			out := autograd.BatchNorm(x, rm, rv, w, b, c.training, c.momentum, c.eps)
			if out.Format() != c.format {
				t.Errorf("output format %v, want %v", out.Format(), c.format)
			}
			out.Backward(set.Get(t, c.name+".gout"))
			golden.AssertClose(t, "out", out, set.Get(t, c.name+".out"), 1e-5)
			golden.AssertClose(t, "grad_x", x.Grad(), set.Get(t, c.name+".grad_x"), 1e-5)
			if w != nil {
				golden.AssertClose(t, "grad_w", w.Grad(), set.Get(t, c.name+".grad_w"), 1e-5)
				golden.AssertClose(t, "grad_b", b.Grad(), set.Get(t, c.name+".grad_b"), 1e-5)
			}
			if rm != nil {
				golden.AssertClose(t, "running_mean", rm, set.Get(t, c.name+".rm_out"), 1e-5)
				golden.AssertClose(t, "running_var", rv, set.Get(t, c.name+".rv_out"), 1e-5)
			}
			checkGoldenStrides(t, set, c.name, out)
		})
	}
}

// The cases of gen_norm.py's LAYER_NORM table.
var layerNormGoldenCases = []struct {
	name  string
	shape []int
	eps   float64
	cl    bool
}{
	{name: "ln.last1", shape: []int{8}, eps: 1e-5},
	{name: "ln.last2", shape: []int{4, 5}, eps: 1e-5},
	{name: "ln.noaffine", shape: []int{7}, eps: 1e-5},
	{name: "ln.weight_only", shape: []int{6}, eps: 1e-3},
	{name: "ln.offset", shape: []int{16}, eps: 1e-5},
	{name: "ln.cl", shape: []int{4, 5}, eps: 1e-5, cl: true},
}

func TestLayerNormGolden(t *testing.T) {
	set := golden.Load(t, "norm.safetensors")
	for _, c := range layerNormGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			x := set.Get(t, c.name+".x")
			if c.cl {
				x = x.To(autograd.ChannelsLast)
			}
			x.SetRequiresGrad(true)
			w := normOptional(set, c.name+".w", true)
			b := normOptional(set, c.name+".b", true)
			out := autograd.LayerNorm(x, c.shape, w, b, c.eps)
			out.Backward(set.Get(t, c.name+".gout"))
			golden.AssertClose(t, "out", out, set.Get(t, c.name+".out"), 1e-5)
			golden.AssertClose(t, "grad_x", x.Grad(), set.Get(t, c.name+".grad_x"), 1e-5)
			if w != nil {
				golden.AssertClose(t, "grad_w", w.Grad(), set.Get(t, c.name+".grad_w"), 1e-5)
			}
			if b != nil {
				golden.AssertClose(t, "grad_b", b.Grad(), set.Get(t, c.name+".grad_b"), 1e-5)
			}
			checkGoldenStrides(t, set, c.name, out)
		})
	}
}

// The cases of gen_norm.py's EMBEDDING table; pad is nil for none.
var embeddingGoldenCases = []struct {
	name string
	pad  *int64
}{
	{name: "emb.basic"},
	{name: "emb.pad", pad: normInt64(2)},
	{name: "emb.pad_neg", pad: normInt64(-1)},
}

func normInt64(v int64) *int64 { return &v }

func TestEmbeddingGolden(t *testing.T) {
	set := golden.Load(t, "norm.safetensors")
	for _, c := range embeddingGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			idx := set.Get(t, c.name+".idx")
			w := set.Get(t, c.name+".w").SetRequiresGrad(true)
			var out *autograd.Tensor
			if c.pad != nil {
				out = autograd.EmbeddingPadding(idx, w, *c.pad)
			} else {
				out = autograd.Embedding(idx, w)
			}
			out.Backward(set.Get(t, c.name+".gout"))
			golden.AssertClose(t, "out", out, set.Get(t, c.name+".out"), 1e-5)
			golden.AssertClose(t, "grad_w", w.Grad(), set.Get(t, c.name+".grad_w"), 1e-5)
		})
	}
}

// The cases of gen_norm.py's BAGS table; offsets and per-sample weights
// are read from the file where the case has them.
var embeddingBagGoldenCases = []struct {
	name string
	mode autograd.EmbeddingBagMode
}{
	{"bag.sum_psw", autograd.BagSum},
	{"bag.sum_2d", autograd.BagSum},
	{"bag.sum_psw_2d", autograd.BagSum},
	{"bag.mean", autograd.BagMean},
	{"bag.mean_2d", autograd.BagMean},
	{"bag.max", autograd.BagMax},
	{"bag.max_2d", autograd.BagMax},
}

func TestEmbeddingBagGolden(t *testing.T) {
	set := golden.Load(t, "norm.safetensors")
	for _, c := range embeddingBagGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			idx := set.Get(t, c.name+".idx")
			w := set.Get(t, c.name+".w").SetRequiresGrad(true)
			offsets := normOptional(set, c.name+".offsets", false)
			psw := normOptional(set, c.name+".psw", true)
			out := autograd.EmbeddingBag(idx, offsets, w, c.mode, psw)
			out.Backward(set.Get(t, c.name+".gout"))
			golden.AssertClose(t, "out", out, set.Get(t, c.name+".out"), 1e-5)
			golden.AssertClose(t, "grad_w", w.Grad(), set.Get(t, c.name+".grad_w"), 1e-5)
			if psw != nil {
				golden.AssertClose(t, "grad_psw", psw.Grad(), set.Get(t, c.name+".grad_psw"), 1e-5)
			}
		})
	}
}

// In training BatchNorm normalises with the batch statistics and moves the
// running statistics towards them, using the unbiased variance.
func ExampleBatchNorm() {
	x := autograd.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 3, 2) // [N=3, C=2]
	runMean, runVar := autograd.Zeros(2), autograd.Ones(2)
	y := autograd.BatchNorm(x, runMean, runVar, nil, nil, true, 0.1, 1e-5)
	fmt.Printf("%.4f\n", y.Values())
	fmt.Printf("%.4f %.4f\n", runMean.Values(), runVar.Values())
	// Evaluation uses the running statistics.
	y = autograd.BatchNorm(x, runMean, runVar, nil, nil, false, 0.1, 1e-5)
	fmt.Printf("%.4f\n", y.Values()[:2])
	// Output:
	// [-1.2247 -1.2247 0.0000 0.0000 1.2247 1.2247]
	// [0.3000 0.4000] [1.3000 1.3000]
	// [0.6139 1.4033]
}

// LayerNorm normalises over the trailing dimensions, here the last one.
func ExampleLayerNorm() {
	x := autograd.FromFloat32([]float32{1, 2, 3, 10, 20, 30}, 2, 3)
	y := autograd.LayerNorm(x, []int{3}, nil, autograd.FromFloat32([]float32{0, 0, 1}), 1e-5)
	fmt.Printf("%.4f\n", y.Values())
	// Output: [-1.2247 0.0000 2.2247 -1.2247 0.0000 2.2247]
}
