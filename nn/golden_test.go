package nn_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/nn_kiln_*.safetensors from the current code")

// interopNet is gen_nn.py's Net: Conv2d+BatchNorm2d+ReLU+MaxPool2d under
// "features", then Flatten and Linear, with an Embedding beside them.
type interopNet struct {
	nn.Base
	Features *nn.Sequential
	Flatten  *nn.Flatten
	FC       *nn.Linear
	Emb      *nn.Embedding
}

func newInteropNet(g *autograd.Generator) *interopNet {
	pad := int64(0)
	n := &interopNet{
		Features: nn.NewSequential(
			nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{Padding: 1}),
			nn.NewBatchNorm2d(4, nn.BatchNormOptions{}),
			nn.NewReLU(),
			nn.NewMaxPool2d(2, nn.MaxPoolOptions{}),
		),
		Flatten: nn.NewFlatten(1, -1),
		FC:      nn.NewLinear(g, 64, 5, nn.LinearOptions{}),
		Emb:     nn.NewEmbedding(g, 10, 3, nn.EmbeddingOptions{PaddingIdx: &pad}),
	}
	n.RegisterModule("features", n.Features)
	n.RegisterModule("flatten", n.Flatten)
	n.RegisterModule("fc", n.FC)
	n.RegisterModule("emb", n.Emb)
	return n
}

func (n *interopNet) Forward(x, idx *autograd.Tensor) (y, e *autograd.Tensor) {
	return n.FC.Forward(n.Flatten.Forward(n.Features.Forward(x))), n.Emb.Forward(idx)
}

func goldenPath(name string) string { return filepath.Join(golden.Dir(), name) }

// TestInteropTorchToKiln loads the state dict PyTorch saved into the same
// Kiln model, strictly, and reproduces PyTorch's outputs, gradients and
// running statistics.
func TestInteropTorchToKiln(t *testing.T) {
	s := golden.Load(t, "nn.safetensors")
	x, idx := s.Get(t, "interop.x"), s.Get(t, "interop.idx")
	for _, format := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
		t.Run(format.String(), func(t *testing.T) {
			net := newInteropNet(autograd.NewGenerator(99))
			nn.To(net, format)
			if err := nn.LoadStateDict(net, goldenPath("nn_torch_state.safetensors")); err != nil {
				t.Fatal(err)
			}
			if got := net.Features.At(1).(*nn.BatchNorm).NumBatchesTracked().Item(); got != 3 {
				t.Errorf("num_batches_tracked loaded as %v, want 3", got)
			}
			xf := x
			if format == autograd.ChannelsLast {
				xf = x.To(format)
			}
			nn.Eval(net)
			y, e := net.Forward(xf, idx)
			golden.AssertClose(t, "eval output", y, s.Get(t, "interop.out"), 1e-5)
			golden.AssertClose(t, "eval embedding", e, s.Get(t, "interop.emb"), 0)

			nn.Train(net, true)
			y, e = net.Forward(xf, idx)
			golden.AssertClose(t, "train output", y, s.Get(t, "interop.train.out"), 1e-5)
			y.Backward(s.Get(t, "interop.train.gout"))
			e.Backward(s.Get(t, "interop.train.gemb"))
			for _, p := range nn.NamedParameters(net) {
				what, want := "grad of "+p.Name, s.Get(t, "interop.train.grad."+p.Name)
				if p.Name == "features.0.bias" {
					// BatchNorm cancels the conv bias: its gradient is zero
					// but for rounding noise (~1e-7 in PyTorch).
					golden.AssertWithin(t, what, p.Tensor.Grad(), want, 1e-5)
					continue
				}
				golden.AssertClose(t, what, p.Tensor.Grad(), want, 1e-4)
			}
			for _, b := range nn.NamedBuffers(net) {
				golden.AssertClose(t, b.Name+" after a train step", b.Tensor, s.Get(t, "interop.train.after."+b.Name), 1e-5)
			}
		})
	}
}

// kilnState builds the seeded Kiln model whose state dict gen_nn.py loads
// into PyTorch. Batch-norm statistics and affine parameters are drawn from
// the generator (not computed by training steps) so that the file depends
// on nothing but the initialisers and the generator, and stays
// byte-identical across machines.
func kilnState() (net *interopNet, x, idx *autograd.Tensor) {
	g := autograd.NewGenerator(2024)
	net = newInteropNet(g)
	bn := net.Features.At(1).(*nn.BatchNorm)
	nn.Uniform(g, bn.Weight(), 0.5, 1.5)
	nn.Uniform(g, bn.Bias(), -0.5, 0.5)
	nn.Uniform(g, bn.RunningMean(), -1, 1)
	nn.Uniform(g, bn.RunningVar(), 0.5, 2)
	bn.NumBatchesTracked().Int64s()[0] = 3
	x = autograd.Randn(g, 2, 3, 8, 8)
	idx = autograd.FromInt64([]int64{0, 3, 9, 1, 0, 2}, 2, 3)
	return net, x, idx
}

// TestInteropKilnToTorch writes Kiln's state dict for gen_nn.py to load
// into PyTorch (with -update), and checks that today's code writes the
// committed file byte for byte, so gen_nn.py's proof stays valid.
func TestInteropKilnToTorch(t *testing.T) {
	net, x, idx := kilnState()
	nn.Eval(net)
	y, e := net.Forward(x, idx)
	statePath, ioPath := goldenPath("nn_kiln_state.safetensors"), goldenPath("nn_kiln_io.safetensors")
	if *update {
		if err := nn.SaveStateDict(net, statePath); err != nil {
			t.Fatal(err)
		}
		io := []nn.NamedTensor{{Name: "x", Tensor: x}, {Name: "idx", Tensor: idx}, {Name: "out", Tensor: y}, {Name: "emb", Tensor: e}}
		if err := nn.SaveTensors(ioPath, io); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s and %s; run gen_nn.py --check-kiln", statePath, ioPath)
	}
	tmp := filepath.Join(t.TempDir(), "state.safetensors")
	if err := nn.SaveStateDict(net, tmp); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatalf("%v (write it with go test ./nn -run Interop -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the state dict Kiln writes today differs from the committed %s; if the change is intended, rerun with -update and gen_nn.py --check-kiln", statePath)
	}
	io := golden.Load(t, "nn_kiln_io.safetensors")
	golden.AssertClose(t, "eval output against the committed one", y, io.Get(t, "out"), 1e-5)
	golden.AssertClose(t, "input", x, io.Get(t, "x"), 0)
}

// TestLayerGolden runs single layers with PyTorch's weights and compares
// outputs, parameter gradients and buffers: the options and bookkeeping
// the layers add to the ops (groups and dilation, cumulative batch-norm
// momentum, the batch counter, padding rows, count_include_pad).
func TestLayerGolden(t *testing.T) {
	s := golden.Load(t, "nn.safetensors")
	g := autograd.NewGenerator(5)
	layer := func(l nn.Layer) func(m nn.Module, in []*autograd.Tensor) *autograd.Tensor {
		return func(m nn.Module, in []*autograd.Tensor) *autograd.Tensor { return l.Forward(in[0]) }
	}
	bag := func(m nn.Module, in []*autograd.Tensor) *autograd.Tensor {
		// A 2-D input has no offsets.
		var offsets, w *autograd.Tensor
		if len(in) > 1 {
			offsets = in[1]
		}
		if len(in) > 2 {
			w = in[2]
		}
		return m.(*nn.EmbeddingBag).Forward(in[0], offsets, w)
	}
	loss := func(m nn.Module, in []*autograd.Tensor) *autograd.Tensor {
		return m.(interface {
			Forward(x, target *autograd.Tensor) *autograd.Tensor
		}).Forward(in[0], in[1])
	}
	pad, lastRow := int64(2), int64(-1)
	cases := []struct {
		name  string
		m     nn.Module
		run   func(m nn.Module, in []*autograd.Tensor) *autograd.Tensor
		steps int
		rtol  float64
	}{
		{name: "conv_grouped", m: nn.NewConv2d(g, 4, 6, 3, nn.ConvOptions{Stride: 2, Padding: 2, Dilation: 2, Groups: 2}), rtol: 1e-4},
		{name: "conv3d", m: nn.NewConv3d(g, 2, 3, 2, nn.ConvOptions{Padding: 1, NoBias: true}), rtol: 1e-4},
		{name: "linear", m: nn.NewLinear(g, 5, 3, nn.LinearOptions{})},
		{name: "layernorm", m: nn.NewLayerNorm([]int{3, 4}, nn.LayerNormOptions{})},
		{name: "bn2d_train", m: nn.NewBatchNorm2d(3, nn.BatchNormOptions{}), steps: 3},
		{name: "bn1d_cumulative", m: nn.NewBatchNorm1d(3, nn.BatchNormOptions{CumulativeAverage: true}), steps: 3},
		{name: "bn2d_eval", m: nn.Eval(nn.NewBatchNorm2d(3, nn.BatchNormOptions{}))},
		{name: "bn2d_notrack_eval", m: nn.Eval(nn.NewBatchNorm2d(3, nn.BatchNormOptions{NoTrackRunningStats: true}))},
		{name: "embedding_pad", m: nn.NewEmbedding(g, 6, 3, nn.EmbeddingOptions{PaddingIdx: &pad})},
		{name: "embedding_bag_mean", m: nn.NewEmbeddingBag(g, 8, 3, nn.EmbeddingBagOptions{}), run: bag},
		{name: "embedding_bag_sum_weighted", m: nn.NewEmbeddingBag(g, 8, 3, nn.EmbeddingBagOptions{Mode: "sum"}), run: bag},
		{name: "avgpool_pad", m: nn.NewAvgPool2d(3, nn.AvgPoolOptions{Stride: 2, Padding: 1})},
		{name: "avgpool_nopad", m: nn.NewAvgPool2d(3, nn.AvgPoolOptions{Stride: 2, Padding: 1, ExcludePad: true})},
		{name: "maxpool_dilated", m: nn.NewMaxPool2d(2, nn.MaxPoolOptions{Stride: 1, Padding: 1, Dilation: 2, CeilMode: true})},
		// Defaults the layers fill in (zero options mean PyTorch's
		// defaults) and options they pass on.
		{name: "conv_default", m: nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{}), rtol: 1e-4},
		{name: "conv3d_strided", m: nn.NewConv3d(g, 4, 2, 3, nn.ConvOptions{Stride: 2, Padding: 1, Groups: 2}), rtol: 1e-4},
		{name: "linear_nobias", m: nn.NewLinear(g, 4, 3, nn.LinearOptions{NoBias: true})},
		{name: "layernorm_noaffine", m: nn.NewLayerNorm([]int{2, 5}, nn.LayerNormOptions{Eps: 1e-2, NoAffine: true})},
		{name: "bn3d_train", m: nn.NewBatchNorm3d(2, nn.BatchNormOptions{Eps: 1e-3, Momentum: 0.3}), steps: 2},
		{name: "bn1d_noaffine", m: nn.NewBatchNorm1d(3, nn.BatchNormOptions{NoAffine: true})},
		{name: "bn2d_notrack_train", m: nn.NewBatchNorm2d(2, nn.BatchNormOptions{NoTrackRunningStats: true})},
		{name: "embedding_negpad", m: nn.NewEmbedding(g, 5, 2, nn.EmbeddingOptions{PaddingIdx: &lastRow})},
		{name: "embedding_bag_max", m: nn.NewEmbeddingBag(g, 7, 3, nn.EmbeddingBagOptions{Mode: "max"}), run: bag},
		{name: "embedding_bag_2d", m: nn.NewEmbeddingBag(g, 7, 3, nn.EmbeddingBagOptions{Mode: "sum"}), run: bag},
		{name: "maxpool_default", m: nn.NewMaxPool2d(2, nn.MaxPoolOptions{})},
		{name: "maxpool_ceil", m: nn.NewMaxPool2d(3, nn.MaxPoolOptions{Stride: 2, CeilMode: true})},
		{name: "avgpool_default", m: nn.NewAvgPool2d(2, nn.AvgPoolOptions{})},
		{name: "avgpool_ceil", m: nn.NewAvgPool2d(3, nn.AvgPoolOptions{Stride: 2, Padding: 1, CeilMode: true})},
		{name: "ce_loss_smooth", m: nn.NewCrossEntropyLoss(autograd.CrossEntropyOptions{LabelSmoothing: 0.1}), run: loss},
		{name: "mse_loss_sum", m: nn.NewMSELoss(autograd.ReductionSum), run: loss},
		{name: "bce_loss", m: nn.NewBCEWithLogitsLoss(autograd.ReductionMean), run: loss},
	}
	// Every case gen_nn.py wrote must be run here.
	have := map[string]bool{}
	for _, c := range cases {
		have[c.name] = true
	}
	for name := range s {
		if k, ok := strings.CutSuffix(name, ".out"); ok && !strings.HasPrefix(k, "interop") && !have[k] {
			t.Errorf("gen_nn.py case %q has no Go counterpart", k)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.run == nil {
				c.run = layer(c.m.(nn.Layer))
			}
			if c.rtol == 0 {
				c.rtol = 1e-5
			}
			var state []nn.NamedTensor
			for name, v := range s {
				if k, ok := strings.CutPrefix(name, c.name+".state."); ok {
					state = append(state, nn.NamedTensor{Name: k, Tensor: v})
				}
			}
			if err := nn.LoadTensors(c.m, state); err != nil {
				t.Fatal(err)
			}
			var y *autograd.Tensor
			for step := range max(c.steps, 1) {
				var in []*autograd.Tensor
				for i := 0; ; i++ {
					name := fmt.Sprintf("%s.in%d", c.name, i)
					if c.steps > 1 {
						name += fmt.Sprintf(".step%d", step)
					}
					v, ok := s[name]
					if !ok {
						break
					}
					in = append(in, v)
				}
				nn.ZeroGrad(c.m)
				y = c.run(c.m, in)
			}
			golden.AssertClose(t, "output", y, s.Get(t, c.name+".out"), c.rtol)
			if gout, ok := s[c.name+".gout"]; ok {
				y.Backward(gout)
				for _, p := range nn.NamedParameters(c.m) {
					golden.AssertClose(t, "grad of "+p.Name, p.Tensor.Grad(), s.Get(t, c.name+".grad."+p.Name), c.rtol)
				}
			}
			var buffers []string
			for _, b := range nn.NamedBuffers(c.m) {
				buffers = append(buffers, b.Name)
				golden.AssertClose(t, b.Name+" after", b.Tensor, s.Get(t, c.name+".after."+b.Name), 1e-5)
			}
			for name := range s {
				if k, ok := strings.CutPrefix(name, c.name+".after."); ok && !slices.Contains(buffers, k) {
					t.Errorf("PyTorch has buffer %s, Kiln does not", k)
				}
			}
		})
	}
}
