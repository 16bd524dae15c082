package nn_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
)

// randomiseBN gives bn nontrivial running statistics and affine
// parameters: means around ±2, variances from about 1e-3 to 4, scales of
// either sign.
func randomiseBN(g *autograd.Generator, bn *nn.BatchNorm) {
	for i := range bn.NumFeatures {
		bn.RunningMean().Float32s()[i] = float32(g.Normal(0, 2))
		bn.RunningVar().Float32s()[i] = float32(g.Uniform(1e-3, 4))
		if w := bn.Weight(); w != nil {
			w.Float32s()[i] = float32(g.Normal(0, 1))
			bn.Bias().Float32s()[i] = float32(g.Normal(0, 1))
		}
	}
}

func stateNames(m nn.Module) []string {
	var names []string
	for _, nt := range nn.StateDict(m) {
		names = append(names, nt.Name)
	}
	return names
}

// eval runs m on x without recording gradients.
func eval(m nn.Layer, x *autograd.Tensor) *autograd.Tensor {
	var y *autograd.Tensor
	y = m.Forward(autograd.NoGrad(x))
	return y
}

// TestFoldBatchNormGolden folds the pairs of gen_fold.py and compares the
// folded weights and biases with torch.nn.utils.fusion's bit for bit, and
// the folded outputs with PyTorch's.
func TestFoldBatchNormGolden(t *testing.T) {
	s := golden.Load(t, "fold.safetensors")
	g := autograd.NewGenerator(1)
	for _, tc := range []struct {
		name                    string
		kind                    string
		in, out, kernel, groups int
		bias, affine            bool
		eps                     float64
	}{
		{"conv2d", "conv2d", 3, 6, 3, 1, true, true, 1e-5},
		{"conv2d_nobias_groups", "conv2d", 4, 6, 3, 2, false, true, 1e-3},
		{"conv2d_noaffine", "conv2d", 3, 5, 1, 1, true, false, 1e-5},
		{"conv3d", "conv3d", 2, 4, 2, 1, false, true, 1e-5},
		{"linear", "linear", 5, 7, 0, 1, true, true, 1e-5},
		{"linear_nobias", "linear", 4, 3, 0, 1, false, true, 1e-4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			get := func(suffix string) *autograd.Tensor { return s.Get(t, tc.name+"."+suffix) }
			bnOpt := nn.BatchNormOptions{Eps: tc.eps, NoAffine: !tc.affine}
			convOpt := nn.ConvOptions{Groups: tc.groups, NoBias: !tc.bias}
			var layer nn.Layer
			var bn *nn.BatchNorm
			switch tc.kind {
			case "conv2d":
				layer, bn = nn.NewConv2d(g, tc.in, tc.out, tc.kernel, convOpt), nn.NewBatchNorm2d(tc.out, bnOpt)
			case "conv3d":
				layer, bn = nn.NewConv3d(g, tc.in, tc.out, tc.kernel, convOpt), nn.NewBatchNorm3d(tc.out, bnOpt)
			default:
				layer, bn = nn.NewLinear(g, tc.in, tc.out, nn.LinearOptions{NoBias: !tc.bias}), nn.NewBatchNorm1d(tc.out, bnOpt)
			}
			m := nn.Eval(nn.NewSequential(layer, bn))
			src := []nn.NamedTensor{{"0.weight", get("w")}, {"1.running_mean", get("rm")}, {"1.running_var", get("rv")}, {"1.num_batches_tracked", autograd.Empty(autograd.Int64)}}
			if tc.bias {
				src = append(src, nn.NamedTensor{"0.bias", get("b")})
			}
			if tc.affine {
				src = append(src, nn.NamedTensor{"1.weight", get("bn_w")}, nn.NamedTensor{"1.bias", get("bn_b")})
			}
			if err := nn.LoadTensors(m, src); err != nil {
				t.Fatal(err)
			}
			x := get("x")
			golden.AssertClose(t, "output before folding", eval(m, x), get("out"), 1e-5)

			n, err := nn.FoldBatchNorm(m)
			if err != nil || n != 1 {
				t.Fatalf("FoldBatchNorm = %d, %v; want 1, nil", n, err)
			}
			params := nn.NamedParameters(m)
			if len(params) != 2 || params[0].Name != "0.weight" || params[1].Name != "0.bias" {
				t.Fatalf("parameters after folding: %v", stateNames(m))
			}
			golden.AssertWithin(t, "folded weight", params[0].Tensor, get("fused_w"), 0)
			golden.AssertWithin(t, "folded bias", params[1].Tensor, get("fused_b"), 0)
			golden.AssertClose(t, "folded output", eval(m, x), get("fused_out"), 1e-5)
			golden.AssertClose(t, "folded output vs unfolded PyTorch", eval(m, x), get("out"), 1e-5)
		})
	}
}

// TestFoldBatchNormSequential folds randomised pairs in Sequentials, in
// both memory formats, and checks that outputs and the state dict's names
// come out as PyTorch's fused models have them.
func TestFoldBatchNormSequential(t *testing.T) {
	for _, tc := range []struct {
		name   string
		build  func(g *autograd.Generator) *nn.Sequential
		input  []int
		format autograd.MemoryFormat
		folded int
		names  []string
	}{
		{
			name: "conv2d-bn-relu",
			build: func(g *autograd.Generator) *nn.Sequential {
				return nn.NewSequential(nn.NewConv2d(g, 3, 8, 3, nn.ConvOptions{Padding: 1, NoBias: true}), nn.NewBatchNorm2d(8, nn.BatchNormOptions{}), nn.NewReLU())
			},
			input: []int{2, 3, 9, 7}, format: autograd.Contiguous, folded: 1,
			names: []string{"0.weight", "0.bias"},
		},
		{
			name: "conv2d-bn-relu channels-last",
			build: func(g *autograd.Generator) *nn.Sequential {
				return nn.NewSequential(nn.NewConv2d(g, 3, 8, 3, nn.ConvOptions{Stride: 2}), nn.NewBatchNorm2d(8, nn.BatchNormOptions{Eps: 1e-3}), nn.NewReLU())
			},
			input: []int{2, 3, 9, 7}, format: autograd.ChannelsLast, folded: 1,
			names: []string{"0.weight", "0.bias"},
		},
		{
			name: "two pairs",
			build: func(g *autograd.Generator) *nn.Sequential {
				return nn.NewSequential(
					nn.NewConv2d(g, 4, 6, 3, nn.ConvOptions{Groups: 2}), nn.NewBatchNorm2d(6, nn.BatchNormOptions{}), nn.NewReLU(),
					nn.NewConv2d(g, 6, 5, 1, nn.ConvOptions{}), nn.NewBatchNorm2d(5, nn.BatchNormOptions{NoAffine: true}))
			},
			input: []int{1, 4, 6, 6}, format: autograd.ChannelsLast, folded: 2,
			names: []string{"0.weight", "0.bias", "3.weight", "3.bias"},
		},
		{
			name: "conv3d-bn channels-last-3d",
			build: func(g *autograd.Generator) *nn.Sequential {
				return nn.NewSequential(nn.NewConv3d(g, 2, 3, 2, nn.ConvOptions{NoBias: true}), nn.NewBatchNorm3d(3, nn.BatchNormOptions{}))
			},
			input: []int{2, 2, 4, 3, 5}, format: autograd.ChannelsLast3d, folded: 1,
			names: []string{"0.weight", "0.bias"},
		},
		{
			name: "linear-bn1d",
			build: func(g *autograd.Generator) *nn.Sequential {
				return nn.NewSequential(nn.NewLinear(g, 6, 5, nn.LinearOptions{}), nn.NewBatchNorm1d(5, nn.BatchNormOptions{}), nn.NewReLU())
			},
			input: []int{4, 6}, format: autograd.Contiguous, folded: 1,
			names: []string{"0.weight", "0.bias"},
		},
		{
			// The Linear maps the last dimension (7 → 5) and the BatchNorm
			// normalises dimension 1 (3 channels): not a pair.
			name: "linear-bn1d over another dimension",
			build: func(g *autograd.Generator) *nn.Sequential {
				return nn.NewSequential(nn.NewLinear(g, 7, 5, nn.LinearOptions{}), nn.NewBatchNorm1d(3, nn.BatchNormOptions{}))
			},
			input: []int{2, 3, 7}, format: autograd.Contiguous, folded: 0,
			names: []string{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked"},
		},
		{
			name: "bn without running statistics",
			build: func(g *autograd.Generator) *nn.Sequential {
				return nn.NewSequential(nn.NewConv2d(g, 3, 4, 1, nn.ConvOptions{}), nn.NewBatchNorm2d(4, nn.BatchNormOptions{NoTrackRunningStats: true}))
			},
			input: []int{2, 3, 3, 3}, format: autograd.Contiguous, folded: 0,
			names: []string{"0.weight", "0.bias", "1.weight", "1.bias"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := autograd.NewGenerator(7)
			m := tc.build(g)
			for _, nm := range nn.NamedModules(m) {
				if bn, ok := nm.Module.(*nn.BatchNorm); ok && bn.RunningMean() != nil {
					randomiseBN(g, bn)
				}
			}
			nn.Eval(nn.To(m, tc.format))
			x := autograd.Randn(g, tc.input...).To(tc.format)
			want := eval(m, x)
			n, err := nn.FoldBatchNorm(m)
			if err != nil || n != tc.folded {
				t.Fatalf("FoldBatchNorm = %d, %v; want %d, nil", n, err, tc.folded)
			}
			if got := stateNames(m); !slices.Equal(got, tc.names) {
				t.Errorf("state dict %v, want %v", got, tc.names)
			}
			got := eval(m, x)
			if got.Format() != want.Format() {
				t.Errorf("output format %v, want %v", got.Format(), want.Format())
			}
			golden.AssertClose(t, "folded output", got, want, 1e-5)
			if n, err := nn.FoldBatchNorm(m); n != 0 || err != nil {
				t.Errorf("folding again = %d, %v; want 0, nil", n, err)
			}
		})
	}
}

// foldBlock computes bn(conv(x)) in its own Forward and declares the pair.
type foldBlock struct {
	nn.Base
	Conv  *nn.Conv2d
	BN    *nn.BatchNorm
	pairs [][2]string
}

func newFoldBlock(g *autograd.Generator, bnOpt nn.BatchNormOptions, pairs ...[2]string) *foldBlock {
	b := &foldBlock{Conv: nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{NoBias: true}), BN: nn.NewBatchNorm2d(4, bnOpt), pairs: pairs}
	b.RegisterModule("conv", b.Conv)
	b.RegisterModule("bn", b.BN)
	return b
}

func (b *foldBlock) FoldPairs() [][2]string { return b.pairs }

func (b *foldBlock) Forward(x *autograd.Tensor) *autograd.Tensor {
	if x.Mode().NoGrad() {
		return b.BN.ForwardInPlace(b.Conv.Forward(x), true)
	}
	return b.BN.ForwardReLU(b.Conv.Forward(x))
}

// TestFoldBatchNormDeclared folds a pair that a module declares, checking
// the fused ReLU paths of a folded BatchNorm with and without gradient
// recording.
func TestFoldBatchNormDeclared(t *testing.T) {
	g := autograd.NewGenerator(3)
	b := newFoldBlock(g, nn.BatchNormOptions{}, [2]string{"conv", "bn"})
	randomiseBN(g, b.BN)
	m := nn.Eval(nn.NewSequential(b, nn.NewFlatten(1, -1)))
	x := autograd.Randn(g, 2, 3, 5, 5)
	want := eval(m, x)
	if n, err := nn.FoldBatchNorm(m); n != 1 || err != nil {
		t.Fatalf("FoldBatchNorm = %d, %v; want 1, nil", n, err)
	}
	if !b.BN.Folded() || b.Conv.Options.NoBias || b.Conv.Bias() == nil {
		t.Errorf("after folding: BN folded %v, conv NoBias %v, bias %v", b.BN.Folded(), b.Conv.Options.NoBias, b.Conv.Bias())
	}
	golden.AssertClose(t, "folded in place", eval(m, x), want, 1e-5)
	y := m.Forward(x)
	golden.AssertClose(t, "folded with gradients", y, want, 1e-5)
	autograd.Sum(y, nil, false).Backward()
	if b.Conv.Bias().Grad() == nil {
		t.Error("the folded conv's new bias got no gradient")
	}
	if s := slices.Min(b.BN.ForwardReLU(autograd.Randn(g, 1, 4, 2, 2)).Float32s()); s < 0 {
		t.Errorf("folded ForwardReLU left a negative value %v", s)
	}
}

// TestFoldBatchNormOverlap declares, by a dotted name, a pair that a
// Sequential also holds: it is folded once.
func TestFoldBatchNormOverlap(t *testing.T) {
	g := autograd.NewGenerator(4)
	b := newFoldBlock(g, nn.BatchNormOptions{}, [2]string{"conv", "bn"}, [2]string{"seq.0", "seq.1"})
	seq := nn.NewSequential(nn.NewConv2d(g, 3, 2, 1, nn.ConvOptions{}), nn.NewBatchNorm2d(2, nn.BatchNormOptions{}))
	b.RegisterModule("seq", seq)
	randomiseBN(g, seq.At(1).(*nn.BatchNorm))
	nn.Eval(b)
	x := autograd.Randn(g, 1, 3, 4, 4)
	want := eval(seq, x)
	if n, err := nn.FoldBatchNorm(b); n != 2 || err != nil {
		t.Fatalf("FoldBatchNorm = %d, %v; want 2, nil", n, err)
	}
	golden.AssertClose(t, "folded Sequential", eval(seq, x), want, 1e-5)
}

func TestFoldBatchNormErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(g *autograd.Generator) nn.Module
		want  string
	}{
		{"training mode", func(g *autograd.Generator) nn.Module {
			return nn.NewSequential(nn.NewConv2d(g, 3, 4, 1, nn.ConvOptions{}), nn.NewBatchNorm2d(4, nn.BatchNormOptions{}))
		}, "training mode"},
		{"submodule in training mode", func(g *autograd.Generator) nn.Module {
			bn := nn.NewBatchNorm2d(4, nn.BatchNormOptions{})
			m := nn.Eval(nn.NewSequential(nn.NewConv2d(g, 3, 4, 1, nn.ConvOptions{}), bn))
			nn.Train(bn, true)
			return m
		}, "1 into 0: a module is in training mode"},
		{"channel mismatch", func(g *autograd.Generator) nn.Module {
			return nn.Eval(nn.NewSequential(nn.NewConv2d(g, 3, 4, 1, nn.ConvOptions{}), nn.NewBatchNorm2d(5, nn.BatchNormOptions{})))
		}, "4 output channels and the BatchNorm 5"},
		{"rank mismatch", func(g *autograd.Generator) nn.Module {
			return nn.Eval(nn.NewSequential(nn.NewConv2d(g, 3, 4, 1, nn.ConvOptions{}), nn.NewBatchNorm1d(4, nn.BatchNormOptions{})))
		}, "followed by a BatchNorm1d, want a BatchNorm2d"},
		{"bf16", func(g *autograd.Generator) nn.Module {
			conv := nn.NewConv2d(g, 3, 4, 1, nn.ConvOptions{})
			conv.SetParameter("weight", autograd.Cast(conv.Weight(), autograd.BFloat16))
			return nn.Eval(nn.NewSequential(conv, nn.NewBatchNorm2d(4, nn.BatchNormOptions{})))
		}, "fold before converting the model to BF16"},
		{"declared without running statistics", func(g *autograd.Generator) nn.Module {
			return nn.Eval(newFoldBlock(g, nn.BatchNormOptions{NoTrackRunningStats: true}, [2]string{"conv", "bn"}))
		}, "bn into conv: the BatchNorm keeps no running statistics"},
		{"declared name missing", func(g *autograd.Generator) nn.Module {
			return nn.Eval(nn.NewSequential(newFoldBlock(g, nn.BatchNormOptions{}, [2]string{"conv", "bn2"})))
		}, `at "0" declares fold pair ["conv" "bn2"] but has no submodule "bn2"`},
		{"declared not a batch norm", func(g *autograd.Generator) nn.Module {
			return nn.Eval(newFoldBlock(g, nn.BatchNormOptions{}, [2]string{"conv", "conv"}))
		}, "conv is a *nn.Conv2d, not a BatchNorm"},
		{"declared not a layer", func(g *autograd.Generator) nn.Module {
			return nn.Eval(newFoldBlock(g, nn.BatchNormOptions{}, [2]string{"bn", "bn"}))
		}, "bn is a *nn.BatchNorm; only Conv2d, Conv3d and Linear fold"},
		{"layer paired twice", func(g *autograd.Generator) nn.Module {
			b := newFoldBlock(g, nn.BatchNormOptions{}, [2]string{"conv", "bn"}, [2]string{"conv", "bn2"})
			b.RegisterModule("bn2", nn.NewBatchNorm2d(4, nn.BatchNormOptions{}))
			return nn.Eval(b)
		}, "conv is paired with both bn and bn2"},
		{"batch norm paired twice", func(g *autograd.Generator) nn.Module {
			b := newFoldBlock(g, nn.BatchNormOptions{}, [2]string{"conv", "bn"}, [2]string{"conv2", "bn"})
			b.RegisterModule("conv2", nn.NewConv2d(g, 3, 4, 1, nn.ConvOptions{}))
			return nn.Eval(b)
		}, "bn is paired with both conv and conv2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.build(autograd.NewGenerator(1))
			before := stateNames(m)
			n, err := nn.FoldBatchNorm(m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FoldBatchNorm = %d, %v; want an error containing %q", n, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "nn: FoldBatchNorm: ") {
				t.Errorf("error %q does not name FoldBatchNorm", err)
			}
			if after := stateNames(m); n != 0 || !slices.Equal(after, before) {
				t.Errorf("a failed fold changed the model: %d folded, state %v, was %v", n, after, before)
			}
		})
	}
}

// TestFoldBatchNormStateDict saves a folded model and loads the file into
// a second folded model strictly; an unfolded state dict no longer fits.
func TestFoldBatchNormStateDict(t *testing.T) {
	build := func(seed uint64) *nn.Sequential {
		g := autograd.NewGenerator(seed)
		m := nn.NewSequential(nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{NoBias: true}), nn.NewBatchNorm2d(4, nn.BatchNormOptions{}))
		randomiseBN(g, m.At(1).(*nn.BatchNorm))
		return nn.Eval(m)
	}
	path := t.TempDir() + "/folded.safetensors"
	unfolded := t.TempDir() + "/unfolded.safetensors"
	a := build(1)
	if err := nn.SaveStateDict(a, unfolded); err != nil {
		t.Fatal(err)
	}
	if _, err := nn.FoldBatchNorm(a); err != nil {
		t.Fatal(err)
	}
	if err := nn.SaveStateDict(a, path); err != nil {
		t.Fatal(err)
	}
	b := build(2)
	if _, err := nn.FoldBatchNorm(b); err != nil {
		t.Fatal(err)
	}
	if err := nn.LoadStateDict(b, path); err != nil {
		t.Fatal(err)
	}
	x := autograd.Randn(autograd.NewGenerator(3), 1, 3, 5, 5)
	golden.AssertWithin(t, "reloaded folded model", eval(b, x), eval(a, x), 0)
	err := nn.LoadStateDict(b, unfolded)
	if err == nil || !strings.Contains(err.Error(), `unexpected key(s) in state dict: "1.bias"`) {
		t.Errorf("loading an unfolded state dict into a folded model: %v", err)
	}
}

func TestRemoveDropout(t *testing.T) {
	g := autograd.NewGenerator(1)
	inner := nn.NewSequential(nn.NewDropout(g, 0.3), nn.NewReLU())
	m := nn.Eval(nn.NewSequential(nn.NewLinear(g, 4, 4, nn.LinearOptions{}), nn.NewDropout(g, 0.5), inner))
	x := autograd.Randn(g, 3, 4)
	want := m.Forward(x)
	training := nn.Train(nn.NewDropout(g, 0.5), true)
	m.Append(training)
	if n := nn.RemoveDropout(m); n != 2 {
		t.Fatalf("RemoveDropout = %d, want 2", n)
	}
	for _, l := range []nn.Layer{m.At(1), inner.At(0)} {
		if _, ok := l.(*nn.Identity); !ok {
			t.Errorf("a dropout became a %T, want *nn.Identity", l)
		}
	}
	if m.At(3) != training {
		t.Error("a dropout in training mode was removed")
	}
	if got := nn.Children(m)[1].Module; got != m.At(1) {
		t.Errorf("child \"1\" is %T, the layer %T", got, m.At(1))
	}
	nn.Eval(m)
	golden.AssertWithin(t, "output without dropout", m.Forward(x), want, 0)
	if n := nn.RemoveDropout(m); n != 1 {
		t.Errorf("RemoveDropout after Eval = %d, want 1", n)
	}
}
