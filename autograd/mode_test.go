package autograd

import (
	"strings"
	"testing"
)

// TestModesFlow runs every op on operands of a marked computation (one
// marked operand among unmarked parameters) and checks that each result
// carries the computation's mode and, without grad, records nothing: an op
// that builds its result outside record must pass the mode on itself.
func TestModesFlow(t *testing.T) {
	g := NewGenerator(3)
	w := Randn(g, 4, 3, 3, 3).SetRequiresGrad(true)
	lw := Randn(g, 5, 4).SetRequiresGrad(true)
	table := Randn(g, 10, 4).SetRequiresGrad(true)
	ln := Ones(4).SetRequiresGrad(true)
	mean, variance := Zeros(3), Ones(3)
	pool := PoolOptions{Kernel: []int{2}}
	ops := []struct {
		name string
		f    func(x, idx *Tensor) *Tensor // x: [2, 3, 6, 4] float32; idx: [6] int64 in [0, 10)
	}{
		{"ReLU", func(x, _ *Tensor) *Tensor { return ReLU(x) }},
		{"Sigmoid", func(x, _ *Tensor) *Tensor { return Sigmoid(x) }},
		{"Tanh", func(x, _ *Tensor) *Tensor { return Tanh(x) }},
		{"SiLU", func(x, _ *Tensor) *Tensor { return SiLU(x) }},
		{"HardTanh", func(x, _ *Tensor) *Tensor { return HardTanh(x, -1, 1) }},
		{"ELU", func(x, _ *Tensor) *Tensor { return ELU(x, 1) }},
		{"GELU", func(x, _ *Tensor) *Tensor { return GELU(x, "tanh") }},
		{"Dropout eval", func(x, _ *Tensor) *Tensor { return Dropout(x, 0.5, false, nil) }},
		{"Dropout train", func(x, _ *Tensor) *Tensor { return Dropout(x, 0.5, true, NewGenerator(1)) }},
		{"Neg", func(x, _ *Tensor) *Tensor { return Neg(x) }},
		{"Exp", func(x, _ *Tensor) *Tensor { return Exp(x) }},
		{"Log", func(x, _ *Tensor) *Tensor { return Log(Exp(x)) }},
		{"Sqrt", func(x, _ *Tensor) *Tensor { return Sqrt(Exp(x)) }},
		{"Pow", func(x, _ *Tensor) *Tensor { return Pow(x, 2) }},
		{"AddScalar", func(x, _ *Tensor) *Tensor { return AddScalar(x, 1) }},
		{"MulScalar", func(x, _ *Tensor) *Tensor { return MulScalar(x, 2) }},
		{"Add", func(x, _ *Tensor) *Tensor { return Add(x, Ones(4)) }},
		{"Sub", func(x, _ *Tensor) *Tensor { return Sub(Ones(4), x) }},
		{"Mul", func(x, _ *Tensor) *Tensor { return Mul(x, x) }},
		{"Div", func(x, _ *Tensor) *Tensor { return Div(x, Full(2, 4)) }},
		{"AddReLU", func(x, _ *Tensor) *Tensor { return AddReLU(x, x) }},
		{"Cast bf16", func(x, _ *Tensor) *Tensor { return Cast(x, BFloat16) }},
		{"Cast int64", func(x, _ *Tensor) *Tensor { return Cast(x, Int64) }},
		{"Cast from int64", func(_, idx *Tensor) *Tensor { return Cast(idx, Float32) }},
		{"To", func(x, _ *Tensor) *Tensor { return x.To(ChannelsLast) }},
		{"Contiguous", func(x, _ *Tensor) *Tensor { return x.To(ChannelsLast).Contiguous() }},
		{"Clone", func(x, _ *Tensor) *Tensor { return x.Clone() }},
		{"Detach", func(x, _ *Tensor) *Tensor { return x.Detach() }},
		{"Conv2d", func(x, _ *Tensor) *Tensor { return Conv2d(x, w, nil, ConvOptions{}) }},
		{"ConvPacked", func(x, _ *Tensor) *Tensor {
			return ConvPacked(x.To(ChannelsLast), PackConvWeight(w.Detach().To(ChannelsLast), 1), nil, ConvOptions{})
		}},
		{"Linear", func(x, _ *Tensor) *Tensor { return Linear(x, lw, nil) }},
		{"Matmul", func(x, _ *Tensor) *Tensor { return Matmul(x, Transpose(lw, 0, 1)) }},
		{"BMM", func(x, _ *Tensor) *Tensor { return BMM(Reshape(x, 6, 6, 4), Reshape(Transpose(x, 2, 3), 6, 4, 6)) }},
		{"BatchNorm", func(x, _ *Tensor) *Tensor { return BatchNorm(x, mean, variance, nil, nil, false, 0.1, 1e-5) }},
		{"BatchNormReLU", func(x, _ *Tensor) *Tensor { return BatchNormReLU(x, mean, variance, nil, nil, false, 0.1, 1e-5) }},
		{"LayerNorm", func(x, _ *Tensor) *Tensor { return LayerNorm(x, []int{4}, ln, nil, 1e-5) }},
		{"MaxPool2d", func(x, _ *Tensor) *Tensor { return MaxPool2d(x, pool) }},
		{"AvgPool2d", func(x, _ *Tensor) *Tensor { return AvgPool2d(x, pool) }},
		{"AdaptiveAvgPool2d", func(x, _ *Tensor) *Tensor { return AdaptiveAvgPool2d(x, 1, 1) }},
		{"Softmax", func(x, _ *Tensor) *Tensor { return Softmax(x, 1) }},
		{"LogSoftmax", func(x, _ *Tensor) *Tensor { return LogSoftmax(x, 1) }},
		{"Sum", func(x, _ *Tensor) *Tensor { return Sum(x, nil, false) }},
		{"Mean", func(x, _ *Tensor) *Tensor { return Mean(x, []int{1}, true) }},
		{"Reshape", func(x, _ *Tensor) *Tensor { return Reshape(x, 6, -1) }},
		{"View", func(x, _ *Tensor) *Tensor { return View(x, 6, -1) }},
		{"Flatten", func(x, _ *Tensor) *Tensor { return Flatten(x, 1, -1) }},
		{"Transpose", func(x, _ *Tensor) *Tensor { return Transpose(x, 1, 2) }},
		{"Permute", func(x, _ *Tensor) *Tensor { return Permute(x, 0, 2, 3, 1) }},
		{"Cat", func(x, _ *Tensor) *Tensor { return Cat([]*Tensor{Ones(2, 3, 6, 4), x}, 1) }},
		{"Split", func(x, _ *Tensor) *Tensor { return Split(x, 2, 1)[1] }},
		{"SplitSizes", func(x, _ *Tensor) *Tensor { return SplitSizes(x, []int{1, 2}, 1)[0] }},
		{"Embedding", func(_, idx *Tensor) *Tensor { return Embedding(idx, table) }},
		{"EmbeddingPadding", func(_, idx *Tensor) *Tensor { return EmbeddingPadding(idx, table, 0) }},
		{"EmbeddingBag", func(_, idx *Tensor) *Tensor {
			return EmbeddingBag(idx, FromInt64([]int64{0, 2}), table, BagSum, nil)
		}},
		{"CrossEntropy", func(x, _ *Tensor) *Tensor {
			return CrossEntropy(Reshape(x, 12, 12), FromInt64(make([]int64, 12)), CrossEntropyOptions{})
		}},
		{"MSELoss", func(x, _ *Tensor) *Tensor { return MSELoss(x, ZerosLike(x), ReductionMean) }},
		{"BCEWithLogits", func(x, _ *Tensor) *Tensor { return BCEWithLogits(x, ZerosLike(x), ReductionSum) }},
	}
	marks := []struct {
		name string
		mark func(*Tensor) *Tensor
	}{{"NoGrad", NoGrad}, {"Autocast", Autocast}, {"NoGrad+Autocast", func(t *Tensor) *Tensor { return Autocast(NoGrad(t)) }}}
	for _, mk := range marks {
		for _, op := range ops {
			x := mk.mark(Randn(g, 2, 3, 6, 4).SetRequiresGrad(true))
			idx := mk.mark(RandInt(g, 0, 10, 6))
			want := x.Mode()
			if op.name == "Detach" {
				want = Mode{autocast: want.autocast} // Detach leaves a NoGrad computation
			}
			var y *Tensor
			if err := Try(func() { y = op.f(x, idx) }); err != nil {
				t.Errorf("%s %s: %v", mk.name, op.name, err)
				continue
			}
			if y.Mode() != want {
				t.Errorf("%s %s: result in mode %+v, want %+v", mk.name, op.name, y.Mode(), want)
			}
			if want.NoGrad() && (y.RequiresGrad() || y.GradFn() != "") {
				t.Errorf("%s %s: result records (%s)", mk.name, op.name, y.GradFn())
			}
		}
	}
}

// TestBackwardRecordsNothing: the ops a backward pass runs record nothing,
// whatever the modes of what the forward saved.
func TestBackwardRecordsNothing(t *testing.T) {
	g := NewGenerator(4)
	w := Randn(g, 3, 4).SetRequiresGrad(true)
	leaf := Randn(g, 2, 4).SetRequiresGrad(true)
	y := Sum(Cast(Linear(Autocast(leaf), w, nil), Float32), nil, false)
	y.Backward()
	for name, grad := range map[string]*Tensor{"weight": w.Grad(), "input": leaf.Grad()} {
		if grad == nil {
			t.Fatalf("%s got no gradient", name)
		}
		if grad.RequiresGrad() || !grad.IsLeaf() {
			t.Errorf("%s gradient was recorded (%s)", name, grad.GradFn())
		}
	}
}

// TestNoGradResultsInTraining: a NoGrad result used in training makes the
// loss no-grad, and Backward says why; detached, it trains.
func TestNoGradResultsInTraining(t *testing.T) {
	g := NewGenerator(5)
	w := Randn(g, 3, 4).SetRequiresGrad(true)
	x := Randn(g, 2, 4)
	target := Linear(NoGrad(x), w, nil) // a frozen model's output
	err := Try(func() { MSELoss(Linear(x, w, nil), target, ReductionMean).Backward() })
	if err == nil || !strings.Contains(err.Error(), "Detach a NoGrad result") {
		t.Errorf("training against a NoGrad result: %v", err)
	}
	MSELoss(MulScalar(Linear(x, w, nil), 2), target.Detach(), ReductionMean).Backward()
	if w.Grad() == nil {
		t.Error("training against a detached NoGrad result gave no gradient")
	}
}
