package kiln_test

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"weak"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
	"github.com/kilnml/kiln/optim"
)

// smallNet is conv + BN + ReLU + dropout + flatten + linear over [N, 3, 6, 6]
// inputs, every kind of layer Optimize rewrites.
func smallNet(seed uint64) *nn.Sequential {
	g := autograd.NewGenerator(seed)
	m := nn.NewSequential(
		nn.NewConv2d(g, 3, 8, 3, nn.ConvOptions{Padding: 1}),
		nn.NewBatchNorm2d(8, nn.BatchNormOptions{}),
		nn.NewReLU(),
		nn.NewDropout(g, 0.5),
		nn.NewFlatten(1, -1),
		nn.NewLinear(g, 8*6*6, 5, nn.LinearOptions{}),
	)
	randomizeBN(m, seed)
	return m
}

// randomizeBN gives every BatchNorm of m statistics and affine parameters
// away from their initial 0/1, so folding them has something to do.
func randomizeBN(m nn.Module, seed uint64) {
	g := autograd.NewGenerator(seed + 100)
	for _, nm := range nn.NamedModules(m) {
		bn, ok := nm.Module.(*nn.BatchNorm)
		if !ok {
			continue
		}
		c := bn.NumFeatures
		bn.RunningMean().CopyFrom(autograd.MulScalar(autograd.Randn(g, c), 0.1))
		bn.RunningVar().CopyFrom(autograd.AddScalar(autograd.Rand(g, c), 0.5))
		bn.Weight().CopyFrom(autograd.AddScalar(autograd.Rand(g, c), 0.5))
		bn.Bias().CopyFrom(autograd.MulScalar(autograd.Randn(g, c), 0.1))
	}
}

// relErr is max|got−want| / max|want| (got widened from bfloat16 if need
// be).
func relErr(got, want *autograd.Tensor) float64 {
	g := autograd.Cast(got, autograd.Float32).ContiguousFloat32s()
	w := want.ContiguousFloat32s()
	var diff, scale float64
	for i := range w {
		diff = math.Max(diff, math.Abs(float64(g[i])-float64(w[i])))
		scale = math.Max(scale, math.Abs(float64(w[i])))
	}
	return diff / scale
}

func forward(m nn.Layer, x *autograd.Tensor, autocast bool) *autograd.Tensor {
	x = autograd.NoGrad(x)
	if autocast {
		x = amp.Autocast(x)
	}
	return m.Forward(x)
}

// hasApplied reports whether some entry of applied starts with prefix.
func hasApplied(applied []string, prefix string) bool {
	for _, a := range applied {
		if strings.HasPrefix(a, prefix) {
			return true
		}
	}
	return false
}

// TestOptimizeEval: at O1 an evaluation model is folded, loses its
// dropout and goes channels-last, computing what it computed before; with
// BF16 its convolution and linear weights are bfloat16 and its outputs
// under autocast stay close.
func TestOptimizeEval(t *testing.T) {
	resnet := func(seed uint64) nn.Layer {
		m := models.ResNet18(autograd.NewGenerator(seed), models.ResNetOptions{NumClasses: 10})
		randomizeBN(m, seed)
		return m
	}
	small := func(seed uint64) nn.Layer { return smallNet(seed) }
	tests := []struct {
		name    string
		model   func(seed uint64) nn.Layer
		input   []int
		dtype   autograd.DType
		tol     float64
		applied []string
		// bf16 names a convolution and a linear weight, f32 a BatchNorm
		// weight that folding leaves in place (or "" when folded away).
		bf16, f32 []string
	}{
		{"small", small, []int{4, 3, 6, 6}, autograd.Float32, 1e-5,
			[]string{"FoldBatchNorm: 1 pair folded", "RemoveDropout: 1 dropout layer removed", "ChannelsLast: 1 tensor reordered", "Prepack: 1 convolution prepacked"}, nil, nil},
		{"small/bf16", small, []int{4, 3, 6, 6}, autograd.BFloat16, 1e-2,
			[]string{"FoldBatchNorm: 1 pair folded", "RemoveDropout: 1 dropout layer removed", "ChannelsLast: 1 tensor reordered", "DType: 4 convolution, linear or embedding tensors cast to bfloat16", "Prepack: 1 convolution prepacked"},
			[]string{"0.weight", "0.bias", "5.weight"}, nil},
		{"resnet18", resnet, []int{2, 3, 32, 32}, autograd.Float32, 1e-5,
			[]string{"FoldBatchNorm: 20 pairs folded", "RemoveDropout: 0 dropout layers removed", "ChannelsLast: 20 tensors reordered", "Prepack: 20 convolutions prepacked"}, nil, nil},
		{"resnet18/bf16", resnet, []int{2, 3, 32, 32}, autograd.BFloat16, 1e-2,
			[]string{"FoldBatchNorm: 20 pairs folded", "RemoveDropout: 0 dropout layers removed", "ChannelsLast: 20 tensors reordered", "DType: 42 convolution, linear or embedding tensors cast to bfloat16", "Prepack: 20 convolutions prepacked"},
			[]string{"conv1.weight", "layer1.0.conv1.bias", "fc.weight"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := nn.Eval(tt.model(1))
			m := nn.Eval(tt.model(1))
			x := autograd.Randn(autograd.NewGenerator(2), tt.input...)
			want := forward(ref, x, false)
			res, err := kiln.Optimize(m, kiln.DType(tt.dtype))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(res.Applied, "; ") != strings.Join(tt.applied, "; ") {
				t.Errorf("Applied:\n%q\nwant\n%q", res.Applied, tt.applied)
			}
			if res.Optimizer != nil || res.Split != nil || res.MasterCopies != nil {
				t.Error("an evaluation model got training state")
			}
			bf16 := tt.dtype == autograd.BFloat16
			e := relErr(forward(m, x, bf16), want)
			t.Logf("relative error %.3g", e)
			if !(e <= tt.tol) {
				t.Errorf("output differs from the unoptimized model's by %.3g relative, want at most %g", e, tt.tol)
			}
			params := map[string]*autograd.Tensor{}
			for _, p := range nn.NamedParameters(m) {
				params[p.Name] = p.Tensor
				if p.Tensor.NDim() == 4 && p.Tensor.Format() != autograd.ChannelsLast {
					t.Errorf("%s is %v, want channels-last", p.Name, p.Tensor.Format())
				}
				if !bf16 && p.Tensor.DType() != autograd.Float32 {
					t.Errorf("%s is %v in a float32 model", p.Name, p.Tensor.DType())
				}
			}
			for _, name := range tt.bf16 {
				if p := params[name]; p == nil || p.DType() != autograd.BFloat16 {
					t.Errorf("%s is not bfloat16", name)
				}
			}
			for _, nm := range nn.NamedModules(m) {
				if bn, ok := nm.Module.(*nn.BatchNorm); ok && !bn.Folded() {
					t.Errorf("BatchNorm %s was not folded", nm.Name)
				}
				if _, ok := nm.Module.(*nn.Dropout); ok {
					t.Errorf("Dropout %s was not removed", nm.Name)
				}
			}
		})
	}
}

// BF16 keeps BatchNorm float32 when it is not folded away.
func TestOptimizeEvalBF16KeepsBatchNormFP32(t *testing.T) {
	m := nn.Eval(smallNet(3))
	res, err := kiln.Optimize(m, kiln.Level(kiln.O0), kiln.DType(autograd.BFloat16))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]autograd.DType{
		"0.weight": autograd.BFloat16, "0.bias": autograd.BFloat16,
		"1.weight": autograd.Float32, "1.bias": autograd.Float32,
		"5.weight": autograd.BFloat16, "5.bias": autograd.BFloat16,
	}
	for _, p := range nn.NamedParameters(m) {
		if p.Tensor.DType() != want[p.Name] {
			t.Errorf("%s is %v, want %v", p.Name, p.Tensor.DType(), want[p.Name])
		}
	}
	for _, nt := range nn.NamedBuffers(m) {
		if nt.Tensor.DType() == autograd.BFloat16 {
			t.Errorf("buffer %s was cast", nt.Name)
		}
	}
	if len(res.Applied) != 1 {
		t.Errorf("Applied %q, want the cast alone", res.Applied)
	}
}

// digitBatches returns the first n batches of 32 digits, channels-last.
func digitBatches(t *testing.T, n int) []datasets.Batch {
	t.Helper()
	loader, err := datasets.NewDataLoader(datasets.Digits(), datasets.LoaderOptions{BatchSize: 32, Shuffle: true, Seed: 4, DropLast: true, ChannelsLast: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []datasets.Batch
	for b, err := range loader.Epoch(0) {
		if err != nil {
			t.Fatal(err)
		}
		if out = append(out, b); len(out) == n {
			break
		}
	}
	return out
}

// digitNet is a small conv net for the 8×8 digits.
func digitNet(seed uint64) *nn.Sequential {
	g := autograd.NewGenerator(seed)
	return nn.NewSequential(
		nn.NewConv2d(g, 1, 16, 3, nn.ConvOptions{Padding: 1}),
		nn.NewBatchNorm2d(16, nn.BatchNormOptions{}),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, nn.MaxPoolOptions{}),
		nn.NewFlatten(1, -1),
		nn.NewLinear(g, 16*4*4, 10, nn.LinearOptions{}),
	)
}

// trainSteps trains m with opt under autocast for len(batches) steps and
// returns the mean losses of the first and last ten.
func trainSteps(m nn.Layer, opt optim.Optimizer, batches []datasets.Batch) (first, last float64) {
	for i, b := range batches {
		loss := autograd.CrossEntropy(m.Forward(amp.Autocast(b.Inputs)), b.Labels, autograd.CrossEntropyOptions{})
		opt.ZeroGrad()
		loss.Backward()
		opt.Step()
		switch {
		case i < 10:
			first += loss.Item() / 10
		case i >= len(batches)-10:
			last += loss.Item() / 10
		}
	}
	return first, last
}

// TestOptimizeTrainBF16: O1 with BF16 and SGD with momentum splits the
// convolution and linear weights, keeps BatchNorm FP32, rebuilds the SGD as
// a split one with the same groups and state, and trains.
func TestOptimizeTrainBF16(t *testing.T) {
	batches := digitBatches(t, 50)
	m := digitNet(1)
	sgdOpts := optim.SGDOptions{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4}
	sgd, err := optim.NewSGD(nn.Parameters(m), sgdOpts)
	if err != nil {
		t.Fatal(err)
	}
	// One FP32 step first, so there is momentum to carry over.
	loss := autograd.CrossEntropy(m.Forward(batches[0].Inputs), batches[0].Labels, autograd.CrossEntropyOptions{})
	loss.Backward()
	sgd.Step()
	before := map[int][]float32{}
	for id, st := range sgd.StateDict().State {
		before[id] = append([]float32(nil), st["momentum_buffer"].ContiguousFloat32s()...)
	}

	var originals []weak.Pointer[autograd.Tensor]
	for _, p := range nn.NamedParameters(m) {
		if !strings.HasPrefix(p.Name, "1.") {
			originals = append(originals, weak.Make(p.Tensor))
		}
	}

	res, err := kiln.Optimize(m, kiln.DType(autograd.BFloat16), kiln.WithOptimizer(sgd))
	if err != nil {
		t.Fatal(err)
	}
	// The FP32 originals are gone, though the optimizer given is not.
	runtime.GC()
	for i, w := range originals {
		if w.Value() != nil {
			t.Errorf("split parameter %d: the FP32 original is still reachable", i)
		}
	}
	want := []string{"ChannelsLast: 1 tensor reordered", "SplitMasterWeights: 4 parameters split", "WithOptimizer: *optim.SGD rebuilt over the split parameters, state carried over"}
	if strings.Join(res.Applied, "; ") != strings.Join(want, "; ") {
		t.Errorf("Applied:\n%q\nwant\n%q", res.Applied, want)
	}
	split, ok := res.Optimizer.(*optim.SGD)
	if !ok || split == sgd {
		t.Fatalf("Optimizer is %T (the original: %v), want a new *optim.SGD", res.Optimizer, split == sgd)
	}
	g := split.Group(0)
	if g.SGDOptions != sgdOpts {
		t.Errorf("hyper-parameters %+v, want %+v", g.SGDOptions, sgdOpts)
	}
	named := nn.NamedParameters(m)
	for i, p := range g.Params {
		if p != named[i].Tensor {
			t.Errorf("optimizer parameter %d is not the model's %s", i, named[i].Name)
		}
		wantDType := autograd.BFloat16
		if strings.HasPrefix(named[i].Name, "1.") {
			wantDType = autograd.Float32 // BatchNorm
		}
		if p.DType() != wantDType {
			t.Errorf("%s is %v, want %v", named[i].Name, p.DType(), wantDType)
		}
		if wantDType == autograd.BFloat16 && res.Split.Param(named[i].Name).Top != p {
			t.Errorf("%s is not its split's Top", named[i].Name)
		}
	}
	if w := res.Split.Param("0.weight").Top; w.Format() != autograd.ChannelsLast {
		t.Errorf("conv weight is %v, want channels-last", w.Format())
	}
	for id, st := range split.StateDict().State {
		got := st["momentum_buffer"].ContiguousFloat32s()
		for i := range got {
			if got[i] != before[id][i] {
				t.Fatalf("state.%d.momentum_buffer[%d] = %v after Optimize, was %v", id, i, got[i], before[id][i])
			}
		}
	}

	first, last := trainSteps(m, res.Optimizer, batches)
	t.Logf("mean loss: first 10 steps %.4f, last 10 %.4f", first, last)
	if !(last < 0.5*first) {
		t.Errorf("loss went from %.4f to %.4f over 50 steps; want it at least halved", first, last)
	}
	for id, st := range res.Optimizer.StateDict().State {
		if b := st["momentum_buffer"]; b.DType() != autograd.Float32 {
			t.Errorf("state.%d.momentum_buffer is %v, want float32", id, b.DType())
		}
	}
	for _, nt := range res.StateDict() {
		if nt.Tensor.DType() == autograd.BFloat16 {
			t.Errorf("model state dict entry %s is bfloat16, want the FP32 master", nt.Name)
		}
	}
}

// With SplitMasterWeights(false) the FP32 parameters stay the masters of
// the given optimizer, the model computes with bfloat16 copies, and it
// trains.
func TestOptimizeTrainMasterCopy(t *testing.T) {
	batches := digitBatches(t, 50)
	m := digitNet(1)
	adam, err := optim.NewAdam(nn.Parameters(m), optim.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	masters := nn.Parameters(m)
	res, err := kiln.Optimize(m, kiln.DType(autograd.BFloat16), kiln.SplitMasterWeights(false), kiln.WithOptimizer(adam))
	if err != nil {
		t.Fatal(err)
	}
	if res.Split != nil || len(res.MasterCopies) != 4 {
		t.Fatalf("Split %v, %d master copies; want none and 4", res.Split, len(res.MasterCopies))
	}
	if !hasApplied(res.Applied, "SplitMasterWeights(false): 4 FP32 masters given") {
		t.Errorf("Applied %q", res.Applied)
	}
	for _, mc := range res.MasterCopies {
		found := false
		for _, p := range masters {
			found = found || p == mc.Param.Master
		}
		if !found {
			t.Errorf("%s: the master is not the optimizer's FP32 parameter", mc.Name)
		}
	}
	first, last := trainSteps(m, res.Optimizer, batches)
	t.Logf("mean loss: first 10 steps %.4f, last 10 %.4f", first, last)
	if !(last < 0.5*first) {
		t.Errorf("loss went from %.4f to %.4f over 50 steps; want it at least halved", first, last)
	}
	// The copies follow their masters.
	for _, mc := range res.MasterCopies {
		want := autograd.Cast(mc.Param.Master, autograd.BFloat16).BFloat16s()
		for i, v := range mc.Param.Copy.BFloat16s() {
			if v != want[i] {
				t.Fatalf("%s[%d]: copy %#04x, master rounds to %#04x", mc.Name, i, v, want[i])
			}
		}
	}
	for _, nt := range res.StateDict() {
		if nt.Tensor.DType() == autograd.BFloat16 {
			t.Errorf("model state dict entry %s is bfloat16, want the FP32 master", nt.Name)
		}
	}
}

// Each knob works alone at O0, and O0 alone changes nothing.
func TestOptimizeKnobsAlone(t *testing.T) {
	tests := []struct {
		name     string
		training bool
		opts     []kiln.Option
		applied  string
		check    func(t *testing.T, m *nn.Sequential)
	}{
		{"O0", false, nil, "", func(t *testing.T, m *nn.Sequential) {
			if m.Len() != 6 || m.At(1).(*nn.BatchNorm).Folded() {
				t.Error("O0 changed the model")
			}
		}},
		{"FoldBatchNorm", false, []kiln.Option{kiln.FoldBatchNorm(true)}, "FoldBatchNorm: 1 pair folded", func(t *testing.T, m *nn.Sequential) {
			if !m.At(1).(*nn.BatchNorm).Folded() {
				t.Error("not folded")
			}
			if _, ok := m.At(3).(*nn.Dropout); !ok {
				t.Error("dropout removed too")
			}
		}},
		{"RemoveDropout", false, []kiln.Option{kiln.RemoveDropout(true)}, "RemoveDropout: 1 dropout layer removed", func(t *testing.T, m *nn.Sequential) {
			if _, ok := m.At(3).(*nn.Identity); !ok {
				t.Errorf("layer 3 is %T, want *nn.Identity", m.At(3))
			}
			if m.At(1).(*nn.BatchNorm).Folded() {
				t.Error("folded too")
			}
		}},
		{"ChannelsLast/eval", false, []kiln.Option{kiln.ChannelsLast(true)}, "ChannelsLast: 1 tensor reordered", func(t *testing.T, m *nn.Sequential) {
			if f := m.At(0).(*nn.Conv2d).Weight().Format(); f != autograd.ChannelsLast {
				t.Errorf("conv weight is %v", f)
			}
		}},
		{"ChannelsLast/training", true, []kiln.Option{kiln.ChannelsLast(true)}, "ChannelsLast: 1 tensor reordered", func(t *testing.T, m *nn.Sequential) {
			if f := m.At(0).(*nn.Conv2d).Weight().Format(); f != autograd.ChannelsLast {
				t.Errorf("conv weight is %v", f)
			}
		}},
		{"DType/eval", false, []kiln.Option{kiln.DType(autograd.BFloat16)}, "DType: 4 convolution, linear or embedding tensors cast to bfloat16", func(t *testing.T, m *nn.Sequential) {
			if d := m.At(0).(*nn.Conv2d).Weight().DType(); d != autograd.BFloat16 {
				t.Errorf("conv weight is %v", d)
			}
			if f := m.At(0).(*nn.Conv2d).Weight().Format(); f != autograd.Contiguous {
				t.Errorf("conv weight went %v", f)
			}
		}},
		{"O1/training", true, []kiln.Option{kiln.Level(kiln.O1)}, "ChannelsLast: 1 tensor reordered", nil},
		{"Prepack", false, []kiln.Option{kiln.Prepack(true)}, "Prepack: 1 convolution prepacked", func(t *testing.T, m *nn.Sequential) {
			if !m.At(0).(*nn.Conv2d).Prepacked() {
				t.Error("the convolution does not prepack")
			}
		}},
		{"Prepack/bf16", false, []kiln.Option{kiln.DType(autograd.BFloat16), kiln.Prepack(true)}, "DType: 4 convolution, linear or embedding tensors cast to bfloat16; Prepack: 1 convolution prepacked", func(t *testing.T, m *nn.Sequential) {
			if !m.At(0).(*nn.Conv2d).Prepacked() {
				t.Error("the convolution does not prepack")
			}
		}},
		{"O1 with a knob off", false, []kiln.Option{kiln.FoldBatchNorm(false), kiln.Level(kiln.O1)}, "RemoveDropout: 1 dropout layer removed; ChannelsLast: 1 tensor reordered; Prepack: 1 convolution prepacked", func(t *testing.T, m *nn.Sequential) {
			if m.At(1).(*nn.BatchNorm).Folded() {
				t.Error("folded although FoldBatchNorm(false)")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := nn.Train(smallNet(1), tt.training)
			res, err := kiln.Optimize(m, append([]kiln.Option{kiln.Level(kiln.O0)}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(res.Applied, "; "); got != tt.applied {
				t.Errorf("Applied %q, want %q", got, tt.applied)
			}
			if res.Model != nn.Module(m) {
				t.Error("Model is not the module given")
			}
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
}

// opaque is an optimizer Optimize does not know.
type opaque struct{ optim.Optimizer }

func TestOptimizeErrors(t *testing.T) {
	sgdFor := func(m nn.Module) optim.Optimizer {
		o, err := optim.NewSGD(nn.Parameters(m), optim.SGDOptions{LR: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	tests := []struct {
		name     string
		training bool
		opts     func(m nn.Module) []kiln.Option
		want     string
	}{
		{"dtype", false, func(nn.Module) []kiln.Option { return []kiln.Option{kiln.DType(autograd.Int8)} },
			"kiln: Optimize: DType(int8) is not supported; want float32 or bfloat16"},
		{"level", false, func(nn.Module) []kiln.Option { return []kiln.Option{kiln.Level(7)} },
			"kiln: Optimize: unknown level OptLevel(7); want O0 or O1"},
		{"fold in training", true, func(nn.Module) []kiln.Option { return []kiln.Option{kiln.FoldBatchNorm(true)} },
			"kiln: Optimize: FoldBatchNorm needs an evaluation model (nn.Eval): training would go on changing the statistics folded in"},
		{"dropout in training", true, func(nn.Module) []kiln.Option { return []kiln.Option{kiln.RemoveDropout(true)} },
			"kiln: Optimize: RemoveDropout needs an evaluation model (nn.Eval): in training, dropout is not the identity"},
		{"optimizer in eval", false, func(m nn.Module) []kiln.Option { return []kiln.Option{kiln.WithOptimizer(sgdFor(m))} },
			"kiln: Optimize: WithOptimizer needs a training model (nn.Train); the model is in evaluation mode, which Optimize prepares for inference"},
		{"nil optimizer", true, func(nn.Module) []kiln.Option { return []kiln.Option{kiln.WithOptimizer(nil)} },
			"kiln: Optimize: WithOptimizer: optimizer is nil"},
		{"split in eval", false, func(nn.Module) []kiln.Option {
			return []kiln.Option{kiln.DType(autograd.BFloat16), kiln.SplitMasterWeights(true)}
		}, "kiln: Optimize: SplitMasterWeights needs a training model (nn.Train); for inference DType(autograd.BFloat16) casts the weights"},
		{"split in float32", true, func(m nn.Module) []kiln.Option {
			return []kiln.Option{kiln.SplitMasterWeights(true), kiln.WithOptimizer(sgdFor(m))}
		}, "kiln: Optimize: SplitMasterWeights needs DType(autograd.BFloat16); the dtype is float32, whose weights are their own masters"},
		{"prepack in training", true, func(nn.Module) []kiln.Option { return []kiln.Option{kiln.Prepack(true)} },
			"kiln: Optimize: Prepack needs an evaluation model (nn.Eval): packed weights do not follow optimizer steps"},
		{"prepack without channels-last", false, func(nn.Module) []kiln.Option {
			return []kiln.Option{kiln.Prepack(true), kiln.ChannelsLast(false)}
		}, "kiln: Optimize: Prepack needs channels-last weights (ChannelsLast), the layout the packed panels are read from"},
		{"bf16 training without optimizer", true, func(nn.Module) []kiln.Option { return []kiln.Option{kiln.DType(autograd.BFloat16)} },
			"kiln: Optimize: BF16 training needs the optimizer (WithOptimizer): it is rebuilt to update the FP32 master weights behind the bfloat16 ones"},
		{"unknown optimizer", true, func(m nn.Module) []kiln.Option {
			return []kiln.Option{kiln.DType(autograd.BFloat16), kiln.WithOptimizer(opaque{sgdFor(m)})}
		}, "kiln: Optimize: WithOptimizer: cannot rebuild a kiln_test.opaque over split BF16 master weights: it is not an optim.Splittable, as all of Kiln's optimizers are (or use SplitMasterWeights(false), which steps any optimizer)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := nn.Train(smallNet(1), tt.training)
			_, err := kiln.Optimize(m, tt.opts(m)...)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error:\n%v\nwant\n%s", err, tt.want)
			}
			w := m.At(0).(*nn.Conv2d).Weight()
			if w.DType() != autograd.Float32 || w.Format() != autograd.Contiguous || m.At(1).(*nn.BatchNorm).Folded() {
				t.Error("a rejected Optimize changed the model")
			}
		})
	}

	if _, err := kiln.Optimize(nil); err == nil || err.Error() != "kiln: Optimize: model is nil" {
		t.Errorf("nil model: %v", err)
	}
	// A model converted already is refused before anything changes.
	m := nn.Eval(smallNet(1))
	if _, err := kiln.Optimize(m, kiln.Level(kiln.O0), kiln.DType(autograd.BFloat16)); err != nil {
		t.Fatal(err)
	}
	_, err := kiln.Optimize(m, kiln.DType(autograd.BFloat16))
	if want := `kiln: Optimize: parameter "0.weight" is bfloat16; DType(bfloat16) converts a float32 model (is it optimized already?)`; err == nil || err.Error() != want {
		t.Errorf("optimizing twice: %v, want %s", err, want)
	}
	if m.At(1).(*nn.BatchNorm).Folded() {
		t.Error("the refused second Optimize folded the BatchNorm")
	}
	// A pair nn.FoldBatchNorm cannot fold is its error, wrapped.
	g := autograd.NewGenerator(1)
	bad := nn.Eval(nn.NewSequential(nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{}), nn.NewBatchNorm2d(5, nn.BatchNormOptions{})))
	if _, err := kiln.Optimize(bad); err == nil || !strings.HasPrefix(err.Error(), "kiln: Optimize: nn: FoldBatchNorm: cannot fold 1 into 0: the layer has 4 output channels and the BatchNorm 5") {
		t.Errorf("unfoldable pair: %v", err)
	}
}

// Every optimizer with a split form is rebuilt as one of its kind, groups
// and state carried over, the FP32 BatchNorm parameters in place beside
// the split ones.
func TestOptimizeConvertsEveryOptimizer(t *testing.T) {
	batches := digitBatches(t, 1)
	type mk func(body, head []*autograd.Tensor) (optim.Optimizer, error)
	tests := []struct {
		name string
		mk   mk
	}{
		{"SGD", func(b, h []*autograd.Tensor) (optim.Optimizer, error) {
			o := optim.SGDOptions{LR: 0.1, Momentum: 0.9}
			return optim.NewSGDGroups(optim.SGDGroup{Params: b, SGDOptions: o}, optim.SGDGroup{Params: h, SGDOptions: o})
		}},
		{"Adam", func(b, h []*autograd.Tensor) (optim.Optimizer, error) {
			o := optim.DefaultAdamOptions()
			return optim.NewAdamGroups(optim.AdamGroup{Params: b, AdamOptions: o}, optim.AdamGroup{Params: h, AdamOptions: o})
		}},
		{"AdamW", func(b, h []*autograd.Tensor) (optim.Optimizer, error) {
			o := optim.DefaultAdamWOptions()
			return optim.NewAdamWGroups(optim.AdamGroup{Params: b, AdamOptions: o}, optim.AdamGroup{Params: h, AdamOptions: o})
		}},
		{"Adagrad", func(b, h []*autograd.Tensor) (optim.Optimizer, error) {
			o := optim.DefaultAdagradOptions()
			return optim.NewAdagradGroups(optim.AdagradGroup{Params: b, AdagradOptions: o}, optim.AdagradGroup{Params: h, AdagradOptions: o})
		}},
		{"Lamb", func(b, h []*autograd.Tensor) (optim.Optimizer, error) {
			o := optim.DefaultLambOptions()
			return optim.NewLambGroups(optim.LambGroup{Params: b, LambOptions: o}, optim.LambGroup{Params: h, LambOptions: o})
		}},
		{"LARS", func(b, h []*autograd.Tensor) (optim.Optimizer, error) {
			o := optim.DefaultLARSOptions()
			o.Momentum = 0.9
			return optim.NewLARSGroups(optim.LARSGroup{Params: b, LARSOptions: o}, optim.LARSGroup{Params: h, LARSOptions: o})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := digitNet(1)
			ps := nn.Parameters(m)
			// The classifier in a group of its own, with a BatchNorm
			// parameter to mix FP32 and split.
			opt, err := tt.mk(ps[:4], ps[4:])
			if err != nil {
				t.Fatal(err)
			}
			loss := autograd.CrossEntropy(m.Forward(batches[0].Inputs), batches[0].Labels, autograd.CrossEntropyOptions{})
			loss.Backward()
			opt.Step()
			before := opt.StateDict()
			res, err := kiln.Optimize(m, kiln.DType(autograd.BFloat16), kiln.WithOptimizer(opt))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprintf("%T", res.Optimizer), fmt.Sprintf("%T", opt); got != want || res.Optimizer == opt {
				t.Fatalf("Optimizer is %s, want a new %s", got, want)
			}
			if a, ok := opt.(*optim.Adam); ok && a.Decoupled() != res.Optimizer.(*optim.Adam).Decoupled() {
				t.Error("Adam and AdamW swapped")
			}
			after := res.Optimizer.StateDict()
			if len(after.Groups) != 2 || len(after.Groups[0].Params) != 4 || len(after.Groups[1].Params) != 2 {
				t.Fatalf("groups %+v", after.Groups)
			}
			if len(after.State) != len(before.State) || len(before.State) == 0 {
				t.Fatalf("%d state entries, had %d", len(after.State), len(before.State))
			}
			for id, st := range before.State {
				for name, ten := range st {
					got := after.State[id][name]
					if got == nil || !slices.Equal(got.ContiguousFloat32s(), ten.ContiguousFloat32s()) {
						t.Errorf("state.%d.%s not carried over", id, name)
					}
				}
			}
			// It steps: the split conv weight moves.
			w := res.Split.Param("0.weight")
			w0 := w.Join().ContiguousFloat32s()[0]
			loss = autograd.CrossEntropy(m.Forward(amp.Autocast(batches[0].Inputs)), batches[0].Labels, autograd.CrossEntropyOptions{})
			res.Optimizer.ZeroGrad()
			loss.Backward()
			res.Optimizer.Step()
			if w.Join().ContiguousFloat32s()[0] == w0 {
				t.Error("a step did not change the split conv weight")
			}
		})
	}
}
