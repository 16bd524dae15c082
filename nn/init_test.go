package nn_test

import (
	"math"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// stats returns the mean, variance and largest magnitude of t's values.
func stats(t *autograd.Tensor) (mean, variance, maxAbs float64) {
	v := t.Values()
	for _, x := range v {
		mean += x
		maxAbs = math.Max(maxAbs, math.Abs(x))
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(v)), maxAbs
}

// checkUniform asserts that t looks like U(-b, b): inside the bound, close
// to it at the extremes, centred, with variance b²/3.
func checkUniform(t *testing.T, what string, x *autograd.Tensor, b float64) {
	t.Helper()
	n := float64(x.Numel())
	mean, variance, maxAbs := stats(x)
	if maxAbs > b {
		t.Errorf("%s: |value| %v exceeds bound %v", what, maxAbs, b)
	}
	if maxAbs < b*(1-20/n) {
		t.Errorf("%s: largest |value| %v is far below bound %v for %v samples", what, maxAbs, b, n)
	}
	// Five standard errors of the sample mean and variance of U(-b, b).
	if se := b / math.Sqrt(3*n); math.Abs(mean) > 5*se {
		t.Errorf("%s: mean %v, want 0 ± %v", what, mean, 5*se)
	}
	want := b * b / 3
	if se := want * math.Sqrt(0.8/n); math.Abs(variance-want) > 5*se {
		t.Errorf("%s: variance %v, want %v ± %v", what, variance, want, 5*se)
	}
}

func TestDefaultInitBounds(t *testing.T) {
	g := autograd.NewGenerator(1)
	lin := nn.NewLinear(g, 300, 200, nn.LinearOptions{})
	checkUniform(t, "Linear weight", lin.Weight(), 1/math.Sqrt(300))
	conv := nn.NewConv2d(g, 16, 64, 3, nn.ConvOptions{})
	checkUniform(t, "Conv2d weight", conv.Weight(), 1/math.Sqrt(16*9))
	grouped := nn.NewConv2d(g, 32, 512, 3, nn.ConvOptions{Groups: 4})
	checkUniform(t, "grouped Conv2d weight", grouped.Weight(), 1/math.Sqrt(8*9))
	if got := grouped.Weight().Shape(); got[1] != 8 {
		t.Errorf("grouped Conv2d weight shape %v, want in/groups = 8 in dimension 1", got)
	}
	conv3 := nn.NewConv3d(g, 4, 32, 3, nn.ConvOptions{})
	checkUniform(t, "Conv3d weight", conv3.Weight(), 1/math.Sqrt(4*27))
	// Biases are too short for the statistics; check the bound.
	for _, c := range []struct {
		name string
		b    *autograd.Tensor
		fan  int
	}{{"Linear", lin.Bias(), 300}, {"Conv2d", conv.Bias(), 144}, {"grouped Conv2d", grouped.Bias(), 72}, {"Conv3d", conv3.Bias(), 108}} {
		if _, _, m := stats(c.b); m > 1/math.Sqrt(float64(c.fan)) || m == 0 {
			t.Errorf("%s bias: largest |value| %v, want in (0, %v]", c.name, m, 1/math.Sqrt(float64(c.fan)))
		}
	}
}

func TestEmbeddingInit(t *testing.T) {
	g := autograd.NewGenerator(2)
	pad := int64(-1)
	e := nn.NewEmbedding(g, 500, 40, nn.EmbeddingOptions{PaddingIdx: &pad})
	if e.PaddingIdx == nil || *e.PaddingIdx != 499 {
		t.Fatalf("padding index -1 normalised to %v, want 499", e.PaddingIdx)
	}
	v := e.Weight().Values()
	for _, x := range v[499*40:] {
		if x != 0 {
			t.Fatalf("padding row holds %v, want zeros", x)
		}
	}
	mean, variance, _ := stats(autograd.FromFloat32(e.Weight().Float32s()[:499*40]))
	if math.Abs(mean) > 0.02 || math.Abs(variance-1) > 0.03 {
		t.Errorf("Embedding weight mean %v variance %v, want N(0, 1)", mean, variance)
	}
	bag := nn.NewEmbeddingBag(g, 100, 8, nn.EmbeddingBagOptions{})
	if bag.Mode != autograd.BagMean {
		t.Errorf("EmbeddingBag default mode %v, want mean", bag.Mode)
	}
}

func TestNormInit(t *testing.T) {
	bn := nn.NewBatchNorm2d(3, nn.BatchNormOptions{})
	ln := nn.NewLayerNorm([]int{2, 3}, nn.LayerNormOptions{})
	for _, c := range []struct {
		name string
		t    *autograd.Tensor
		want float64
	}{{"bn.weight", bn.Weight(), 1}, {"bn.bias", bn.Bias(), 0}, {"bn.running_mean", bn.RunningMean(), 0},
		{"bn.running_var", bn.RunningVar(), 1}, {"ln.weight", ln.Weight(), 1}, {"ln.bias", ln.Bias(), 0}} {
		for _, x := range c.t.Values() {
			if x != c.want {
				t.Errorf("%s holds %v, want %v", c.name, x, c.want)
				break
			}
		}
	}
	n := bn.NumBatchesTracked()
	if n.DType() != autograd.Int64 || n.NDim() != 0 || n.Item() != 0 {
		t.Errorf("num_batches_tracked is %v %v = %v, want a 0-d int64 zero", n.DType(), n.Shape(), n.Item())
	}
	if bn.Eps != 1e-5 || bn.Momentum != 0.1 {
		t.Errorf("BatchNorm eps %v momentum %v, want 1e-5 and 0.1", bn.Eps, bn.Momentum)
	}
	bare := nn.NewBatchNorm1d(3, nn.BatchNormOptions{NoAffine: true, NoTrackRunningStats: true})
	if got := len(nn.StateDict(bare)); got != 0 {
		t.Errorf("BatchNorm without affine or running stats has %d state entries, want 0", got)
	}
}

func TestInitFunctions(t *testing.T) {
	g := autograd.NewGenerator(3)
	w := autograd.Zeros(400, 100, 1, 1)
	nn.XavierUniform(g, w, nn.Gain("relu", 0))
	checkUniform(t, "XavierUniform", w, math.Sqrt2*math.Sqrt(6.0/500))
	nn.KaimingUniform(g, w, nn.KaimingOptions{Mode: nn.FanOut, Nonlinearity: "relu"})
	checkUniform(t, "KaimingUniform fan_out", w, math.Sqrt2*math.Sqrt(3.0/400))
	nn.KaimingNormal(g, w, nn.KaimingOptions{Nonlinearity: "relu"})
	if _, v, _ := stats(w); math.Abs(v-2.0/100) > 0.001 {
		t.Errorf("KaimingNormal variance %v, want %v", v, 2.0/100)
	}
	nn.XavierNormal(g, w, 1)
	if _, v, _ := stats(w); math.Abs(v-2.0/500) > 0.0002 {
		t.Errorf("XavierNormal variance %v, want %v", v, 2.0/500)
	}

	// A seed gives the same logical values whatever the memory format.
	a := nn.Uniform(autograd.NewGenerator(9), autograd.Zeros(2, 3, 4, 5), -1, 1)
	b := nn.Uniform(autograd.NewGenerator(9), autograd.Zeros(2, 3, 4, 5).To(autograd.ChannelsLast), -1, 1)
	if b.Format() != autograd.ChannelsLast {
		t.Fatalf("Uniform changed the format to %v", b.Format())
	}
	av, bv := a.Values(), b.Values()
	for i := range av {
		if av[i] != bv[i] {
			t.Fatalf("element %d: contiguous %v, channels-last %v", i, av[i], bv[i])
		}
	}
	bf := nn.Ones(autograd.Cast(autograd.Zeros(3), autograd.BFloat16))
	if bf.DType() != autograd.BFloat16 || bf.Values()[2] != 1 {
		t.Errorf("Ones on bfloat16 gave %v", bf)
	}

	fanIn, fanOut := nn.Fans(autograd.Zeros(8, 4, 3, 3))
	if fanIn != 36 || fanOut != 72 {
		t.Errorf("Fans = %d, %d, want 36, 72", fanIn, fanOut)
	}
	if g := nn.Gain("leaky_relu", math.Sqrt(5)); math.Abs(g-math.Sqrt(1.0/3)) > 1e-15 {
		t.Errorf("Gain(leaky_relu, √5) = %v", g)
	}
	for _, bad := range []struct {
		name string
		f    func()
		want string
	}{
		{"Fans of a vector", func() { nn.Fans(autograd.Zeros(3)) }, "at least 2 dimensions"},
		{"unknown nonlinearity", func() { nn.Gain("swish", 0) }, `"swish"`},
		{"integer tensor", func() { nn.Zeros(autograd.Empty(autograd.Int64, 2)) }, "int64"},
		{"negative std", func() { nn.Normal(g, autograd.Zeros(2), 0, -1) }, "-1"},
	} {
		err := autograd.Try(bad.f)
		if err == nil || !contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one mentioning %s", bad.name, err, bad.want)
		}
	}
}
