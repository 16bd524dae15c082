package autograd_test

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

// The cases of testdata/golden/gen_loss.py's SOFTMAX table.
var softmaxGoldenCases = []struct {
	name string
	dim  int
	log  bool
	cl   bool
}{
	{name: "softmax.1d", dim: 0},
	{name: "softmax.2d_dim1", dim: 1},
	{name: "softmax.2d_dim0", dim: 0},
	{name: "softmax.3d_dimm2", dim: -2},
	{name: "softmax.wide_inner", dim: 0},
	{name: "softmax.large", dim: 1},
	{name: "softmax.cl_dim1", dim: 1, cl: true},
	{name: "softmax.cl_dim3", dim: -1, cl: true},
	{name: "logsoftmax.2d_dim1", dim: 1, log: true},
	{name: "logsoftmax.3d_dim0", dim: 0, log: true},
	{name: "logsoftmax.large", dim: -1, log: true},
	{name: "logsoftmax.cl_dim1", dim: 1, log: true, cl: true},
	{name: "logsoftmax.cl_dim2", dim: 2, log: true, cl: true},
}

func TestSoftmaxGolden(t *testing.T) {
	set := golden.Load(t, "loss.safetensors")
	for _, c := range softmaxGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			x := set.Get(t, c.name+".x")
			if c.cl {
				x = x.To(autograd.ChannelsLast)
			}
			x.SetRequiresGrad(true)
			op := autograd.Softmax
			if c.log {
				op = autograd.LogSoftmax
			}
			out := op(x, c.dim)
			out.Backward(set.Get(t, c.name+".gout"))
			golden.AssertClose(t, "out", out, set.Get(t, c.name+".out"), 1e-5)
			golden.AssertClose(t, "grad_x", x.Grad(), set.Get(t, c.name+".grad_x"), 1e-5)
			lossGoldenStrides(t, set, c.name+".out_strides", out)
			lossGoldenStrides(t, set, c.name+".grad_strides", x.Grad())
		})
	}
}

// The cases of testdata/golden/gen_loss.py's CE table.
var ceGoldenCases = []struct {
	name string
	cl   bool
	opt  autograd.CrossEntropyOptions
}{
	{name: "ce.mean"},
	{name: "ce.sum", opt: autograd.CrossEntropyOptions{Reduction: autograd.ReductionSum}},
	{name: "ce.none", opt: autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone}},
	{name: "ce.smooth", opt: autograd.CrossEntropyOptions{LabelSmoothing: 0.2}},
	{name: "ce.smooth_none", opt: autograd.CrossEntropyOptions{LabelSmoothing: 0.3, Reduction: autograd.ReductionNone}},
	{name: "ce.ignore", opt: autograd.CrossEntropyOptions{IgnoreIndex: lossIgnore(-100)}},
	{name: "ce.ignore_class_smooth", opt: autograd.CrossEntropyOptions{IgnoreIndex: lossIgnore(1), LabelSmoothing: 0.1}},
	{name: "ce.ignore_smooth_sum", opt: autograd.CrossEntropyOptions{IgnoreIndex: lossIgnore(-100), LabelSmoothing: 0.25, Reduction: autograd.ReductionSum}},
	{name: "ce.ignore_none", opt: autograd.CrossEntropyOptions{IgnoreIndex: lossIgnore(3), Reduction: autograd.ReductionNone}},
	{name: "ce.all_ignored", opt: autograd.CrossEntropyOptions{IgnoreIndex: lossIgnore(-1), LabelSmoothing: 0.1}},
	{name: "ce.large", opt: autograd.CrossEntropyOptions{LabelSmoothing: 0.05}},
	{name: "ce.3d"},
	{name: "ce.spatial_none", opt: autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone}},
	{name: "ce.spatial_cl", cl: true, opt: autograd.CrossEntropyOptions{IgnoreIndex: lossIgnore(-100), LabelSmoothing: 0.1}},
	{name: "ce.spatial_cl_none", cl: true, opt: autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone}},
	{name: "ce.unbatched"},
	{name: "ce.unbatched_none", opt: autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone, LabelSmoothing: 0.2}},
	{name: "ce.many"},
}

func TestCrossEntropyGolden(t *testing.T) {
	set := golden.Load(t, "loss.safetensors")
	for _, c := range ceGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			x := set.Get(t, c.name+".x")
			if c.cl {
				x = x.To(autograd.ChannelsLast)
			}
			x.SetRequiresGrad(true)
			target := set.Get(t, c.name+".target")
			if x.NDim() == 1 {
				// The golden file's 0-d target loads as [1].
				v := target.Int64s()[0]
				target = autograd.Empty(autograd.Int64)
				target.Int64s()[0] = v
			}
			out := autograd.CrossEntropy(x, target, c.opt)
			out.Backward(lossGoldenLike(out, set.Get(t, c.name+".gout")))
			golden.AssertClose(t, "out", out, lossGoldenLike(out, set.Get(t, c.name+".out")), 1e-5)
			golden.AssertClose(t, "grad_x", x.Grad(), set.Get(t, c.name+".grad_x"), 1e-5)
			lossGoldenStrides(t, set, c.name+".out_strides", out)
			lossGoldenStrides(t, set, c.name+".grad_strides", x.Grad())
		})
	}
}

// The cases of testdata/golden/gen_loss.py's POINTWISE table.
var pointwiseLossGoldenCases = []struct {
	name     string
	mse      bool
	r        autograd.Reduction
	xCL, tCL bool
}{
	{name: "bce.mean", r: autograd.ReductionMean},
	{name: "bce.sum", r: autograd.ReductionSum},
	{name: "bce.none", r: autograd.ReductionNone},
	{name: "bce.extreme", r: autograd.ReductionNone},
	{name: "bce.cl_x", r: autograd.ReductionNone, xCL: true},
	{name: "bce.cl_t", r: autograd.ReductionNone, tCL: true},
	{name: "bce.cl_mean", r: autograd.ReductionMean, xCL: true},
	{name: "bce.empty_mean", r: autograd.ReductionMean},
	{name: "mse.mean", mse: true, r: autograd.ReductionMean},
	{name: "mse.sum", mse: true, r: autograd.ReductionSum},
	{name: "mse.none", mse: true, r: autograd.ReductionNone},
	{name: "mse.cl_x", mse: true, r: autograd.ReductionNone, xCL: true},
	{name: "mse.cl_t", mse: true, r: autograd.ReductionNone, tCL: true},
	{name: "mse.cl_sum", mse: true, r: autograd.ReductionSum, tCL: true},
	{name: "mse.empty_sum", mse: true, r: autograd.ReductionSum},
}

func TestPointwiseLossGolden(t *testing.T) {
	set := golden.Load(t, "loss.safetensors")
	for _, c := range pointwiseLossGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			x, target := set.Get(t, c.name+".x"), set.Get(t, c.name+".target")
			if c.xCL {
				x = x.To(autograd.ChannelsLast)
			}
			if c.tCL {
				target = target.To(autograd.ChannelsLast)
			}
			x.SetRequiresGrad(true)
			target.SetRequiresGrad(true)
			op := autograd.BCEWithLogits
			if c.mse {
				op = autograd.MSELoss
			}
			out := op(x, target, c.r)
			out.Backward(lossGoldenLike(out, set.Get(t, c.name+".gout")))
			golden.AssertClose(t, "out", out, lossGoldenLike(out, set.Get(t, c.name+".out")), 1e-5)
			golden.AssertClose(t, "grad_x", x.Grad(), set.Get(t, c.name+".grad_x"), 1e-5)
			golden.AssertClose(t, "grad_t", target.Grad(), set.Get(t, c.name+".grad_t"), 1e-5)
			lossGoldenStrides(t, set, c.name+".out_strides", out)
			if x.Grad().Format() != x.Format() || target.Grad().Format() != target.Format() {
				t.Errorf("gradient formats %v, %v for inputs in %v, %v",
					x.Grad().Format(), target.Grad().Format(), x.Format(), target.Format())
			}
		})
	}
}

// lossGoldenLike returns want as a 0-d tensor when got is one: the golden
// loader gives PyTorch's 0-d tensors the shape [1].
func lossGoldenLike(got, want *autograd.Tensor) *autograd.Tensor {
	if got.NDim() == 0 && want.Numel() == 1 {
		return autograd.Scalar(float32(want.Item()))
	}
	return want
}

// lossGoldenStrides compares the strides of got with PyTorch's, saved
// under key where the case has a channels-last input.
func lossGoldenStrides(t *testing.T, set golden.Set, key string, got *autograd.Tensor) {
	t.Helper()
	want, ok := set[key]
	if !ok {
		return
	}
	if fmt.Sprint(got.Strides()) != fmt.Sprint(want.Int64s()) {
		t.Errorf("%s: strides %v (%v), PyTorch's %v", key, got.Strides(), got.Format(), want.Int64s())
	}
}
