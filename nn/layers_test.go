package nn_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
)

func TestBadInputs(t *testing.T) {
	g := autograd.NewGenerator(1)
	conv := nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{})
	bn2 := nn.NewBatchNorm2d(3, nn.BatchNormOptions{})
	cases := []struct {
		name string
		f    func()
		want []string
	}{
		{"Conv2d with wrong input channels", func() { conv.Forward(autograd.Zeros(1, 5, 8, 8)) }, []string{"Conv2d", "5 channels"}},
		{"Linear with wrong features", func() { nn.NewLinear(g, 4, 2, nn.LinearOptions{}).Forward(autograd.Zeros(3, 5)) }, []string{"Linear", "[3 5]"}},
		{"BatchNorm2d with a 3-D input", func() { bn2.Forward(autograd.Zeros(2, 3, 4)) }, []string{"BatchNorm2d", "expected 4D input (got 3D input"}},
		{"BatchNorm1d with a 4-D input", func() { nn.NewBatchNorm1d(3, nn.BatchNormOptions{}).Forward(autograd.Zeros(2, 3, 4, 4)) }, []string{"BatchNorm1d", "expected 2D or 3D input (got 4D input"}},
		{"BatchNorm3d with a 4-D input", func() { nn.NewBatchNorm3d(3, nn.BatchNormOptions{}).Forward(autograd.Zeros(2, 3, 4, 4)) }, []string{"BatchNorm3d", "expected 5D input"}},
		{"groups not dividing in channels", func() { nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{Groups: 2}) }, []string{"NewConv2d", "in channels 3 must be divisible by groups 2"}},
		{"groups not dividing out channels", func() { nn.NewConv3d(g, 4, 3, 3, nn.ConvOptions{Groups: 2}) }, []string{"NewConv3d", "out channels 3"}},
		{"zero kernel", func() { nn.NewConv2d(g, 3, 4, 0, nn.ConvOptions{}) }, []string{"kernel=0"}},
		{"negative Linear size", func() { nn.NewLinear(g, -1, 2, nn.LinearOptions{}) }, []string{"in=-1"}},
		{"dropout probability", func() { nn.NewDropout(g, 1.5) }, []string{"between 0 and 1", "1.5"}},
		{"GELU approximation", func() { nn.NewGELU("fast") }, []string{`"fast"`}},
		{"HardTanh bounds", func() { nn.NewHardTanh(1, -1) }, []string{"min 1 is greater than max -1"}},
		{"padding index", func() { p := int64(6); nn.NewEmbedding(g, 6, 2, nn.EmbeddingOptions{PaddingIdx: &p}) }, []string{"padding index 6"}},
		{"bag mode", func() { nn.NewEmbeddingBag(g, 6, 2, nn.EmbeddingBagOptions{Mode: "median"}) }, []string{`"median"`}},
		{"empty LayerNorm shape", func() { nn.NewLayerNorm(nil, nn.LayerNormOptions{}) }, []string{"at least one dimension"}},
		{"BatchNorm features", func() { nn.NewBatchNorm2d(0, nn.BatchNormOptions{}) }, []string{"positive", "0"}},
		{"pool kernel", func() { nn.NewMaxPool2d(0, nn.MaxPoolOptions{}) }, []string{"NewMaxPool2d", "kernel=0"}},
		{"adaptive pool size", func() { nn.NewAdaptiveAvgPool2d(0, 1) }, []string{"0x1"}},
		{"To with a bad format", func() { nn.To(conv, autograd.MemoryFormat(7)) }, []string{"nn: To"}},
		{"duplicate child name", func() { s := nn.NewSequential(); s.RegisterModule("0", nn.NewReLU()); s.Append(nn.NewReLU()) }, []string{`"0"`}},

		// Constructors: a nil generator fails where it is passed, sizes and
		// options where they are given.
		{"Conv2d nil generator", func() { nn.NewConv2d(nil, 3, 4, 3, nn.ConvOptions{}) }, []string{"NewConv2d: generator is nil"}},
		{"Conv3d nil generator", func() { nn.NewConv3d(nil, 3, 4, 3, nn.ConvOptions{}) }, []string{"NewConv3d: generator is nil"}},
		{"Conv2d zero channels", func() { nn.NewConv2d(g, 0, 4, 3, nn.ConvOptions{}) }, []string{"NewConv2d", "in=0 out=4 kernel=3"}},
		{"Conv3d negative padding", func() { nn.NewConv3d(g, 2, 2, 1, nn.ConvOptions{Padding: -1}) }, []string{"NewConv3d", "negative stride, padding, dilation or groups"}},
		{"Conv2d negative groups", func() { nn.NewConv2d(g, 2, 2, 1, nn.ConvOptions{Groups: -2}) }, []string{"NewConv2d", "Groups:-2"}},
		{"Linear nil generator", func() { nn.NewLinear(nil, 2, 2, nn.LinearOptions{}) }, []string{"NewLinear: generator is nil"}},
		{"Linear negative out", func() { nn.NewLinear(g, 2, -3, nn.LinearOptions{}) }, []string{"NewLinear", "out=-3"}},
		{"Embedding nil generator", func() { nn.NewEmbedding(nil, 4, 2, nn.EmbeddingOptions{}) }, []string{"NewEmbedding: generator is nil"}},
		{"Embedding negative size", func() { nn.NewEmbedding(g, 4, -2, nn.EmbeddingOptions{}) }, []string{"NewEmbedding", "dim=-2"}},
		{"Embedding padding index below", func() { p := int64(-7); nn.NewEmbedding(g, 6, 2, nn.EmbeddingOptions{PaddingIdx: &p}) }, []string{"padding index -7 must be within the 6 embeddings"}},
		{"EmbeddingBag nil generator", func() { nn.NewEmbeddingBag(nil, 4, 2, nn.EmbeddingBagOptions{}) }, []string{"NewEmbeddingBag: generator is nil"}},
		{"EmbeddingBag negative size", func() { nn.NewEmbeddingBag(g, -1, 2, nn.EmbeddingBagOptions{}) }, []string{"NewEmbeddingBag", "num=-1"}},
		{"Dropout nil generator", func() { nn.NewDropout(nil, 0.5) }, []string{"NewDropout: generator is nil"}},
		{"Dropout NaN probability", func() { nn.NewDropout(g, math.NaN()) }, []string{"NewDropout", "but got NaN"}},
		{"BatchNorm negative eps", func() { nn.NewBatchNorm1d(3, nn.BatchNormOptions{Eps: -1e-5}) }, []string{"NewBatchNorm1d: eps must be finite and positive, got -1e-05"}},
		{"BatchNorm NaN momentum", func() { nn.NewBatchNorm2d(3, nn.BatchNormOptions{Momentum: math.NaN()}) }, []string{"NewBatchNorm2d: momentum must be a finite number, got NaN"}},
		{"BatchNorm3d negative features", func() { nn.NewBatchNorm3d(-1, nn.BatchNormOptions{}) }, []string{"NewBatchNorm3d", "got -1"}},
		{"LayerNorm zero dimension", func() { nn.NewLayerNorm([]int{3, 0}, nn.LayerNormOptions{}) }, []string{"normalized shape [3 0] has a non-positive dimension"}},
		{"LayerNorm NaN eps", func() { nn.NewLayerNorm([]int{3}, nn.LayerNormOptions{Eps: math.NaN()}) }, []string{"NewLayerNorm: eps must be finite and positive, got NaN"}},
		{"AvgPool negative stride", func() { nn.NewAvgPool2d(2, nn.AvgPoolOptions{Stride: -1}) }, []string{"NewAvgPool2d", "stride=-1"}},
		{"MaxPool negative padding", func() { nn.NewMaxPool2d(2, nn.MaxPoolOptions{Padding: -1}) }, []string{"NewMaxPool2d", "padding=-1"}},
		{"adaptive pool negative size", func() { nn.NewAdaptiveAvgPool2d(2, -1) }, []string{"NewAdaptiveAvgPool2d", "2x-1"}},
		{"Uniform nil generator", func() { nn.Uniform(nil, autograd.Zeros(2), 0, 1) }, []string{"Uniform: generator is nil"}},
		{"Uniform reversed range", func() { nn.Uniform(g, autograd.Zeros(2), 1, -1) }, []string{"Uniform: expects a finite range [from, to) with from <= to, got [1, -1)"}},
		{"Normal nil generator", func() { nn.Normal(nil, autograd.Zeros(2), 0, 1) }, []string{"Normal: generator is nil"}},
		{"KaimingUniform of a vector", func() { nn.KaimingUniform(g, autograd.Zeros(3), nn.KaimingOptions{}) }, []string{"Fans", "shape [3]"}},

		// Forward with the wrong rank, dtype or size names the op and the
		// shapes.
		{"Conv2d 5-D input", func() { conv.Forward(autograd.Zeros(1, 3, 2, 8, 8)) }, []string{"Conv2d: expected 3-D (unbatched) or 4-D (batched) input, got shape [1 3 2 8 8]"}},
		{"Conv2d int64 input", func() { conv.Forward(autograd.Empty(autograd.Int64, 1, 3, 8, 8)) }, []string{"Conv2d: input has dtype int64"}},
		{"Conv2d input smaller than the kernel", func() { conv.Forward(autograd.Zeros(1, 3, 2, 8)) }, []string{"Conv2d: kernel 3×3", "larger than the padded input 2×8"}},
		{"Conv3d 3-D input", func() { nn.NewConv3d(g, 2, 2, 1, nn.ConvOptions{}).Forward(autograd.Zeros(2, 4, 4)) }, []string{"Conv3d: expected 4-D (unbatched) or 5-D (batched) input, got shape [2 4 4]"}},
		{"Linear 0-d input", func() { nn.NewLinear(g, 4, 2, nn.LinearOptions{}).Forward(autograd.Scalar(1)) }, []string{"Linear: input must have at least 1 dimension"}},
		{"Linear bfloat16 input", func() { nn.NewLinear(g, 4, 2, nn.LinearOptions{}).Forward(autograd.Empty(autograd.BFloat16, 4)) }, []string{"weight has dtype float32 but the input is bfloat16"}},
		{"BatchNorm2d int64 input", func() { bn2.Forward(autograd.Empty(autograd.Int64, 2, 3, 2, 2)) }, []string{"BatchNorm: input has dtype int64"}},
		{"BatchNorm2d wrong channels", func() { bn2.Forward(autograd.Zeros(2, 4, 2, 2)) }, []string{"BatchNorm: weight has shape [3], want [4] for input [2 4 2 2]"}},
		{"BatchNorm1d one value per channel", func() { nn.NewBatchNorm1d(3, nn.BatchNormOptions{}).Forward(autograd.Zeros(1, 3)) }, []string{"Expected more than 1 value per channel when training"}},
		{"LayerNorm trailing shape", func() { nn.NewLayerNorm([]int{3, 4}, nn.LayerNormOptions{}).Forward(autograd.Zeros(2, 4, 3)) }, []string{"LayerNorm: normalized shape [3 4] does not match the trailing dimensions of input [2 4 3]"}},
		{"Embedding float indices", func() { nn.NewEmbedding(g, 6, 2, nn.EmbeddingOptions{}).Forward(autograd.Zeros(3)) }, []string{"Embedding: indices has dtype float32; Embedding needs int64 indices"}},
		{"Embedding index out of range", func() { nn.NewEmbedding(g, 6, 2, nn.EmbeddingOptions{}).Forward(autograd.FromInt64([]int64{1, 6})) }, []string{"index 6 (at position 1 of indices [2]) is out of range for a table of 6 rows"}},
		{"padded Embedding negative index", func() {
			p := int64(0)
			nn.NewEmbedding(g, 6, 2, nn.EmbeddingOptions{PaddingIdx: &p}).Forward(autograd.FromInt64([]int64{-1}))
		}, []string{"EmbeddingPadding: index -1"}},
		{"EmbeddingBag 3-D input", func() {
			nn.NewEmbeddingBag(g, 6, 2, nn.EmbeddingBagOptions{}).Forward(autograd.Empty(autograd.Int64, 1, 2, 2), nil, nil)
		}, []string{"EmbeddingBag: input must be 1-D (with offsets) or 2-D [bags, size], got shape [1 2 2]"}},
		{"EmbeddingBag missing offsets", func() {
			nn.NewEmbeddingBag(g, 6, 2, nn.EmbeddingBagOptions{}).Forward(autograd.Empty(autograd.Int64, 3), nil, nil)
		}, []string{"EmbeddingBag: offsets are required for 1-D input [3]"}},
		{"EmbeddingBag weights with mean", func() {
			nn.NewEmbeddingBag(g, 6, 2, nn.EmbeddingBagOptions{}).Forward(autograd.Empty(autograd.Int64, 2, 2), nil, autograd.Zeros(2, 2))
		}, []string{"per-sample weights are only supported with BagSum, got mode mean"}},
		{"MaxPool2d 2-D input", func() { nn.NewMaxPool2d(2, nn.MaxPoolOptions{}).Forward(autograd.Zeros(4, 4)) }, []string{"MaxPool2d: expected 3-D (unbatched) or 4-D (batched) input, got shape [4 4]"}},
		{"MaxPool2d dilation", func() { nn.NewMaxPool2d(2, nn.MaxPoolOptions{Dilation: -1}).Forward(autograd.Zeros(1, 4, 4)) }, []string{"MaxPool2d: dilation must be positive"}},
		{"AvgPool2d 5-D input", func() { nn.NewAvgPool2d(2, nn.AvgPoolOptions{}).Forward(autograd.Zeros(1, 1, 1, 4, 4)) }, []string{"AvgPool2d: expected 3-D (unbatched) or 4-D (batched) input"}},
		{"AvgPool2d big padding", func() { nn.NewAvgPool2d(2, nn.AvgPoolOptions{Padding: 2}).Forward(autograd.Zeros(1, 4, 4)) }, []string{"AvgPool2d: padding [2 2] should be at most half of kernel size [2 2]"}},
		{"AdaptiveAvgPool2d int input", func() { nn.NewAdaptiveAvgPool2d(1, 1).Forward(autograd.Empty(autograd.Int32, 1, 4, 4)) }, []string{"AdaptiveAvgPool2d: input has dtype int32"}},
		{"Flatten start after end", func() { nn.NewFlatten(2, 1).Forward(autograd.Zeros(2, 3, 4)) }, []string{"Flatten: start dimension 2 comes after end dimension 1"}},
		{"Flatten dimension out of range", func() { nn.NewFlatten(1, 5).Forward(autograd.Zeros(2, 3)) }, []string{"Flatten: dimension 5 out of range for a 2-D tensor"}},
		{"Softmax dimension out of range", func() { nn.NewSoftmax(2).Forward(autograd.Zeros(2, 3)) }, []string{"Softmax: dim 2 out of range for input of shape [2 3]"}},
		{"LogSoftmax nil input", func() { nn.NewLogSoftmax(0).Forward(nil) }, []string{"LogSoftmax: input is nil"}},
		{"ReLU nil input", func() { nn.NewReLU().Forward(nil) }, []string{"ReLU: input is nil"}},
		{"GELU int input", func() { nn.NewGELU("tanh").Forward(autograd.Empty(autograd.Int32, 2)) }, []string{"GELU: input has dtype int32"}},
		{"Dropout int input", func() { nn.NewDropout(g, 0.5).Forward(autograd.Empty(autograd.Int64, 2)) }, []string{"Dropout: input has dtype int64"}},
		{"CrossEntropyLoss float target", func() {
			nn.NewCrossEntropyLoss(autograd.CrossEntropyOptions{}).Forward(autograd.Zeros(2, 3), autograd.Zeros(2))
		}, []string{"CrossEntropy: target has dtype float32"}},
		{"CrossEntropyLoss class out of range", func() {
			nn.NewCrossEntropyLoss(autograd.CrossEntropyOptions{}).Forward(autograd.Zeros(2, 3), autograd.FromInt64([]int64{0, 3}))
		}, []string{"CrossEntropy: target 3 is out of range for 3 classes"}},
		{"MSELoss shapes", func() { nn.NewMSELoss(autograd.ReductionSum).Forward(autograd.Zeros(2, 3), autograd.Zeros(3)) }, []string{"MSELoss: input shape [2 3] and target shape [3] differ"}},
		{"BCEWithLogitsLoss int target", func() {
			nn.NewBCEWithLogitsLoss(autograd.ReductionMean).Forward(autograd.Zeros(2), autograd.Empty(autograd.Int64, 2))
		}, []string{"BCEWithLogits: target has dtype int64"}},
		{"MSELoss bad reduction", func() { nn.NewMSELoss(7).Forward(autograd.Zeros(2), autograd.Zeros(2)) }, []string{"MSELoss: invalid reduction Reduction(7)"}},

		// Containers and registration.
		{"Sequential.At past the end", func() { nn.NewSequential(nn.NewReLU()).At(1) }, []string{"Sequential.At: index 1 out of range for 1 entries"}},
		{"Sequential.At negative", func() { nn.NewSequential().At(-1) }, []string{"Sequential.At: index -1 out of range for 0 entries"}},
		{"ModuleList.At past the end", func() { nn.NewModuleList(nn.NewReLU(), nn.NewTanh()).At(2) }, []string{"ModuleList.At: index 2 out of range for 2 entries"}},
		{"nil layer", func() { nn.NewSequential(nn.NewReLU(), nil) }, []string{`RegisterModule: module "1" is nil`}},
		{"nil module", func() { nn.NewModuleList(nil) }, []string{`RegisterModule: module "0" is nil`}},
		{"empty parameter name", func() { var b nn.Base; b.RegisterParameter("", autograd.Zeros(1)) }, []string{"RegisterParameter: empty name"}},
		{"parameter name taken by a buffer", func() {
			var b nn.Base
			b.RegisterBuffer("w", autograd.Zeros(1))
			b.RegisterParameter("w", autograd.Zeros(1))
		}, []string{`RegisterParameter: name "w" already holds a buffer`}},
		{"integer parameter", func() { var b nn.Base; b.RegisterParameter("n", autograd.Empty(autograd.Int64)) }, []string{"SetRequiresGrad: only floating-point tensors"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(c.f)
			var m autograd.Misuse
			if !errors.As(err, &m) {
				t.Fatalf("got %v, want an *nn.Error or *autograd.Error", err)
			}
			for _, w := range c.want {
				if !contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if n := bn2.NumBatchesTracked().Item(); n != 0 {
		t.Errorf("a rejected input advanced num_batches_tracked to %v", n)
	}
}

func TestTrainEval(t *testing.T) {
	g := autograd.NewGenerator(3)
	bn := nn.NewBatchNorm2d(2, nn.BatchNormOptions{})
	drop := nn.NewDropout(g, 0.5)
	model := nn.NewSequential(bn, drop)
	x := autograd.AddScalar(autograd.Randn(g, 4, 2, 3, 3), 3)

	if !bn.Training() || !drop.Training() {
		t.Fatal("modules do not start in training mode")
	}
	y := model.Forward(x)
	if n := bn.NumBatchesTracked().Item(); n != 1 {
		t.Errorf("num_batches_tracked after a training forward = %v, want 1", n)
	}
	if m := bn.RunningMean().Values()[0]; math.Abs(m-0.3) > 0.1 {
		t.Errorf("running mean %v, want about 0.1·3", m)
	}
	zeros := 0
	for _, v := range y.Values() {
		if v == 0 {
			zeros++
		}
	}
	if zeros < 10 || zeros > 62 {
		t.Errorf("dropout(0.5) in training zeroed %d of 72 elements", zeros)
	}

	nn.Eval(model)
	if bn.Training() || drop.Training() {
		t.Fatal("Eval did not reach the children")
	}
	mean := bn.RunningMean().Values()
	y1, y2 := model.Forward(x), model.Forward(x)
	golden.AssertClose(t, "eval forwards agree", y1, y2, 0)
	if n := bn.NumBatchesTracked().Item(); n != 1 {
		t.Errorf("num_batches_tracked advanced in eval mode to %v", n)
	}
	if got := bn.RunningMean().Values(); got[0] != mean[0] {
		t.Errorf("running mean moved in eval mode")
	}
	// In eval mode the layer normalises with the running statistics.
	xv, yv := x.Values(), y1.Values()
	rv := bn.RunningVar().Values()
	want := (xv[0] - mean[0]) / math.Sqrt(rv[0]+1e-5)
	if math.Abs(yv[0]-want) > 1e-4*math.Abs(want) {
		t.Errorf("eval output %v, want %v from the running statistics", yv[0], want)
	}

	nn.Train(model, true)
	model.Forward(x)
	if n := bn.NumBatchesTracked().Item(); n != 2 {
		t.Errorf("num_batches_tracked after Train = %v, want 2", n)
	}
}

func TestToChannelsLast(t *testing.T) {
	g := autograd.NewGenerator(4)
	conv := nn.NewConv2d(g, 3, 8, 3, nn.ConvOptions{Padding: 1})
	model := nn.NewSequential(conv, nn.NewBatchNorm2d(8, nn.BatchNormOptions{}), nn.NewReLU(),
		nn.NewAdaptiveAvgPool2d(1, 1), nn.NewFlatten(1, -1), nn.NewLinear(g, 8, 2, nn.LinearOptions{}))
	nn.Eval(model)
	x := autograd.Randn(g, 2, 3, 5, 5)
	want := model.Forward(x)

	w := conv.Weight()
	nn.To(model, autograd.ChannelsLast)
	if conv.Weight() != w {
		t.Fatal("To replaced the weight tensor; optimizers holding it would be cut off")
	}
	for _, p := range nn.StateDict(model) {
		wantFormat := autograd.Contiguous
		if p.Tensor.NDim() == 4 {
			wantFormat = autograd.ChannelsLast
		}
		if p.Tensor.Format() != wantFormat {
			t.Errorf("%s (%d-D) is %v, want %v", p.Name, p.Tensor.NDim(), p.Tensor.Format(), wantFormat)
		}
	}
	xcl := x.To(autograd.ChannelsLast)
	golden.AssertClose(t, "channels-last output", model.Forward(xcl), want, 1e-5)
	golden.AssertClose(t, "channels-last weight, contiguous input", model.Forward(x), want, 1e-5)

	nn.Train(model, true)
	model.Forward(xcl).Backward(autograd.Ones(2, 2))
	if w.Grad() == nil || w.Grad().Format() != autograd.ChannelsLast {
		t.Errorf("weight gradient %v, want one in channels-last format", w.Grad())
	}

	nn.To(model, autograd.Contiguous)
	if w.Format() != autograd.Contiguous || w.Grad().Format() != autograd.Contiguous {
		t.Errorf("To(Contiguous) left the weight %v and its gradient %v", w.Format(), w.Grad().Format())
	}

	c3 := nn.NewConv3d(g, 2, 2, 1, nn.ConvOptions{})
	nn.To(c3, autograd.ChannelsLast)
	if c3.Weight().Format() != autograd.Contiguous {
		t.Errorf("ChannelsLast converted a 5-D weight")
	}
	nn.To(c3, autograd.ChannelsLast3d)
	if c3.Weight().Format() != autograd.ChannelsLast3d {
		t.Errorf("ChannelsLast3d left the 5-D weight %v", c3.Weight().Format())
	}
}

func TestLayersForward(t *testing.T) {
	g := autograd.NewGenerator(5)
	x := autograd.Randn(g, 2, 3, 4, 4)
	shape := func(l nn.Layer) []int { return l.Forward(x).Shape() }
	for _, c := range []struct {
		name string
		l    nn.Layer
		want []int
	}{
		{"Identity", nn.NewIdentity(), []int{2, 3, 4, 4}},
		{"Flatten default", nn.NewFlatten(1, -1), []int{2, 48}},
		{"Flatten 0..1", nn.NewFlatten(0, 1), []int{6, 4, 4}},
		{"empty Sequential", nn.NewSequential(), []int{2, 3, 4, 4}},
		{"Softmax", nn.NewSoftmax(1), []int{2, 3, 4, 4}},
		{"strided conv", nn.NewConv2d(g, 3, 5, 3, nn.ConvOptions{Stride: 2, Padding: 1}), []int{2, 5, 2, 2}},
		{"adaptive pool", nn.NewAdaptiveAvgPool2d(2, 1), []int{2, 3, 2, 1}},
	} {
		if got := shape(c.l); !equalInts(got, c.want) {
			t.Errorf("%s: output shape %v, want %v", c.name, got, c.want)
		}
	}
	if nn.NewIdentity().Forward(x) != x {
		t.Error("Identity did not return its input")
	}

	// Activation modules apply their op with their settings.
	v := autograd.FromFloat32([]float32{-2, -0.5, 0.5, 2})
	for _, c := range []struct {
		name string
		l    nn.Layer
		f    func(float64) float64
	}{
		{"ReLU", nn.NewReLU(), func(x float64) float64 { return math.Max(x, 0) }},
		{"Sigmoid", nn.NewSigmoid(), func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }},
		{"Tanh", nn.NewTanh(), math.Tanh},
		{"SiLU", nn.NewSiLU(), func(x float64) float64 { return x / (1 + math.Exp(-x)) }},
		{"HardTanh", nn.NewHardTanh(-1, 1), func(x float64) float64 { return math.Max(-1, math.Min(1, x)) }},
		{"ELU", nn.NewELU(0.5), func(x float64) float64 {
			if x > 0 {
				return x
			}
			return 0.5 * (math.Exp(x) - 1)
		}},
		{"GELU", nn.NewGELU("none"), func(x float64) float64 { return x / 2 * (1 + math.Erf(x/math.Sqrt2)) }},
		{"LogSoftmax", nn.NewLogSoftmax(0), func(x float64) float64 {
			return x - math.Log(math.Exp(-2)+math.Exp(-0.5)+math.Exp(0.5)+math.Exp(2))
		}},
	} {
		got := c.l.Forward(v).Values()
		for i, x := range v.Values() {
			if want := c.f(x); math.Abs(got[i]-want) > 1e-5*(1+math.Abs(want)) {
				t.Errorf("%s(%v) = %v, want %v", c.name, x, got[i], want)
			}
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLayersMatchOps checks the layers that only forward to an op (whose
// values and gradients the autograd golden tests compare with PyTorch):
// each must give exactly the op's output, format and input gradient, for
// contiguous and channels-last inputs.
func TestLayersMatchOps(t *testing.T) {
	g := autograd.NewGenerator(8)
	cases := []struct {
		name string
		l    nn.Layer
		op   func(x *autograd.Tensor) *autograd.Tensor
	}{
		{"ReLU", nn.NewReLU(), autograd.ReLU},
		{"Sigmoid", nn.NewSigmoid(), autograd.Sigmoid},
		{"Tanh", nn.NewTanh(), autograd.Tanh},
		{"SiLU", nn.NewSiLU(), autograd.SiLU},
		{"HardTanh", nn.NewHardTanh(-0.5, 2), func(x *autograd.Tensor) *autograd.Tensor { return autograd.HardTanh(x, -0.5, 2) }},
		{"ELU", nn.NewELU(0.3), func(x *autograd.Tensor) *autograd.Tensor { return autograd.ELU(x, 0.3) }},
		{"GELU", nn.NewGELU("none"), func(x *autograd.Tensor) *autograd.Tensor { return autograd.GELU(x, "none") }},
		{"GELU tanh", nn.NewGELU("tanh"), func(x *autograd.Tensor) *autograd.Tensor { return autograd.GELU(x, "tanh") }},
		{"Softmax", nn.NewSoftmax(1), func(x *autograd.Tensor) *autograd.Tensor { return autograd.Softmax(x, 1) }},
		{"LogSoftmax", nn.NewLogSoftmax(-1), func(x *autograd.Tensor) *autograd.Tensor { return autograd.LogSoftmax(x, -1) }},
		{"Flatten", nn.NewFlatten(1, -1), func(x *autograd.Tensor) *autograd.Tensor { return autograd.Flatten(x, 1, -1) }},
		{"Flatten middle", nn.NewFlatten(1, 2), func(x *autograd.Tensor) *autograd.Tensor { return autograd.Flatten(x, 1, 2) }},
		{"AdaptiveAvgPool2d", nn.NewAdaptiveAvgPool2d(2, 3), func(x *autograd.Tensor) *autograd.Tensor { return autograd.AdaptiveAvgPool2d(x, 2, 3) }},
		{"Identity", nn.NewIdentity(), func(x *autograd.Tensor) *autograd.Tensor { return x }},
		{"Dropout in eval", nn.Eval(nn.NewDropout(g, 0.5)), func(x *autograd.Tensor) *autograd.Tensor { return x }},
	}
	x0 := autograd.Randn(g, 2, 3, 4, 5)
	for _, c := range cases {
		for _, f := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
			t.Run(c.name+"/"+f.String(), func(t *testing.T) {
				var outs, grads []*autograd.Tensor
				for _, run := range []func(*autograd.Tensor) *autograd.Tensor{c.l.Forward, c.op} {
					x := x0.To(f).Detach().SetRequiresGrad(true)
					y := run(x)
					// The same seed gives both runs the same gradient.
					y.Backward(autograd.Randn(autograd.NewGenerator(3), y.Shape()...))
					outs, grads = append(outs, y), append(grads, x.Grad())
				}
				if outs[0].Format() != outs[1].Format() || grads[0].Format() != grads[1].Format() {
					t.Errorf("formats: layer %v/%v, op %v/%v", outs[0].Format(), grads[0].Format(), outs[1].Format(), grads[1].Format())
				}
				golden.AssertClose(t, "output", outs[0], outs[1], 0)
				golden.AssertClose(t, "input gradient", grads[0], grads[1], 0)
			})
		}
	}
}

// A Dropout layer draws its masks from its own generator, seeded once from
// the one it was built with: the masks equal the op's with that seed, and
// do not change when the building generator is used afterwards.
func TestDropoutLayerMasks(t *testing.T) {
	x := autograd.Ones(4, 50)
	d := nn.NewDropout(autograd.NewGenerator(7), 0.3)
	ref := autograd.NewGenerator(autograd.NewGenerator(7).Uint64())
	for step := range 2 {
		want := autograd.Dropout(x, 0.3, true, ref)
		golden.AssertClose(t, fmt.Sprintf("mask of forward %d", step), d.Forward(x), want, 0)
	}
	g := autograd.NewGenerator(7)
	a := nn.NewDropout(g, 0.3)
	g.Uint64()
	g.Uint64()
	b := nn.NewDropout(autograd.NewGenerator(7), 0.3)
	golden.AssertClose(t, "mask after the builder's generator moved on", a.Forward(x), b.Forward(x), 0)
	if y := nn.Eval(d).Forward(x); y != x {
		t.Error("Dropout in eval mode did not return its input")
	}
	if y := nn.NewDropout(autograd.NewGenerator(1), 0).Forward(x); y != x {
		t.Error("Dropout(0) in training did not return its input")
	}
}

// The loss modules pass their options (and zero-value defaults) to the
// ops unchanged.
func TestLossModulesMatchOps(t *testing.T) {
	g := autograd.NewGenerator(9)
	logits := autograd.Randn(g, 4, 5, 3)
	target := autograd.RandInt(g, 0, 5, 4, 3)
	ign := int64(2)
	ceOpt := autograd.CrossEntropyOptions{Reduction: autograd.ReductionSum, LabelSmoothing: 0.2, IgnoreIndex: &ign}
	x, y := autograd.Randn(g, 3, 4), autograd.Rand(g, 3, 4)
	cases := []struct {
		name      string
		got, want func() *autograd.Tensor
	}{
		{"CrossEntropyLoss default", func() *autograd.Tensor {
			return nn.NewCrossEntropyLoss(autograd.CrossEntropyOptions{}).Forward(logits, target)
		}, func() *autograd.Tensor {
			return autograd.CrossEntropy(logits, target, autograd.CrossEntropyOptions{Reduction: autograd.ReductionMean})
		}},
		{"CrossEntropyLoss options", func() *autograd.Tensor { return nn.NewCrossEntropyLoss(ceOpt).Forward(logits, target) },
			func() *autograd.Tensor { return autograd.CrossEntropy(logits, target, ceOpt) }},
		{"MSELoss default", func() *autograd.Tensor { return nn.NewMSELoss(0).Forward(x, y) },
			func() *autograd.Tensor { return autograd.MSELoss(x, y, autograd.ReductionMean) }},
		{"MSELoss none", func() *autograd.Tensor { return nn.NewMSELoss(autograd.ReductionNone).Forward(x, y) },
			func() *autograd.Tensor { return autograd.MSELoss(x, y, autograd.ReductionNone) }},
		{"BCEWithLogitsLoss default", func() *autograd.Tensor { return nn.NewBCEWithLogitsLoss(0).Forward(x, y) },
			func() *autograd.Tensor { return autograd.BCEWithLogits(x, y, autograd.ReductionMean) }},
		{"BCEWithLogitsLoss sum", func() *autograd.Tensor { return nn.NewBCEWithLogitsLoss(autograd.ReductionSum).Forward(x, y) },
			func() *autograd.Tensor { return autograd.BCEWithLogits(x, y, autograd.ReductionSum) }},
	}
	for _, c := range cases {
		got, want := c.got(), c.want()
		if got.NDim() != want.NDim() {
			t.Errorf("%s: shape %v, want %v", c.name, got.Shape(), want.Shape())
		}
		golden.AssertClose(t, c.name, got, want, 0)
	}
}
